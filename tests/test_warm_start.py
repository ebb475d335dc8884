"""What a warm start (fresh process, caches a cold compile filled) still does: no lowering,
no training fusions' forward-only trace (they run as AOTAutograd's pre-grad pass, after
its cache lookup), one parse of each GE graph's ``.air`` (the device's) and no re-check of
the device rules on loading it, and the same fused GE graphs, outputs and gradients as the
cold one."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# A llama-like block (RMSNorm, rotary with cos/sin buffers, SwiGLU) trained one step; prints
# how often the fusions traced and the lowering ran, the fused GE ops of the loaded graphs,
# the caches' counters and the error against eager.
WORKLOAD = """
import json, sys, torch
import torch.nn.functional as F
from torch._dynamo.utils import counters
from npu_inductor.cache import COUNTERS
from npu_inductor.compile_fx import record_reports
from npu_inductor.ge import serialize
from npu_inductor.graph_passes import training_fusions
from npu_inductor.lowering import lower
from npu_inductor.runtime import host_model
traces, lowerings, parses, load_checks = [], [], [], []
real_check = host_model.check_graph
host_model.check_graph = lambda g: (load_checks.append(1), real_check(g))[1]
real_trace, real_lower = training_fusions._trace, lower._lower_graph
real_parse = serialize.from_model_def
training_fusions._trace = lambda *a: (traces.append(1), real_trace(*a))[1]
lower._lower_graph = lambda *a, **k: (lowerings.append(1), real_lower(*a, **k))[1]
serialize.from_model_def = lambda *a: (parses.append(1), real_parse(*a))[1]

class Block(torch.nn.Module):
    def __init__(self, d=16, s=6):
        super().__init__()
        self.norm_w = torch.nn.Parameter(torch.rand(d) + 0.5)
        self.wq = torch.nn.Linear(d, d, bias=False)
        self.up = torch.nn.Linear(d, 2 * d, bias=False)
        self.down = torch.nn.Linear(d, d, bias=False)
        pos = torch.arange(s, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1, d)
        self.register_buffer("cos", pos.cos())
        self.register_buffer("sin", pos.sin())

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm_w
        q = self.wq(h)
        q1, q2 = q.chunk(2, -1)
        q = q * self.cos + torch.cat((-q2, q1), -1) * self.sin
        a, b = self.up(q).chunk(2, -1)
        return self.down(F.silu(a) * b) + x

torch.manual_seed(0)
m = Block()
x = torch.randn(2, 6, 16)
with record_reports() as reports:
    out = torch.compile(m, backend="npu", options={"cache_dir": sys.argv[1]})(x)
    out.square().sum().backward()
parsed = len(parses)  # .air parses so far: the device's, one per GE graph it loaded
grads = [p.grad.clone() for p in m.parameters()]
m.zero_grad()
ref = m(x)
ref.square().sum().backward()
rel = lambda a, b: ((a - b).abs().max() / b.abs().max()).item()
print(json.dumps({
    "traces": len(traces), "lowerings": len(lowerings), "parses": parsed,
    "load_checks": len(load_checks),
    "counters": dict(COUNTERS),
    "aot_hits": counters["aot_autograd"]["autograd_cache_hit"],
    "ge_ops": sorted({op.type for r in reports for g in r.ge_graphs
                      for op in g.lowered.graph.ops}),
    "out_err": rel(out, ref), "grad_err": max(rel(g, p.grad) for g, p in
                                              zip(grads, m.parameters()))}))
"""
FUSED = {"RmsNorm", "RmsNormGrad", "RotaryMul", "RotaryPositionEmbeddingGrad", "SwiGlu",
         "SwiGluGrad"}


def _run(tmp_path) -> dict:
    env = {**os.environ, "NPU_INDUCTOR_CACHE_DIR": "off",  # the option names the folder
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch_cache")}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(WORKLOAD),
                           str(tmp_path / "cache")], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two interpreters
def test_warm_training_start_skips_the_fusions_trace(tmp_path):
    cold = _run(tmp_path)
    warm = _run(tmp_path)
    assert cold["traces"] == 1 and cold["lowerings"] == 2, cold  # forward, backward
    assert FUSED <= set(cold["ge_ops"]), cold["ge_ops"]
    assert warm["traces"] == 0 and warm["lowerings"] == 0, warm
    assert cold["parses"] == warm["parses"] == 2, (cold, warm)
    # the device rules ran when the lowering built each graph, not again when loading it
    assert cold["load_checks"] == warm["load_checks"] == 0, (cold, warm)
    assert warm["aot_hits"] == 1 and warm["counters"] == {"hit": 2}, warm
    assert warm["ge_ops"] == cold["ge_ops"]
    for run in (cold, warm):
        assert run["out_err"] < 1e-5 and run["grad_err"] < 1e-5, run
