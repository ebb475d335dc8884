"""Fusions on the LLaMA / BERT / CNN test models: every pattern that occurs fires
(counters), compiled output still matches eager (forward, and backward for training),
and the GE graphs hold the fused GE op types."""

from __future__ import annotations

import collections
import copy
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from harness import check_model
from models import make

from npu_inductor.graph_passes import counters

# fp16/bf16 inference vs eager: both round, at different points of the fused ops
LOW_TOL = {torch.float16: 1e-2, torch.bfloat16: 5e-2}


def _compile(name: str, train: bool = False, dtype: torch.dtype = torch.float32, **options):
    model, inputs = make(name)
    model = model.to(dtype)
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    before = collections.Counter(counters)
    tol = LOW_TOL.get(dtype, 1e-5 if dtype == torch.float32 else 1e-2)
    if options.get("precision_mode", "must_keep_origin_dtype") != "must_keep_origin_dtype":
        tol = LOW_TOL[torch.float16]  # fp32 attention computed in fp16
    graphs = check_model(model, inputs, train=train, options=options or None,
                         rtol=tol, atol=tol if tol > 1e-5 else 1e-6)
    fired = collections.Counter(counters) - before
    ops = collections.Counter()
    for g in graphs:
        ops.update(g.lowered.graph.op_counts())
    return fired, ops


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_llama_inference_fuses_norms_rope_attention_and_matmuls(dtype):
    fired, ops = _compile("llama", dtype=dtype)
    # 2 layers: 2 RmsNorm each + final; 4 of the 5 follow a residual add
    assert fired["fuse_rms_norm"] == 5 and fired["fuse_add_rms_norm"] == 4
    assert fired["fuse_rotary"] == 4 and fired["fuse_apply_rotary_pos_emb"] == 2
    assert fired["fuse_attention"] == 2 and fired["fuse_matmul"] >= 14
    assert ops["AddRmsNorm"] == 4 and ops["RmsNorm"] == 1 and ops["ApplyRotaryPosEmb"] == 2
    assert ops["PromptFlashAttention"] == 2
    # per layer q/k/v in one GroupedMatmul, gate/up in another feeding SwiGlu; o, down and
    # the LM head stay matmuls
    assert fired["fuse_grouped_matmul"] == 2 and fired["fuse_swiglu_grouped"] == 2
    assert ops["GroupedMatmul"] == 4 and ops["SwiGlu"] == 2
    assert ops["MatMulV2"] + ops["BatchMatMulV2"] == 5 and ops["Reshape"] <= 14
    for plain in ("Rsqrt", "Pow", "SoftmaxV2", "ConcatV2", "Neg", "Transpose", "Swish"):
        assert plain not in ops, plain


def test_llama_fp32_inference_keeps_plain_attention_on_910b():
    # PromptFlashAttention has no fp32 kernel on Ascend910B (must_keep_origin_dtype)
    fired, ops = _compile("llama")
    assert fired["fuse_attention"] == 0 and fired["fuse_rms_norm"] == 5
    assert ops["SoftmaxV2"] == 2 and "PromptFlashAttention" not in ops


def test_llama_fp32_attention_fuses_in_fp16_when_precision_mode_allows():
    fired, ops = _compile("llama", precision_mode="allow_fp32_to_fp16")
    assert fired["fuse_attention"] == 2 and ops["PromptFlashAttention"] == 2
    assert "SoftmaxV2" not in ops and ops["Cast"] >= 2 * 4  # q, k, v in; output back


def test_llama_frozen_merges_gate_up_into_swiglu():
    fired, ops = _compile("llama", freeze_parameters=True)
    assert fired["fuse_swiglu_merged"] == 2 and ops["SwiGlu"] == 2
    assert "Swish" not in ops and ops["Data"] == 1  # only the token ids stay inputs


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_bert_inference_fuses_attention_with_padding_mask(dtype):
    fired, ops = _compile("bert", dtype=dtype)
    assert fired["fuse_attention"] == 2 and ops["PromptFlashAttention"] == 2
    assert fired["fuse_matmul"] >= 8 and "SoftmaxV2" not in ops


def test_bert_fp32_inference_keeps_plain_attention_on_910b():
    fired, ops = _compile("bert")
    assert fired["fuse_attention"] == 0 and ops["SoftmaxV2"] == 2
    assert fired["fuse_matmul"] >= 8 and "PromptFlashAttention" not in ops


def test_cnn_inference_frozen_folds_batch_norm_into_conv():
    fired, ops = _compile("cnn", freeze_parameters=True)
    assert fired["fuse_conv_bn"] == 2 and ops["Conv2D"] == 2
    assert not any("BatchNorm" in op or "BNInfer" in op for op in ops)


