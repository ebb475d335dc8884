"""Compile one aten FX graph: passes -> lower to GE -> serialize -> render executor -> load.

The returned callable is boxed (AOTAutograd's calling convention): it takes the list of
graph inputs and returns the list of graph outputs. A graph with nodes that cannot be
lowered is split into GE partitions and eager islands (``graph_passes/partition.py``), or
rejected with ``fallback="error"``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import operator
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from npu_inductor import cache, codegen
from npu_inductor.atc import compile_om
from npu_inductor.cache_key import cache_key
from npu_inductor.config import NpuConfig
from npu_inductor.ge import format_graph, from_air, to_air, to_pbtxt
from npu_inductor.gears import current_plan, gear_plan
from npu_inductor.graph_passes import run_passes
from npu_inductor.graph_passes.partition import Fallback, fallbacks, split
from npu_inductor.lowering import LoweredGraph, LoweringError, lower_graph
from npu_inductor.lowering.lower import describe, try_lower
from npu_inductor.lowering.output_views import outputs_function
from npu_inductor.runtime import get_device
from npu_inductor.runtime.allocator import AllocatorError
from npu_inductor.runtime.device import DeviceError
from npu_inductor.runtime.memory import DeviceMemoryError

log = logging.getLogger("npu_inductor")
_GRAPH_IDS = itertools.count()
# Callbacks run with every CompiledGraph (tests and explain() observe compiles here).
COMPILE_HOOKS: list[Callable[[CompiledGraph], None]] = []
# Callbacks run once per FX graph compiled, with what became GE and what fell back.
REPORT_HOOKS: list[Callable[[GraphReport], None]] = []
# Re-partitioning rounds after a converter fails inside a partition (the first lowering
# pass already finds converter failures, so more than one round is unexpected).
MAX_PARTITION_ROUNDS = 8
_WARNED: set[str] = set()  # op types already warned about (warn once per op type)


@contextlib.contextmanager
def recording(hooks: list[Callable[[Any], None]]) -> Iterator[list[Any]]:
    """Collect what ``hooks`` (``COMPILE_HOOKS`` or ``REPORT_HOOKS``) receive in the block."""
    seen: list[Any] = []
    hooks.append(seen.append)
    try:
        yield seen
    finally:
        hooks.remove(seen.append)


def record_reports() -> contextlib.AbstractContextManager[list[GraphReport]]:
    """Every ``GraphReport`` (GE graphs and fallbacks of one FX graph) made in the block."""
    return recording(REPORT_HOOKS)
# Failures of the device, not of the graph: loading them in eager would hide the problem.
_ENVIRONMENT_ERRORS = (DeviceError, DeviceMemoryError, AllocatorError, torch.OutOfMemoryError)


class FallbackError(LoweringError):
    """``fallback="error"`` and the graph has nodes without a GE lowering."""


@dataclass
class CompiledGraph:
    """A GE graph loaded on a device, callable with the FX graph's inputs."""

    name: str
    lowered: LoweredGraph
    executor: Any
    air: bytes
    om: bytes | None = None  # ATC's model (acl device)
    checker: Callable[[list[Any]], None] | None = None  # options compare=True (debug.py)
    _call_plan: Any = field(default=None, init=False, repr=False)  # (set on first call)

    def __call__(self, args: list[Any]) -> list[Any]:
        if self.checker is not None:
            self.checker(args)
        plan = self._call_plan
        take = plan[0] if plan is not None else _take(self.lowered.data_inputs)
        inputs = [a if isinstance(a, torch.Tensor) else _as_tensor(a) for a in take(args)]
        if torch._C._len_torch_dispatch_stack() == 0:  # (the usual call: no mode to leave)
            ge_outs = self.executor.run(inputs)
        else:
            with _outside_aot_op_analysis():
                ge_outs = self.executor.run(inputs)
        if plan is None:  # (the GE output count from the run: a cached graph is not parsed)
            plan = self._call_plan = (take, *_outputs_plan(self.lowered, len(ge_outs)))
        outs = ge_outs if plan[1] else plan[2](args, ge_outs)
        args.clear()
        return outs


