"""``FlashAttentionScore`` / ``FlashAttentionScoreGrad`` take an ``out=`` tuple
(``MULTI_OUT_KERNELS``): the bf16 training graphs write the softmax statistics and the
gradients into their planned workspace places instead of copying them there (no ``store``
left in the generated forward or backward). The causal-mask check of both kernels is cached
per mask tensor and its version counter."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.benchmarks.zoo import Llama  # noqa: E402
from npu_inductor.runtime.kernels import KERNELS, MULTI_OUT_KERNELS, fused  # noqa: E402

ATTRS = dict(scale_value=0.25, head_num=4, input_layout="BNSD", pre_tockens=65536,
             next_tockens=0)


def _qkv(dtype, s=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 4, s, 16, generator=g).to(dtype) for _ in range(4)]


def _causal_mask(s):
    return torch.ones(s, s, dtype=torch.uint8).triu(1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_out_tuple_bitwise(dtype):
    q, k, v, dy = _qkv(dtype)
    mask = _causal_mask(6)
    assert {"FlashAttentionScore", "FlashAttentionScoreGrad"} <= MULTI_OUT_KERNELS
    fas, grad = KERNELS["FlashAttentionScore"], KERNELS["FlashAttentionScoreGrad"]
    ref = fas(q, k, v, None, None, None, mask, **ATTRS)
    outs = tuple(torch.full(t.shape, float("nan"), dtype=t.dtype) for t in ref)
    got = fas(q, k, v, None, None, None, mask, out=(outs[0], outs[1], None, outs[3]), **ATTRS)
    for i in (0, 1, 3):
        assert got[i].data_ptr() == outs[i].data_ptr() and torch.equal(outs[i], ref[i])
    gref = grad(q, k, v, dy, None, None, None, mask, ref[0], ref[1], None, ref[3], **ATTRS)
    gouts = tuple(torch.full(t.shape, float("nan"), dtype=t.dtype) for t in gref[:3])
    gg = grad(q, k, v, dy, None, None, None, mask, ref[0], ref[1], None, ref[3],
              out=(*gouts, None), **ATTRS)
    for given, result, want in zip(gouts, gg, gref):
        assert result.data_ptr() == given.data_ptr() and torch.equal(given, want)
    # against torch's attention (causal): forward and gradients
    qq, kk, vv = (t.detach().float().requires_grad_() for t in (q, k, v))
    y = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, scale=0.25)
    y.backward(dy.float())
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(ref[3].float(), y, **tol)
    for got_g, t in zip(gref[:3], (qq, kk, vv)):
        torch.testing.assert_close(got_g.float(), t.grad, **tol)


def test_causal_check_cached_and_invalidated_by_writes(monkeypatch):
    """The second call with the same mask does not look at it again; an in-place write to
    the mask (version bump) is seen: the kernel then applies the mask as written."""
    q, k, v, _ = _qkv(torch.float32, seed=1)
    mask = _causal_mask(6)
    fas = KERNELS["FlashAttentionScore"]
    first = fas(q, k, v, None, None, None, mask, **ATTRS)[3]
    looked = []
    tril = torch.Tensor.tril
    monkeypatch.setattr(torch.Tensor, "tril", lambda self, *a: looked.append(1) or tril(self, *a))
    again = fas(q, k, v, None, None, None, mask, **ATTRS)[3]
    assert looked == [] and torch.equal(first, again)
    mask[4, 1] = 1  # now query 4 may not see key 1: no longer the plain causal band
    changed = fas(q, k, v, None, None, None, mask, **ATTRS)[3]
    assert looked == [1]
    bias = torch.zeros(6, 6).masked_fill(mask.bool(), float("-inf"))
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.25)
    torch.testing.assert_close(changed, want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(changed, first)
    # a different mask tensor with the same id-free content is checked on its own
    other = _causal_mask(6)
    assert fused._plain_causal(other, 6, 6, 65536, 0)
    assert not fused._plain_causal(mask, 6, 6, 65536, 0)


def test_bf16_training_step_stores_nothing():
    """A bf16 LLaMA training step: FlashAttentionScore(Grad) write their planned results in
    place (no ``store`` copy in either generated graph); loss and gradients close to eager."""
    torch.manual_seed(0)
    model = Llama(vocab=64, hidden=32, heads=4, kv_heads=2, layers=2, ffn=48,
                  max_pos=16).to(torch.bfloat16)
    ids = torch.randint(0, 64, (2, 9))
    torch._dynamo.reset()
    with record_graphs() as graphs:
        loss = torch.compile(model, backend="npu", dynamic=False)(ids).float().square().mean()
        loss.backward()
    sources = {}
    for g in graphs:
        hm = g.executor.device.acl.models[g.executor.model_id]
        sources[g.name] = hm.codegen_source
    fwd = [s for n, s in sources.items() if "forward" in n][-1]
    bwd = [s for n, s in sources.items() if "backward" in n][-1]
    assert "FlashAttentionScore_" in fwd and "FlashAttentionScoreGrad_" in bwd
    assert "store(" not in fwd and "store(" not in bwd
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    eager = model(ids).float().square().mean()
    eager.backward()
    torch.testing.assert_close(loss, eager.detach(), rtol=2e-2, atol=2e-2)
    for got, p in zip(grads, model.parameters()):
        torch.testing.assert_close(got.float(), p.grad.float(), rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "nomask"])
def test_low_precision_grad_short_keys_as_accurate_as_flash(dtype, causal):
    """Short sequences in bf16/fp16: the backward runs as fp32 matmuls (not torch's CPU flash
    backward, ~4x slower there): against a float64 reference its error is no worse than the
    flash backward's, grouped key heads included."""
    g = torch.Generator().manual_seed(3)
    q, dy = (torch.randn(2, 4, 12, 16, generator=g, dtype=torch.float64) for _ in range(2))
    k, v = (torch.randn(2, 2, 12, 16, generator=g, dtype=torch.float64) for _ in range(2))
    mask = _causal_mask(12) if causal else None
    attrs = dict(ATTRS, next_tockens=0 if causal else 65536)
    lq, lk, lv, ldy = (t.to(dtype) for t in (q, k, v, dy))
    fwd = KERNELS["FlashAttentionScore"](lq, lk, lv, None, None, None, mask, **attrs)
    got = KERNELS["FlashAttentionScoreGrad"](lq, lk, lv, ldy, None, None, None, mask, fwd[0],
                                             fwd[1], None, fwd[3], **attrs)[:3]
    assert lk.shape[-2] < fused.FLASH_GRAD_MIN_KEYS
    lse = fwd[0][..., 0] + fwd[1][..., 0].log()
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        ldy, lq, lk, lv, fwd[3], lse, 0.0, causal, scale=0.25)
    qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal, scale=0.25,
                                   enable_gqa=True).backward(dy)
    for ours, theirs, ref in zip(got, flash, (qq.grad, kk.grad, vv.grad)):
        assert ours.dtype == dtype and ours.shape == ref.shape
        err, flash_err = ((t.double() - ref).abs().max().item() for t in (ours, theirs))
        assert err <= flash_err * 1.05 + 1e-3, (err, flash_err)


def test_causal_band_cache_is_bounded(monkeypatch):
    """The low-precision backward's causal band is cached per size; a dynamic graph meets a
    new size per length, so the cache keeps at most ``_UPPER_MAX`` (oldest dropped first),
    and each band is the right one."""
    monkeypatch.setattr(fused, "_UPPER", {})
    for n in range(1, fused._UPPER_MAX + 9):
        band = fused._upper(n, n + 1)
        assert torch.equal(band, torch.ones(n, n + 1, dtype=torch.bool).triu(1))
    assert len(fused._UPPER) == fused._UPPER_MAX
    last = fused._UPPER_MAX + 8
    assert (1, 2) not in fused._UPPER and (last, last + 1) in fused._UPPER
