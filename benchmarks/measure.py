"""Measurements: latency, peak memory, accuracy against a float64 reference, compile stats.

Peak memory (``eager_peak_mem`` / ``dynamo_peak_mem``) is measured with torch's own CPU
allocator accounting: under ``torch.profiler`` with ``profile_memory=True`` every
allocation and free of the CPU allocator is recorded as a ``[memory]`` event with its
byte count. Two profiled regions per backend:
  1. compile + first call (after ``torch._dynamo.reset()``): the bytes still live at its
     end are what the backend retains (GE constants, loaded models, workspaces);
  2. one steady-state step: the peak of the running sum of allocations minus frees.
Peak = retained + step peak. Model weights and inputs exist before both regions and are
the same for every backend, so they are excluded. ``tracemalloc`` cannot see torch's
allocator and process RSS is dominated by compiler state, hence this method.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
from torch.profiler import ProfilerActivity, profile

# Allowed growth of the compiled error over eager's own error vs the float64 reference
# (PyTorch's dynamo harness uses the same fp64-reference scheme with a 2-3x multiplier).
ERROR_MULTIPLIER = 3.0
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-3}
NON_COMPUTE_OPS = frozenset({"Data", "RefData", "NetOutput", "Const"})


def tensors(x: Any) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` in [0, 100]."""
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@dataclass
class Latency:
    """Per-call wall times in ms."""

    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p10(self) -> float:
        return percentile(self.samples, 10)

    @property
    def p90(self) -> float:
        return percentile(self.samples, 90)


def time_call(fn: Callable[[], Any]) -> float:
    """Wall time of one call in ms."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


# ---- CPU and wall time of passes over a stream (dynamic and serve modes) -------------------
@dataclass
class Times:
    """Seconds of CPU time (``time.process_time``: every thread of this process, waiting
    for a CPU excluded) and of wall time. With ``--threads 1`` a competing load barely
    changes the CPU time, so published stream figures use it; wall time is kept beside it."""

    cpu: float = 0.0
    wall: float = 0.0

    def __sub__(self, other: Times) -> Times:
        return Times(self.cpu - other.cpu, self.wall - other.wall)


def now() -> Times:
    return Times(time.process_time(), time.perf_counter())


@contextlib.contextmanager
def timed(into: Times | None = None) -> Iterator[Times]:
    """Add the block's CPU and wall seconds to ``into`` (a new ``Times`` by default)."""
    total = Times() if into is None else into
    start = now()
    try:
        yield total
    finally:
        spent = now() - start
        total.cpu, total.wall = total.cpu + spent.cpu, total.wall + spent.wall


@dataclass(frozen=True)
class Warm:
    """How long the warm (steady-state) passes run: at least ``passes`` passes and
    ``cpu_s`` CPU seconds of the measured variant (``--warm-s``, ``--passes``)."""

    cpu_s: float = 5.0
    passes: int = 3


P = TypeVar("P")


def stream_passes(cold_pass: Callable[[], Times], warm_pass: Callable[[int], P],
                  variant_time: Callable[[P], Times], compiles: Callable[[], int], warm: Warm,
                  max_passes: int = 200) -> tuple[list[Times], list[P]]:
    """The cold pass, then warm passes ``warm_pass(i)`` until at least ``warm.passes`` ran
    and the variant's CPU seconds in them (``variant_time``) add up to ``warm.cpu_s``.
    A warm pass that compiled something is not steady state (``shape_buckets="auto"``
    compiles after recording sizes in eager): it and the warm passes before it become
    cold passes and the warm passes start again. Returns (cold times, warm passes)."""
    cold, done = [cold_pass()], []
    while len(cold) + len(done) < max_passes and (
            len(done) < max(warm.passes, 1) or sum(variant_time(p).cpu for p in done) < warm.cpu_s):
        before = compiles()
        result = warm_pass(len(done))
        if compiles() == before:
            done.append(result)
        else:
            cold += [variant_time(p) for p in (*done, result)]
            done = []
    if not done:
        raise RuntimeError(f"still compiling after {max_passes} passes over the stream")
    return cold, done


