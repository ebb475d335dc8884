"""Each fusion on a tiny hand-built aten graph: it fires (counter + npu::* node), the
rewritten graph still computes the same values, and a near miss is left untouched."""

from __future__ import annotations

import math
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from models import RMSNorm, rotate_half
from pass_util import has, run, same_result, trace

from npu_inductor import graph_passes as gp
from npu_inductor.graph_passes.constant_fold import constant_fold
from npu_inductor.graph_passes.noop import remove_noops

aten, npu = torch.ops.aten, torch.ops.npu


def _prepared(fn, *inputs):
    """The graph as the fusions see it: after no-op removal and constant folding."""
    gm, _ = run(remove_noops, trace(fn, *inputs))
    gm, _ = run(constant_fold, gm)
    return gm


# ---- RmsNorm / AddRmsNorm -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_fires_on_the_llama_form_with_casts(dtype):
    norm = RMSNorm(16).to(dtype)
    norm.weight.data.normal_()
    x = torch.randn(2, 3, 16, dtype=dtype)
    def fn(x, w):
        return norm.__class__.forward(_with_weight(norm, w), x)
    gm, fired = run(gp.fuse_rms_norm, _prepared(fn, x, norm.weight.detach()))
    assert fired == {"fuse_rms_norm": 1} and has(gm, npu.rms_norm.default)
    assert not has(gm, aten.rsqrt.default)
    tol = 1e-5 if dtype == torch.float32 else 2e-2  # bf16: one rounding step apart
    same_result(gm, fn, x, norm.weight.detach(), rtol=tol, atol=tol)


def _with_weight(norm, w):
    clone = RMSNorm(w.shape[0], norm.eps)
    clone.weight = torch.nn.Parameter(w, requires_grad=False)
    return clone


def test_rms_norm_near_miss_mean_over_wrong_dim_is_untouched():
    def fn(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + 1e-6))
    gm, fired = run(gp.fuse_rms_norm, _prepared(fn, torch.randn(4, 4), torch.randn(4)))
    assert not fired and has(gm, aten.rsqrt.default)


def test_rms_norm_near_miss_intermediate_used_elsewhere_is_untouched():
    def fn(x, w):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return w * (x * r), r
    _, fired = run(gp.fuse_rms_norm, _prepared(fn, torch.randn(4, 8), torch.randn(8)))
    assert not fired


def _add_norm(a, b, w):
    s = a + b
    return w * (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-5)), s * 2


def _saving_norm(x, w):
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    n = x * r
    return w * n, r, n  # rstd and x * rstd also leave the graph, as a training forward's do


def test_rms_norm_in_a_training_forward_feeds_the_saved_values_from_rstd():
    inputs = (torch.randn(2, 8), torch.randn(8))
    gm = _prepared(_saving_norm, *inputs)
    next(iter(gm.graph.find_nodes(op="placeholder"))).name = "primals_1"  # a training graph
    gm, fired = run(gp.fuse_rms_norm, gm)
    assert fired == {"fuse_rms_norm": 1} and not has(gm, aten.rsqrt.default)
    same_result(gm, _saving_norm, *inputs)


def test_add_rms_norm_fires_and_reuses_the_sum():
    inputs = (torch.randn(2, 8), torch.randn(2, 8), torch.randn(8))
    gm, _ = run(gp.fuse_rms_norm, _prepared(_add_norm, *inputs))
    gm, fired = run(gp.fuse_add_rms_norm, gm)
    assert fired == {"fuse_add_rms_norm": 1} and has(gm, npu.add_rms_norm.default)
    assert not has(gm, aten.add.Tensor)  # the residual sum is AddRmsNorm's third output
    same_result(gm, _add_norm, *inputs)


def test_add_rms_norm_near_miss_broadcasting_add_is_untouched():
    inputs = (torch.randn(2, 8), torch.randn(8), torch.randn(8))
    gm, _ = run(gp.fuse_rms_norm, _prepared(_add_norm, *inputs))
    gm, fired = run(gp.fuse_add_rms_norm, gm)
    assert not fired and has(gm, npu.rms_norm.default)


