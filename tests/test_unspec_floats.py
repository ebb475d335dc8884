"""Under ``dynamic=True`` a module's float attribute (an RMSNorm's ``eps``) becomes a
constant of the graph, so RMSNorm fuses, and a changed value recompiles; a float passed as
an argument stays symbolic and never recompiles (``npu_inductor/unspec_floats.py``)."""

import torch
from harness import ge_op_types, record_graphs, strict


class Norm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(16) + 0.5)
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.float()
    return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps))


def _epsilons(graphs: list) -> list[float]:
    return [op.attrs["epsilon"].value for g in graphs for op in g.lowered.graph.ops
            if op.type == "RmsNorm"]


def test_module_eps_is_a_constant_under_dynamic_true():
    model = Norm()
    compiled = torch.compile(model, backend="npu", dynamic=True, options=strict())
    with torch.no_grad(), record_graphs() as graphs:
        for n in (5, 9, 3):
            x = torch.randn(2, n, 16)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)
        assert len(graphs) == 1, len(graphs)  # one dynamic graph for every length
        assert not {"Rsqrt", "ReduceMean", "Cast"} & ge_op_types(graphs), ge_op_types(graphs)
        model.eps = 0.5  # guarded: recompiles with the new constant
        x = torch.randn(2, 4, 16) * 0.1
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)
    assert len(graphs) == 2, len(graphs)
    assert [round(e, 7) for e in _epsilons(graphs)] == [1e-6, 0.5], _epsilons(graphs)


def test_float_argument_stays_symbolic():
    w = torch.rand(16) + 0.5
    compiled = torch.compile(rms_norm, backend="npu", dynamic=True, options=strict())
    with torch.no_grad(), record_graphs() as graphs:
        for eps in (1e-6, 0.5, 2.0):
            x = torch.randn(2, 4, 16) * 0.1
            torch.testing.assert_close(compiled(x, w, eps), rms_norm(x, w, eps),
                                       rtol=1e-5, atol=1e-6)
    assert len(graphs) == 1, len(graphs)
    assert not _epsilons(graphs)  # the value is an input: RmsNorm cannot take it
