"""Scaled dot-product attention (the CPU flash kernel torch emits for
``F.scaled_dot_product_attention``) lowered to plain GE ops.

    scores = (scale * Q) @ K^T (+ causal / user mask);  P = SoftmaxV2(scores);  O = P @ V
    logsumexp = ReduceLogSumExp(scores)

Grouped-query attention (``Hq = g * Hk``) needs no key/value repeat: query head ``h`` uses
key head ``h // g``, so ``Q`` reshaped to ``(B, Hk, g * L, D)`` multiplies the shared ``K``
directly, and in the backward the ``dK``/``dV`` matmuls sum over the group by themselves.
The backward recomputes ``P`` and uses ``SoftmaxGrad``:

    dV = P^T dO;  dP = dO V^T;  dS = scale * SoftmaxGrad(P, dP);  dQ = dS K;  dK = dS^T Q

The fused ``FlashAttentionScore`` is the fusion passes' job (and float16/bfloat16 only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from npu_inductor.ge.ir import DYNAMIC_DIM, Value
from npu_inductor.lowering.context import LoweringContext, static_shape
from npu_inductor.lowering.helpers import cast, int_list
from npu_inductor.lowering.linalg import used
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.symbolic import (
    DynamicShapeError,
    reshape_to,
    sym_sizes,
    upper_mask,
)

aten = torch.ops.aten


@dataclass(frozen=True)
class _Dims:
    """Sizes as ints, or SymInts for dynamic dims (heads are static)."""

    b: Any
    hq: int
    hk: int
    lq: Any
    s: Any

    @property
    def g(self) -> int:
        return self.hq // self.hk


def _dims(ctx: LoweringContext, query: Value, key: Value, value: Value) -> _Dims:
    b, hq, lq, _ = sym_sizes(ctx, query)
    _, hk, s, _ = sym_sizes(ctx, key)
    if not isinstance(hq, int) or not isinstance(hk, int):
        raise DynamicShapeError(f"{ctx.node.target}: head counts must be static")
    return _Dims(b, hq, hk, lq, s)


def _reshape(ctx: LoweringContext, v: Value, shape, suffix: str) -> Value:
    """Reshape to sizes given as ints and SymInts."""
    return reshape_to(ctx, v, tuple(shape), suffix)


def _grouped(ctx: LoweringContext, v: Value, d: _Dims, suffix: str) -> Value:
    """(B, Hq, L, X) -> (B, Hk, g * L, X)."""
    return _reshape(ctx, v, (d.b, d.hk, d.g * d.lq, v.shape[-1]), suffix)


def _bmm(ctx: LoweringContext, a: Value, b: Value, shape, suffix: str, adj_x1=False,
         adj_x2=False) -> Value:
    return ctx.op("BatchMatMulV2", [a, b], {"adj_x1": adj_x1, "adj_x2": adj_x2},
                  out=(a.dtype, static_shape(shape)), suffix=suffix)


def _causal(ctx: LoweringContext, d: _Dims, dtype: torch.dtype) -> Value:
    """The additive causal mask (-inf above the diagonal), (L, S)."""
    shape = static_shape((d.lq, d.s))
    if DYNAMIC_DIM not in shape:
        keep = torch.ones(shape, dtype=torch.bool).tril()
        bias = torch.zeros(shape).masked_fill(~keep, float("-inf"))
        return ctx.const(bias, dtype, "causal_mask")
    upper = upper_mask(ctx, d.lq, d.s, suffix="causal_upper")
    zero, ninf = ctx.const(0.0, dtype), ctx.const(float("-inf"), dtype)
    return ctx.op("SelectV2", [upper, ninf, zero], out=(dtype, shape), suffix="causal_mask")


def _mask(ctx: LoweringContext, d: _Dims, dtype: torch.dtype, is_causal: bool,
          attn_mask: Value | None) -> list[Value]:
    """Additive masks, shaped to broadcast against (B, Hk, g, L, S) scores."""
    masks = []
    if is_causal:
        masks.append(_causal(ctx, d, dtype))
    if attn_mask is not None:
        m = attn_mask
        if m.dtype == torch.bool:
            zero, ninf = ctx.const(0.0, dtype), ctx.const(float("-inf"), dtype)
            m = ctx.op("SelectV2", [m, zero, ninf], out=(dtype, m.shape), suffix="mask_bias")
        shape = (1,) * (4 - m.rank) + sym_sizes(ctx, attn_mask)
        heads = (d.hk, d.g) if static_shape(shape)[1] == d.hq else (1, 1)
        masks.append(_reshape(ctx, cast(ctx, m, dtype), (shape[0], *heads, *shape[2:]),
                              "mask_shape"))
    return masks


def _scores(ctx: LoweringContext, qg: Value, key: Value, d: _Dims, scale: float,
            masks: list[Value]) -> Value:
    """Scaled, masked scores shaped (B, Hk, g, L, S). The scale multiplies Q (L x D
    elements) rather than the scores (L x S)."""
    qg = ctx.op("Mul", [qg, ctx.const(scale, qg.dtype)], out=(qg.dtype, qg.shape),
                suffix="scale")
    s = _bmm(ctx, qg, key, (d.b, d.hk, d.g * d.lq, d.s), "qk", adj_x2=True)
    s = _reshape(ctx, s, (d.b, d.hk, d.g, d.lq, d.s), "scores5d")
    for m in masks:
        s = ctx.op("Add", [s, m], out=(s.dtype, s.shape), suffix="masked")
    return s


def _probs(ctx: LoweringContext, scores: Value, d: _Dims) -> Value:
    p = ctx.op("SoftmaxV2", [scores], {"axes": [-1]}, out=(scores.dtype, scores.shape),
               suffix="probs")
    return _reshape(ctx, p, (d.b, d.hk, d.g * d.lq, d.s), "probs3d")


def _scale(query: Value, scale: float | None) -> float:
    if scale is None and query.shape[-1] == DYNAMIC_DIM:
        raise DynamicShapeError("the default attention scale needs a static head dim")
    return scale if scale is not None else query.shape[-1] ** -0.5


def _capability(node: torch.fx.Node) -> str | None:
    dropout = node.args[3] if len(node.args) > 3 else node.kwargs.get("dropout_p", 0.0)
    if node.target is aten._scaled_dot_product_flash_attention_for_cpu_backward.default:
        dropout = node.args[6]
    return "attention dropout is not lowered to GE" if dropout else None


@register(aten._scaled_dot_product_flash_attention_for_cpu.default, capability=_capability)
def sdpa_flash_cpu(ctx, query, key, value, dropout_p=0.0, is_causal=False, attn_mask=None,
                   scale=None):
    """_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, float dropout_p=0., bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor output, Tensor logsumexp)"""  # noqa: E501
    d = _dims(ctx, query, key, value)
    qg = _grouped(ctx, query, d, "q_grouped")
    scores = _scores(ctx, qg, key, d, _scale(query, scale),
                     _mask(ctx, d, query.dtype, is_causal, attn_mask))
    out = _bmm(ctx, _probs(ctx, scores, d), value, (d.b, d.hk, d.g * d.lq, value.shape[-1]),
               "pv")
    out_sizes, lse_sizes = (tuple(v.shape) for v in ctx.meta)  # ints and SymInts
    out = _reshape(ctx, out, out_sizes, "out")
    if not used(ctx.node, 1):  # inference: a logsumexp nobody reads costs a pass over scores
        return out, None
    lse_dtype = ctx.out_specs()[1][0]
    last = int_list(ctx, [scores.rank - 1], "axes")  # non-negative: -1 reads as a dynamic dim
    lse = ctx.op("ReduceLogSumExp", [cast(ctx, scores, lse_dtype), last],
                 {"keep_dims": False}, out=(lse_dtype, static_shape((d.b, d.hk, d.g, d.lq))),
                 suffix="lse")
    return out, _reshape(ctx, lse, lse_sizes, "lse_shape")


@register(aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
          capability=_capability)
def sdpa_flash_cpu_backward(ctx, grad_out, query, key, value, out, logsumexp, dropout_p,
                            is_causal, attn_mask=None, scale=None):
    """_scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)"""  # noqa: E501
    d, sc = _dims(ctx, query, key, value), _scale(query, scale)
    qg = _grouped(ctx, query, d, "q_grouped")
    p = _probs(ctx, _scores(ctx, qg, key, d, sc, _mask(ctx, d, query.dtype, is_causal,
                                                        attn_mask)), d)
    dog = _grouped(ctx, cast(ctx, grad_out, query.dtype), d, "do_grouped")
    dv = _bmm(ctx, p, dog, value.shape, "dv", adj_x1=True)
    dp = _bmm(ctx, dog, value, p.shape, "dp", adj_x2=True)
    ds = ctx.op("SoftmaxGrad", [p, dp], {"axes": [-1]}, out=(p.dtype, p.shape), suffix="ds")
    ds = ctx.op("Mul", [ds, ctx.const(sc, ds.dtype)], out=(ds.dtype, ds.shape),
                suffix="ds_scale")
    dq = _bmm(ctx, ds, key, qg.shape, "dq")
    dk = _bmm(ctx, ds, qg, key.shape, "dk", adj_x1=True)
    return _reshape(ctx, dq, sym_sizes(ctx, query), "dq_shape"), dk, dv
