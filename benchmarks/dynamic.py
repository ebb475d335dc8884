"""The dynamic-shape stream: LLaMA prefill requests of random prompt length, one after
another (a decoder-serving workload; causal attention makes sequence padding provably exact,
so the bucket variants really pad).

Reports total time (compiles included), GE compile count, the time the first pass spent
beyond a steady pass (``compile_time``: compiles and first calls) and the steady-state
speed per request against eager (``steady_speedup``: a second pass over the stream, eager
and the variant interleaved request by request) per variant: eager, exact
static shapes (one compile per new length), symbolic shapes (``dynamic=True``),
power-of-two buckets and ``shape_buckets="auto"``. Variants the compiler cannot run yet
are reported as ``fail_to_run`` with the error.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx.experimental._config as fx_config
from torch import nn

from npu_inductor import buckets as bucket_reports
from npu_inductor.benchmarks.measure import Accuracy, judge, recording, tensors
from npu_inductor.benchmarks.results import Row
from npu_inductor.benchmarks.runner import Progress, Settings, _error_text
from npu_inductor.benchmarks.zoo import Llama

MODEL = "llama_prefill"
BATCH = 2


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


def stream(requests: int, max_len: int, seed: int) -> list[tuple[torch.Tensor]]:
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 1000, (BATCH, rng.randint(1, max_len)), generator=gen),)
            for _ in range(requests)]


def _serve(fn: Callable[..., Any], requests: list) -> tuple[float, list[list[torch.Tensor]]]:
    start = time.perf_counter()
    with torch.no_grad():
        outs = [tensors(fn(*r)) for r in requests]
    return time.perf_counter() - start, outs


def _steady(model: nn.Module, fn: Callable[..., Any], requests: list) -> tuple[float, float]:
    """Eager's and ``fn``'s time over the stream once everything is compiled, request by
    request interleaved (a load spike hits both)."""
    eager_s = graph_s = 0.0
    with torch.no_grad():
        for r in requests:
            start = time.perf_counter()
            model(*r)
            mid = time.perf_counter()
            fn(*r)
            eager_s, graph_s = eager_s + mid - start, graph_s + time.perf_counter() - mid
    return eager_s, graph_s


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


def run_variant(v: Variant, model: nn.Module, requests: list, eager: list, ref: list,
                settings: Settings) -> Row:
    row = Row(MODEL, "dynamic", v.name, "float32", BATCH, requests=len(requests))
    torch._dynamo.reset()
    first_report = len(bucket_reports.REPORTS)
    try:
        # one Dynamo graph for every length, 1 included (no size-1 specialization)
        with recording() as rec, torch._dynamo.config.patch(recompile_limit=len(requests) + 1), \
                fx_config.patch(backed_size_oblivious=v.name != "npu_exact"):
            fn = v.wrap(model)
            row.total_time, outs = _serve(fn, requests)
            eager_s, graph_s = _steady(model, fn, requests)
        row.steady_speedup, row.compile_time = eager_s / graph_s, row.total_time - graph_s
    except Exception as e:  # noqa: BLE001 - a variant that cannot run yet is a result
        row.error = _error_text(e)
        return row
    acc = _accuracy(outs, eager, ref, settings.dtype)
    row.accuracy, row.max_abs_err, row.max_rel_err = acc.status, acc.max_abs_err, acc.max_rel_err
    # Compiles = FX graphs npu_inductor compiled (each may hold several GE partitions).
    row.compiles = len(rec.reports) if rec.reports_available else len(rec.graphs)
    row.ge_graphs = len(rec.graphs)
    lengths = [r[0].shape[1] for r in requests]
    reports = bucket_reports.REPORTS[first_report:]
    if v.name == "npu_exact":
        row.padding_overhead = 0.0
    elif reports and not any(r.exact_reasons for r in reports):
        # what the compiler really padded (the auto policy's eager warm-up is not padded)
        real = sum(r.real_elements for r in reports)
        row.padding_overhead = sum(r.padded_elements for r in reports) / real - 1 if real else 0
    elif v.buckets and row.compiles <= len(v.buckets):
        row.padding_overhead = padding_overhead(lengths, v.buckets)
    elif v.buckets:  # more compiles than buckets: the sizes ran exact, not padded
        row.error = f"buckets not applied: {row.compiles} compiles for {len(v.buckets)} buckets"
    return row


def run_dynamic(requests: int, max_len: int, settings: Settings,
                progress: Progress = lambda s: None) -> list[Row]:
    """All variants over one seeded stream; eager's total time gives each ``speedup``."""
    torch.manual_seed(settings.seed)
    model = Llama(vocab=1000, hidden=128, heads=4, kv_heads=2, layers=2, ffn=256,
                  max_pos=max(max_len, 8)).eval()
    reqs = stream(requests, max_len, settings.seed)
    with torch.no_grad():
        model64 = copy.deepcopy(model).double()
        ref = [tensors(model64(*r)) for r in reqs]
    eager_time, eager = _serve(model, reqs)
    rows = []
    for v in variants(max_len):
        progress(f"{MODEL}/dynamic: {v.name} over {requests} requests")
        if v.wrap is None:
            row = Row(MODEL, "dynamic", "eager", "float32", BATCH, "pass", requests=requests,
                      total_time=eager_time, compiles=0, padding_overhead=0.0,
                      steady_speedup=1.0)
            acc = _accuracy(eager, eager, ref, settings.dtype)
            row.max_abs_err, row.max_rel_err = acc.max_abs_err, acc.max_rel_err
        else:
            row = run_variant(v, model, reqs, eager, ref, settings)
        row.speedup = eager_time / row.total_time if row.total_time else None
        row.threads = torch.get_num_threads()
        rows.append(row)
    return rows
