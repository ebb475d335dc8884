"""``npu::*`` fused ops (made by ``graph_passes``) -> the GE fused ops, per their prototypes.

    npu::rms_norm              -> RmsNorm(x, gamma; epsilon)
    npu::add_rms_norm          -> AddRmsNorm(x1, x2, gamma; epsilon)
    npu::flash_attention       -> PromptFlashAttention(query, key, value, pse_shift, atten_mask;
                                  num_heads, scale_value, input_layout, num_key_value_heads,
                                  pre_tokens, next_tokens, sparse_mode)
                                  IncreFlashAttention for a length-1 query without mask
    npu::rotary_mul            -> RotaryMul(x, r1, r2)
    npu::apply_rotary_pos_emb  -> ApplyRotaryPosEmb(query, key, cos, sin; layout=1 (BSND),
                                  rotary_mode="half")
    npu::swiglu                -> SwiGlu(x; dim)
    npu::gelu                  -> GeluV2(x; approximate) ("none"), Gelu(x) ("tanh")
    npu::matmul                -> MatMulV2(x1, x2, bias; transpose_x1, transpose_x2) (2-D),
                                  BatchMatMulV2(x1, x2, bias; adj_x1, adj_x2)
    npu::grouped_linear        -> GroupedMatmul(x=[x]*n, weight=[W1..Wn], bias; split_item=0,
                                  group_type=-1, transpose_weight) (n outputs)
    npu::grouped_linear_stacked -> GroupedMatmul(x=[x]*n, weight=[W1..Wn]; split_item=2,
                                  group_type=0, transpose_weight) (one output, rows stacked)
"""

from __future__ import annotations

import torch

from npu_inductor import ops, ops_moe, ops_projections  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.ge.ir import DYNAMIC_DIM, Value
from npu_inductor.ge.op_specs import get_spec
from npu_inductor.lowering.context import static_shape
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.symbolic import sizes_value, sym_sizes, upper_mask

npu = torch.ops.npu
# GE's "no limit" for pre_tokens/next_tokens (int32 max).
ALL_TOKENS = 2147483647
BSND_LAYOUT = 1  # ApplyRotaryPosEmb's ``layout`` attr: 1 = BSND


@register(npu.rms_norm.default)
def rms_norm(ctx, x, gamma, eps):
    """rms_norm(Tensor x, Tensor gamma, float eps) -> (Tensor, Tensor)"""
    return ctx.op("RmsNorm", [x, gamma], {"epsilon": float(eps)})


@register(npu.add_rms_norm.default)
def add_rms_norm(ctx, x1, x2, gamma, eps):
    """add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float eps) -> (Tensor, Tensor, Tensor)"""
    return ctx.op("AddRmsNorm", [x1, x2, gamma], {"epsilon": float(eps)})


def _heads(layout: str, q, k) -> tuple:
    """(num_heads, num_key_value_heads, Sq, Skv) of BNSD / BSND sizes."""
    n_axis, s_axis = (1, 2) if layout == "BNSD" else (2, 1)
    return q[n_axis], k[n_axis], q[s_axis], k[s_axis]


def _pse_shift(ctx, mask, n: int, sq, skv):
    """An additive mask broadcast to PromptFlashAttention's pse_shift [B or 1, N, Sq, Skv]
    (sizes are ints or SymInts)."""
    batch = sym_sizes(ctx, mask)[0] if mask.rank == 4 else 1
    target = static_shape((batch, n, sq, skv))
    if tuple(mask.shape) == target and DYNAMIC_DIM not in target:
        return mask
    return ctx.op("BroadcastTo", [mask, sizes_value(ctx, (batch, n, sq, skv))],
                  out=(mask.dtype, target), suffix="pse_shift")