def _take(idx: list[int]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """How a call maps the FX inputs to the GE graph's Data inputs (one C-level gather)."""
    if len(idx) == 1:
        return lambda args: (args[idx[0]],)  # (an itemgetter of one returns no tuple)
    return operator.itemgetter(*idx) if idx else (lambda args: ())


def _outputs_plan(lowered: LoweredGraph, n_ge: int) -> tuple[bool, Callable[[list, list], list]]:
    """Whether the FX outputs are the ``n_ge`` GE outputs as they are (then handed over
    unwrapped); and the generated function that makes them otherwise
    (``output_views.outputs_function``)."""
    ge_only = len(lowered.outputs) == n_ge and all(
        slot.kind == "ge" and slot.index == k for k, slot in enumerate(lowered.outputs))
    return ge_only, outputs_function(lowered.outputs)


@contextlib.contextmanager
def _outside_aot_op_analysis() -> Iterator[None]:
    """Run the device's execution of a GE graph outside the dispatch mode AOTAutograd wraps
    a compiled graph's first call in (``_AnalyzeCustomOpInputOutputMode``, which checks the
    aliasing of custom ops in the graph): on the host device every torch call of the
    simulator's kernels went through it (~700 Python dispatches in llama's first call),
    and a GE graph runs no custom op of the model. Other dispatch modes stay."""
    if torch._C._len_torch_dispatch_stack() == 0:
        yield
        return
    from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

    if type(_get_current_dispatch_mode()).__name__ != "_AnalyzeCustomOpInputOutputMode":
        yield
        return
    with _pop_mode_temporarily():
        yield


_SIZE_TENSORS: dict[int, torch.Tensor] = {}  # size -> its 0-d input tensor (bounded)


def _as_tensor(x: Any) -> torch.Tensor:
    """Graph inputs that are sizes (SymInt placeholders) travel as 0-d int64 tensors, one
    per size made once (a GE graph never writes a Data input), so that a size seen before
    is the input buffer bound last time (the executor skips its binding)."""
    if isinstance(x, torch.Tensor):
        return x
    if type(x) is not int:
        return torch.tensor(x, dtype=torch.int64)
    t = _SIZE_TENSORS.get(x)
    if t is None:
        if len(_SIZE_TENSORS) >= 4096:
            _SIZE_TENSORS.clear()
        t = _SIZE_TENSORS[x] = torch.tensor(x, dtype=torch.int64)
    return t


@dataclass
class GraphReport:
    """What one FX graph became: its GE graphs and the nodes that fell back to eager."""

    name: str
    kind: str
    ge_graphs: list[CompiledGraph] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    module: torch.fx.GraphModule | None = None  # top level when partitioned
    decisions: list[Any] = field(default_factory=list)  # device rules the FX passes applied
    failures: dict[str, str] = field(default_factory=dict)  # FX node -> why it runs eager
    cache: str = "off"  # compile cache: "hit" | "miss" | "off" (see npu_inductor/cache.py)


class GEPartition(torch.nn.Module):
    """A loaded GE graph standing in for a fused partition submodule (returns a tuple)."""

    def __init__(self, compiled: CompiledGraph) -> None:
        super().__init__()
        self.compiled = compiled

    def forward(self, *args: Any) -> tuple[Any, ...]:
        return tuple(self.compiled(list(args)))


def _boxed(compiled: CompiledGraph) -> Any:
    def run(args: list[Any]) -> list[Any]:
        return compiled(args)

    run._boxed_call = True  # type: ignore[attr-defined]
    run.compiled_graph = compiled  # type: ignore[attr-defined]
    return run


def _boxed_module(top: torch.fx.GraphModule) -> Any:
    def run(args: list[Any]) -> list[Any]:
        inputs = list(args)
        args.clear()  # boxed convention: we own the inputs now
        return list(top(*inputs))

    run._boxed_call = True  # type: ignore[attr-defined]
    run.partitioned = top  # type: ignore[attr-defined]
    return run


def compile_fx_graph(gm: torch.fx.GraphModule, example_inputs: list[Any], *,
                     config: NpuConfig, kind: str) -> Any:
    """AOTAutograd's fw/bw/inference compiler. Runs outside AOT's fake mode: GE constants
    and the loaded model hold real tensors."""
    with unset_fake_temporarily():
        return _compile(gm, config, kind)


def _compile(gm: torch.fx.GraphModule, config: NpuConfig, kind: str) -> Any:
    name = f"{kind}_{next(_GRAPH_IDS)}"
    before = gm.print_readable(print_output=False) if config.dump_dir else None
    gm = run_passes(gm, config, name=name)
    report = GraphReport(name, kind, decisions=list(gm.meta.get("device_decisions", [])))
    lookup = _cache_lookup(gm, config, report)
    runner = _from_cache(gm, lookup, report, config, before) if lookup else None
    if runner is None:
        lowered, failures = try_lower(gm, name, config)
        if lowered is not None:  # fast path: the whole graph is one GE graph
            runner = _compile_whole(gm, lowered, report, config, before)
        else:
            with gear_plan(None):  # gears name the whole graph's inputs, not a partition's
                runner = _compile_partitioned(gm, report, failures, config, before)
        if lookup:
            _cache_store(lookup, report, config)
    if lookup and report.module is None and len(report.ge_graphs) == 1 and (
            report.cache == "hit" or cache.entry_path(lookup.root, lookup.key).exists()):
        runner.cache_entry = (str(lookup.root), lookup.key)  # for AOTAutograd's cache
    _warn_fallbacks(report)
    for hook in REPORT_HOOKS:
        hook(report)
    return runner


def _compile_whole(gm: torch.fx.GraphModule, lowered: LoweredGraph, report: GraphReport,
                   config: NpuConfig, fx_before: str | None) -> Any:
    compiled = _try_load(lowered, config, fx_before, gm, report)
    if compiled is None:
        report.module = gm
        return _boxed_module(gm)
    report.ge_graphs.append(compiled)
    return _boxed(compiled)


def _load(lowered: LoweredGraph, config: NpuConfig, fx_before: str | None,
          gm: torch.fx.GraphModule, cached: cache.CachedGraph | None = None,
          name: str | None = None) -> CompiledGraph:
    compiled = load_graph(lowered, config, cached, name)
    compiled.name = name or compiled.name
    verb = "loaded cached" if cached else "compiled"
    if log.isEnabledFor(logging.INFO):  # a cached graph's ops are parsed only when asked
        log.info("%s GE graph %s: %d ops", verb, compiled.name, len(lowered.graph.ops))
    if config.compare:
        from npu_inductor.debug import checker  # debugging only: FX eager next to GE

        compiled.checker = checker(gm, compiled)
    for hook in COMPILE_HOOKS:
        hook(compiled)
    if config.dump_dir:
        fx_after = gm.print_readable(print_output=False) if gm is not None else ""
        write_dump(Path(config.dump_dir) / compiled.name, compiled, fx_before, fx_after)
    return compiled


def _try_load(lowered: LoweredGraph, config: NpuConfig, fx_before: str | None,
              gm: torch.fx.GraphModule, report: GraphReport) -> CompiledGraph | None:
    """``_load``; with ``fallback="eager"`` a graph that fails to serialize or load runs
    in eager instead (None), its nodes reported as fallbacks."""
    try:
        return _load(lowered, config, fx_before, gm)
    except _ENVIRONMENT_ERRORS:
        raise
    except Exception as e:
        if config.fallback == "error":
            raise
        reason = f"GE graph {lowered.graph.name} failed to load: {type(e).__name__}: {e}"
        log.warning(reason)
        every_node = {n.name: reason for n in gm.graph.nodes if n.op == "call_function"}
        report.fallbacks += fallbacks(gm, every_node)
        return None


def _compile_partitioned(gm: torch.fx.GraphModule, report: GraphReport,
                         failures: dict[str, str], config: NpuConfig,
                         fx_before: str | None) -> Any:
    """Lower each GE partition; nodes in ``failures`` (and any node whose converter fails
    inside a partition) run eagerly in the top-level module."""
    top, parts, lowered = _split_and_lower(gm, report, dict(failures), config)
    for part, low in zip(parts, lowered):
        compiled = _try_load(low, config, fx_before, getattr(top, part), report)
        if compiled is not None:  # else the partition's FX module runs in eager
            report.ge_graphs.append(compiled)
            setattr(top, part, GEPartition(compiled))
    top.recompile()
    report.module = top
    if config.dump_dir:
        folder = Path(config.dump_dir) / report.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "partitioned.py").write_text(top.print_readable(print_output=False))
    return _boxed_module(top)


