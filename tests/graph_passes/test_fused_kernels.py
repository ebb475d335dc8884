"""Host kernels of the GE fused ops against torch references written from the GE op
semantics (layouts, pse_shift, atten_mask + next_tokens band, GQA, casts)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from npu_inductor.runtime.kernels import KERNELS

ALL = 2147483647


def _ref_attention(q, k, v, bias, scale):
    """BNSD reference: explicit softmax(q k^T * scale + bias) v with repeated kv heads."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) * scale
    return (s + bias).softmax(-1) @ v if bias is not None else s.softmax(-1) @ v


@pytest.mark.parametrize("layout", ["BNSD", "BSND"])
def test_prompt_flash_attention_pse_shift_and_gqa(layout):
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    pse = torch.randn(2, 4, 5, 5)
    conv = (lambda t: t.transpose(1, 2).contiguous()) if layout == "BSND" else (lambda t: t)
    out = KERNELS["PromptFlashAttention"](conv(q), conv(k), conv(v), pse, num_heads=4,
                                          scale_value=0.3, input_layout=layout,
                                          num_key_value_heads=2, pre_tokens=ALL,
                                          next_tokens=ALL)
    torch.testing.assert_close(conv(out) if layout == "BSND" else out,
                               _ref_attention(q, k, v, pse, 0.3))


def test_prompt_flash_attention_atten_mask_is_one_where_masked_and_band_applies():
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    causal = torch.ones(4, 4).triu(1)
    out = KERNELS["PromptFlashAttention"](q, k, v, None, causal, num_heads=2, scale_value=0.5,
                                          input_layout="BNSD", num_key_value_heads=2,
                                          pre_tokens=ALL, next_tokens=0)
    bias = torch.zeros(4, 4).masked_fill(causal.bool(), float("-inf"))
    torch.testing.assert_close(out, _ref_attention(q, k, v, bias, 0.5))
    extra = causal.clone()
    extra[2, 0] = 1  # one more masked key: not the plain causal case any more
    out = KERNELS["PromptFlashAttention"](q, k, v, None, extra, num_heads=2, scale_value=0.5,
                                          input_layout="BNSD", num_key_value_heads=2,
                                          pre_tokens=ALL, next_tokens=0)
    bias = torch.zeros(4, 4).masked_fill(extra.bool(), float("-inf"))
    torch.testing.assert_close(out, _ref_attention(q, k, v, bias, 0.5))


def test_incre_flash_attention_takes_key_value_lists():
    q, k, v = torch.randn(2, 4, 1, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    out = KERNELS["IncreFlashAttention"](q, [k], [v], num_heads=4, scale_value=0.25,
                                         input_layout="BNSD", num_key_value_heads=2)
    torch.testing.assert_close(out, _ref_attention(q, k, v, None, 0.25))


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_rms_norm_and_add_rms_norm(dtype, tol):
    x1, x2 = torch.randn(3, 16, dtype=dtype), torch.randn(3, 16, dtype=dtype)
    g = torch.randn(16, dtype=dtype)
    y, rstd, x = KERNELS["AddRmsNorm"](x1, x2, g, epsilon=1e-5)
    s = (x1 + x2).float()
    want_rstd = torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-5)
    torch.testing.assert_close(rstd, want_rstd, rtol=tol, atol=tol)
    torch.testing.assert_close(y, (s * want_rstd * g.float()).to(dtype), rtol=tol, atol=tol)
    torch.testing.assert_close(x, x1 + x2)
    assert rstd.dtype == torch.float32 and rstd.shape == (3, 1)


def test_rotary_kernels_rotate_half():
    q, k = torch.randn(2, 5, 4, 8), torch.randn(2, 5, 2, 8)
    cos, sin = torch.randn(1, 5, 1, 8), torch.randn(1, 5, 1, 8)

    def ref(x):
        x1, x2 = x.chunk(2, -1)
        return x * cos + torch.cat((-x2, x1), -1) * sin
    oq, ok = KERNELS["ApplyRotaryPosEmb"](q, k, cos, sin, layout=1, rotary_mode="half")
    torch.testing.assert_close(oq, ref(q))
    torch.testing.assert_close(ok, ref(k))
    torch.testing.assert_close(KERNELS["RotaryMul"](q, cos, sin), ref(q))


def test_swiglu_and_gelu():
    x = torch.randn(3, 10)
    torch.testing.assert_close(KERNELS["SwiGlu"](x, dim=-1), F.silu(x[:, :5]) * x[:, 5:])
    tanh_gelu = 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x ** 3)))
    torch.testing.assert_close(KERNELS["Gelu"](x), tanh_gelu)
