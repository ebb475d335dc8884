"""Projections of one input in one GE GroupedMatmul (graph_passes/fuse_projections.py): the
host kernel's list forms against torch's ``linear`` (an independent implementation), the
compiled functions against eager, and the near misses the 910B would refuse left alone."""

import collections

import pytest
import torch
import torch.nn.functional as F
from harness import check_fn, check_ge_ops, check_model, ge_op_types

from npu_inductor.graph_passes import counters
from npu_inductor.runtime.kernels.fused import grouped_matmul

BF16 = torch.bfloat16
# bf16: compiled and eager both round each matmul once; SwiGlu rounds silu(a) * b once where
# eager rounds silu(a) first (one bf16 ulp, 2^-8 relative)
TOL = {"rtol": 2e-2, "atol": 2e-2}


def _weights(*rows: int, k: int = 32, dtype=BF16) -> list[torch.Tensor]:
    return [torch.randn(n, k, dtype=dtype) / k ** 0.5 for n in rows]


def test_kernel_list_forms_match_torch_linear():
    x = torch.randn(2, 5, 32, dtype=BF16)
    ws = _weights(32, 16, 16)
    ys = grouped_matmul([x] * 3, ws, split_item=0, group_type=-1, transpose_weight=True)
    for y, w in zip(ys, ws):
        torch.testing.assert_close(y, F.linear(x, w), **TOL)
    x2 = x.reshape(10, 32)
    gate, up = _weights(24, 24)
    rows = grouped_matmul([x2, x2], [gate, up], split_item=2, group_type=0,
                          transpose_weight=True)
    torch.testing.assert_close(rows, torch.cat([F.linear(x2, gate), F.linear(x2, up)]), **TOL)


def test_kernel_refuses_list_forms_the_910b_lacks():
    x = torch.randn(4, 32)
    with pytest.raises(ValueError, match="float16/bfloat16"):  # fp32: single tensors only
        grouped_matmul([x, x], _weights(8, 8, dtype=torch.float32), split_item=0,
                       group_type=-1, transpose_weight=True)
    xb = x.to(BF16)
    with pytest.raises(ValueError, match="equal N"):
        grouped_matmul([xb, xb], _weights(8, 16), split_item=2, group_type=0,
                       transpose_weight=True)


def _qkv(x, wq, wk, wv):
    return F.linear(x, wq), F.linear(x, wk), F.linear(x, wv)


def _mlp(x, wg, wu, wd):
    return F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)


def _compiled(fn, *inputs, **tol):
    before = collections.Counter(counters)
    graphs = check_fn(fn, *inputs, **tol)
    types = collections.Counter(op.type for g in graphs for op in g.lowered.graph.ops)
    return dict(collections.Counter(counters) - before), types


def test_q_k_v_projections_become_one_grouped_matmul():
    fired, types = _compiled(_qkv, torch.randn(2, 6, 32, dtype=BF16), *_weights(32, 16, 16),
                             **TOL)
    assert fired.get("fuse_grouped_matmul") == 1, fired
    assert types["GroupedMatmul"] == 1 and "BatchMatMulV2" not in types, types


def test_unfrozen_gated_mlp_becomes_grouped_matmul_and_swiglu():
    x = torch.randn(2, 6, 32, dtype=BF16)
    wg, wu = _weights(48, 48)
    (wd,) = _weights(32, k=48)
    fired, types = _compiled(_mlp, x, wg, wu, wd, **TOL)
    assert fired.get("fuse_swiglu_grouped") == 1, fired
    assert types["GroupedMatmul"] == 1 and types["SwiGlu"] == 1, types
    assert "Swish" not in types and "Mul" not in types and types["BatchMatMulV2"] == 1, types


def test_float32_projections_stay_matmuls():
    """910B: the list forms of GroupedMatmul have no float32 kernel."""
    x = torch.randn(2, 6, 32)
    graphs = check_ge_ops(_qkv, x, *_weights(32, 16, 16, dtype=torch.float32),
                          ge="BatchMatMulV2")
    assert "GroupedMatmul" not in ge_op_types(graphs)


def _biased(x, wq, wk, bq, bk):
    return F.linear(x, wq, bq), F.linear(x, wk, bk)


@pytest.mark.parametrize("dtype", [torch.float16, BF16])
def test_biased_projections_group_where_the_bias_dtype_allows(dtype):
    """fp16: the fp16 biases go in as they are. bf16: GroupedMatmul wants float32 biases,
    which only frozen (constant) biases give without a Cast per call: these stay matmuls."""
    x = torch.randn(2, 6, 32, dtype=dtype)
    bq, bk = torch.randn(16, dtype=dtype), torch.randn(16, dtype=dtype)
    graphs = check_fn(_biased, x, *_weights(16, 16, dtype=dtype), bq, bk, **TOL)
    grouped = "GroupedMatmul" in ge_op_types(graphs)
    assert grouped == (dtype == torch.float16), ge_op_types(graphs)


def test_frozen_bf16_biases_group_with_float32_copies():
    class QK(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k = torch.nn.Linear(32, 16), torch.nn.Linear(32, 16)

        def forward(self, x):
            return self.q(x), self.k(x)

    torch.manual_seed(0)
    before = counters["fuse_grouped_matmul"]
    graphs = check_model(QK().to(BF16).eval(), (torch.randn(2, 6, 32, dtype=BF16),),
                         train=False, options={"freeze_parameters": True}, **TOL)
    assert counters["fuse_grouped_matmul"] == before + 1
    (gmm,) = [op for g in graphs for op in g.lowered.graph.ops if op.type == "GroupedMatmul"]
    biases = [d for d in gmm.input_descs if d.name.startswith("bias")]
    assert len(biases) == 2 and {d.dtype for d in biases} == {torch.float32}, biases


def test_kernel_bias_is_added_before_rounding():
    x = torch.randn(4, 32, dtype=BF16)
    ws, bs = _weights(8, 8), [torch.randn(8), torch.randn(8)]
    ys = grouped_matmul([x, x], ws, bias=bs, split_item=0, group_type=-1,
                        transpose_weight=True)
    for y, w, b in zip(ys, ws, bs):
        torch.testing.assert_close(y, F.linear(x.float(), w.float(), b).to(BF16))
    with pytest.raises(ValueError, match="bias"):  # a bf16 bias: the device wants float32
        grouped_matmul([x, x], ws, bias=[b.to(BF16) for b in bs], split_item=0,
                       group_type=-1, transpose_weight=True)