def median_ratio(num: list[float], den: list[float]) -> float:
    """Median over passes of ``num[i] / den[i]`` (one pass's load spike moves one ratio)."""
    if not num or len(num) != len(den):
        raise ValueError(f"median_ratio needs equal, non-empty lists ({len(num)}, {len(den)})")
    return statistics.median(n / d for n, d in zip(num, den))


def median_pass(passes: list[Times]) -> Times:
    """The median of the passes' CPU times and, apart, of their wall times."""
    return Times(statistics.median(p.cpu for p in passes),
                 statistics.median(p.wall for p in passes))


def ratios(num: list[Times], den: list[Times]) -> Times:
    """``median_ratio`` of CPU times and, apart, of wall times (e.g. eager's / a variant's)."""
    return Times(median_ratio([n.cpu for n in num], [d.cpu for d in den]),
                 median_ratio([n.wall for n in num], [d.wall for d in den]))


def select_names(available: Sequence[str], names: list[str] | None) -> list[str]:
    """Eager and the named variants of a stream (``exact`` or ``npu_exact``; None: all), in
    ``available``'s order."""
    if not names:
        return list(available)
    wanted = {n if n.startswith("npu_") or n == "eager" else f"npu_{n}" for n in names}
    unknown = wanted - set(available)
    if unknown:
        raise SystemExit(f"npu-bench: unknown --variants {sorted(unknown)}; choose from "
                         f"{list(available)}")
    return [v for v in available if v == "eager" or v in wanted]


@contextlib.contextmanager
def compile_clock() -> Iterator[Times]:
    """CPU and wall seconds the process spends compiling inside the block, measured around
    the compiles themselves: Dynamo's frame compiles (tracing, AOTAutograd, our backend) and
    npu_inductor's compiles at call time (a bucket's static graph, ``shape_buckets="auto"``
    after its eager calls). Nested compiles count once."""
    from torch._dynamo.callback import callback_handler

    from npu_inductor import backend

    total, depth, start = Times(), [0], [Times()]

    def enter(*_: Any) -> None:
        depth[0] += 1
        if depth[0] == 1:
            start[0] = now()

    def leave(*_: Any) -> None:
        depth[0] -= 1
        if depth[0] == 0:
            spent = now() - start[0]
            total.cpu, total.wall = total.cpu + spent.cpu, total.wall + spent.wall

    def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            enter()
            try:
                return fn(*args, **kwargs)
            finally:
                leave()
        return run

    originals = {name: getattr(backend, name) for name in ("_compile", "compile_fx_graph")}
    callback_handler.register_start_callback(enter)
    callback_handler.register_end_callback(leave)
    for name, fn in originals.items():
        setattr(backend, name, counted(fn))
    try:
        yield total
    finally:
        for name, fn in originals.items():
            setattr(backend, name, fn)
        callback_handler.remove_start_callback(enter)
        callback_handler.remove_end_callback(leave)


def _memory_events(prof: profile) -> list[tuple[int, int]]:
    events = prof.profiler.kineto_results.events()
    return sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence fd 2 (kineto prints a line at every profiler start and stop)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def allocations() -> Iterator[dict[str, int]]:
    """Profile the block; yields a dict filled with ``peak`` and ``retained`` bytes."""
    result = {"peak": 0, "retained": 0}
    gc.collect()
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():
        prof.start()
    try:
        yield result
        gc.collect()
    finally:
        with _quiet_stderr():
            prof.stop()
    running = peak = 0
    for _, nbytes in _memory_events(prof):
        running += nbytes
        peak = max(peak, running)
    result.update(peak=peak, retained=max(running, 0))