def _split_and_lower(gm: torch.fx.GraphModule, report: GraphReport, failures: dict[str, str],
                     config: NpuConfig) -> tuple[torch.fx.GraphModule, list[str], list]:
    report.fallbacks = fallbacks(gm, failures)
    report.failures = failures
    if config.fallback == "error" and report.fallbacks:
        raise FallbackError(_error_message(gm, report.fallbacks))
    for _ in range(MAX_PARTITION_ROUNDS):
        top, parts = split(gm, failures)
        try:
            lowered = [lower_graph(getattr(top, p), f"{report.name}_{p}", config) for p in parts]
            return top, parts, lowered
        except LoweringError as e:
            if e.node is None or e.node in failures or config.fallback == "error":
                raise
            failures[e.node] = e.reason
            report.fallbacks = fallbacks(gm, failures)
    raise LoweringError(f"graph {report.name}: partitioning did not converge")


def _error_message(gm: torch.fx.GraphModule, records: list[Fallback]) -> str:
    nodes = {n.name: n for n in gm.graph.nodes}
    lines = [f"  {describe(nodes[f.node])}: {f.reason}" for f in records]
    return ("fallback='error' and these ops have no GE lowering (use fallback='eager' to run "
            "them in eager):\n" + "\n".join(lines))


def _warn_fallbacks(report: GraphReport) -> None:
    """One warning per op type (count, reason, first source line); later graphs log only."""
    by_type = Counter(f.target for f in report.fallbacks)
    for target, count in by_type.items():
        first = next(f for f in report.fallbacks if f.target == target)
        msg = (f"npu_inductor: {count} {target} node(s) in graph {report.name} run in eager "
               f"(fallback): {first.reason}; first at {first.source}")
        log.info(msg)  # every time; the warning (printed by default) only once per op type
        if target not in _WARNED:
            _WARNED.add(target)
            _warn_at(msg, first.source)


