"""The serving stream: requests with random prompt and output lengths through ``generate()``.

    npu-bench --mode serve                 # the zoo's LLaMA decoder (no transformers needed)
    npu-bench --mode serve --hf llama      # transformers' LlamaForCausalLM, small config

Each variant serves the same seeded stream, batch 1, greedy: the first pass (``cold``)
includes every compile (a later pass that still compiles counts as cold too), then warm
passes, eager and the variant interleaved request by request, until the variant ran
``--passes`` passes and ``--warm-s`` CPU seconds. ``vs eager`` is the median over these
passes of eager's time / the variant's; ``tok/s`` and ``TTFT`` (time to the first token)
are eager's quiet figures over the whole run (its passes beside every variant: the 10th
percentile of its pass times, and the median over requests of each request's 10th
percentile, ``QUIET``) times the variant's ratio to eager within its own passes (``vs
eager``; for TTFT the median over requests of the variant's / eager's): a load that changes
between variants moves both sides of a ratio, so these reproduce where a variant's own
median (``own`` columns) does not. tok/s counts the generated tokens of a pass (``--max-new``
draws) over its CPU time, prompt processing included. ``compile cpu s`` is the process's
CPU time inside the compiles (``measure.compile_clock``). Every run compiles into fresh
cache folders (``npu-bench --cache-dir`` keeps one), warm passes run with the garbage
collector off (``_without_gc``). Figures are CPU time of the process (``time.process_time``:
with ``--threads 1`` a competing load changes it less than wall time), and the same in wall
time beside them. Variants
(``--variants`` picks): eager (its warm figures: its passes interleaved with the
variants, ``vs eager`` 1 by definition), exact static shapes (``dynamic=False``: a compile
per new prompt length and per cache length), symbolic shapes (``dynamic=True``),
power-of-two prompt buckets and ``shape_buckets="auto"``.

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
import gc
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
from torch import nn

from npu_inductor import buckets as bucket_reports
from npu_inductor.benchmarks.dynamic import VOCAB, pow2_buckets, stream_model
from npu_inductor.benchmarks.measure import (
    Times,
    Warm,
    median_pass,
    median_ratio,
    now,
    percentile,
    ratios,
    select_names,
    stream_passes,
    timed,
    variant_run,
)
from npu_inductor.benchmarks.runner import _error_text
from npu_inductor.benchmarks.zoo import Llama, LlamaDecode

# eager's absolute tok/s and TTFT: the 10th percentile of its warm passes. A process's CPU
# time grows with what the machine's other jobs do (the other hyperthread of the core,
# caches refilled after their time slices): its median moved 14-29% between runs minutes
# apart at the same load average; the least disturbed passes are what the code costs.
QUIET = 10
P = TypeVar("P")
VARIANTS = ("eager", "npu_exact", "npu_dynamic", "npu_pow2", "npu_auto")


@dataclass(frozen=True)
class Request:
    prompt: torch.Tensor  # (1, n) token ids
    new_tokens: int


@dataclass
class ServeRow:
    """One variant. CPU-time figures (``time.process_time``: they reproduce under load with
    ``--threads 1``) and the same in wall time (``*_wall``, ``cold_s``, ``compile_s``)."""

    model: str
    variant: str
    requests: int
    tokens: int = 0  # generated per pass
    cold_cpu: float | None = None  # s, first pass, compiles included
    cold_s: float | None = None  # same, wall
    compile_cpu: float | None = None  # s, inside the compiles (measure.compile_clock)
    compile_s: float | None = None  # same, wall
    tok_per_s: float | None = None  # eager's tok/s over the run * vs_eager (CPU)
    tok_per_s_own: float | None = None  # tokens / this variant's median warm pass (CPU)
    tok_per_s_quiet: float | None = None  # tokens / the 10th percentile of its warm passes
    tok_per_s_wall: float | None = None  # tokens / median warm pass, wall
    ttft_ms: float | None = None  # eager's TTFT over the run * ttft_vs_eager (CPU ms)
    ttft_ms_own: float | None = None  # median CPU ms to the first token, own warm passes
    ttft_ms_quiet: float | None = None  # median over requests of each one's 10th percentile
    ttft_ms_wall: float | None = None
    ttft_vs_eager: float | None = None  # median over warm requests of this TTFT / eager's
    vs_eager: float | None = None  # median over warm passes of eager / this (CPU)
    vs_eager_wall: float | None = None
    warm_passes: int | None = None
    compiles: int | None = None
    padding_overhead: float | None = None
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
Generate = Callable[[Request], tuple[torch.Tensor, Times]]  # -> (new tokens, time to 1st)


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
    def generate(r: Request) -> tuple[torch.Tensor, Times]:
        start = now()
        logits, *kv = prefill(r.prompt)
        k, v = torch.stack(kv[:len(kv) // 2]), torch.stack(kv[len(kv) // 2:])
        tok = logits[:, -1].argmax(-1, keepdim=True)
        ttft = now() - start
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
            self.at = now()

    def end(self) -> None:
        pass


def hf_generate(model: nn.Module) -> Generate:
    def generate(r: Request) -> tuple[torch.Tensor, Times]:
        streamer, start = _FirstToken(), now()
        out = model.generate(r.prompt, attention_mask=torch.ones_like(r.prompt),
                             max_new_tokens=r.new_tokens, min_new_tokens=r.new_tokens,
                             do_sample=False, streamer=streamer, pad_token_id=0)
        return out[:, r.prompt.shape[1]:], (streamer.at or now()) - start

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
def _cold_pass(generate: Generate, reqs: list[Request], outs: list[list]) -> Times:
    with timed() as t, torch.no_grad():
        outs.append([generate(r)[0] for r in reqs])
    return t


def _warm_pass(eager: Generate, generate: Generate, reqs: list[Request],
               index: int) -> tuple[Times, Times, list[Times], list[Times]]:
    """Eager and ``generate`` interleaved request by request (which runs first alternates);
    returns ``generate``'s and eager's pass times and their times to the first token."""
    mine, theirs, my_ttfts, their_ttfts = Times(), Times(), [], []
    with torch.no_grad():
        for i, r in enumerate(reqs):
            calls = ((eager, theirs, their_ttfts), (generate, mine, my_ttfts))
            for call, into, ttfts in calls if (i + index) % 2 == 0 else calls[::-1]:
                with timed(into):
                    _, ttft = call(r)
                ttfts.append(ttft)
    return mine, theirs, my_ttfts, their_ttfts


def _without_gc(fn: Callable[..., P], *args: Any) -> P:
    """``fn(*args)`` with the garbage collector off, after a collection of what the last pass
    left and a ``gc.freeze()`` of every survivor: a collection the compiles' heap made due
    (a full one scans millions of objects, 0.1-0.3 s) otherwise lands in a random timed
    request. ``run_one`` unfreezes at the variant's end."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        return fn(*args)
    finally:
        gc.enable()


