"""Run one model in one mode under every backend, in one process, and produce its rows.

Per backend: cold compile (first call after ``torch._dynamo.reset()``; also the accuracy
sample), warm compile, memory (see ``measure.py``), then steady-state latency with all
backends interleaved call by call so that machine noise hits them alike.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from npu_inductor.benchmarks.measure import (
    Accuracy,
    CompileStats,
    Latency,
    Recorded,
    allocations,
    dynamo_counts,
    ge_stats,
    judge,
    recording,
    tensors,
    time_call,
    timed_backend,
)
from npu_inductor.benchmarks.results import Row, ratio, to_mb
from npu_inductor.benchmarks.warm import WARM_KIND, measure_in_fresh_process, spec
from npu_inductor.benchmarks.zoo import ZOO, ZooModel

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Backend:
    """How a model runs: ``wrap(model)`` returns the callable to benchmark."""

    name: str
    wrap: Callable[[nn.Module], Callable[..., Any]]
    npu: bool = False  # an npu_inductor configuration (GE stats apply)
    warm_kind: str = "recompile"
    inference_only: bool = False  # a configuration that only applies to inference
    options: dict[str, Any] | None = None  # npu_inductor options (graph-mode backends)


def _compiler(backend: str, **kwargs: Any) -> Callable[[nn.Module], Callable[..., Any]]:
    return lambda model: torch.compile(model, backend=backend, **kwargs)


# ``--compare`` names that are npu_inductor configurations rather than other compilers
NPU_VARIANTS = {"npu_freeze": {"freeze_parameters": True}}


def make_backends(compare: list[str]) -> list[Backend]:
    """eager, graph mode, graph mode with fusions off, then the ``--compare`` backends
    (``npu_freeze``: graph mode with ``freeze_parameters=True``, inference rows only)."""
    # warm = a fresh process with the cache the cold compile filled (npu); the variants
    # hit the same cache in this process (cheaper to measure, same cache path)
    out = [Backend("eager", lambda m: m, warm_kind="n/a"),
           Backend("npu", _compiler("npu", options={}), npu=True, warm_kind=WARM_KIND,
                   options={}),
           Backend("npu_nofuse", _compiler("npu", options={"fusions": False}), npu=True,
                   warm_kind="cache_same_process", options={"fusions": False})]
    for name in compare:
        if name in NPU_VARIANTS:
            out.append(Backend(name, _compiler("npu", options=NPU_VARIANTS[name]), npu=True,
                               inference_only=True, warm_kind="cache_same_process",
                               options=NPU_VARIANTS[name]))
            continue
        kind = "fx_graph_cache" if name == "inductor" else "recompile"
        out.append(Backend(name, _compiler(name), warm_kind=kind))
    return out


@dataclass(frozen=True)
class Settings:
    dtype: torch.dtype = torch.float32
    batch_size: int | None = None
    repeat: int = 20
    warmup: int = 3
    seed: int = 0
    lr: float = 1e-3
    precompile: bool = False  # npu's fresh-process cold/warm with npu_inductor.precompile


@dataclass
class Case:
    """One model in one mode: the model (in dtype), its inputs and the loss weights."""

    name: str
    mode: str
    model: nn.Module
    inputs: tuple[Any, ...]
    seeds: list[torch.Tensor] = field(default_factory=list)

    @property
    def train(self) -> bool:
        return self.mode == "training"


def _cast(x: Any, dtype: torch.dtype) -> Any:
    return x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def prepare(entry: ZooModel, mode: str, settings: Settings) -> Case:
    model, inputs = entry.build(settings.batch_size or entry.default_batch, settings.seed)
    model = model.to(settings.dtype).train(mode == "training")
    inputs = tuple(_cast(x, settings.dtype) for x in inputs)
    with torch.no_grad():
        outs = tensors(model(*inputs))
    generator = torch.Generator().manual_seed(settings.seed + 1)
    seeds = [torch.randn(o.shape, generator=generator) for o in outs]
    return Case(entry.name, mode, model, inputs, seeds)


def step_fn(case: Case, model: nn.Module, fn: Callable[..., Any],
            opt: torch.optim.Optimizer | None,
            opt_step: Callable[[], Any] | None = None) -> Callable[[bool], list[torch.Tensor]]:
    """One inference call or one training step (zero_grad, fwd, loss, bwd, optimizer).
    With ``capture`` it returns outputs (and gradients, taken before the update)."""

    def infer(capture: bool = False) -> list[torch.Tensor]:
        with torch.no_grad():
            out = fn(*case.inputs)
        return tensors(out) if capture else []

    def train(capture: bool = False) -> list[torch.Tensor]:
        c0 = time.process_time()
        opt.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        out = tensors(fn(*case.inputs))
        loss = sum((o.to(s.dtype) * s).sum() for o, s in zip(out, case.seeds))
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        captured = ([o.detach() for o in out] + [p.grad.clone() for p in model.parameters()
                                                  if p.grad is not None]) if capture else []
        t3 = time.perf_counter()
        (opt_step or opt.step)()
        train.phases.append((t1 - t0, t2 - t1, time.perf_counter() - t3))  # type: ignore
        if not capture:  # CPU seconds of the whole step (timed steps capture nothing)
            train.cpu.append(time.process_time() - c0)  # type: ignore
        return captured

    train.phases = []  # type: ignore[attr-defined]  (forward, backward, optimizer) seconds
    train.cpu = []  # type: ignore[attr-defined]  CPU seconds per step (time.process_time)
    return train if case.train else infer


def reference(case: Case) -> list[torch.Tensor]:
    """Float64 eager outputs (and gradients) from the same weights and inputs."""
    model = copy.deepcopy(case.model).double()
    ref_case = Case(case.name, case.mode, model, tuple(_cast(x, torch.float64)
                                                       for x in case.inputs),
                    [s.double() for s in case.seeds])
    opt = torch.optim.SGD(model.parameters(), lr=0.0) if case.train else None
    return step_fn(ref_case, model, model, opt)(True)


@dataclass
class Runner:
    """One backend's copy of the model and its measurements."""

    backend: Backend
    case: Case
    model: nn.Module
    settings: Settings
    fn: Callable[..., Any] | None = None
    step: Callable[[bool], list[torch.Tensor]] | None = None
    latency: Latency = field(default_factory=Latency)
    stats: CompileStats = field(default_factory=CompileStats)
    accuracy: Accuracy = field(default_factory=lambda: Accuracy("fail_to_run"))
    cold_s: float | None = None
    warm_s: float | None = None
    peak_mem: int | None = None
    notes: list[str] = field(default_factory=list)
    warm_cache: tuple[int, int] | None = None  # (hits, misses) of the warm process
    fresh_cold_s: float | None = None  # cold compile in a fresh process, empty caches

    def compile(self) -> None:
        opt = (torch.optim.SGD(self.model.parameters(), lr=self.settings.lr)
               if self.case.train else None)
        self.fn = self.backend.wrap(self.model)
        # training: the optimizer step is compiled by the same backend (eager: as is)
        opt_step = self.backend.wrap(opt.step) if opt is not None else None
        self.step = step_fn(self.case, self.model, self.fn, opt, opt_step)

    def first_call(self, capture: bool = False) -> tuple[float, list[torch.Tensor]]:
        """Reset Dynamo, compile and run once; returns (seconds, captured tensors)."""
        cold_state()
        start = time.perf_counter()
        self.compile()
        out = self.step(capture)
        return time.perf_counter() - start, out