@register(npu.flash_attention.default)
def flash_attention(ctx, query, key, value, mask, scale, causal, layout):
    """flash_attention(Tensor query, Tensor key, Tensor value, Tensor? mask, float scale, bool causal, str layout) -> Tensor"""  # noqa: E501
    n, kvh, sq, skv = _heads(layout, sym_sizes(ctx, query), sym_sizes(ctx, key))
    common = {"num_heads": n, "scale_value": float(scale), "input_layout": layout,
              "num_key_value_heads": kvh}
    if isinstance(sq, int) and sq == 1 and mask is None and not causal:
        return ctx.op("IncreFlashAttention", [query, [key], [value]], common)
    pse = _pse_shift(ctx, mask, n, sq, skv) if mask is not None else None
    atten_mask = None
    tokens = {"pre_tokens": ALL_TOKENS, "next_tokens": ALL_TOKENS, "sparse_mode": 0}
    if causal:  # 1 = masked; next_tokens=0 states the same band
        atten_mask = upper_mask(ctx, sq, skv, suffix="causal_mask")  # bool: every dtype
        tokens["next_tokens"] = 0
    return ctx.op("PromptFlashAttention", [query, key, value, pse, atten_mask],
                  {**common, **tokens})


@register(npu.rotary_mul.default)
def rotary_mul(ctx, x, cos, sin):
    """rotary_mul(Tensor x, Tensor cos, Tensor sin) -> Tensor"""
    return ctx.op("RotaryMul", [x, cos, sin])


@register(npu.apply_rotary_pos_emb.default)
def apply_rotary_pos_emb(ctx, query, key, cos, sin):
    """apply_rotary_pos_emb(Tensor query, Tensor key, Tensor cos, Tensor sin) -> (Tensor, Tensor)"""  # noqa: E501
    query, key = (_own_copy(ctx, v, s) for v, s in ((query, "query_copy"), (key, "key_copy")))
    return ctx.op("ApplyRotaryPosEmb", [query, key, cos, sin],
                  {"layout": BSND_LAYOUT, "rotary_mode": "half"})


def _own_copy(ctx, v: Value, suffix: str) -> Value:
    """ApplyRotaryPosEmb writes query and key in place: give it copies of its own
    (``TensorMove``, as torchair). TensorMove's prototype has no bfloat16; there the device
    rule ``ref-input-copy`` proves at build time that nothing else reads the buffer."""
    if v.dtype not in get_spec("TensorMove").inputs[0].dtypes:
        return v
    return ctx.op("TensorMove", [v], out=(v.dtype, v.shape), suffix=suffix)


@register(npu.swiglu.default)
def swiglu(ctx, x, dim):
    """swiglu(Tensor x, int dim) -> Tensor"""
    return ctx.op("SwiGlu", [x], {"dim": int(dim)})


@register(npu.gelu.default)
def gelu(ctx, x, approximate):
    """gelu(Tensor x, str approximate) -> Tensor"""
    if approximate == "tanh":
        return ctx.op("Gelu", [x])  # GE Gelu is the tanh approximation
    return ctx.op("GeluV2", [x], {"approximate": "none"})


@register(npu.matmul.default)
def matmul(ctx, x1, x2, bias, transpose_x1, transpose_x2):
    """matmul(Tensor x1, Tensor x2, Tensor? bias, bool transpose_x1, bool transpose_x2) -> Tensor"""  # noqa: E501
    if x1.rank == 2 and x2.rank == 2:
        return ctx.op("MatMulV2", [x1, x2, bias],
                      {"transpose_x1": bool(transpose_x1), "transpose_x2": bool(transpose_x2)})
    return ctx.op("BatchMatMulV2", [x1, x2, bias],
                  {"adj_x1": bool(transpose_x1), "adj_x2": bool(transpose_x2)})


def _causal_bool_mask(ctx, query, key):
    """FlashAttentionScore's atten_mask for a causal band: bool, True = masked."""
    return upper_mask(ctx, sym_sizes(ctx, query)[2], sym_sizes(ctx, key)[2],
                      suffix="causal_mask")


def _fas_attrs(query, causal: bool, scale: float) -> dict:
    return {"head_num": query.shape[1], "input_layout": "BNSD", "scale_value": float(scale),
            "keep_prob": 1.0, "pre_tockens": ALL_TOKENS,
            "next_tockens": 0 if causal else ALL_TOKENS, "sparse_mode": 0}


@register(npu.flash_attention_score.default)
def flash_attention_score(ctx, query, key, value, causal, scale):
    """flash_attention_score(Tensor query, Tensor key, Tensor value, bool causal, float scale) -> (Tensor, Tensor, Tensor, Tensor)"""  # noqa: E501
    mask = _causal_bool_mask(ctx, query, key) if causal else None
    return ctx.op("FlashAttentionScore", [query, key, value, None, None, None, mask],
                  _fas_attrs(query, causal, scale))