class FallbackWarning(UserWarning):
    """Ops of a graph run in eager (``fallback="eager"``); filter with this category."""


_SOURCE = re.compile(r"(?P<file>.+):(?P<line>\d+) in ")


def _warn_at(msg: str, source: str) -> None:
    """Warn at the user's source line (``path:line in fn: code``): Dynamo's frames sit
    between the user and the compiler, so no ``stacklevel`` reaches the user's line."""
    m = _SOURCE.match(source)
    filename, lineno = (m["file"], int(m["line"])) if m else ("<npu_inductor>", 0)
    warnings.warn_explicit(msg, FallbackWarning, filename, lineno, module="npu_inductor")


def reset_fallback_warnings() -> None:
    """Warn again for op types already warned about (tests)."""
    _WARNED.clear()


@contextlib.contextmanager
def quiet_fallbacks() -> Iterator[None]:
    """Compile without fallback warnings, leaving the warn-once state as it was (explain)."""
    saved = set(_WARNED)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        _WARNED.clear()
        _WARNED.update(saved)


def load_graph(lowered: LoweredGraph, config: NpuConfig,
               cached: cache.CachedGraph | None = None,
               name: str | None = None) -> CompiledGraph:
    """Serialize ``lowered`` and load it on the configured device through its executor
    (``cached``: the .air, executor source and .om a cache entry holds for it)."""
    device = get_device(config.device, config.device_id)
    plan = current_plan() if device.kind == "acl" else None
    gears = plan.gears_for(lowered.graph, lowered.data_inputs) if plan else None
    if cached is None:
        air = to_air(lowered.graph)
        source = codegen.executor_source(lowered.graph, device.kind, gears)
        om = (compile_om(lowered.graph, air, config, device.soc_name, gears)
              if device.kind == "acl" else None)
    else:
        air, source, om = cached.air, cached.source, cached.om
    # a cached graph's name from its executor (CachedLowered parses the .air only when asked)
    module = codegen.load_executor(source, name or lowered.graph.name)
    # the graph was checked against the device rules when built (or stored: same source)
    checked = device.acl.rules_checked() if device.kind == "host" else contextlib.nullcontext()
    with checked:
        executor = module.Executor(device, om if device.kind == "acl" else air)
    executor.source = source
    device.configure_model(executor.model_id, config)  # memory_plan / memory_limit
    return CompiledGraph(module.GRAPH_NAME, lowered, executor, air, om)


