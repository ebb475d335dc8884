"""MoE in the device's forms (graph_passes/moe.py): grouped matmuls -> GE GroupedMatmul,
the expert-id sort through float32. The host kernel is checked against torch's own
``_grouped_mm`` (an independent implementation), the compiled functions against eager."""

import pytest
import torch
from harness import check_ge_ops, check_grad, record_graphs

from npu_inductor.graph_passes import counters
from npu_inductor.runtime.kernels.fused import grouped_matmul

OFFS = torch.tensor([3, 3, 8], dtype=torch.int32)  # an empty middle group


@pytest.mark.parametrize("transposed", [False, True])
def test_kernel_split_m_matches_torch(transposed):
    x, w = torch.randn(8, 16), torch.randn(3, 16, 8)
    stored = w.transpose(1, 2).contiguous() if transposed else w
    y = grouped_matmul((x,), (stored,), group_list=OFFS.long(), split_item=3, group_type=0,
                       transpose_weight=transposed)
    torch.testing.assert_close(y, torch._grouped_mm(x, w, OFFS))


def test_kernel_split_k_matches_torch():
    a, b = torch.randn(16, 8), torch.randn(8, 16)  # a: [M, K], K split into groups
    y = grouped_matmul((a.t().contiguous(),), (b,), group_list=OFFS.long(), split_item=3,
                       group_type=2, transpose_x=True)
    torch.testing.assert_close(y, torch._grouped_mm(a, b, OFFS))


def _experts(x, w, offs):
    return torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)


def test_grouped_mm_lowers_to_grouped_matmul():
    x, w = torch.randn(8, 16, dtype=torch.bfloat16), torch.randn(3, 8, 16, dtype=torch.bfloat16)
    before = counters["moe_grouped_matmul"]
    check_ge_ops(_experts, x, w, OFFS, ge="GroupedMatmul")
    assert counters["moe_grouped_matmul"] == before + 1


def test_grouped_mm_backward_lowers_to_grouped_matmul():
    """float32: transformers' own grouped-mm op (torch's needs bf16), forward and backward."""
    pytest.importorskip("transformers.integrations.moe")
    x, w = torch.randn(8, 16), torch.randn(3, 8, 16)

    def experts(x, w):
        return torch.ops.transformers.grouped_mm_fallback(x, w.transpose(-2, -1), OFFS)

    with record_graphs() as graphs:
        check_grad(experts, x, w)
    backward = [g for g in graphs if g.name.startswith("backward")]
    assert backward
    types = [op.type for g in backward for op in g.lowered.graph.ops]
    assert types.count("GroupedMatmul") == 2, types  # dx (split M) and dw (split K)


def _route(logits):
    _, ids = torch.topk(logits.softmax(-1), 2, dim=-1)
    sorted_ids, perm = torch.sort(ids.reshape(-1), stable=True)
    return sorted_ids, perm


def test_expert_id_sort_runs_as_float():
    logits = torch.randn(6, 4)
    graphs = check_ge_ops(_route, logits, ge=("Sort", "TopKV2"))
    sorts = [op for g in graphs for op in g.lowered.graph.ops if op.type == "Sort"]
    assert all(op.input_descs[0].dtype == torch.float32 for op in sorts)


def test_bf16_grouped_mm_backward_splits_k():
    """bf16 training through torch's op: AOTAutograd writes dw as a 2-D x 2-D _grouped_mm
    (the K axis split), which becomes GroupedMatmul group_type=2. bf16: both sides round
    each product sum once, in different orders."""
    x = torch.randn(8, 16, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(3, 8, 16, dtype=torch.bfloat16, requires_grad=True)
    xe, we = (t.detach().clone().requires_grad_() for t in (x, w))
    torch._dynamo.reset()
    with record_graphs() as graphs:
        y = torch.compile(_experts, backend="npu")(x, w, OFFS)
        dy = torch.randn_like(y)
        y.backward(dy)
    _experts(xe, we, OFFS).backward(dy)
    for a, e in ((x.grad, xe.grad), (w.grad, we.grad)):
        torch.testing.assert_close(a.float(), e.float(), rtol=2e-2, atol=5e-2)
    ops = [op for g in graphs if g.name.startswith("backward") for op in g.lowered.graph.ops
           if op.type == "GroupedMatmul"]
    assert sorted(op.attrs["group_type"].value for op in ops) == [0, 2]