@pytest.mark.parametrize("name", ["llama", "bert"])
def test_training_graphs_match_eager_and_keep_only_backward_safe_fusions(name):
    fired, ops = _compile(name, train=True, verify=True)
    assert fired["fuse_matmul"] > 0  # layout-only: safe in forward and backward graphs
    # RmsNorm has a GE backward: the forward fuses, the saved rstd comes from RmsNorm
    assert fired["fuse_rms_norm"] == (5 if name == "llama" else 0)
    assert ops["RmsNorm"] == fired["fuse_rms_norm"] and "Rsqrt" not in ops
    for fusion in ("fuse_add_rms_norm", "fuse_attention", "fuse_rotary", "fuse_swiglu"):
        assert fired[fusion] == 0, fusion  # no GE backward, or fp32 (FlashAttentionScore)
    assert "PromptFlashAttention" not in ops and "AddRmsNorm" not in ops


def test_fusions_off_gives_the_plain_graph():
    fired, ops = _compile("llama", fusions=False)
    assert not any(k.startswith("fuse_") for k in fired)
    assert "RmsNorm" not in ops and ops["Rsqrt"] == 5


def test_llama_bf16_training_uses_flash_attention_score_and_its_grad():
    model, inputs = make("llama")
    before = collections.Counter(counters)
    # bf16: the fused ops compute in fp32 and round once, eager's plain ops round at every
    # step; against float64 the compiled gradients are as close as eager's (next test)
    graphs = check_model(model.to(torch.bfloat16), inputs, train=True, rtol=2e-2, atol=5e-2)
    fired = collections.Counter(counters) - before
    assert fired["fuse_flash_attention_score"] == 2
    assert fired["fuse_flash_attention_score_grad"] == 2
    ops = {g.name.split("_")[0]: g.lowered.graph.op_counts() for g in graphs}
    assert ops["forward"]["FlashAttentionScore"] == 2
    assert ops["backward"]["FlashAttentionScoreGrad"] == 2
    assert "SoftmaxV2" not in ops["forward"] and "SoftmaxGrad" not in ops["backward"]
    # RMSNorm (2 per layer + final), rotary (q and k per layer), SwiGLU: fused both ways
    assert ops["forward"]["RmsNorm"] == ops["backward"]["RmsNormGrad"] == 5
    assert ops["forward"]["RotaryMul"] == ops["backward"]["RotaryPositionEmbeddingGrad"] == 4
    assert ops["forward"]["SwiGlu"] == ops["backward"]["SwiGluGrad"] == 2


def _grad_errors(model, inputs, fn):
    """Max error of each parameter's gradient against float64, relative to its size."""
    ref = copy.deepcopy(model).double()
    out = ref(*(x.double() if x.is_floating_point() else x for x in inputs))
    weights = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape)
    (out * weights).sum().backward()
    low = copy.deepcopy(model).to(torch.bfloat16)
    (fn(low)(*inputs).double() * weights).sum().backward()
    return torch.tensor([((p.grad.double() - r.grad).abs().max() / r.grad.abs().max()).item()
                         for p, r in zip(low.parameters(), ref.parameters())])


def test_llama_bf16_training_gradients_as_close_to_float64_as_eager():
    model, inputs = make("llama")
    compiled = _grad_errors(model, inputs, lambda m: torch.compile(
        m, backend="npu", options={"fallback": "error"}))
    eager = _grad_errors(model, inputs, lambda m: m)
    assert compiled.max() <= 1.25 * eager.max() and compiled.mean() <= 1.25 * eager.mean()


def test_fp32_training_keeps_plain_attention():
    fired, ops = _compile("llama", train=True)
    assert fired["fuse_flash_attention_score"] == 0 and "FlashAttentionScore" not in ops


def _decode_step(q, k_cache, v_cache):
    """One decode step over a KV cache: a single query position, GQA, no mask."""
    out = torch.nn.functional.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
    return out.transpose(1, 2).reshape(q.shape[0], 1, -1)


def test_decode_attention_becomes_incre_flash_attention():
    from harness import check_fn

    q, k, v = (torch.randn(*s, dtype=torch.float16) for s in ((2, 4, 1, 8), (2, 2, 9, 8),
                                                             (2, 2, 9, 8)))
    before = collections.Counter(counters)
    with torch.no_grad():  # fp16: IncreFlashAttention has fp16/bf16 kernels on 910B only
        graphs = check_fn(_decode_step, q, k, v, rtol=1e-2, atol=1e-2)
    assert (collections.Counter(counters) - before)["fuse_attention"] == 1
    ops = graphs[0].lowered.graph.op_counts()
    assert ops["IncreFlashAttention"] == 1 and "PromptFlashAttention" not in ops
