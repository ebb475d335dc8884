"""transformers models in inference (no_grad, eval mode), compiled with backend="npu" under
fallback="error": zero graph breaks, zero fallbacks, eager's results. The encoders,
encoder-decoder and vision/speech models in float32 at 1e-5; the decoder-only LLMs in
bfloat16 with frozen weights, where the fusions run as on a 910B (fused attention has no
float32 kernel there), with their fusion counters and fused GE ops asserted. (The training
steps are in test_hf_models.py: two files, so pytest-xdist's loadfile splits the suite.)
"""

from __future__ import annotations

import collections

import pytest
import torch

pytest.importorskip("transformers")

from archs import ARCHS, build  # noqa: E402
from harness import assert_close, record_graphs  # noqa: E402
from test_hf_models import FP32, _compile, _graph_breaks, _main  # noqa: E402

from npu_inductor.graph_passes import counters  # noqa: E402

# bf16 logits: eager rounds every op's result to bf16 (RMSNorm, softmax, rotary), the fused
# kernels round once at their end, so single logits differ by a few bf16 ulps (2^-8 each).
BF16 = {"rtol": 4e-2, "atol": 4e-2}

# Deployed inference: weights as constants, so gate and up projections merge into one matmul
# feeding SwiGlu (without it SwiGlu would need a weight concat on every call).
FROZEN = {"freeze_parameters": True}

# Fusion counters the bf16 inference compile of each decoder bumps, from each model's
# structure: 2 layers, so 2 attentions, q and k rotaries per layer (4, paired into 2
# ApplyRotaryPosEmb where both are BSND), 2 RMSNorms per layer + the final one (5, of which
# the 4 fed by a residual add become AddRmsNorm), one gated MLP per layer. Where a family
# cannot fuse one of rotary / RMSNorm / attention / gated MLP, why:
#   gemma     RMSNorm runs in fp32 (x.float() * (1 + w)): RmsNorm on the fp32 tensor, so
#             the bf16 residual add stays an Add; GELU-gated MLP stays GeluV2 * up: GE's
#             GeGluV2 would need the merged gate/up, and CANN's docs give its activate_left
#             opposite meanings across versions (8.0/8.1 vs 8.3), so it is not emitted unchecked;
#   phi3      partial rotary on slices of the fused qkv: RotaryMul per tensor; pairing into
#             ApplyRotaryPosEmb (BSND) would add 4 Transposes per layer around the slices;
#   gpt_neox  LayerNorm (LayerNormV4) and a plain GELU MLP: no RMSNorm, no gated MLP;
#   gpt2      learned positions (no rotary), LayerNorm, plain GELU MLP (tanh form -> Gelu);
#   mixtral   expert MLPs: one SwiGlu per layer on the grouped gate/up matmul (GroupedMatmul);
#             the routing (topk, sort, scatter) in the same graph.
# Projections of one input without bias become one GroupedMatmul (fuse_grouped_matmul):
# q/k/v per layer (qwen2's with their frozen biases as float32 constants; not phi3 /
# gpt_neox / gpt2, whose qkv is one linear already), and gemma's GELU gate/up pair.
_LLAMA_LIKE = {"fuse_rms_norm": 5, "fuse_add_rms_norm": 4, "fuse_rotary": 4,
               "fuse_apply_rotary_pos_emb": 2, "fuse_attention": 2, "fuse_swiglu_merged": 2,
               "fuse_grouped_matmul": 2}
EXPECTED_FUSIONS: dict[str, dict[str, int]] = {
    "llama": _LLAMA_LIKE,
    "llama_eager_attn": _LLAMA_LIKE,
    "mistral": _LLAMA_LIKE,
    "qwen2": _LLAMA_LIKE,
    "gemma": {"fuse_rms_norm": 5, "fuse_rotary": 4, "fuse_apply_rotary_pos_emb": 2,
              "fuse_attention": 2, "fuse_grouped_matmul": 4},
    "phi3": {"fuse_rms_norm": 5, "fuse_add_rms_norm": 4, "fuse_rotary": 4,
             "fuse_attention": 2, "fuse_swiglu": 2},
    "gpt_neox": {"fuse_rotary": 4, "fuse_apply_rotary_pos_emb": 2, "fuse_attention": 2},
    "gpt2": {"fuse_attention": 2, "fuse_gelu": 2},
    "mixtral": {"fuse_rms_norm": 5, "fuse_add_rms_norm": 4, "fuse_rotary": 4,
                "fuse_apply_rotary_pos_emb": 2, "fuse_attention": 2, "fuse_swiglu": 2,
                "moe_grouped_matmul": 4, "moe_sort_ids_f32": 2, "fuse_grouped_matmul": 2},
}
# GE ops each decoder's bf16 graph must hold (the fused forms the counters stand for)
FUSED_OPS = {
    "llama": {"AddRmsNorm", "RmsNorm", "ApplyRotaryPosEmb", "PromptFlashAttention", "SwiGlu",
              "GroupedMatmul"},
    "gemma": {"RmsNorm", "ApplyRotaryPosEmb", "PromptFlashAttention", "GroupedMatmul"},
    "phi3": {"AddRmsNorm", "RotaryMul", "PromptFlashAttention", "SwiGlu"},
    "gpt_neox": {"ApplyRotaryPosEmb", "PromptFlashAttention", "LayerNormV4", "GeluV2"},
    "gpt2": {"PromptFlashAttention", "LayerNormV4", "Gelu"},
    "mixtral": {"AddRmsNorm", "ApplyRotaryPosEmb", "PromptFlashAttention", "SwiGlu",
                "GroupedMatmul", "TopKV2", "Sort"},
}
FUSED_OPS["mistral"] = FUSED_OPS["qwen2"] = FUSED_OPS["llama_eager_attn"] = FUSED_OPS["llama"]



def _infer(name: str, dtype: torch.dtype, options: dict | None = None):
    model, inputs = build(ARCHS[name])
    model = model.eval().to(dtype)
    inputs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()
              if k != "labels"}
    compiled = _compile(model, options)
    before = collections.Counter(counters)
    with torch.no_grad(), record_graphs() as graphs:
        actual = compiled(**inputs)
        expected = model(**inputs)
    fired = {k: v for k, v in (collections.Counter(counters) - before).items()
             if k.startswith(("fuse_", "moe_")) and k != "fuse_matmul"}
    assert _graph_breaks() == {}, _graph_breaks()
    types = collections.Counter(op.type for g in graphs for op in g.lowered.graph.ops)
    return _main(actual), _main(expected), fired, types


@pytest.mark.parametrize("name", [n for n, a in ARCHS.items() if not a.decoder])
def test_inference_fp32(name):
    actual, expected, _, _ = _infer(name, torch.float32)
    assert_close(actual, expected, what=f"{name} output", **FP32)


@pytest.mark.parametrize("name", [n for n, a in ARCHS.items() if a.decoder])
def test_decoder_inference_bf16_fused(name):
    actual, expected, fired, types = _infer(name, torch.bfloat16, FROZEN)
    assert_close(actual.float(), expected.float(), what=f"{name} logits", **BF16)
    assert fired == EXPECTED_FUSIONS[name], fired
    missing = FUSED_OPS[name] - set(types)
    assert not missing, f"{name}: {sorted(missing)} not in the GE graphs {sorted(types)}"