@register(npu.flash_attention_score_grad.default)
def flash_attention_score_grad(ctx, query, key, value, dy, softmax_max, softmax_sum,
                               attention_in, causal, scale):
    """flash_attention_score_grad(Tensor query, Tensor key, Tensor value, Tensor dy, Tensor softmax_max, Tensor softmax_sum, Tensor attention_in, bool causal, float scale) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    mask = _causal_bool_mask(ctx, query, key) if causal else None
    outs = [*ctx.out_specs(), (query.dtype, (0,))]  # + dpse, empty without pse_shift
    dq, dk, dv, _ = ctx.op("FlashAttentionScoreGrad",
                           [query, key, value, dy, None, None, None, mask, softmax_max,
                            softmax_sum, None, attention_in],
                           _fas_attrs(query, causal, scale), out=outs)
    return dq, dk, dv


# ---- backward ops of the training fusions (npu_inductor/ops_training.py) -------------------
@register(npu.rms_norm_grad.default)
def rms_norm_grad(ctx, dy, x, rstd, gamma):
    """rms_norm_grad(Tensor dy, Tensor x, Tensor rstd, Tensor gamma) -> (Tensor, Tensor)"""
    return ctx.op("RmsNormGrad", [dy, x, rstd, gamma])


@register(npu.rotary_mul_grad.default)
def rotary_mul_grad(ctx, dy, cos, sin):
    """rotary_mul_grad(Tensor dy, Tensor cos, Tensor sin) -> Tensor"""
    outs = [ctx.out_specs()[0], (cos.dtype, cos.shape), (sin.dtype, sin.shape)]
    dx, _, _ = ctx.op("RotaryPositionEmbeddingGrad", [dy, cos, sin], {"mode": 0}, out=outs)
    return dx


@register(npu.swiglu_grad.default)
def swiglu_grad(ctx, dy, x, dim):
    """swiglu_grad(Tensor dy, Tensor x, int dim) -> Tensor"""
    return ctx.op("SwiGluGrad", [dy, x], {"dim": int(dim)})


# ---- mixture of experts (npu_inductor/ops_moe.py, graph_passes/moe.py) ---------------------
@register(torch.ops.npu.grouped_matmul.default)
def grouped_matmul(ctx, x, weight, group_list, group_type, transpose_x, transpose_weight):
    """grouped_matmul(Tensor x, Tensor weight, Tensor group_list, int group_type, bool transpose_x, bool transpose_weight) -> Tensor"""  # noqa: E501
    attrs = {"split_item": 3, "group_type": int(group_type), "group_list_type": 0,
             "transpose_x": bool(transpose_x), "transpose_weight": bool(transpose_weight)}
    return ctx.op("GroupedMatmul", [[x], [weight], [], [], [], [], [], group_list], attrs,
                  out=ctx.out_specs())


# ---- projections of one input (npu_inductor/ops_projections.py, fuse_projections.py) --------
def _grouped_linear(ctx, x, weights, split_item: int, group_type: int, biases=(),
                    transpose_weight: bool = True):
    attrs = {"split_item": split_item, "group_type": group_type,
             "transpose_weight": bool(transpose_weight)}
    return ctx.op("GroupedMatmul",
                  [[x] * len(weights), list(weights), list(biases), [], [], [], []],
                  attrs, out=ctx.out_specs())


@register(npu.grouped_linear.default)
def grouped_linear(ctx, x, weights, biases, transpose_weight):
    """grouped_linear(Tensor x, Tensor[] weights, Tensor[] biases, bool transpose_weight) -> Tensor[]"""  # noqa: E501
    ys = _grouped_linear(ctx, x, weights, 0, -1, biases, transpose_weight)
    return ys if isinstance(ys, tuple) else (ys,)


@register(npu.grouped_linear_stacked.default)
def grouped_linear_stacked(ctx, x, weights):
    """grouped_linear_stacked(Tensor x, Tensor[] weights) -> Tensor"""
    return _grouped_linear(ctx, x, weights, 2, 0)
