"""GE ops per decoder layer of a transformers LLaMA in bf16 inference (4-layer minus 2-layer
graph, halved; views and Data/Const excluded): at most 12 (issue 19; 36 before the rotary,
attention and gated-MLP fusions fired on transformers' code). Deployed inference compiles
with frozen weights, which lets gate/up merge into SwiGlu."""

import pytest

pytest.importorskip("transformers")

from npu_inductor.benchmarks.layer_ops import _hf, ops_per_layer  # noqa: E402

# Per layer: AddRmsNorm x2, q/k/v/o projections, ApplyRotaryPosEmb, PromptFlashAttention,
# gate+up (one matmul), SwiGlu, down projection.
EXPECTED = {"AddRmsNorm": 2, "ApplyRotaryPosEmb": 1, "BatchMatMulV2": 6,
            "PromptFlashAttention": 1, "SwiGlu": 1}


def test_transformers_llama_ops_per_layer():
    total, per_type = ops_per_layer(_hf("llama"), {"freeze_parameters": True})
    assert total <= 12, per_type
    assert per_type == EXPECTED