# ---- rotary embedding ---------------------------------------------------------------------------
def _rope(q, k, cos, sin):
    q, k = q.transpose(1, 2), k.transpose(1, 2)  # BSND -> BNSD, as LLaMA does
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def test_rotary_fires_per_tensor_and_pairs_query_key_into_apply_rotary_pos_emb():
    inputs = (torch.randn(2, 5, 4, 8), torch.randn(2, 5, 2, 8), torch.randn(5, 8),
              torch.randn(5, 8))
    gm, fired = run(gp.fuse_rotary, _prepared(_rope, *inputs))
    assert fired == {"fuse_rotary": 2, "fuse_apply_rotary_pos_emb": 1}
    assert has(gm, npu.apply_rotary_pos_emb.default) and not has(gm, aten.cat.default)
    same_result(gm, _rope, *inputs)


def test_rotary_near_miss_wrong_half_order_is_untouched():
    def fn(x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x1, x2), dim=-1) * sin  # not rotate-half
    gm, fired = run(gp.fuse_rotary, _prepared(fn, torch.randn(2, 4, 5, 8), torch.randn(5, 8),
                                              torch.randn(5, 8)))
    assert not fired and has(gm, aten.cat.default)


# ---- attention -----------------------------------------------------------------------------------
def _explicit(q, k, v, mask):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask
    return s.softmax(-1) @ v


# fp16/bf16: the fused CPU kernel and the explicit ops round at different points
LOW = pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])


@LOW
def test_explicit_attention_with_additive_mask_becomes_flash_attention(dtype):
    q, k, v = (torch.randn(2, 4, 6, 8, dtype=dtype) for _ in range(3))
    mask = torch.zeros(2, 1, 1, 6, dtype=dtype)
    mask[1, ..., 4:] = torch.finfo(dtype).min
    gm, fired = run(gp.fuse_attention, _prepared(_explicit, q, k, v, mask))
    assert fired == {"fuse_attention": 1} and has(gm, npu.flash_attention.default)
    assert not has(gm, aten._softmax.default) and not has(gm, aten.bmm.default)
    same_result(gm, _explicit, q, k, v, mask, rtol=2e-2, atol=2e-2)


def _sdpa_gqa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


@LOW
def test_sdpa_with_gqa_and_causal_becomes_flash_attention(dtype):
    q, k, v = (torch.randn(*s, dtype=dtype) for s in ((2, 4, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8)))
    gm, fired = run(gp.fuse_attention, _prepared(_sdpa_gqa, q, k, v))
    assert fired == {"fuse_attention": 1}
    (node,) = [n for n in gm.graph.nodes if n.target is npu.flash_attention.default]
    assert node.args[5] is True and node.args[3] is None  # causal, no explicit mask
    same_result(gm, _sdpa_gqa, q, k, v, rtol=2e-2, atol=2e-2)


def test_attention_near_miss_softmax_over_wrong_dim_is_untouched():
    def fn(q, k, v):
        return (q @ k.transpose(-1, -2)).softmax(-2) @ v
    gm, fired = run(gp.fuse_attention, _prepared(fn, *(torch.randn(2, 4, 6, 8) for _ in "qkv")))
    assert not fired and has(gm, aten._softmax.default)


def test_fp32_attention_is_left_to_plain_ops_on_910b_and_the_reason_recorded():
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    gm, fired = run(gp.fuse_attention, _prepared(_sdpa_gqa, q, k, v))
    assert not fired  # PromptFlashAttention has fp16/bf16 kernels only on Ascend910B
    (decision,) = gm.meta["device_decisions"]
    assert decision.rule == "dtype-gate"
    assert "PromptFlashAttention has no float32 kernel on Ascend910B1" in decision.detail


@pytest.mark.parametrize("mode,low", [("allow_fp32_to_fp16", torch.float16),
                                      ("allow_mix_precision_bf16", torch.bfloat16)])
