"""``npu_inductor.precompile`` (cache_precompile.py): a fresh process loads a model's
compiled graph without Dynamo tracing it; damaged, planted or foreign artifacts are never
unpickled; edited inlined source, other inputs and failed guards recompile."""

import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import npu_inductor
from npu_inductor import cache, cache_precompile
from npu_inductor.config import ConfigError

# Precompiles (or loads) a small MLP in inference and a training step of it; prints the
# outputs, the gradient, Dynamo's and npu_inductor's counters and how many graphs were
# lowered. Run in this process first (cold) and then in a fresh interpreter (warm).
WORKLOAD = """
import json, sys, torch
import npu_inductor
from npu_inductor.lowering import lower
from npu_inductor.cache import COUNTERS
from torch._dynamo.utils import counters
calls = []
real = lower._lower_graph
lower._lower_graph = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
def run(root):
    # the options in full (precompiled graphs load only for equal options): as the tests'
    opts = {"cache_dir": root, "fallback": "error", "verify": True, "device": "host"}
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x = torch.randn(4, 6)
    with torch.no_grad():
        infer = npu_inductor.precompile(mlp.eval(), (x,), options=opts)
        out = infer(x)
    mlp.train()
    step = npu_inductor.precompile(mlp, (x,), options=opts)
    step(x).square().sum().backward()
    return {"out": out.tolist(), "grad": mlp[0].weight.grad.tolist(),
            "sources": [infer.source, step.source], "lowerings": len(calls),
            "frames": sum(counters["frames"].values()),
            "graphs": counters["stats"]["unique_graphs"], "counters": dict(COUNTERS)}
if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1])))
"""


@pytest.fixture(autouse=True)
def _own_torch_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch_cache"))
    cache.COUNTERS.clear()
    cache.reset_warnings()


def _eager(mlp, x):
    return mlp(x)


@pytest.mark.slow  # one fresh interpreter
def test_fresh_process_loads_without_dynamo_tracing(tmp_path):
    root = str(tmp_path / "cache")
    scope: dict = {}
    exec(compile(WORKLOAD, "<precompile workload>", "exec"), scope)  # noqa: S102 (our own)
    torch._dynamo.utils.counters.clear()
    cold = scope["run"](root)
    assert cold["sources"] == ["miss", "miss"] and cold["graphs"] == 2 and cold["lowerings"] == 3
    env = {**os.environ, "NPU_INDUCTOR_CACHE_DIR": "off"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(WORKLOAD), root],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    warm = json.loads(done.stdout.strip().splitlines()[-1])
    assert warm["sources"] == ["hit", "hit"], done.stderr[-3000:]
    assert warm["frames"] == 0 and warm["graphs"] == 0  # Dynamo traced nothing
    assert warm["lowerings"] == 0 and warm["counters"]["hit"] == 3  # fwd, bwd, inference
    assert warm["out"] == cold["out"] and warm["grad"] == cold["grad"]
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x = torch.randn(4, 6)
    torch.testing.assert_close(torch.tensor(warm["out"]), mlp(x).detach(), rtol=1e-5, atol=1e-6)
    mlp(x).square().sum().backward()
    torch.testing.assert_close(torch.tensor(warm["grad"]), mlp[0].weight.grad, rtol=1e-5,
                               atol=1e-6)


def _scaled(a, b):
    return torch.relu(a) * 2 + b.sum(-1, keepdim=True)


def _artifacts(root: Path) -> list[Path]:
    return sorted((root / "precompiled").glob("*.npup"))


def _precompile(fn, *args, root: Path, **options):
    return npu_inductor.precompile(fn, args, options={"cache_dir": str(root), **options})


