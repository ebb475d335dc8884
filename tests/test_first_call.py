"""A compiled graph's first call: the device runs the GE graph outside the dispatch mode
AOTAutograd wraps first calls in (its custom-op aliasing analysis), and the outputs match
eager. (Under a user's dispatch mode Dynamo runs the model eagerly: nothing to check.)"""

from __future__ import annotations

import torch
import torch._functorch.aot_autograd  # noqa: F401  (imports runtime_wrappers in order)
from torch._functorch._aot_autograd import runtime_wrappers

aten = torch.ops.aten


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_first_call_runs_the_ge_graph_outside_aot_op_analysis(monkeypatch):
    seen: list = []
    original = runtime_wrappers._AnalyzeCustomOpInputOutputMode.__torch_dispatch__

    def spy(self, func, types, args=(), kwargs=None):
        seen.append(func)
        return original(self, func, types, args, kwargs)

    monkeypatch.setattr(runtime_wrappers._AnalyzeCustomOpInputOutputMode, "__torch_dispatch__",
                        spy)
    x, matmuls = torch.randn(3, 8), {aten.addmm.default, aten.mm.default}
    with torch.no_grad():
        torch._dynamo.reset()
        torch.compile(_model(), backend="aot_eager")(x)
        assert matmuls & set(seen)  # the analysis runs around a first call: the spy sees it
        seen.clear()
        torch._dynamo.reset()
        out = torch.compile(_model(), backend="npu")(x)
        eager = _model()(x)
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)
    # the host device's kernels (out= variants, workspace views) ran outside it
    kernels = [f for f in seen if f._overloadname == "out" or f is aten.view.dtype]
    assert not kernels, kernels
