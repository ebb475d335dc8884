"""GE ops per decoder layer: the GE op count of a decoder's bf16 inference graph with 4
layers minus that with 2, halved. Data/Const/NetOutput and the ops the host device runs as
views (``Reshape`` and the other ``VIEW_OPS``: no kernel, no copy) are not counted.

    from npu_inductor.benchmarks.layer_ops import ops_per_layer, layer_ops_report
    ops_per_layer(lambda layers: (model, inputs))   # -> (per-layer count, {op type: count})

``layer_ops_report()`` gives two lines per zoo decoder (the built-in LLaMA prefill and
decode step and, with transformers installed, its LLaMA / Qwen2 / GPT-2), for
``npu-bench --layer-ops``: with ``freeze_parameters=True`` (weights are constants, so the
gate/up projections merge into one matmul feeding ``SwiGlu``) and without (gate/up run as one
``GroupedMatmul`` whose stacked rows feed ``SwiGlu``); q/k/v are one ``GroupedMatmul`` in both.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import torch
from torch import nn

from npu_inductor.runtime.memory_plan import VIEW_OPS

NOT_COMPUTE = frozenset({"Data", "RefData", "Const", "NetOutput"}) | frozenset(VIEW_OPS)
Build = Callable[[int], tuple[nn.Module, tuple]]


Check = Callable[[object, object], None]


def ge_op_counts(model: nn.Module, inputs: tuple, options: dict | None = None,
                 check: Check | None = None) -> dict[str, int]:
    """GE op types and counts of ``model``'s inference graphs (compute ops only).
    ``check(compiled output, eager output)`` when given (tests: numerics of the same run)."""
    from npu_inductor.compile_fx import COMPILE_HOOKS, recording

    torch._dynamo.reset()
    with recording(COMPILE_HOOKS) as graphs, torch.no_grad():
        actual = torch.compile(model, backend="npu", options=options)(*inputs)
        if check is not None:
            check(actual, model(*inputs))
    counts = collections.Counter(op.type for g in graphs for op in g.lowered.graph.ops)
    return {k: v for k, v in counts.items() if k not in NOT_COMPUTE}


def ops_per_layer(build: Build, options: dict | None = None,
                  dtype: torch.dtype = torch.bfloat16,
                  check: Check | None = None) -> tuple[float, dict[str, float]]:
    """(GE ops per layer, per op type) from the 4-layer and 2-layer builds of one decoder."""
    counts = []
    for layers in (2, 4):
        model, inputs = build(layers)
        inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
        counts.append(ge_op_counts(model.eval().to(dtype), inputs, options, check))
    two, four = counts
    diff = {k: (four.get(k, 0) - two.get(k, 0)) / 2 for k in set(two) | set(four)}
    diff = {k: v for k, v in sorted(diff.items()) if v}
    return sum(diff.values()), diff


class _Logits(nn.Module):
    """A transformers causal LM without KV cache, returning the logits."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, use_cache=False).logits


def _builtin(name: str) -> Build:
    """The zoo's ``llama_prefill`` / ``llama_decode`` (batch 1) with ``layers`` layers."""
    def build(layers: int) -> tuple[nn.Module, tuple]:
        from npu_inductor.benchmarks import zoo

        make = {"llama_prefill": zoo._llama_prefill, "llama_decode": zoo._llama_decode}[name]
        return make(1, 0, **{**zoo.LLAMA_CONFIG, "layers": layers})

    return build


def _hf(name: str) -> Build:
    def build(layers: int) -> tuple[nn.Module, tuple]:
        import transformers as tf

        small = {"hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": layers,
                 "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 128}
        torch.manual_seed(0)
        if name == "gpt2":
            cfg = tf.GPT2Config(n_layer=layers, n_embd=128, n_head=4, vocab_size=1000,
                                n_positions=128, loss_type="ForCausalLM", bos_token_id=0,
                                eos_token_id=0)
            model = tf.GPT2LMHeadModel(cfg)
        else:
            cls = {"llama": (tf.LlamaForCausalLM, tf.LlamaConfig),
                   "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config)}[name]
            model = cls[0](cls[1](**small, num_key_value_heads=2))
        return _Logits(model), (torch.randint(0, 1000, (1, 32)),)

    return build


def zoo_decoders() -> dict[str, Build]:
    """The decoders of the benchmark zoo (transformers ones when it is installed)."""
    import importlib.util

    found: dict[str, Build] = {n: _builtin(n) for n in ("llama_prefill", "llama_decode")}
    if importlib.util.find_spec("transformers") is not None:
        found.update({f"hf_{n}": _hf(n) for n in ("llama", "qwen2", "gpt2")})
    return found


def layer_ops_report() -> list[str]:
    """One line per zoo decoder: bf16 inference GE ops per layer, frozen and not."""
    lines = ["GE ops per decoder layer (bf16 inference, 4 layers - 2 layers, views excluded):"]
    for name, build in zoo_decoders().items():
        for label, options in (("frozen", {"freeze_parameters": True}), ("unfrozen", None)):
            total, types = ops_per_layer(build, options)
            detail = ", ".join(f"{k} {v:g}" for k, v in types.items())
            lines.append(f"  {name:<13} {label:<8} {total:4g}  ({detail})")
    return lines
