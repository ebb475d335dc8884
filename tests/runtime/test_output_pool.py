"""Large graph outputs reuse memory nothing references any more (``runtime/output_pool.py``),
and ``EmbeddingDenseGrad`` writes its output in place (bitwise aten's loop)."""

import copy

import pytest
import torch
from torch import nn

from npu_inductor.runtime import output_pool
from npu_inductor.runtime.kernels.nn import embedding_dense_grad

aten = torch.ops.aten
BIG = (512, 1024)  # 2 MB of fp32: pooled


@pytest.fixture(autouse=True)
def _fresh_pool():
    output_pool.clear()
    yield
    output_pool.clear()


def test_dropped_output_memory_is_reused():
    a = output_pool.empty(BIG, torch.float32)
    ptr = a.data_ptr()
    del a
    b = output_pool.empty(BIG, torch.float32)
    assert b.data_ptr() == ptr and b.shape == BIG and b.is_contiguous()
    c = output_pool.empty((1024, 1024), torch.bfloat16)  # same byte size, other dtype
    assert c.data_ptr() != ptr and c.dtype == torch.bfloat16


def test_referenced_output_is_never_handed_out_again():
    a = output_pool.empty(BIG, torch.float32)
    view = a[3:]
    del a  # the view keeps the storage in use
    b = output_pool.empty(BIG, torch.float32)
    assert b.untyped_storage().data_ptr() != view.untyped_storage().data_ptr()
    b.fill_(1.0)
    view.fill_(2.0)
    assert b.eq(1.0).all()


def test_small_outputs_are_not_kept():
    before = output_pool.stats()
    a = output_pool.empty((16, 16), torch.float32)
    assert a.shape == (16, 16) and a.is_contiguous()
    assert output_pool.stats() == before and not output_pool._free


def test_kept_storages_are_capped_per_size():
    held = [output_pool.empty(BIG, torch.float32) for _ in range(output_pool.PER_SIZE + 3)]
    nbytes = held[0].untyped_storage().nbytes()
    kept = output_pool._free[nbytes]
    assert len(kept) == output_pool.PER_SIZE
    assert [s.data_ptr() for s in kept] == [h.data_ptr() for h in held[3:]]  # newest kept


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("padding_idx", [-1, 3])
def test_embedding_dense_grad_out_is_bitwise_aten(dtype, padding_idx):
    torch.manual_seed(0)
    idx = torch.randint(0, 40, (3, 500))  # many repeats: the summation order shows
    grad = torch.randn(3, 500, 32, dtype=dtype)
    ref = aten.embedding_dense_backward(grad, idx, 40, padding_idx, False)
    out = torch.full((40, 32), float("nan"), dtype=dtype)
    got = embedding_dense_grad(grad, idx, 40, padding_idx, False, out=out)
    assert got.data_ptr() == out.data_ptr()
    assert torch.equal(got, ref)
    assert torch.equal(embedding_dense_grad(grad, idx, 40, padding_idx, False), ref)


def test_embedding_dense_grad_scaled_by_freq_matches_aten():
    idx = torch.randint(0, 10, (2, 50))
    grad = torch.randn(2, 50, 8)
    ref = aten.embedding_dense_backward(grad, idx, 10, -1, True)
    got = embedding_dense_grad(grad, idx, 10, -1, True, out=torch.empty(10, 8))
    assert torch.equal(got, ref)


class _Lm(nn.Module):
    def __init__(self, vocab=2048, dim=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        return self.head(torch.tanh(self.emb(ids)))


def test_training_steps_reuse_gradient_memory_and_match_eager():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Lm()
    ref_model = copy.deepcopy(model)
    ids = torch.randint(0, 2048, (2, 64))
    f = torch.compile(model, backend="npu", options={"fallback": "error"})
    ptrs = []
    for _ in range(3):
        for m, fn in ((model, f), (ref_model, ref_model)):
            m.zero_grad(set_to_none=True)
            fn(ids).square().mean().backward()
        for p, r in zip(model.parameters(), ref_model.parameters()):
            torch.testing.assert_close(p.grad, r.grad, rtol=1e-5, atol=1e-7)
        ptrs.append((model.emb.weight.grad.data_ptr(), model.head.weight.grad.data_ptr()))
        with torch.no_grad():
            for p, r in zip(model.parameters(), ref_model.parameters()):
                p.sub_(0.1 * p.grad)
                r.sub_(0.1 * r.grad)
    # the 2 MB gradients of steps 2 and 3 live where step 1's (dropped by zero_grad) did
    assert set(ptrs[1]) == set(ptrs[0]) and set(ptrs[2]) == set(ptrs[0])


def test_kept_outputs_are_not_overwritten():
    torch._dynamo.reset()
    w = torch.randn(256, 2048)
    f = torch.compile(lambda x, w: torch.tanh(x) @ w, backend="npu",
                      options={"fallback": "error"})
    x = torch.randn(256, 256)
    first = f(x, w)
    kept = first.clone()
    second = f(x * 2, w)
    assert first.data_ptr() != second.data_ptr()
    assert torch.equal(first, kept)
    del first
    third = f(x * 3, w)  # may take the first output's memory, never the second's
    assert third.data_ptr() != second.data_ptr()
    torch.testing.assert_close(third, torch.tanh(x * 3) @ w, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(second, torch.tanh(x * 2) @ w, rtol=1e-5, atol=1e-5)
