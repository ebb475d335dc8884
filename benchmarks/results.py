"""The result schema: one ``Row`` per model, mode and backend (the CSV's columns).

Names follow PyTorch's dynamo benchmark harness where they overlap (``speedup``,
``abs_latency``, ``compilation_latency``, ``compression_ratio``, ``eager_peak_mem``,
``dynamo_peak_mem``, ``graphs``, ``graph_breaks``, ``accuracy``). A field that a backend
or the current compiler cannot provide stays None and prints as ``n/a``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

MB = 1024 * 1024


@dataclass
class Row:
    model: str
    mode: str  # inference | training | dynamic
    backend: str  # eager | npu | npu_nofuse | aot_eager | inductor | npu_exact | ...
    dtype: str
    batch_size: int
    accuracy: str = "fail_to_run"  # pass | fail_accuracy | fail_to_run
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    speedup: float | None = None  # median eager / median this backend
    speedup_p10: float | None = None  # p10 eager / p10 this backend (robust to load spikes)
    abs_latency: float | None = None  # ms, median
    abs_latency_p10: float | None = None
    abs_latency_p90: float | None = None
    eager_latency: float | None = None  # ms, median, same interleaved run
    compilation_latency: float | None = None  # s, cold: first call after dynamo reset
    compilation_latency_warm: float | None = None  # s, see warm_kind
    warm_kind: str | None = None  # see NOTES["warm_kind"] in cli.py
    cache_hits: int | None = None  # npu_inductor compile cache, cold compile (FX graphs)
    cache_misses: int | None = None
    warm_cache_hits: int | None = None  # same, in the warm compile's fresh process
    backend_compile_s: float | None = None  # s inside npu_inductor's graph compiler (cold)
    compile_ratio_vs_aot_eager: float | None = None  # cold compilation_latency ratio
    # s, cold compile in a fresh process with empty caches (npu, aot_eager; see warm.py)
    compilation_latency_fresh: float | None = None
    compile_ratio_fresh_vs_aot_eager: float | None = None  # same ratio, both fresh processes
    eager_peak_mem: float | None = None  # MB, see measure.py for the method
    dynamo_peak_mem: float | None = None  # MB, this backend
    compression_ratio: float | None = None  # eager_peak_mem / dynamo_peak_mem
    graphs: int | None = None
    graph_breaks: int | None = None
    ge_graphs: int | None = None
    ge_ops: int | None = None  # GE compute ops (no Data/Const/NetOutput) as compiled
    ge_ops_before_fusion: int | None = None  # same model compiled with fusions off
    fallback_ops: int | None = None
    aicore_ops: int | None = None  # GE ops with an AI Core kernel on the target SoC
    aicpu_ops: int | None = None  # GE ops that run on AI CPU there (slow, host sync)
    unproven_ops: int | None = None  # GE ops the SoC kernel table has no evidence for
    device_rules: int | None = None  # device-rule decisions that changed the lowering
    planned_workspace: float | None = None  # MB, static memory plan (issue 6)
    workspace_lower_bound: float | None = None  # MB
    workspace_ratio: float | None = None  # planned / lower bound
    requests: int | None = None  # dynamic stream: number of requests
    total_time: float | None = None  # s wall, dynamic stream: first pass incl. compiles
    compiles: int | None = None  # dynamic stream: GE graph compiles
    padding_overhead: float | None = None  # dynamic stream: padded / real elements - 1
    # dynamic stream, bucket variants: eager's CPU time at each request's length / at its
    # bucket's length (the steady ratio a policy reaches at eager's speed per size)
    padding_bound: float | None = None
    steady_speedup: float | None = None  # dynamic stream, after compiles: eager / this (CPU)
    compile_time: float | None = None  # s wall, dynamic stream: inside the compiles
    # dynamic stream, CPU time (time.process_time; reproduces under load with --threads 1)
    total_cpu: float | None = None  # s, first pass, compiles included
    compile_cpu: float | None = None  # s CPU, dynamic stream: inside the compiles
    steady_ms: float | None = None  # ms per request, median warm pass
    steady_speedup_wall: float | None = None  # steady_speedup from wall time
    warm_passes: int | None = None  # warm passes measured (median taken)
    warm_cpu: float | None = None  # s, this variant's CPU time over all warm passes
    forward_ms: float | None = None  # training: median forward (+ loss) of a timed step
    backward_ms: float | None = None  # training: median backward
    optimizer_ms: float | None = None  # training: median optimizer step (compiled likewise)
    step_cpu_ms: float | None = None  # training: median CPU ms of a step (time.process_time)
    cpu_speedup: float | None = None  # training: eager's step_cpu_ms / this one (same run)
    threads: int | None = None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Row))
ACCURACY_STATES = ("pass", "fail_accuracy", "fail_to_run")


def to_mb(nbytes: int | None) -> float | None:
    return None if nbytes is None else nbytes / MB


def ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den
