"""``npu::*`` custom ops: the fused operators the fusion passes rewrite aten patterns into.

Each op is a ``torch.library.custom_op`` with a CPU implementation (torch's fused CPU
kernel where one exists) and a fake implementation, so a fused FX graph still runs in
eager and stays shape-propagatable. Each lowers to one GE fused op
(``lowering/fused.py``); the names in the docstrings are those GE op types. Layouts
follow the GE ops: attention tensors are BNSD, rotary tensors BSND.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

aten = torch.ops.aten


# ---- RmsNorm / AddRmsNorm -------------------------------------------------------------------
def _rstd_shape(x: Tensor) -> list[int]:
    return [*x.shape[:-1], 1]


@torch.library.custom_op("npu::rms_norm", mutates_args=())
def rms_norm(x: Tensor, gamma: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """GE ``RmsNorm``: y = x * rsqrt(mean(x^2, -1) + eps) * gamma (in fp32); rstd (fp32)."""
    xf = x.float()
    y, rstd = aten._fused_rms_norm(xf, [x.shape[-1]], None, eps)
    return y.to(x.dtype) * gamma, rstd


@rms_norm.register_fake
def _(x: Tensor, gamma: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    return x.new_empty(x.shape), x.new_empty(_rstd_shape(x), dtype=torch.float32)


@torch.library.custom_op("npu::add_rms_norm", mutates_args=())
def add_rms_norm(x1: Tensor, x2: Tensor, gamma: Tensor,
                 eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """GE ``AddRmsNorm``: x = x1 + x2; (RmsNorm(x, gamma).y, rstd, x)."""
    x = x1 + x2
    y, rstd = rms_norm(x, gamma, eps)
    return y, rstd, x


@add_rms_norm.register_fake
def _(x1: Tensor, x2: Tensor, gamma: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    return (x1.new_empty(x1.shape), x1.new_empty(_rstd_shape(x1), dtype=torch.float32),
            x1.new_empty(x1.shape))


# ---- attention ---------------------------------------------------------------------------
def sdpa(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, scale: float,
         causal: bool, layout: str) -> Tensor:
    """Attention in ``layout`` (BNSD or BSND) through torch's fused CPU SDPA kernel."""
    if layout == "BSND":
        query, key, value = (t.transpose(1, 2) for t in (query, key, value))
    gqa = key.shape[1] != query.shape[1]
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale,
                                         is_causal=causal, enable_gqa=gqa)
    return out.transpose(1, 2).contiguous() if layout == "BSND" else out


@torch.library.custom_op("npu::flash_attention", mutates_args=())
def flash_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None,
                    scale: float, causal: bool, layout: str) -> Tensor:
    """GE ``PromptFlashAttention`` / ``IncreFlashAttention`` (query length 1).

    softmax(q @ k^T * scale + mask [+ causal]) @ v in ``layout`` ("BNSD" or "BSND");
    key/value may have fewer heads (GQA). ``mask`` is additive and broadcasts to
    [B, N, Sq, Skv] whatever the layout."""
    return sdpa(query, key, value, mask, scale, causal, layout)


@flash_attention.register_fake
def _(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, scale: float,
      causal: bool, layout: str) -> Tensor:
    return query.new_empty([*query.shape[:-1], value.shape[-1]])


