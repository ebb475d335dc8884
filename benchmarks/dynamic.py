"""The dynamic-shape stream: LLaMA prefill requests of random prompt length, one after
another (a decoder-serving workload; causal attention makes sequence padding provably exact,
so the bucket variants really pad).

Per variant (eager, exact static shapes: one compile per new length; symbolic shapes,
``dynamic=True``; power-of-two buckets; ``shape_buckets="auto"``; ``--variants`` picks):

* cold passes: the first pass over the stream (``total_cpu``/``total_time``: compiles
  included), and any later pass that still compiled (``auto`` records sizes in eager
  first), with the warm passes before it;
* warm passes: eager and the variant interleaved request by request, repeated until the
  variant ran ``--passes`` passes and ``--warm-s`` CPU seconds; ``steady_speedup`` is the
  median over passes of eager's time / the variant's, ``steady_ms`` its median pass per
  request;
* ``compile_cpu``: the process's CPU time inside the compiles themselves (Dynamo's frame
  compiles and npu_inductor's at call time, ``measure.compile_clock``);
* ``padding_bound`` (bucket variants): eager over the stream at each request's length /
  eager with each request zero-padded to its bucket (the buckets the variant used),
  interleaved request by request, median over ``BOUND_PASSES`` passes: the steady ratio a
  bucket policy would reach if graph mode ran each size at eager's speed with no per-call
  cost, i.e. what the padding alone costs.

Figures are CPU time of the process (``time.process_time``; with ``--threads 1`` a
competing load barely changes it), the ``*_wall``/``total_time``/``compile_time`` fields
the same in wall time. The eager row's warm figures are its passes interleaved with the
variants (its ``steady`` is 1 by definition). Variants the compiler cannot run yet are
reported with their error.
"""

from __future__ import annotations

import copy
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from npu_inductor import buckets as bucket_reports
from npu_inductor.benchmarks.measure import (
    Accuracy,
    Times,
    Warm,
    judge,
    median_pass,
    ratios,
    select_names,
    stream_passes,
    tensors,
    timed,
    variant_run,
)
from npu_inductor.benchmarks.report import cell
from npu_inductor.benchmarks.results import Row, ratio
from npu_inductor.benchmarks.runner import Progress, Settings, _error_text
from npu_inductor.benchmarks.zoo import Llama

MODEL = "llama_prefill"
BATCH = 2
BOUND_PASSES = 3


def pow2_buckets(max_len: int, smallest: int = 8) -> list[int]:
    sizes, s = [], smallest
    while s < max_len:
        sizes.append(s)
        s *= 2
    return [*sizes, max_len]


def padding_overhead(lengths: list[int], buckets: list[int]) -> float:
    """Padded elements / real elements - 1 when each length pads to the next bucket."""
    padded = sum(min(b for b in buckets if b >= n) for n in lengths)
    return padded / sum(lengths) - 1


@dataclass(frozen=True)
class Variant:
    name: str
    wrap: Callable[[nn.Module], Callable[..., Any]] | None  # None: eager
    buckets: list[int] | None = None


def variants(max_len: int) -> list[Variant]:
    pow2 = pow2_buckets(max_len)
    named = {"ids": {1: pow2}}
    return [
        Variant("eager", None),
        Variant("npu_exact", lambda m: torch.compile(m, backend="npu", dynamic=False)),
        Variant("npu_dynamic", lambda m: torch.compile(m, backend="npu", dynamic=True)),
        Variant("npu_pow2", lambda m: torch.compile(m, backend="npu", dynamic=True,
                                                    options={"shape_buckets": named}), pow2),
        Variant("npu_auto", lambda m: torch.compile(m, backend="npu", dynamic=True,
                                                    options={"shape_buckets": "auto"})),
    ]


VOCAB = 1000  # the streams' token ids are drawn from [0, VOCAB)


def stream_model(max_pos: int) -> Llama:
    """The decoder of the dynamic-shape and serving streams (and of ``step_split``), in
    eval mode: 2 layers, hidden 128, GQA 4/2 heads."""
    return Llama(vocab=VOCAB, hidden=128, heads=4, kv_heads=2, layers=2, ffn=256,
                 max_pos=max_pos).eval()


def stream(requests: int, max_len: int, seed: int) -> list[tuple[torch.Tensor]]:
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, VOCAB, (BATCH, rng.randint(1, max_len)), generator=gen),)
            for _ in range(requests)]


def _cold_pass(fn: Callable[..., Any], requests: list,
               outs: list[list[list[torch.Tensor]]]) -> Times:
    with timed() as t, torch.no_grad():
        outs.append([tensors(fn(*r)) for r in requests])
    return t