def test_other_inputs_and_failed_guards_recompile(tmp_path):
    root = tmp_path / "cache"
    a, b = torch.randn(3, 5), torch.randn(3, 2)
    first = _precompile(_scaled, a, b, root=root)
    assert first.source == "miss"
    torch.testing.assert_close(first(a, b), _scaled(a, b))
    again = _precompile(_scaled, a, b, root=root)
    assert again.source == "hit"
    torch.testing.assert_close(again(a, b), _scaled(a, b))
    assert _precompile(_scaled, a[:2], b[:2], root=root).source == "miss"
    assert _precompile(_scaled, a, b, root=root, precision_mode="force_fp32").source == "miss"
    assert len(_artifacts(root)) == 3
    wide = torch.randn(3, 7)  # guards of the (3, 5) graph fail: torch.compile runs it
    torch.testing.assert_close(again(wide, b), _scaled(wide, b))


def test_needs_the_cache(tmp_path):
    with pytest.raises(ConfigError, match="cache_dir"):
        npu_inductor.precompile(_scaled, (torch.ones(2, 2), torch.ones(2, 2)),
                                options={"cache_dir": False})


def _flip_bit(data: bytes) -> bytes:
    at = len(data) - 9
    return data[:at] + bytes([data[at] ^ 0x04]) + data[at + 1:]


class _Evil:
    marker = ""

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def test_damaged_planted_or_foreign_artifacts_are_rebuilt_never_unpickled(tmp_path, caplog):
    root = tmp_path / "cache"
    a, b = torch.randn(2, 4), torch.randn(2, 3)
    _precompile(_scaled, a, b, root=root)
    (path,) = _artifacts(root)
    good, key = path.read_bytes(), path.stem
    torch_bytes = cache_precompile.decode(good, key, cache_precompile.secret(root))
    # a whole artifact signed with another cache folder's secret (copied from elsewhere)
    foreign = cache_precompile.encode(torch_bytes, key, "_scaled", os.urandom(32))
    marker = tmp_path / "pwned"
    _Evil.marker = str(marker)
    evil = pickle.dumps(_Evil())
    forged = cache_precompile.encode(evil, key, "_scaled", os.urandom(32))
    planted = [good[:len(good) // 2], _flip_bit(good), foreign, evil,
               cache_precompile.MAGIC + evil, forged]
    for data in planted:
        path.write_bytes(data)
        cache.reset_warnings()
        with caplog.at_level(logging.WARNING, logger="npu_inductor"):
            caplog.clear()
            result = _precompile(_scaled, a, b, root=root)
        assert result.source == "miss" and not marker.exists()
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and path.name in warnings[0].getMessage()
        torch.testing.assert_close(result(a, b), _scaled(a, b))
    assert cache.COUNTERS["precompile_rebuilt"] == len(planted)
    assert _precompile(_scaled, a, b, root=root).source == "hit"
    secret = root / cache_precompile._SECRET
    assert secret.stat().st_mode & 0o077 == 0


HELPER = "import torch\n\ndef bump(x):\n    return x {op} 1\n"


def test_edited_inlined_source_recompiles(tmp_path, monkeypatch):
    """The key holds the traced function's own file; a function Dynamo inlined from
    another module is checked against the source checksum torch recorded."""
    pkg = tmp_path / "mods"
    pkg.mkdir()
    (pkg / "pc_helper.py").write_text(HELPER.format(op="+"))
    (pkg / "pc_main.py").write_text("import pc_helper\n\ndef fn(x):\n"
                                    "    return pc_helper.bump(x) * 2\n")
    monkeypatch.syspath_prepend(str(pkg))
    import importlib

    import pc_helper
    import pc_main

    root, x = tmp_path / "cache", torch.arange(4.0)
    assert _precompile(pc_main.fn, x, root=root).source == "miss"
    (pkg / "pc_helper.py").write_text(HELPER.format(op="-"))
    importlib.reload(pc_helper)
    edited = _precompile(pc_main.fn, x, root=root)
    assert edited.source == "miss" and cache.COUNTERS["precompile_rebuilt"] == 1
    torch.testing.assert_close(edited(x), (x - 1) * 2)
    for name in ("pc_helper", "pc_main"):
        sys.modules.pop(name, None)