# ---- rotary embedding ----------------------------------------------------------------------
def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@torch.library.custom_op("npu::rotary_mul", mutates_args=())
def rotary_mul(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """GE ``RotaryMul``: x * cos + rotate_half(x) * sin (rotate-half form)."""
    return x * cos + _rotate_half(x) * sin


@rotary_mul.register_fake
def _(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return x.new_empty(torch.broadcast_shapes(x.shape, cos.shape, sin.shape))


@torch.library.custom_op("npu::apply_rotary_pos_emb", mutates_args=())
def apply_rotary_pos_emb(query: Tensor, key: Tensor, cos: Tensor,
                         sin: Tensor) -> tuple[Tensor, Tensor]:
    """GE ``ApplyRotaryPosEmb`` (layout BSND, rotary_mode "half"): rotary_mul on q and k;
    cos/sin are [B or 1, S, 1, D]."""
    return rotary_mul(query, cos, sin), rotary_mul(key, cos, sin)


@apply_rotary_pos_emb.register_fake
def _(query: Tensor, key: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    return query.new_empty(query.shape), key.new_empty(key.shape)


# ---- activations -------------------------------------------------------------------------
@torch.library.custom_op("npu::swiglu", mutates_args=())
def swiglu(x: Tensor, dim: int) -> Tensor:
    """GE ``SwiGlu``: a, b = x.chunk(2, dim); silu(a) * b."""
    a, b = x.chunk(2, dim=dim)
    return F.silu(a) * b


@swiglu.register_fake
def _(x: Tensor, dim: int) -> Tensor:
    shape = list(x.shape)
    shape[dim] //= 2
    return x.new_empty(shape)


@torch.library.custom_op("npu::gelu", mutates_args=())
def gelu(x: Tensor, approximate: str) -> Tensor:
    """GE ``GeluV2`` (approximate "none": erf form) or ``Gelu`` ("tanh" form)."""
    return F.gelu(x, approximate=approximate)


@gelu.register_fake
def _(x: Tensor, approximate: str) -> Tensor:
    return x.new_empty(x.shape)


# ---- matmul with folded transposes and bias --------------------------------------------------
def _t(x: Tensor, flag: bool) -> Tensor:
    return x.transpose(-1, -2) if flag else x


@torch.library.custom_op("npu::matmul", mutates_args=())
def matmul(x1: Tensor, x2: Tensor, bias: Tensor | None, transpose_x1: bool,
           transpose_x2: bool) -> Tensor:
    """GE ``MatMulV2`` (2-D) / ``BatchMatMulV2`` (3-D+): op(x1) @ op(x2) + bias."""
    a, b = _t(x1, transpose_x1), _t(x2, transpose_x2)
    if bias is not None and a.dim() == 2:
        return torch.addmm(bias, a, b)
    out = torch.matmul(a, b)
    return out if bias is None else out + bias


@matmul.register_fake
def _(x1: Tensor, x2: Tensor, bias: Tensor | None, transpose_x1: bool,
      transpose_x2: bool) -> Tensor:
    shape = _static_matmul_shape(x1, x2, transpose_x1, transpose_x2)
    if shape is not None:  # torch.matmul's result without its ~10 fake dispatches (~2 ms)
        return x1.new_empty(shape)
    return torch.matmul(_t(x1, transpose_x1), _t(x2, transpose_x2))


def _static_matmul_shape(x1: Tensor, x2: Tensor, t1: bool, t2: bool) -> list[int] | None:
    """torch.matmul's (contiguous) output shape for static >= 2-D operands of one dtype whose
    inner dims agree; None for anything else (symbolic sizes, 1-D, a mismatch: torch.matmul
    decides, and raises)."""
    s1, s2 = list(x1.shape), list(x2.shape)
    if (len(s1) < 2 or len(s2) < 2 or x1.dtype != x2.dtype
            or not all(type(d) is int for d in s1 + s2)):
        return None
    if t1:
        s1[-2:] = s1[-1], s1[-2]
    if t2:
        s2[-2:] = s2[-1], s2[-2]
    if s1[-1] != s2[-2]:
        return None
    try:
        batch = torch.broadcast_shapes(tuple(s1[:-2]), tuple(s2[:-2]))
    except RuntimeError:
        return None
    return [*batch, s1[-2], s2[-1]]


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


# ---- training attention: FlashAttentionScore / FlashAttentionScoreGrad --------------------------
SOFTMAX_STAT_WIDTH = 8  # GE keeps softmax max/sum as [B, N, Sq, 8] (the value repeated)


def _stat(t: Tensor) -> Tensor:
    return t.unsqueeze(-1).expand(*t.shape, SOFTMAX_STAT_WIDTH).contiguous()


@torch.library.custom_op("npu::flash_attention_score", mutates_args=())
def flash_attention_score(query: Tensor, key: Tensor, value: Tensor, causal: bool,
                          scale: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """GE ``FlashAttentionScore`` (BNSD, fp16/bf16): (softmax_max, softmax_sum,
    softmax_out (empty), attention_out); softmax = exp(s - max) / sum."""
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, 0.0, causal,
                                                                scale=scale)
    return _stat(lse), _stat(torch.ones_like(lse)), query.new_empty([0]), out


@flash_attention_score.register_fake
def _(query: Tensor, key: Tensor, value: Tensor, causal: bool,
      scale: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    stat = [*query.shape[:-1], SOFTMAX_STAT_WIDTH]
    return (query.new_empty(stat, dtype=torch.float32), query.new_empty(stat, dtype=torch.float32),
            query.new_empty([0]), query.new_empty([*query.shape[:-1], value.shape[-1]]))


def logsumexp_of(softmax_max: Tensor, softmax_sum: Tensor) -> Tensor:
    """torch's [B, N, Sq] logsumexp from GE's softmax statistics."""
    return softmax_max[..., 0] + softmax_sum[..., 0].log()


@torch.library.custom_op("npu::flash_attention_score_grad", mutates_args=())
def flash_attention_score_grad(query: Tensor, key: Tensor, value: Tensor, dy: Tensor,
                               softmax_max: Tensor, softmax_sum: Tensor, attention_in: Tensor,
                               causal: bool, scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """GE ``FlashAttentionScoreGrad`` (BNSD, fp16/bf16): (dq, dk, dv)."""
    lse = logsumexp_of(softmax_max, softmax_sum)
    return aten._scaled_dot_product_flash_attention_for_cpu_backward(
        dy, query, key, value, attention_in, lse, 0.0, causal, scale=scale)


@flash_attention_score_grad.register_fake
def _(query: Tensor, key: Tensor, value: Tensor, dy: Tensor, softmax_max: Tensor,
      softmax_sum: Tensor, attention_in: Tensor, causal: bool,
      scale: float) -> tuple[Tensor, Tensor, Tensor]:
    return query.new_empty(query.shape), key.new_empty(key.shape), value.new_empty(value.shape)
from npu_inductor import ops_training  # noqa: E402,F401  (backward ops, autograd)