def error_vs(actual: list[torch.Tensor], ref: list[torch.Tensor]) -> tuple[float, float]:
    """Max abs error and max error relative to the reference's largest magnitude."""
    abs_err = rel_err = 0.0
    for a, r in zip(actual, ref):
        diff = (a.detach().double() - r.detach().double()).abs().max().item() if a.numel() else 0
        scale = r.detach().double().abs().max().item() if r.numel() else 0
        abs_err = max(abs_err, diff)
        rel_err = max(rel_err, diff / max(scale, 1e-12))
    return abs_err, rel_err


@dataclass(frozen=True)
class Accuracy:
    status: str  # pass | fail_accuracy | fail_to_run
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    error: str = ""


def judge(actual: list[torch.Tensor], eager: list[torch.Tensor], ref: list[torch.Tensor],
          dtype: torch.dtype) -> Accuracy:
    """``pass`` when the compiled error vs float64 is within a multiple of eager's error."""
    if len(actual) != len(ref) or any(a.shape != r.shape for a, r in zip(actual, ref)):
        return Accuracy("fail_accuracy", error="output structure differs from eager")
    abs_err, rel_err = error_vs(actual, ref)
    _, eager_rel = error_vs(eager, ref)
    ok = rel_err <= ERROR_MULTIPLIER * eager_rel + TOLERANCE.get(dtype, 1e-5)
    return Accuracy("pass" if ok else "fail_accuracy", abs_err, rel_err)


@dataclass
class CompileStats:
    """What one backend's compile did (graph-mode fields stay None for other backends)."""

    graphs: int = 0
    graph_breaks: int = 0
    ge_graphs: int | None = None
    ge_ops: int | None = None
    fallback_ops: int | None = None
    aicore_ops: int | None = None
    aicpu_ops: int | None = None
    unproven_ops: int | None = None
    device_rules: int | None = None
    planned_workspace: int | None = None
    workspace_lower_bound: int | None = None
    backend_compile_s: float | None = None
    cache_hits: int | None = None  # FX graphs loaded from the compile cache (cold compile)
    cache_misses: int | None = None


def dynamo_counts() -> tuple[int, int]:
    """(graphs, graph breaks) Dynamo counted since the last ``counters.clear()``."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def memory_plan(graph: Any) -> dict[str, Any] | None:
    """The static memory plan of one CompiledGraph as its device reports it (None when
    the device or this compiler version has none)."""
    executor = getattr(graph, "executor", None)
    device = getattr(executor, "device", None)
    if not hasattr(device, "memory_plan"):
        return None
    try:
        plan = device.memory_plan(executor.model_id)
    except (AttributeError, KeyError, RuntimeError):
        return None
    return plan if isinstance(plan, dict) and "workspace_bytes" in plan else None


def ge_stats(stats: CompileStats, recorded: Recorded) -> None:
    """Fill the GE fields from the CompiledGraphs and reports one compile produced."""
    graphs = recorded.graphs
    stats.ge_graphs = len(graphs)
    stats.ge_ops = sum(sum(op.type not in NON_COMPUTE_OPS for op in g.lowered.graph.ops)
                       for g in graphs)
    if recorded.reports_available:
        stats.fallback_ops = sum(len(r.fallbacks) for r in recorded.reports)
        stats.cache_hits = sum(getattr(r, "cache", "") == "hit" for r in recorded.reports)
        stats.cache_misses = sum(getattr(r, "cache", "") == "miss" for r in recorded.reports)
    _kernel_stats(stats, recorded)
    plans = [p for p in map(memory_plan, graphs) if p is not None]
    if plans:
        stats.planned_workspace = sum(p["workspace_bytes"] for p in plans)
        stats.workspace_lower_bound = sum(p.get("lower_bound_bytes", 0) for p in plans)


def _kernel_stats(stats: CompileStats, recorded: Recorded) -> None:
    """Ops by kernel kind on the target SoC and device-rule decisions (compilers that
    record them)."""
    try:
        from npu_inductor.device_rules_report import graph_device
    except ImportError:
        return
    devices = [graph_device(g, "", []) for g in recorded.graphs
               if hasattr(g.lowered, "decisions")]
    if len(devices) != len(recorded.graphs):
        return
    stats.aicore_ops = sum(d.counts["aicore"] for d in devices)
    stats.aicpu_ops = sum(d.counts["aicpu"] for d in devices)
    stats.unproven_ops = sum(d.counts["unproven"] for d in devices)
    stats.device_rules = sum(len(d.decisions) for d in devices) + sum(
        len(getattr(r, "decisions", ())) for r in recorded.reports)


@dataclass
class Recorded:
    """npu_inductor's CompiledGraphs and per-FX-graph reports (when the compiler has them)."""

    graphs: list[Any] = field(default_factory=list)
    reports: list[Any] = field(default_factory=list)
    reports_available: bool = False

    def compiles(self) -> int:
        """FX graphs npu_inductor compiled (each may hold several GE partitions)."""
        return len(self.reports) if self.reports_available else len(self.graphs)


