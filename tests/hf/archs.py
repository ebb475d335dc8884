"""The transformers architectures of the suite: tiny configs, random weights, no downloads.

Each ``Arch`` builds its model from a small config (hidden 32-64, 1-2 layers) after
``torch.manual_seed`` and makes the inputs of one batch (sequence 8-16). Dropout and layer
drop are off, so a training-mode forward is deterministic and comparable with eager.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import transformers as tf
from torch import nn

VOCAB = 96
SEQ = 12
BATCH = 2
LLM = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
       "max_position_embeddings": 64, "attention_dropout": 0.0}


@dataclass(frozen=True)
class Arch:
    """One architecture: ``make()`` builds the model, ``inputs()`` one batch (kwargs),
    ``decoder`` marks the decoder-only LLMs (fused-graph checks in bf16)."""

    name: str
    make: Callable[[], nn.Module]
    inputs: Callable[[], dict[str, torch.Tensor]]
    decoder: bool = False
    notes: dict[str, str] = field(default_factory=dict)


def _ids(seq: int = SEQ) -> torch.Tensor:
    return torch.randint(1, VOCAB, (BATCH, seq))


def _lm_inputs() -> dict[str, torch.Tensor]:
    ids = _ids()
    return {"input_ids": ids, "labels": ids}


def _padded_lm_inputs() -> dict[str, torch.Tensor]:
    """Right-padded second row: transformers builds a padding + causal mask."""
    ids = _ids()
    mask = torch.ones_like(ids)
    mask[1, SEQ - 3:] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": ids}


def _llama() -> nn.Module:
    return tf.LlamaForCausalLM(tf.LlamaConfig(**LLM))


def _llama_eager() -> nn.Module:
    """LLaMA with transformers' eager attention code (matmul, fp32 softmax, matmul)."""
    config = tf.LlamaConfig(**LLM)
    config._attn_implementation = "eager"
    return tf.LlamaForCausalLM(config)


def _mistral() -> nn.Module:
    return tf.MistralForCausalLM(tf.MistralConfig(**LLM, sliding_window=4))


def _qwen2() -> nn.Module:
    return tf.Qwen2ForCausalLM(tf.Qwen2Config(**LLM))


def _gemma() -> nn.Module:
    return tf.GemmaForCausalLM(tf.GemmaConfig(**LLM, head_dim=16))


def _phi3() -> nn.Module:
    return tf.Phi3ForCausalLM(tf.Phi3Config(**LLM, partial_rotary_factor=0.5,
                                            pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                            resid_pdrop=0.0, embd_pdrop=0.0))


def _gpt_neox() -> nn.Module:
    return tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        vocab_size=VOCAB, max_position_embeddings=64, rotary_pct=0.5, hidden_dropout=0.0,
        attention_dropout=0.0))


def _gpt2() -> nn.Module:
    model = tf.GPT2LMHeadModel(tf.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=64, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))
    # transformers 5 gives GPT2LMHeadModel no loss_type, and its loss_function then logs a
    # warning inside forward: a logger call is a Dynamo graph break. Name the loss.
    model.loss_type = "ForCausalLM"
    return model


def _mixtral() -> nn.Module:
    return tf.MixtralForCausalLM(tf.MixtralConfig(**LLM, num_local_experts=4,
                                                  num_experts_per_tok=2))


def _bert() -> nn.Module:
    return tf.BertModel(tf.BertConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        vocab_size=VOCAB, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), add_pooling_layer=False)


def _bert_inputs() -> dict[str, torch.Tensor]:
    ids = _ids()
    mask = torch.ones_like(ids)
    mask[1, SEQ - 4:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _t5() -> nn.Module:
    return tf.T5ForConditionalGeneration(tf.T5Config(
        d_model=64, d_ff=96, d_kv=16, num_layers=1, num_decoder_layers=1, num_heads=4,
        vocab_size=VOCAB, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0,
        feed_forward_proj="gated-gelu", relative_attention_num_buckets=8))


def _t5_inputs() -> dict[str, torch.Tensor]:
    target = _ids(8)
    return {"input_ids": _ids(), "decoder_input_ids": target, "labels": target}


def _vit() -> nn.Module:
    return tf.ViTModel(tf.ViTConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        image_size=16, patch_size=4, num_channels=3, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), add_pooling_layer=False)


def _vit_inputs() -> dict[str, torch.Tensor]:
    return {"pixel_values": torch.randn(BATCH, 3, 16, 16)}


def _whisper() -> nn.Module:
    cfg = tf.WhisperConfig(
        d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=96,
        decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=96, num_mel_bins=16,
        max_source_positions=8, max_target_positions=16, vocab_size=VOCAB, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0,
        decoder_layerdrop=0.0, pad_token_id=0, bos_token_id=0, eos_token_id=0,
        decoder_start_token_id=0)
    return tf.WhisperModel(cfg).get_encoder()


def _whisper_inputs() -> dict[str, torch.Tensor]:
    return {"input_features": torch.randn(BATCH, 16, 16)}


ARCHS: dict[str, Arch] = {a.name: a for a in [
    Arch("llama", _llama, _lm_inputs, decoder=True),
    Arch("llama_eager_attn", _llama_eager, _padded_lm_inputs, decoder=True),
    Arch("mistral", _mistral, _lm_inputs, decoder=True),
    Arch("qwen2", _qwen2, _padded_lm_inputs, decoder=True),
    Arch("gemma", _gemma, _lm_inputs, decoder=True),
    Arch("phi3", _phi3, _lm_inputs, decoder=True),
    Arch("gpt_neox", _gpt_neox, _lm_inputs, decoder=True),
    Arch("gpt2", _gpt2, _lm_inputs, decoder=True),
    Arch("mixtral", _mixtral, _lm_inputs, decoder=True),
    Arch("bert", _bert, _bert_inputs),
    Arch("t5", _t5, _t5_inputs),
    Arch("vit", _vit, _vit_inputs),
    Arch("whisper_encoder", _whisper, _whisper_inputs),
]}


def build(arch: Arch, seed: int = 0) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    torch.manual_seed(seed)
    model = arch.make()
    model.config.use_cache = False
    return model, arch.inputs()
