"""Matrix-multiply converters: compiled vs eager, forward and backward; one golden dump."""

from __future__ import annotations

import textwrap

import pytest
import torch
from harness import check_fn, check_model
from test_nn import check_grad, ge_ops
from torch import nn

from npu_inductor.ge import format_graph

# A k-term dot product in float32 reassociates differently from eager's BLAS: a few ulps
# times k, so matmuls compare with 1e-4 absolute.
ACC = {"rtol": 1e-5, "atol": 1e-4}
# One rounding of the result in bfloat16 (8 mantissa bits) / float16 (11 bits), plus
# accumulation-order differences of the k-term sum.
LOW = {torch.float16: {"rtol": 5e-3, "atol": 5e-3}, torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2}}


def test_mm_fwd_bwd():
    graphs = check_grad(torch.mm, torch.randn(3, 5), torch.randn(5, 4), **ACC)
    assert "MatMulV2" in ge_ops(graphs)


def test_bmm_fwd_bwd():
    graphs = check_grad(torch.bmm, torch.randn(2, 3, 5), torch.randn(2, 5, 4), **ACC)
    assert "BatchMatMulV2" in ge_ops(graphs)


def test_addmm_bias_input():
    graphs = check_grad(torch.addmm, torch.randn(4), torch.randn(3, 5), torch.randn(5, 4), **ACC)
    assert "MatMulV2" in ge_ops(graphs)


@pytest.mark.parametrize("beta,alpha", [(0.5, 2.0), (1, 3), (2, 1)])
def test_addmm_beta_alpha(beta, alpha):
    check_fn(lambda b, x, y: torch.addmm(b, x, y, beta=beta, alpha=alpha), torch.randn(3, 4),
             torch.randn(3, 5), torch.randn(5, 4), **ACC)


def test_linear_model_grads():
    check_model(nn.Linear(6, 3), (torch.randn(4, 6),), train=True, **ACC)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mm_bmm_low_precision(dtype):
    a, b = torch.randn(4, 16).to(dtype), torch.randn(16, 8).to(dtype)
    check_fn(torch.mm, a, b, **LOW[dtype])
    check_fn(torch.bmm, a.expand(2, 4, 16).contiguous(), b.expand(2, 16, 8).contiguous(),
             **LOW[dtype])


def test_golden_linear_softmax():
    """The Linear's transpose is folded into MatMulV2 (graph pass); softmax is SoftmaxV2."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Softmax(-1)).eval()
    with torch.no_grad():
        graphs = check_fn(model, torch.randn(2, 4))
    _, body = format_graph(graphs[0].lowered.graph).split("\n", 1)  # header: a global counter
    assert textwrap.dedent(body) == textwrap.dedent("""\
        %arg0_1 = Data()[index=0] -> f32[3, 4]
        %arg1_1 = Data()[index=1] -> f32[3]
        %arg2_1 = Data()[index=2] -> f32[2, 4]
        %matmul_default = MatMulV2(%arg2_1, %arg0_1, %arg1_1)[transpose_x1=false, transpose_x2=true] -> f32[2, 3]
        %_softmax = SoftmaxV2(%matmul_default)[axes=[1], half_to_float=false] -> f32[2, 3]
        return (%_softmax)
        """)  # noqa: E501


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_baddbmm_addbmm(beta, alpha):
    s, b1, b2 = torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4)
    graphs = check_grad(lambda s, x, y: torch.baddbmm(s, x, y, beta=beta, alpha=alpha), s, b1, b2,
                        **ACC)
    assert "BatchMatMulV2" in ge_ops(graphs)
    check_fn(lambda s, x, y: torch.addbmm(s, x, y, beta=beta, alpha=alpha), s[0], b1, b2, **ACC)


def test_mv_addmv_dot():
    m, v, w = torch.randn(3, 4), torch.randn(4), torch.randn(3)
    check_grad(torch.mv, m, v, **ACC)
    check_grad(lambda s, m, v: torch.addmv(s, m, v, beta=0.5, alpha=2), w, m, v, **ACC)
    check_grad(torch.dot, v, torch.randn(4), **ACC)
