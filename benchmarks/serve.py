"""The serving stream: requests with random prompt and output lengths through ``generate()``.

    npu-bench --mode serve                 # the zoo's LLaMA decoder (no transformers needed)
    npu-bench --mode serve --hf llama      # transformers' LlamaForCausalLM, small config

Each variant serves the same seeded stream twice, batch 1, greedy: the first pass includes
every compile (``cold s``), the second runs on what is compiled (``tok/s`` and ``TTFT``:
steady state). Variants: eager, exact static shapes (``dynamic=False``: a compile per new
prompt length and per cache length), symbolic shapes (``dynamic=True``), power-of-two
prompt buckets and ``shape_buckets="auto"``.

* zoo decoder: ``generate`` is a greedy loop with a KV cache over ``Llama.prefill`` and
  ``Llama.decode``, each compiled on its own; buckets apply to the prompt (prefill), the
  decode step stays one ``dynamic=True`` graph (its cache grows by one token a step).
* transformers: ``model.generate`` with its dynamic cache and ``model.forward`` compiled;
  buckets name ``input_ids`` dim 1.

``tokens`` compares each variant's tokens with eager's (greedy: they should be equal).
Compiles count FX graphs npu_inductor compiled; padding is padded / real prompt elements
- 1 as the compiler padded them.
"""

from __future__ import annotations

import copy
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx.experimental._config as fx_config
from torch import nn

from npu_inductor import buckets as bucket_reports
from npu_inductor.benchmarks.dynamic import pow2_buckets
from npu_inductor.benchmarks.measure import recording
from npu_inductor.benchmarks.runner import _error_text
from npu_inductor.benchmarks.zoo import Llama, LlamaDecode

VOCAB = 1000
VARIANTS = ("eager", "npu_exact", "npu_dynamic", "npu_pow2", "npu_auto")


@dataclass(frozen=True)
class Request:
    prompt: torch.Tensor  # (1, n) token ids
    new_tokens: int


@dataclass
class ServeRow:
    model: str
    variant: str
    requests: int
    tokens: int = 0  # generated per pass
    cold_s: float | None = None  # first pass, compiles included
    warm_s: float | None = None  # second pass
    tok_per_s: float | None = None  # second pass
    ttft_ms: float | None = None  # median time to first token, second pass
    compiles: int | None = None
    padding_overhead: float | None = None
    vs_eager: float | None = None  # eager warm_s / this warm_s
    match: str = "n/a"  # requests whose tokens equal eager's
    threads: int | None = None
    error: str = ""
    outputs: list[torch.Tensor] = field(default_factory=list, repr=False)


def stream(requests: int, max_len: int, max_new: int, seed: int) -> list[Request]:
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    return [Request(torch.randint(0, VOCAB, (1, rng.randint(1, max_len)), generator=gen),
                    rng.randint(1, max_new)) for _ in range(requests)]


# ---- generate(): the zoo decoder's greedy loop, or transformers' model.generate ------------
Generate = Callable[[Request], tuple[torch.Tensor, float]]  # -> (new tokens, seconds to 1st)


class Prefill(nn.Module):
    """``Llama.prefill`` returning each layer's k and v unstacked (the stack runs outside the
    graph: the padding-safety analysis does not know ``stack``, buckets would not pad)."""

    def __init__(self, llama: Llama) -> None:
        super().__init__()
        self.llama = llama

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        m, s = self.llama, ids.shape[1]
        x, ks, vs = m.embed(ids), [], []
        for layer in m.layers:
            x, k, v = layer.prefill(x, m.cos[:s], m.sin[:s])
            ks.append(k)
            vs.append(v)
        return (m.lm_head(m.norm(x)), *ks, *vs)


