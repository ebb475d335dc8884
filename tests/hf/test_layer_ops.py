"""GE ops per decoder layer of a transformers LLaMA in bf16 inference (4-layer minus 2-layer
graph, halved; views and Data/Const excluded): at most 12 (issue 19; 36 before the rotary,
attention and gated-MLP fusions fired on transformers' code), with frozen weights and
without. The compiled logits of each measured model match eager's."""

import pytest

pytest.importorskip("transformers")

from harness import assert_close  # noqa: E402

from npu_inductor.benchmarks.layer_ops import _hf, ops_per_layer  # noqa: E402

# Per layer, both configurations: AddRmsNorm x2, q/k/v in one GroupedMatmul,
# ApplyRotaryPosEmb, PromptFlashAttention, o projection, gate+up, SwiGlu, down projection.
# Frozen, gate+up is one matmul of the concatenated constant weights; unfrozen, a
# GroupedMatmul stacks the gate rows above the up rows (SwiGlu on dim 0).
COMMON = {"AddRmsNorm": 2, "ApplyRotaryPosEmb": 1, "PromptFlashAttention": 1, "SwiGlu": 1}
EXPECTED = {
    "frozen": {**COMMON, "GroupedMatmul": 1, "BatchMatMulV2": 3},
    "unfrozen": {**COMMON, "GroupedMatmul": 2, "BatchMatMulV2": 2},
}
OPTIONS = {"frozen": {"freeze_parameters": True}, "unfrozen": None}
# bf16 logits: eager rounds every op's result, the fused kernels once at their end
BF16 = {"rtol": 4e-2, "atol": 4e-2}


def _matches_eager(actual, expected):
    assert_close(actual.float(), expected.float(), what="logits", **BF16)


@pytest.mark.parametrize("config", ["frozen", "unfrozen"])
def test_transformers_llama_ops_per_layer(config):
    total, per_type = ops_per_layer(_hf("llama"), OPTIONS[config], check=_matches_eager)
    assert total <= 12, per_type
    assert per_type == EXPECTED[config]
