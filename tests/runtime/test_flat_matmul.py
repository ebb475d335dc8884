"""A bias-free ``BatchMatMulV2`` of an N-D (N >= 3) left operand and a 2-D right one runs as
one ``torch.mm`` of the flattened rows into ``out`` flattened (``runtime/kernels/math.py``,
and in the generated host code ``host_codegen._flat_mm`` for static shapes): the ``mm``
``torch.matmul`` calls inside, without its views, so the result is bitwise eager's
``linear``; a non-contiguous left operand is still computed right."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.runtime.kernels import math as kmath  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("adj_x2", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_kernel_flat_mm_matches_linear(dtype, adj_x2, layout):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 24, generator=g).to(dtype)
    if layout == "transposed":  # a strided left operand: the matmul path, still right
        x = torch.randn(5, 3, 24, generator=g).to(dtype).transpose(0, 1)
    w = torch.randn(16, 24, generator=g).to(dtype)  # linear's [out, in] weight
    fn = kmath._specialize_batch_matmul((), {"adj_x1": False, "adj_x2": adj_x2})
    out = torch.full((3, 5, 16), float("nan"), dtype=dtype)
    got = fn(x, w if adj_x2 else w.t().contiguous(), out=out)
    assert got is out
    want = F.linear(x, w)
    free = fn(x, w if adj_x2 else w.t().contiguous())  # no out: matmul as before
    if layout == "contiguous":
        assert torch.equal(out, want) and torch.equal(free, want)
    else:
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(out.float(), want.float(), **tol)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(24, 32, bias=False)
        self.b = nn.Linear(32, 24, bias=False)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) + x.transpose(1, 2).sum(1, keepdim=True).mT


def test_generated_code_flat_mm_bitwise_eager():
    torch.manual_seed(0)
    model = _Block()
    x = torch.randn(2, 7, 24, requires_grad=True)
    torch._dynamo.reset()
    with record_graphs() as graphs:
        y = torch.compile(model, backend="npu", dynamic=False)(x)
        y.sum().backward()
    src = "\n".join(g.executor.device.acl.models[g.executor.model_id].codegen_source
                    for g in graphs)
    assert ".reshape((14, 24))" in src and ".reshape((14, 32))" in src
    grads = [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]
    x.grad = None
    model.zero_grad(set_to_none=True)
    want = model(x)
    want.sum().backward()
    assert torch.equal(y, want)
    for got, ref in zip(grads, [x.grad] + [p.grad for p in model.parameters()]):
        torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)
