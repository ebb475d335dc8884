"""torch's ``caching_precompile`` (``TORCH_CACHING_PRECOMPILE=1``) on: a second process
compiles an npu model as usual instead of failing to load torch's Dynamo cache entry."""

import json
import os
import subprocess
import sys
import textwrap

WORKLOAD = """
import json, sys, torch
from torch._dynamo.utils import counters
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
x = torch.randn(4, 8)
out = torch.compile(m, backend="npu", options={"fallback": "error"})(x)
torch.compiler.save_cache_artifacts()
print(json.dumps({"err": (out - m(x)).abs().max().item(),
                  "graphs": counters["stats"]["unique_graphs"],
                  "dynamo_cache": dict(counters["dynamo_cache"])}))
"""


def _run(tmp_path) -> dict:
    env = {**os.environ, "TORCH_CACHING_PRECOMPILE": "1",
           "NPU_INDUCTOR_CACHE_DIR": str(tmp_path / "npu"),
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch")}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(WORKLOAD)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_second_process_compiles_instead_of_failing(tmp_path):
    first = _run(tmp_path)
    assert first["dynamo_cache"] == {"dynamo_cache_miss": 1}
    second = _run(tmp_path)
    # torch found its entry (bypassed: no npu backend in it) and Dynamo traced the frame
    assert second["dynamo_cache"] == {"dynamo_cache_hit": 1}
    assert second["graphs"] == 1
    assert first["err"] < 1e-6 and second["err"] < 1e-6