def write_dump(folder: Path, compiled: CompiledGraph, fx_before: str | None,
               fx_after: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    graph = compiled.lowered.graph
    (folder / f"{compiled.name}.air").write_bytes(compiled.air)
    (folder / f"{compiled.name}.pbtxt").write_text(to_pbtxt(graph))
    (folder / "ge_graph.txt").write_text(format_graph(graph))
    (folder / "fx_before_passes.py").write_text(fx_before or "")
    (folder / "fx_after_passes.py").write_text(fx_after)
    (folder / "executor.py").write_text(compiled.executor.source)
    compiled.executor.device.write_memory_plan(compiled.executor.model_id,
                                               folder / "memory_plan.json")
    from npu_inductor.runtime.host_codegen import write_source  # host device: generated run
    write_source(compiled.executor.device, compiled.executor.model_id, folder / "host_model.py")


# ---- compile cache (npu_inductor/cache.py) ----------------------------------------------------
@dataclass(frozen=True)
class _Lookup:
    root: Path
    key: str
    entry: cache.Entry | None


def _cache_lookup(gm: torch.fx.GraphModule, config: NpuConfig,
                  report: GraphReport) -> _Lookup | None:
    """The cache entry for ``gm`` (None when the cache is off)."""
    if config.compare:  # the bisector needs the lowering's FX -> GE map, entries hold none
        return None
    root = cache.cache_root(config)
    if root is None or not cache.prepare_root(root):
        return None
    key = cache_key(gm, config, get_device(config.device, config.device_id).kind)
    entry = cache.load(root, key)
    report.cache = "hit" if entry is not None else "miss"
    cache.count(root, report.cache)
    log.info("npu_inductor cache %s for graph %s (key %s)", report.cache, report.name, key[:16])
    return _Lookup(root, key, entry)


def _from_cache(gm: torch.fx.GraphModule, lookup: _Lookup, report: GraphReport,
                config: NpuConfig, fx_before: str | None) -> Any:
    """Load the entry's GE graphs in place of lowering ``gm`` (None: compile instead)."""
    entry = lookup.entry
    if entry is None:
        return None
    if not entry.failures and len(entry.graphs) == 1:
        compiled = _load_cached(entry.graphs[0], config, fx_before, gm, report.name)
        report.ge_graphs.append(compiled)
        return _boxed(compiled)
    report.failures = dict(entry.failures)
    report.fallbacks = fallbacks(gm, entry.failures)
    top, parts = split(gm, entry.failures)
    if len(parts) != len(entry.graphs):  # cannot happen for an entry this code wrote
        report.cache, report.fallbacks, report.failures = "miss", [], {}
        return None
    for part, graph in zip(parts, entry.graphs):
        compiled = _load_cached(graph, config, fx_before, getattr(top, part),
                                f"{report.name}_{part}")
        report.ge_graphs.append(compiled)
        setattr(top, part, GEPartition(compiled))
    top.recompile()
    report.module = top
    return _boxed_module(top)


class CachedLowered(LoweredGraph):
    """A cached graph's ``LoweredGraph``: its GE ``graph`` is parsed from the ``.air`` on
    first use (reports, dumps, gears), not on every load: the device parses its own copy
    to load it, and a warm start needs only the input and output mapping."""

    def __init__(self, cached: cache.CachedGraph) -> None:
        for name, value in (("data_inputs", cached.data_inputs), ("outputs", cached.outputs),
                            ("decisions", cached.decisions), ("soc", cached.soc),
                            ("fx_edges", {}), ("_air", cached.air)):
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:  # only for attributes not set: ``graph``
        if name != "graph":
            raise AttributeError(name)
        graph = from_air(self.__dict__["_air"])
        object.__setattr__(self, "graph", graph)
        return graph


def _load_cached(graph: cache.CachedGraph, config: NpuConfig, fx_before: str | None,
                 gm: torch.fx.GraphModule, name: str) -> CompiledGraph:
    return _load(CachedLowered(graph), config, fx_before, gm, graph, name)


def _cache_store(lookup: _Lookup, report: GraphReport, config: NpuConfig) -> None:
    """Store what ``report``'s graph compiled to; graphs that fell back whole (a GE graph
    that failed to load) or return non-JSON constants are not stored."""
    parts = max(len(report.ge_graphs), 1)
    if report.module is not None and len(_partitions_of(report.module)) != parts:
        return
    graphs = []
    for g in report.ge_graphs:
        if not all(s.kind != "const" or cache.jsonable(s.value) for s in g.lowered.outputs):
            return
        plan = g.executor.device.memory_plan(g.executor.model_id)
        graphs.append(cache.CachedGraph(g.air, g.executor.source, g.om, g.lowered.data_inputs,
                                        g.lowered.outputs, plan, g.lowered.decisions,
                                        g.lowered.soc))
    if not graphs:
        return
    try:
        entry = cache.Entry(tuple(graphs), dict(report.failures), tuple(report.decisions))
        cache.store(lookup.root, lookup.key, entry, config.cache_size_limit)
    except OSError as e:
        log.warning("npu_inductor cache: cannot write an entry to %s: %s", lookup.root, e)


def _partitions_of(top: torch.fx.GraphModule) -> list[str]:
    return [n.target for n in top.graph.nodes if n.op == "call_module"]


def runner_from_cache(root: str, key: str, config: NpuConfig, kind: str) -> Any:
    """The boxed runner of a whole-graph cache entry (AOTAutograd cache hit: no FX graph
    at hand). Raises ``CacheEntryError`` when the entry is gone or unusable."""
    name = f"{kind}_{next(_GRAPH_IDS)}"
    entry = cache.load(Path(root), key)
    if entry is None or entry.failures or len(entry.graphs) != 1:
        raise cache.CacheEntryError(f"npu_inductor cache entry {key[:16]} is not loadable")
    report = GraphReport(name, kind, cache="hit", decisions=list(entry.pass_decisions))
    cache.count(Path(root), "hit")
    log.info("npu_inductor cache hit for graph %s (key %s, AOTAutograd cache)", name, key[:16])
    compiled = _load_cached(entry.graphs[0], config, None, None, name)
    report.ge_graphs.append(compiled)
    for hook in REPORT_HOOKS:
        hook(report)
    runner = _boxed(compiled)
    runner.cache_entry = (root, key)
    return runner