def zoo_generate(prefill: Callable[..., Any], decode: Callable[..., Any]) -> Generate:
    def generate(r: Request) -> tuple[torch.Tensor, float]:
        start = time.perf_counter()
        logits, *kv = prefill(r.prompt)
        k, v = torch.stack(kv[:len(kv) // 2]), torch.stack(kv[len(kv) // 2:])
        tok = logits[:, -1].argmax(-1, keepdim=True)
        ttft = time.perf_counter() - start
        out = [tok]
        for _ in range(r.new_tokens - 1):
            logits, k, v = decode(tok, k, v)
            tok = logits[:, -1].argmax(-1, keepdim=True)
            out.append(tok)
        return torch.cat(out, 1), ttft

    return generate


class _FirstToken:
    """A ``generate`` streamer noting when the first new token arrives (the first ``put``
    is the prompt)."""

    def __init__(self) -> None:
        self.puts, self.at = 0, None

    def put(self, value: torch.Tensor) -> None:
        self.puts += 1
        if self.puts == 2:
            self.at = time.perf_counter()

    def end(self) -> None:
        pass


def hf_generate(model: nn.Module) -> Generate:
    def generate(r: Request) -> tuple[torch.Tensor, float]:
        streamer, start = _FirstToken(), time.perf_counter()
        out = model.generate(r.prompt, attention_mask=torch.ones_like(r.prompt),
                             max_new_tokens=r.new_tokens, min_new_tokens=r.new_tokens,
                             do_sample=False, streamer=streamer, pad_token_id=0)
        return out[:, r.prompt.shape[1]:], (streamer.at or time.perf_counter()) - start

    return generate


def _compile_options(variant: str, max_len: int, name: str) -> tuple[bool, dict]:
    if variant == "npu_pow2":
        return True, {"shape_buckets": {name: {1: pow2_buckets(max_len)}}}
    if variant == "npu_auto":
        return True, {"shape_buckets": "auto"}
    return variant != "npu_exact", {}


def zoo_variant(model: Llama, variant: str, max_len: int) -> Generate:
    prefill, decode = Prefill(model), LlamaDecode(model)
    if variant == "eager":
        return zoo_generate(prefill, decode)
    dynamic, options = _compile_options(variant, max_len, "ids")
    return zoo_generate(torch.compile(prefill, backend="npu", dynamic=dynamic, options=options),
                        torch.compile(decode, backend="npu", dynamic=dynamic))


def hf_variant(model: nn.Module, variant: str, max_len: int) -> Generate:
    model = copy.deepcopy(model)
    if variant != "eager":
        dynamic, options = _compile_options(variant, max_len, "input_ids")
        model.forward = torch.compile(model.forward, backend="npu", dynamic=dynamic,
                                      options=options)
    return hf_generate(model)


def hf_llama(max_pos: int) -> nn.Module:
    import transformers as tf

    from npu_inductor.benchmarks.hf import SMALL

    config = tf.LlamaConfig(**{**SMALL, "max_position_embeddings": max_pos},
                            num_key_value_heads=2, eos_token_id=None, bos_token_id=None)
    model = tf.LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return model


# ---- running ----------------------------------------------------------------------------
def _pass(generate: Generate, reqs: list[Request]) -> tuple[float, list[float], list]:
    start, ttfts, outs = time.perf_counter(), [], []
    with torch.no_grad():
        for r in reqs:
            toks, ttft = generate(r)
            ttfts.append(ttft)
            outs.append(toks)
    return time.perf_counter() - start, ttfts, outs


def run_one(model_name: str, make: Callable[[str], Generate], variant: str,
            reqs: list[Request]) -> ServeRow:
    row = ServeRow(model_name, variant, len(reqs), sum(r.new_tokens for r in reqs),
                   threads=torch.get_num_threads())
    torch._dynamo.reset()
    first_report = len(bucket_reports.REPORTS)
    try:
        # every size is a new Dynamo frame only for npu_exact; size 1 stays symbolic
        with recording() as rec, torch._dynamo.config.patch(recompile_limit=10_000), \
                fx_config.patch(backed_size_oblivious=variant != "npu_exact"):
            generate = make(variant)
            row.cold_s, _, _ = _pass(generate, reqs)
            row.warm_s, ttfts, row.outputs = _pass(generate, reqs)
    except Exception as e:  # noqa: BLE001 - a variant that cannot run yet is a result
        row.error = _error_text(e)
        return row
    row.tok_per_s = row.tokens / row.warm_s
    row.ttft_ms = statistics.median(ttfts) * 1e3
    row.compiles = len(rec.reports) if rec.reports_available else len(rec.graphs)
    reports = bucket_reports.REPORTS[first_report:]
    real = sum(r.real_elements for r in reports if not r.exact_reasons)
    padded = sum(r.padded_elements for r in reports if not r.exact_reasons)
    if real:
        row.padding_overhead = padded / real - 1
    elif variant in ("npu_exact", "npu_pow2", "npu_auto"):  # static shapes, nothing padded
        row.padding_overhead = 0.0
    return row


def run_serve(hf: bool, requests: int, max_len: int, max_new: int, seed: int,
              progress: Callable[[str], None] = lambda s: None) -> list[ServeRow]:
    """Every variant over one seeded stream, in one process."""
    torch.manual_seed(seed)
    max_pos = max_len + max_new + 1
    if hf:
        name, base = "hf_llama", hf_llama(max_pos)
        make: Callable[[str], Generate] = lambda v: hf_variant(base, v, max_len)  # noqa: E731
    else:
        name = "llama_decoder"
        base = Llama(vocab=VOCAB, hidden=128, heads=4, kv_heads=2, layers=2, ffn=256,
                     max_pos=max_pos).eval()
        make = lambda v: zoo_variant(base, v, max_len)  # noqa: E731
    reqs = stream(requests, max_len, max_new, seed)
    rows: list[ServeRow] = []
    for variant in VARIANTS:
        progress(f"{name}/serve: {variant} over {requests} requests")
        rows.append(run_one(name, make, variant, reqs))
    eager = rows[0]
    for row in rows:
        if row.warm_s and eager.warm_s:
            row.vs_eager = eager.warm_s / row.warm_s
        if row.outputs and eager.outputs:
            same = sum(torch.equal(a, b) for a, b in zip(row.outputs, eager.outputs))
            row.match = f"{same}/{len(reqs)}"
    return rows


COLUMNS = (("variant", "variant", "{}"), ("compiles", "compiles", "{}"),
           ("cold_s", "cold s", "{:.2f}"), ("warm_s", "warm s", "{:.2f}"),
           ("tok_per_s", "tok/s", "{:.1f}"), ("ttft_ms", "TTFT ms", "{:.1f}"),
           ("vs_eager", "vs eager", "{:.2f}x"), ("padding_overhead", "padding", "{:.1%}"),
           ("match", "tokens = eager", "{}"))


def format_table(rows: list[ServeRow]) -> str:
    """A Markdown table per model, errors below it."""
    lines = []
    for model in dict.fromkeys(r.model for r in rows):
        mine = [r for r in rows if r.model == model]
        first = mine[0]
        lines += [f"serve {model}: {first.requests} requests, {first.tokens} new tokens per "
                  f"pass, batch 1, greedy, {first.threads} threads", "",
                  "| " + " | ".join(h for _, h, _ in COLUMNS) + " |",
                  "|" + "---|" * len(COLUMNS)]
        for r in mine:
            cells = [_cell(getattr(r, c), f) for c, _, f in COLUMNS]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [f"{r.variant}: fail_to_run: {r.error}" for r in mine if r.error]
        lines.append("")
    return "\n".join(lines)


def _cell(value: Any, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)
