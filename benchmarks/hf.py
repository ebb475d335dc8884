"""Hugging Face ``transformers`` models built from small configs (random weights, no
downloads), for ``npu-bench --hf NAME``. Needs the optional ``hf`` extra."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from npu_inductor.benchmarks.zoo import Inputs, ZooModel

SEQ = 32
VOCAB = 1000
SMALL = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 344, "vocab_size": VOCAB, "max_position_embeddings": 128}


class FirstTensor(nn.Module):
    """Returns the model output's main tensor (``logits`` or ``last_hidden_state``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=ids, use_cache=False)
        return out.logits if hasattr(out, "logits") else out.last_hidden_state


def _configs() -> dict[str, Callable[[], nn.Module]]:
    import transformers as tf

    return {
        "gpt2": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
            n_layer=2, n_embd=128, n_head=4, vocab_size=VOCAB, n_positions=128,
            bos_token_id=0, eos_token_id=0)),
        "bert": lambda: tf.BertModel(tf.BertConfig(**SMALL), add_pooling_layer=False),
        "llama": lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**SMALL, num_key_value_heads=2)),
        "qwen2": lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(**SMALL, num_key_value_heads=2)),
    }


HF_NAMES = ("gpt2", "bert", "llama", "qwen2")


def available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def _builder(make: Callable[[], nn.Module]) -> Callable[[int, int], tuple[nn.Module, Inputs]]:
    def build(batch: int, seed: int) -> tuple[nn.Module, Inputs]:
        torch.manual_seed(seed)
        model = make()
        model.config.use_cache = False
        return FirstTensor(model), (torch.randint(0, VOCAB, (batch, SEQ)),)

    return build


def hf_models(names: list[str]) -> tuple[list[ZooModel], str | None]:
    """Zoo entries ``hf_<name>``, or ([], a message) when transformers is missing."""
    if not names:
        return [], None
    if not available():
        return [], ("--hf skipped: transformers is not installed "
                    "(pip install 'npu_inductor[hf]')")
    unknown = sorted(set(names) - set(HF_NAMES))
    if unknown:
        raise KeyError(f"unknown --hf model(s) {unknown}; choose from {list(HF_NAMES)}")
    configs: dict[str, Any] = _configs()
    return [ZooModel(f"hf_{n}", _builder(configs[n])) for n in names], None