def _warm_pass(model: nn.Module, fn: Callable[..., Any], requests: list,
               index: int) -> tuple[Times, Times]:
    """Eager and ``fn`` over the stream, interleaved request by request (which runs first
    alternates, so neither always finds the other's data in the caches); returns
    (``fn``'s time, eager's time)."""
    mine, theirs = Times(), Times()
    with torch.no_grad():
        for i, r in enumerate(requests):
            calls = ((model, theirs), (fn, mine))
            for call, into in calls if (i + index) % 2 == 0 else calls[::-1]:
                with timed(into):
                    call(*r)
    return mine, theirs


def measure_stream(model: nn.Module, fn: Callable[..., Any], requests: list, row: Row,
                   warm: Warm, compiles: Callable[[], int],
                   eager_log: list[Times]) -> list[list[torch.Tensor]]:
    """Cold passes (compiles) then warm passes; fills the row's times, appends eager's
    warm passes to ``eager_log``, returns the first pass's outputs. Ratios are CPU time,
    ``*_wall`` wall time."""
    outs: list[list[list[torch.Tensor]]] = []
    cold, passes = stream_passes(lambda: _cold_pass(fn, requests, outs),
                                 lambda i: _warm_pass(model, fn, requests, i),
                                 lambda p: p[0], compiles, warm)
    graph, eager = [p[0] for p in passes], [p[1] for p in passes]
    eager_log += eager
    row.total_cpu, row.total_time = cold[0].cpu, cold[0].wall
    _steady(row, graph, len(requests))
    vs = ratios(eager, graph)
    row.steady_speedup, row.steady_speedup_wall = vs.cpu, vs.wall
    return outs[0]


def _steady(row: Row, passes: list[Times], requests: int) -> None:
    """Fills the row's per-request figure (median warm pass) and pass counts."""
    row.steady_ms = median_pass(passes).cpu / requests * 1e3
    row.warm_passes, row.warm_cpu = len(passes), sum(p.cpu for p in passes)


def _accuracy(outs: list, eager: list, ref: list, dtype: torch.dtype) -> Accuracy:
    """The worst request decides; its errors are reported."""
    worst = Accuracy("pass", 0.0, 0.0)
    for o, e, r in zip(outs, eager, ref):
        acc = judge(o, e, r, dtype)
        if acc.status != "pass" or (acc.max_rel_err or 0) > (worst.max_rel_err or 0):
            worst = acc
        if acc.status != "pass":
            break
    return worst


def run_variant(v: Variant, model: nn.Module, requests: list, eager: list | None, ref: list,
                settings: Settings, warm: Warm, eager_log: list[Times]) -> tuple[Row, list]:
    """One variant over the stream; returns its row and first-pass outputs. Eager (``eager``
    None) runs its cold pass only: its warm passes are the ones interleaved with the
    variants (``eager_log``)."""
    row = Row(MODEL, "dynamic", v.name, "float32", BATCH, requests=len(requests),
              threads=torch.get_num_threads())
    first_report = len(bucket_reports.REPORTS)
    try:
        with variant_run(len(requests) + 1) as (rec, clock):
            count = rec.compiles
            if v.wrap is None:
                firsts: list[list] = []
                cold = _cold_pass(model, requests, firsts)
                row.total_cpu, row.total_time, outs = cold.cpu, cold.wall, firsts[0]
            else:
                outs = measure_stream(model, v.wrap(model), requests, row, warm, count,
                                      eager_log)
    except Exception as e:  # noqa: BLE001 - a variant that cannot run yet is a result
        row.error = _error_text(e)
        return row, []
    acc = _accuracy(outs, outs if eager is None else eager, ref, settings.dtype)
    row.accuracy, row.max_abs_err, row.max_rel_err = acc.status, acc.max_abs_err, acc.max_rel_err
    row.compiles, row.ge_graphs = count(), len(rec.graphs) if v.wrap else None
    if v.wrap is not None:
        row.compile_cpu, row.compile_time = clock.cpu, clock.wall
    reports = bucket_reports.REPORTS[first_report:]
    row.padding_overhead = _padding(v, row, requests, reports)
    sizes = _sequence_buckets(reports)
    if sizes:
        row.padding_bound = padding_bound(model, requests, sizes)
    return row, outs


def _sequence_buckets(reports: list) -> tuple[int, ...] | None:
    """The bucket sizes the variant used on the prompt length (``ids`` dim 1)."""
    for report in reports:
        for label, sizes in report.buckets.items():
            if label.endswith("dim 1"):
                return sizes
    return None


def _padded(ids: torch.Tensor, sizes: tuple[int, ...]) -> torch.Tensor:
    """``ids`` zero-padded to its bucket (as it is above the largest bucket)."""
    n = ids.shape[1]
    bucket = next((b for b in sizes if b >= n), n)
    return torch.cat([ids, ids.new_zeros(ids.shape[0], bucket - n)], 1)