def cold_state() -> None:
    """What a cold compile starts from in this process: Dynamo reset and fake tensors'
    dispatch cache emptied. That cache is process-wide and outlives ``torch._dynamo.reset()``:
    the backend compiled second found the first one's entries and its trace ran ~0.15-0.2 s
    faster on bert (npu then aot_eager: 0.60 / 0.40 s; aot_eager then npu: 0.57 / 0.44 s;
    emptied before each: 0.63 / 0.63 and 0.50 / 0.50 s)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch._dynamo.reset()
    FakeTensorMode.cache_clear()


def _error_text(e: BaseException) -> str:
    """Type and the first two non-empty lines (Dynamo puts the real error on line two)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()][:2]
    return f"{type(e).__name__}: {' '.join(lines)}"[:400]


def cold(r: Runner, ref: list[torch.Tensor], eager: list[torch.Tensor]) -> list[torch.Tensor]:
    """Cold compile + first call; fills accuracy and compile stats. Returns the outputs."""
    from torch._dynamo.utils import counters

    counters.clear()
    stats = CompileStats()
    try:
        with _observed(r.backend, stats) as rec:
            r.cold_s, out = r.first_call(capture=True)
    except Exception as e:  # noqa: BLE001 - a model that cannot run yet is a result
        r.accuracy = Accuracy("fail_to_run", error=_error_text(e))
        return []
    stats.graphs, stats.graph_breaks = dynamo_counts()
    if rec is not None:
        ge_stats(stats, rec)
    r.stats = stats
    r.accuracy = judge(out, eager or out, ref, r.settings.dtype)
    return out