@contextlib.contextmanager
def recording() -> Iterator[Recorded]:
    """Collect what npu_inductor compiled inside the block."""
    from npu_inductor import compile_fx

    rec = Recorded(reports_available=hasattr(compile_fx, "REPORT_HOOKS"))
    hooks = [(compile_fx.COMPILE_HOOKS, rec.graphs.append)]
    if rec.reports_available:
        hooks.append((compile_fx.REPORT_HOOKS, rec.reports.append))
    for registry, hook in hooks:
        registry.append(hook)
    try:
        yield rec
    finally:
        for registry, hook in hooks:
            registry.remove(hook)


@contextlib.contextmanager
def variant_run(recompile_limit: int) -> Iterator[tuple[Recorded, Times]]:
    """One stream variant's scope: a fresh Dynamo and a collected heap, npu_inductor's
    compiles recorded and timed (``compile_clock``), up to ``recompile_limit`` Dynamo
    frames (exact shapes: one per size). No ``backed_size_oblivious`` flag: size 1 needs
    none (``npu_inductor/bucket_options.py``)."""
    from npu_inductor.buckets import install_compile_callbacks

    torch._dynamo.reset()
    # the reset dropped the callbacks that keep size 1 symbolic under shape_buckets (a
    # session's first compile, before any reset, has them: importing the backend installs
    # them); plain dynamic=True still specializes size 1 (Dynamo's 0/1 specialization)
    install_compile_callbacks()
    gc.collect()  # a collection the previous variant left due would land in this one's times
    with recording() as rec, compile_clock() as clock, \
            torch._dynamo.config.patch(recompile_limit=recompile_limit):
        yield rec, clock


@contextlib.contextmanager
def timed_backend(stats: CompileStats) -> Iterator[None]:
    """Accumulate time spent inside npu_inductor's per-graph compiler into ``stats``."""
    from npu_inductor import backend

    original = backend.compile_fx_graph

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            stats.backend_compile_s = (stats.backend_compile_s or 0.0) + time.perf_counter() - start

    backend.compile_fx_graph = timed
    try:
        yield
    finally:
        backend.compile_fx_graph = original


# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_MAX = 32 << 20  # glibc's ceiling for M_MMAP_THRESHOLD on 64-bit


def steady_heap() -> bool:
    """Make glibc keep freed memory in the process (``--steady-heap``): no heap trimming, and
    chunks up to 32 MiB from the heap instead of fresh mmaps. With the defaults a step's
    multi-megabyte tensors (a 32 MB embedding gradient, the logits' fp32 copy) land on pages
    the kernel must fault in again whenever another allocation pattern made glibc give memory
    back, and which backend pays depends on the order the interleaved backends freed theirs
    in: +-10% of a step, more than the differences measured. False without glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)) and \
            bool(libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    except (OSError, AttributeError):
        return False