EagerLog = list[tuple[Times, list[Times]]]  # eager's warm passes and first-token times


def measure(row: ServeRow, eager: Generate, generate: Generate, reqs: list[Request],
            warm: Warm, compiles: Callable[[], int], eager_log: EagerLog) -> None:
    """Cold passes (the first, and warm passes that still compiled), then warm passes
    interleaved with eager (appended to ``eager_log``); fills the row's CPU and wall
    figures and ``outputs`` (first pass)."""
    outs: list[list] = []
    cold, passes = stream_passes(lambda: _cold_pass(generate, reqs, outs),
                                 lambda i: _without_gc(_warm_pass, eager, generate, reqs, i),
                                 lambda p: p[0], compiles, warm)
    mine, theirs = [p[0] for p in passes], [p[1] for p in passes]
    eager_log += [(p[1], p[3]) for p in passes]
    row.outputs, row.cold_cpu, row.cold_s = outs[0], cold[0].cpu, cold[0].wall
    _warm_figures(row, mine, [t for p in passes for t in p[2]])
    vs = ratios(theirs, mine)
    row.vs_eager, row.vs_eager_wall = vs.cpu, vs.wall
    row.ttft_vs_eager = median_ratio([t.cpu for p in passes for t in p[2]],
                                     [t.cpu for p in passes for t in p[3]])


def _warm_figures(row: ServeRow, passes: list[Times], ttfts: list[Times]) -> None:
    """The row's own figures: tok/s from its median warm pass, TTFT the median over its
    warm requests (``ttfts``: the passes' first-token times one after the other); and the
    quiet ones (``QUIET``)."""
    steady = median_pass(passes)
    row.warm_passes = len(passes)
    row.tok_per_s_own, row.tok_per_s_wall = row.tokens / steady.cpu, row.tokens / steady.wall
    ttft = median_pass(ttfts)
    row.ttft_ms_own, row.ttft_ms_wall = ttft.cpu * 1e3, ttft.wall * 1e3
    row.tok_per_s_quiet = row.tokens / percentile([p.cpu for p in passes], QUIET)
    per_request = [ttfts[i::row.requests] for i in range(row.requests)]
    row.ttft_ms_quiet = 1e3 * statistics.median(
        percentile([t.cpu for t in times], QUIET) for times in per_request)


def scale_to_eager(rows: list[ServeRow]) -> None:
    """tok/s and TTFT: eager's quiet figures (``rows[0]``, over the whole run: its least
    disturbed passes, ``QUIET``) times each variant's ratio to eager within its own
    passes."""
    base = rows[0]
    base.tok_per_s, base.ttft_ms = base.tok_per_s_quiet, base.ttft_ms_quiet
    base.vs_eager = base.vs_eager_wall = base.ttft_vs_eager = 1.0
    for row in rows[1:]:
        if row.vs_eager is not None and base.tok_per_s is not None:
            row.tok_per_s = base.tok_per_s * row.vs_eager
            row.ttft_ms = base.ttft_ms * row.ttft_vs_eager