def test_fp32_attention_fuses_in_lower_precision_when_precision_mode_allows(mode, low):
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    gm, fired = run(gp.fuse_attention, _prepared(_sdpa_gqa, q, k, v), precision_mode=mode)
    assert fired == {"fuse_attention": 1}
    (node,) = [n for n in gm.graph.nodes if n.target is npu.flash_attention.default]
    assert node.meta["val"].dtype == low
    assert mode in gm.meta["device_decisions"][0].detail
    same_result(gm, _sdpa_gqa, q, k, v, rtol=3e-2, atol=3e-2)


# ---- SwiGlu -------------------------------------------------------------------------------------
def _halves(x):
    a, b = x.chunk(2, dim=-1)
    return F.silu(a) * b


def test_swiglu_fires_on_halves_of_one_tensor():
    x = torch.randn(3, 16)
    gm, fired = run(gp.fuse_swiglu, _prepared(_halves, x))
    assert fired == {"fuse_swiglu": 1} and has(gm, npu.swiglu.default)
    same_result(gm, _halves, x)


def test_swiglu_near_miss_gate_on_second_half_is_untouched():
    def fn(x):
        a, b = x.chunk(2, dim=-1)
        return F.silu(b) * a
    _, fired = run(gp.fuse_swiglu, _prepared(fn, torch.randn(3, 16)))
    assert not fired


def test_swiglu_near_miss_unfrozen_gate_up_projections_are_untouched():
    def fn(x, wg, wu):
        return F.silu(x @ wg.t()) * (x @ wu.t())
    _, fired = run(gp.fuse_swiglu, _prepared(fn, torch.randn(3, 8), torch.randn(16, 8),
                                              torch.randn(16, 8)))
    assert not fired


# ---- GELU ---------------------------------------------------------------------------------------
def _gelu_erf(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


@pytest.mark.parametrize("fn, approximate", [(_gelu_erf, "none"), (_gelu_tanh, "tanh")])
def test_gelu_forms_fire(fn, approximate):
    x = torch.randn(4, 8)
    gm, fired = run(gp.fuse_gelu, _prepared(fn, x))
    assert fired == {"fuse_gelu": 1}
    (node,) = [n for n in gm.graph.nodes if n.target is npu.gelu.default]
    assert node.args[1] == approximate
    same_result(gm, fn, x)


def test_gelu_near_miss_wrong_constant_is_untouched():
    def fn(x):
        return 0.5 * x * (1 + torch.erf(x / 1.5))
    gm, fired = run(gp.fuse_gelu, _prepared(fn, torch.randn(4)))
    assert not fired and has(gm, aten.erf.default)


# ---- matmul transposes and bias ------------------------------------------------------------
def test_matmul_folds_weight_transpose_and_linear_bias():
    def fn(x, w, b, w2):
        return F.linear(x, w, b) @ w2.t()
    inputs = (torch.randn(3, 8), torch.randn(4, 8), torch.randn(4), torch.randn(5, 4))
    gm, fired = run(gp.fuse_matmul, _prepared(fn, *inputs))
    assert fired == {"fuse_matmul": 2}
    assert not has(gm, aten.t.default) and not has(gm, aten.permute.default)
    nodes = [n for n in gm.graph.nodes if n.target is npu.matmul.default]
    assert [n.args[2] is not None for n in nodes] == [True, False]  # bias on the linear only
    same_result(gm, fn, *inputs)


def test_matmul_near_miss_plain_mm_and_scaled_addmm_are_untouched():
    def fn(x, w, b):
        return torch.addmm(b, x, w.t(), beta=2.0) + x @ w.t().contiguous()
    gm, fired = run(gp.fuse_matmul, trace(fn, torch.randn(3, 8), torch.randn(4, 8),
                                          torch.randn(4)))
    assert not fired and has(gm, aten.addmm.default) and has(gm, aten.mm.default)
