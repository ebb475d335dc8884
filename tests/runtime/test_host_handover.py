"""A graph output that views a matmul result only it reads (a dynamic graph's
``_unsafe_view(mm)`` logits) is handed to the caller without a copy, and stays the
caller's alone."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402


def _logits(x, w):
    return torch.relu(x) @ w


def test_view_of_private_matmul_is_handed_over_uncopied():
    torch._dynamo.reset()
    x, w = torch.randn(2, 5, 8), torch.randn(8, 4)
    torch._dynamo.mark_dynamic(x, 1)
    with record_graphs() as graphs:
        f = torch.compile(_logits, backend="npu")
        first = f(x, w)
    ex = graphs[0].executor
    model = ex.device.acl.models[ex.model_id]
    private = [b for b in model.bound if b.private]
    assert [b.step.op.type for b in private] == ["Reshape"]
    kept = first.clone()
    second = f(x * 2, w)
    torch.testing.assert_close(first, kept, rtol=0, atol=0)  # not overwritten by the next run
    assert first.untyped_storage().data_ptr() != second.untyped_storage().data_ptr()
    torch.testing.assert_close(second, _logits(x * 2, w), rtol=1e-5, atol=1e-6)
    third = f(torch.randn(2, 7, 8), w)
    assert third.shape == (2, 7, 4)
    torch.testing.assert_close(first, kept, rtol=0, atol=0)