def run_one(model_name: str, make: Callable[[str], Generate], variant: str,
            reqs: list[Request], eager: Generate, warm: Warm, eager_log: EagerLog) -> ServeRow:
    """One variant; eager runs its cold pass only (its warm passes are the ones interleaved
    with the variants, ``eager_log``)."""
    row = ServeRow(model_name, variant, len(reqs), sum(r.new_tokens for r in reqs),
                   threads=torch.get_num_threads())
    first_report = len(bucket_reports.REPORTS)
    try:
        with variant_run(10_000) as (rec, clock):
            if variant == "eager":
                firsts: list[list] = []
                cold = _cold_pass(eager, reqs, firsts)
                row.outputs, row.cold_cpu, row.cold_s = firsts[0], cold.cpu, cold.wall
            else:
                measure(row, eager, make(variant), reqs, warm, rec.compiles, eager_log)
                row.compile_cpu, row.compile_s = clock.cpu, clock.wall
    except Exception as e:  # noqa: BLE001 - a variant that cannot run yet is a result
        row.error = _error_text(e)
        return row
    finally:
        gc.unfreeze()  # the next variant_run's collection frees this variant's graphs
    row.compiles = rec.compiles()
    reports = bucket_reports.REPORTS[first_report:]
    real = sum(r.real_elements for r in reports if not r.exact_reasons)
    padded = sum(r.padded_elements for r in reports if not r.exact_reasons)
    if real:
        row.padding_overhead = padded / real - 1
    elif variant in ("npu_exact", "npu_pow2", "npu_auto"):  # static shapes, nothing padded
        row.padding_overhead = 0.0
    return row


def run_serve(hf: bool, requests: int, max_len: int, max_new: int, seed: int,
              progress: Callable[[str], None] = lambda s: None,
              names: list[str] | None = None, warm: Warm = Warm()) -> list[ServeRow]:
    """Eager and the variants (``names``: all by default) over one seeded stream, in one
    process; eager's warm figures come from its passes interleaved with the variants."""
    torch.manual_seed(seed)
    max_pos = max_len + max_new + 1
    if hf:
        name, base = "hf_llama", hf_llama(max_pos)
        make: Callable[[str], Generate] = lambda v: hf_variant(base, v, max_len)  # noqa: E731
    else:
        name = "llama_decoder"
        base = stream_model(max_pos)
        make = lambda v: zoo_variant(base, v, max_len)  # noqa: E731
    reqs = stream(requests, max_len, max_new, seed)
    eager, eager_log = make("eager"), []
    rows: list[ServeRow] = []
    for variant in select_names(VARIANTS, names):
        progress(f"{name}/serve: {variant} over {requests} requests")
        rows.append(run_one(name, make, variant, reqs, eager, warm, eager_log))
    if eager_log:  # eager's warm passes: every one interleaved with a variant
        _warm_figures(rows[0], [p for p, _ in eager_log], [t for _, ts in eager_log for t in ts])
        scale_to_eager(rows)
    for row in rows:
        if row.outputs and rows[0].outputs:
            same = sum(torch.equal(a, b) for a, b in zip(row.outputs, rows[0].outputs))
            row.match = f"{same}/{len(reqs)}"
    return rows


# (field, header, format): CPU-time figures first (they reproduce under load), wall after
COLUMNS = (("variant", "variant", "{}"), ("compiles", "compiles", "{}"),
           ("cold_cpu", "cold cpu s", "{:.2f}"), ("compile_cpu", "compile cpu s", "{:.2f}"),
           ("tok_per_s", "tok/s (cpu)", "{:.1f}"), ("ttft_ms", "TTFT cpu ms", "{:.2f}"),
           ("vs_eager", "vs eager (cpu)", "{:.2f}x"), ("padding_overhead", "padding", "{:.1%}"),
           ("match", "tokens = eager", "{}"), ("tok_per_s_own", "own tok/s (cpu)", "{:.1f}"),
           ("ttft_ms_own", "own TTFT cpu ms", "{:.2f}"), ("cold_s", "cold wall s", "{:.2f}"),
           ("tok_per_s_wall", "tok/s (wall)", "{:.1f}"), ("ttft_ms_wall", "TTFT wall ms", "{:.2f}"),
           ("vs_eager_wall", "vs eager (wall)", "{:.2f}x"), ("warm_passes", "warm passes", "{}"))


def format_table(rows: list[ServeRow]) -> str:
    """A Markdown table per model, errors below it."""
    lines = []
    for model in dict.fromkeys(r.model for r in rows):
        mine = [r for r in rows if r.model == model]
        first = mine[0]
        lines += [f"serve {model}: {first.requests} requests, {first.tokens} new tokens per "
                  f"pass, batch 1, greedy, {first.threads} threads; cold = first pass "
                  "(compiles included), compile = time inside the compiles; tok/s and TTFT "
                  "= eager's over the run (10th percentile of its passes) x the variant's "
                  "ratio to eager in its warm passes (eager interleaved; own = the variant's "
                  "own median)", "",
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