@contextlib.contextmanager
def _observed(backend: Backend, stats: CompileStats) -> Iterator[Recorded | None]:
    """npu_inductor's compiles and compile time, for graph-mode backends only."""
    if not backend.npu:
        yield None
        return
    with recording() as rec, timed_backend(stats):
        yield rec


FRESH_COLD = ("npu", "aot_eager")  # backends whose cold compile is also measured in a new process


def fresh_cold(r: Runner) -> None:
    """Cold compile in a fresh process with empty caches (``warm.py``): the same conditions
    as the warm measurement, for graph mode and its ``aot_eager`` floor."""
    if r.backend.name not in FRESH_COLD or r.case.name not in ZOO:
        return
    job = {**spec(r.case.name, r.case.mode, r.settings, r.backend.options or {}),
           "backend": r.backend.name, "empty_cache": True}
    try:
        r.fresh_cold_s, _ = measure_in_fresh_process(job)
    except Exception as e:  # noqa: BLE001 - reported in the row, the run goes on
        r.notes.append(f"fresh cold: {_error_text(e)}")


def warm_and_memory(r: Runner, fresh: bool = False) -> None:
    """Warm compile time, then peak memory = retained by compile + steady-step peak
    (``fresh``: also the cold compile in a fresh process, for ``--compare aot_eager``)."""
    fresh_process = r.backend.warm_kind == WARM_KIND and r.case.name in ZOO
    precompiled = fresh_process and r.settings.precompile
    if fresh and not precompiled:
        fresh_cold(r)
    try:
        if precompiled:
            _precompiled_cold_and_warm(r, fresh)
        elif fresh_process:
            job = spec(r.case.name, r.case.mode, r.settings, r.backend.options or {})
            r.warm_s, counters = measure_in_fresh_process(job)
            r.warm_cache = (counters.get("hit", 0), counters.get("miss", 0))
        else:
            r.warm_s, _ = r.first_call()
        with allocations() as first:
            r.first_call()
        with allocations() as steady:
            r.step(False)
        r.peak_mem = first["retained"] + steady["peak"]
    except Exception as e:  # noqa: BLE001 - reported in the row, the run goes on
        r.notes.append(f"memory/warm: {_error_text(e)}")


def _precompiled_cold_and_warm(r: Runner, fresh: bool) -> None:
    """With ``--precompile`` the in-process compile (``torch.compile``) stores no precompiled
    artifact, so a warm process on its cache folder would precompile cold: a fresh process
    precompiles into a folder of its own (the fresh cold compile), a second one starts warm
    from it."""
    job = spec(r.case.name, r.case.mode, r.settings, r.backend.options or {})
    with tempfile.TemporaryDirectory(prefix="npu_bench_precompiled_") as folder:
        cold_s, _ = measure_in_fresh_process(job, cache_dir=folder)
        if fresh:
            r.fresh_cold_s = cold_s
        r.warm_s, counters = measure_in_fresh_process(job, cache_dir=folder)
    r.warm_cache = (counters.get("hit", 0), counters.get("miss", 0))
    if not counters.get("precompile_hit"):
        r.notes.append("precompile: the warm process did not load the precompiled artifact")