def padding_bound(model: nn.Module, requests: list, sizes: tuple[int, ...],
                  passes: int = BOUND_PASSES) -> float | None:
    """Eager's CPU time at the real lengths / at the bucket lengths (module docstring)."""
    padded = [(_padded(r[0], sizes),) for r in requests]
    passes_ = [_pair_pass(model, requests, padded, i) for i in range(passes)]
    found = [r for r in (ratio(real.cpu, pad.cpu) for real, pad in passes_) if r is not None]
    return statistics.median(found) if found else None


def _pair_pass(model: nn.Module, requests: list, padded: list,
               index: int) -> tuple[Times, Times]:
    """Eager on each request and on its padded copy, interleaved (which runs first
    alternates); returns (real lengths' time, padded lengths' time)."""
    real, pad = Times(), Times()
    with torch.no_grad():
        for i, (r, p) in enumerate(zip(requests, padded)):
            calls = ((r, real), (p, pad))
            for args, into in calls if (i + index) % 2 == 0 else calls[::-1]:
                with timed(into):
                    model(*args)
    return real, pad


def _padding(v: Variant, row: Row, requests: list, reports: list) -> float | None:
    if v.name in ("eager", "npu_exact"):
        return 0.0
    if reports and not any(r.exact_reasons for r in reports):
        # what the compiler really padded (the auto policy's eager warm-up is not padded)
        real = sum(r.real_elements for r in reports)
        return sum(r.padded_elements for r in reports) / real - 1 if real else 0
    if v.buckets and (row.compiles or 0) <= len(v.buckets):
        return padding_overhead([r[0].shape[1] for r in requests], v.buckets)
    if v.buckets:  # more compiles than buckets: the sizes ran exact, not padded
        row.error = f"buckets not applied: {row.compiles} compiles for {len(v.buckets)} buckets"
    return None


def run_dynamic(requests: int, max_len: int, settings: Settings,
                progress: Progress = lambda s: None, names: list[str] | None = None,
                warm: Warm = Warm()) -> list[Row]:
    """Eager and the variants over one seeded stream (eager first: its outputs judge the
    others; ``speedup`` is eager's first-pass CPU time over each variant's)."""
    torch.manual_seed(settings.seed)
    model = stream_model(max(max_len, 8))
    reqs = stream(requests, max_len, settings.seed)
    with torch.no_grad():
        model64 = copy.deepcopy(model).double()
        ref = [tensors(model64(*r)) for r in reqs]
    rows: list[Row] = []
    eager: list | None = None
    eager_log: list[Times] = []
    every = variants(max_len)
    chosen = select_names([v.name for v in every], names)
    for v in (v for v in every if v.name in chosen):
        progress(f"{MODEL}/dynamic: {v.name} over {requests} requests")
        row, outs = run_variant(v, model, reqs, eager, ref, settings, warm, eager_log)
        eager = outs if v.wrap is None else eager
        rows.append(row)
    if eager_log:  # eager's warm passes: every one interleaved with a variant
        _steady(rows[0], eager_log, requests)
        rows[0].steady_speedup = rows[0].steady_speedup_wall = 1.0
    for row in rows:
        row.speedup = ratio(rows[0].total_cpu, row.total_cpu)
    return rows


# (field, header, format): CPU-time figures first (they reproduce under load), wall after
COLUMNS = (("backend", "variant", "{}"), ("compiles", "compiles", "{}"),
           ("total_cpu", "cold cpu s", "{:.2f}"), ("compile_cpu", "compile cpu s", "{:.2f}"),
           ("steady_ms", "steady cpu ms/req", "{:.2f}"),
           ("steady_speedup", "steady vs eager (cpu)", "{:.2f}x"),
           ("padding_overhead", "padding", "{:.1%}"),
           ("padding_bound", "padding bound (cpu)", "{:.2f}x"), ("accuracy", "accuracy", "{}"),
           ("total_time", "cold wall s", "{:.2f}"), ("compile_time", "compile wall s", "{:.2f}"),
           ("steady_speedup_wall", "steady vs eager (wall)", "{:.2f}x"),
           ("warm_passes", "warm passes", "{}"))


def format_table(rows: list[Row]) -> str:
    """The stream's Markdown table, errors below it."""
    if not rows:
        return ""
    first = rows[0]
    lines = [f"dynamic {MODEL}: {first.requests} requests, batch {BATCH}, {first.threads} "
             "threads; cold = first pass (compiles included), compile = time inside the "
             "compiles, steady = median over warm passes (eager interleaved)", "",
             "| " + " | ".join(h for _, h, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(r, c, f) for c, _, f in COLUMNS) + " |" for r in rows]
    lines += [f"{r.backend}: {r.error}" for r in rows if r.error]
    return "\n".join(lines) + "\n"