def interleave(runners: list[Runner], settings: Settings) -> None:
    """Warmup, then ``repeat`` rounds, each calling every runner once, rotating the order."""
    for _ in range(settings.warmup):
        for r in runners:
            r.step(False)
    for k in range(settings.repeat if runners else 0):
        shift = k % len(runners)
        for r in runners[shift:] + runners[:shift]:
            r.latency.samples.append(time_call(functools.partial(r.step, False)))


def run_case(entry: ZooModel, mode: str, backends: list[Backend], settings: Settings,
             progress: Progress = lambda s: None) -> list[Row]:
    """All backends on one model and mode; the rows come back in ``backends`` order."""
    case = prepare(entry, mode, settings)
    ref = reference(case)
    runners = [Runner(b, case, copy.deepcopy(case.model), settings) for b in backends
               if not (b.inference_only and case.train)]
    eager: list[torch.Tensor] = []
    for r in runners:
        progress(f"{entry.name}/{mode}: compile {r.backend.name}")
        out = cold(r, ref, eager)
        eager = eager or (out if r.backend.name == "eager" else [])
    alive = [r for r in runners if r.accuracy.status != "fail_to_run"]
    fresh = any(r.backend.name == "aot_eager" for r in alive)
    for r in alive:
        progress(f"{entry.name}/{mode}: warm compile + memory {r.backend.name}")
        warm_and_memory(r, fresh)
    progress(f"{entry.name}/{mode}: timing {len(alive)} backends x {settings.repeat}")
    interleave(alive, settings)
    return finish(runners, case, settings)


def finish(runners: list[Runner], case: Case, settings: Settings) -> list[Row]:
    by_name = {r.backend.name: r for r in runners}
    eager, aot = by_name.get("eager"), by_name.get("aot_eager")
    rows = [_row(r, case, settings, eager, aot) for r in runners]
    nofuse = next((row for row in rows if row.backend == "npu_nofuse"), None)
    for row in rows:
        if by_name[row.backend].backend.npu and nofuse is not None:
            row.ge_ops_before_fusion = nofuse.ge_ops
    return rows


def _median(r: Runner | None) -> float | None:
    return r.latency.median if r is not None and r.latency.samples else None


def _row(r: Runner, case: Case, settings: Settings, eager: Runner | None,
         aot: Runner | None) -> Row:
    dtype = str(settings.dtype).removeprefix("torch.")
    row = Row(case.name, case.mode, r.backend.name, dtype,
              settings.batch_size or len(case.inputs[0]), r.accuracy.status,
              r.accuracy.max_abs_err, r.accuracy.max_rel_err,
              threads=torch.get_num_threads(),
              error="; ".join(filter(None, [r.accuracy.error, *r.notes])))
    if r.latency.samples:
        row.abs_latency, row.abs_latency_p10 = r.latency.median, r.latency.p10
        row.abs_latency_p90 = r.latency.p90
    row.eager_latency = _median(eager)
    _fill_phases(row, r, settings)
    row.step_cpu_ms = _cpu_median(r, settings)
    row.cpu_speedup = ratio(_cpu_median(eager, settings), row.step_cpu_ms)
    row.speedup = ratio(row.eager_latency, row.abs_latency)
    if eager is not None and eager.latency.samples and r.latency.samples:
        row.speedup_p10 = ratio(eager.latency.p10, r.latency.p10)
    if r.backend.name != "eager" and r.cold_s is not None:
        row.compilation_latency, row.compilation_latency_warm = r.cold_s, r.warm_s
        row.warm_kind = r.backend.warm_kind + (
            "_precompiled" if settings.precompile and r.backend.warm_kind == WARM_KIND else "")
        row.warm_cache_hits = r.warm_cache[0] if r.warm_cache else None
        row.compile_ratio_vs_aot_eager = ratio(r.cold_s, aot.cold_s if aot else None)
        row.compilation_latency_fresh = r.fresh_cold_s
        row.compile_ratio_fresh_vs_aot_eager = ratio(r.fresh_cold_s,
                                                     aot.fresh_cold_s if aot else None)
    _fill_stats(row, r.stats)
    row.eager_peak_mem = to_mb(eager.peak_mem) if eager else None
    row.dynamo_peak_mem = to_mb(r.peak_mem)
    row.compression_ratio = ratio(row.eager_peak_mem, row.dynamo_peak_mem)
    return row


def _fill_phases(row: Row, r: Runner, settings: Settings) -> None:
    """Median forward / backward / optimizer ms over the timed training steps."""
    phases = getattr(r.step, "phases", None) or []
    timed = phases[-settings.repeat:] if r.latency.samples else []
    if timed:
        import statistics

        row.forward_ms, row.backward_ms, row.optimizer_ms = (
            1e3 * statistics.median(p[k] for p in timed) for k in range(3))


def _cpu_median(r: Runner | None, settings: Settings) -> float | None:
    """Median CPU ms (``time.process_time``) of the timed training steps: with
    ``--threads 1`` a competing load barely moves it, unlike the wall time."""
    cpu = getattr(r.step, "cpu", None) if r is not None and r.latency.samples else None
    if not cpu:
        return None
    import statistics

    return 1e3 * statistics.median(cpu[-settings.repeat:])


def _fill_stats(row: Row, stats: CompileStats) -> None:
    if row.accuracy == "fail_to_run":
        return
    row.graphs, row.graph_breaks = stats.graphs, stats.graph_breaks
    row.ge_graphs, row.ge_ops, row.fallback_ops = stats.ge_graphs, stats.ge_ops, stats.fallback_ops
    row.backend_compile_s = stats.backend_compile_s
    row.aicore_ops, row.aicpu_ops = stats.aicore_ops, stats.aicpu_ops
    row.unproven_ops, row.device_rules = stats.unproven_ops, stats.device_rules
    row.cache_hits, row.cache_misses = stats.cache_hits, stats.cache_misses
    row.planned_workspace = to_mb(stats.planned_workspace)
    row.workspace_lower_bound = to_mb(stats.workspace_lower_bound)
    row.workspace_ratio = ratio(stats.planned_workspace, stats.workspace_lower_bound)


def prime(backends: list[Backend], train: bool = True) -> None:
    """Compile a tiny training step once per backend (forward, backward and the optimizer
    step, as ``Runner.compile`` does; the forward alone without ``train``) so one-time
    imports do not land in the first model's cold compilation_latency: the backward's
    (aot_eager compiles it lazily) and Dynamo's optimizer support's (it imports Inductor's
    compile_fx and cudagraph_trees, ~0.2 s). Then a full garbage collection: the first one
    in a process scans every object the imports made (torch, the model's library), ~0.25 s
    CPU, and otherwise lands in whichever measurement crosses the collector's threshold."""
    x = torch.randn(4, 4)
    for b in backends:
        torch._dynamo.reset()
        with contextlib.suppress(Exception):  # a failing backend is reported per model
            model = nn.Linear(4, 4)
            out = b.wrap(model)(x)
            if train:
                out.sum().backward()
                b.wrap(torch.optim.SGD(model.parameters(), lr=0.0).step)()
    torch._dynamo.reset()
    gc.collect()


def machine_info() -> dict[str, Any]:
    import platform

    return {"python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform(), "processor": _cpu_name(),
            "cpu_count": os.cpu_count(), "threads": torch.get_num_threads(),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "device": "host (CPU simulator of an Ascend device)"}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        import platform

        return platform.processor()
