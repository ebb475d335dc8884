"""Accuracy bisector: run each GE graph op by op on the host device next to its FX graph in
eager, and report the first GE op whose output diverges, with the user's source line.

    report = npu_inductor.debug.compare(model, *inputs)
    print(report)            # per GE graph: values compared, the first divergence if any
    report.divergence        # the first ``Divergence`` (None when everything matches)

``NPU_INDUCTOR_COMPARE=1`` (option ``compare``) does the same on every call of every GE
graph of a run (forward and backward) and reports divergences through the
``npu_inductor`` logger and a warning.

[Note: how the bisector lines GE up with FX]
The lowering records which GE edge (``"op:index"``) holds each FX node's value
(``LoweredGraph.fx_edges``). On a call, the FX graph the GE graph was lowered from runs in
eager (``torch.fx.Interpreter``) on copies of the inputs, keeping every node's value, and
again in float64 when its floating inputs allow. The GE graph, parsed back from its
``.air`` bytes like a device would load it, then runs kernel by kernel with the host
device's kernels (no memory plan); after each kernel, every FX node whose value it
produced is compared with eager. A value diverges when it is not close to eager (``rtol``
/ ``atol`` per dtype) and, when the float64 reference exists, its error against float64
is also more than twice eager's (so a more exact GE result is not blamed). Later ops read
the diverged value, so the first divergence is the one reported.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from npu_inductor.ge.serialize import from_air
from npu_inductor.lowering.lower import source_line
from npu_inductor.runtime.host_model import HostModel

log = logging.getLogger("npu_inductor")

# (rtol, atol) by dtype; integer and bool values must be equal
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3), torch.bfloat16: (5e-2, 1e-2),
    torch.complex128: (1e-7, 1e-7), torch.complex64: (1e-4, 1e-5),
}


@dataclass(frozen=True)
class Divergence:
    """The first GE op of a graph whose output is not close to eager's."""

    graph: str
    ge_op: str
    ge_type: str
    fx_node: str
    target: str
    source: str
    detail: str  # mismatch count, largest error, first mismatching element

    def __str__(self) -> str:
        return (f"GE op {self.ge_op!r} ({self.ge_type}) in graph {self.graph} diverges from "
                f"eager at FX node {self.fx_node!r} ({self.target}): {self.detail}\n"
                f"  at {self.source}")


@dataclass(frozen=True)
class GraphComparison:
    """One call of one GE graph, compared op by op."""

    graph: str
    ops_run: int
    values_compared: int
    divergence: Divergence | None
    float64_reference: bool

    def __str__(self) -> str:
        ref = "eager (+ float64 reference)" if self.float64_reference else "eager"
        head = (f"{self.graph}: {self.ops_run} GE ops run, {self.values_compared} FX values "
                f"compared with {ref}")
        return f"{head}: {self.divergence}" if self.divergence else f"{head}: no divergence"


@dataclass
class CompareReport:
    """Every GE graph call made by ``compare``, in call order."""

    graphs: list[GraphComparison] = field(default_factory=list)

    @property
    def divergence(self) -> Divergence | None:
        return next((g.divergence for g in self.graphs if g.divergence), None)

    def __str__(self) -> str:
        if not self.graphs:
            return "no GE graph ran"
        return "\n".join(str(g) for g in self.graphs)


# ---- running a comparison -----------------------------------------------------------------
@dataclass
class _Session:
    results: list[GraphComparison]
    rtol: float | None
    atol: float | None


_SESSIONS: list[_Session] = []


def compare(fn: Callable, *args: Any, rtol: float | None = None, atol: float | None = None,
            options: dict | None = None, **kwargs: Any) -> CompareReport:
    """Compile ``fn`` with ``backend="npu"`` (``options`` plus ``compare=True``), call it
    on ``args``/``kwargs`` and compare every GE graph that runs, op by op, with its FX
    graph in eager. ``rtol``/``atol`` override ``TOLERANCES``. Resets Dynamo before and
    after (like ``explain``)."""
    session = _Session([], rtol, atol)
    torch._dynamo.reset()
    _SESSIONS.append(session)
    try:
        torch.compile(fn, backend="npu", options={**(options or {}), "compare": True})(
            *args, **kwargs)
    finally:
        _SESSIONS.remove(session)
        torch._dynamo.reset()
    return CompareReport(session.results)


def checker(gm: torch.fx.GraphModule, compiled: Any) -> Callable[[list[Any]], None]:
    """The per-call hook of a GE graph compiled with ``compare=True``: compare it with
    ``gm`` (the FX graph it was lowered from) on the call's inputs, then report."""
    def check(args: list[Any]) -> None:
        session = _SESSIONS[-1] if _SESSIONS else None
        rtol, atol = (session.rtol, session.atol) if session else (None, None)
        result = compare_graph(gm, compiled, list(args), rtol=rtol, atol=atol)
        if session is not None:
            session.results.append(result)
        else:
            _report(result)
    return check


def _report(result: GraphComparison) -> None:
    if result.divergence is None:
        log.info("npu_inductor compare: %s", result)
        return
    msg = f"npu_inductor compare: {result}"
    log.warning(msg)
    warnings.warn(msg, stacklevel=2)


def compare_graph(gm: torch.fx.GraphModule, compiled: Any, args: list[Any], *,
                  rtol: float | None = None, atol: float | None = None) -> GraphComparison:
    """Run ``compiled`` (a ``CompiledGraph``) op by op next to ``gm`` on ``args`` (the FX
    graph's inputs; not modified) and find the first diverging op."""
    with torch.no_grad():
        eager = _run_fx(gm, args)
        ref64 = _run_fx64(gm, args)
        nodes = {n.name: n for n in gm.graph.nodes}
        by_edge: dict[str, list[str]] = {}
        for fx_name, edge in compiled.lowered.fx_edges.items():
            if fx_name in eager:
                by_edge.setdefault(edge, []).append(fx_name)
        inputs = [_copy(_as_tensor(args[i])) for i in compiled.lowered.data_inputs]
        ops_run = compared = 0
        for step, outs in _run_ge(compiled.air, inputs):
            ops_run += 1
            for edge, value in outs.items():
                for fx_name in by_edge.get(edge, ()):
                    compared += 1
                    detail = _mismatch(value, eager[fx_name], (ref64 or {}).get(fx_name),
                                       rtol, atol)
                    if detail is not None:
                        node = nodes[fx_name]
                        div = Divergence(compiled.name, step.op.name, step.op.type, fx_name,
                                         str(node.target), source_line(node), detail)
                        return GraphComparison(compiled.name, ops_run, compared, div,
                                               ref64 is not None)
    return GraphComparison(compiled.name, ops_run, compared, None, ref64 is not None)


# ---- the FX side --------------------------------------------------------------------------
class _Recorder(torch.fx.Interpreter):
    """Runs an FX graph, keeping a copy of every call's tensor result by node name."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        out = super().run_node(n)
        if n.op == "call_function" and isinstance(out, torch.Tensor):
            self.values[n.name] = out.detach().clone()  # later in-place ops must not reach it
        return out


def _run_fx(gm: torch.fx.GraphModule, args: list[Any]) -> dict[str, Any]:
    rec = _Recorder(gm)
    rec.run(*[_copy(a) for a in args])
    return rec.values


def _run_fx64(gm: torch.fx.GraphModule, args: list[Any]) -> dict[str, Any] | None:
    """The FX graph in float64 (complex128), or None when it has no floating input or
    does not run in float64 (ops with a fixed dtype)."""
    wide = [_widen(a) for a in args]
    if not any(isinstance(a, torch.Tensor) and a.dtype in (torch.float64, torch.complex128)
               for a in wide):
        return None
    try:
        return _run_fx(gm, wide)
    except Exception as e:  # a reference we cannot have is not an error
        log.debug("npu_inductor compare: no float64 reference: %s", e)
        return None


def _widen(a: Any) -> Any:
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return a.detach().to(torch.float64)
    if isinstance(a, torch.Tensor) and a.is_complex():
        return a.detach().to(torch.complex128)
    return a


def _copy(a: Any) -> Any:
    return a.detach().clone() if isinstance(a, torch.Tensor) else a


def _as_tensor(x: Any) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=torch.int64)


# ---- the GE side --------------------------------------------------------------------------
def _run_ge(air: bytes, inputs: list[torch.Tensor]) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Load ``air`` on the host device and run it kernel by kernel; yields each step with
    its outputs by GE edge (cast to the dtypes the graph declares)."""
    model = HostModel(from_air(air), None, memory_plan=False)
    vals: list[Any] = [None] * model.num_slots
    for slot, t in model.consts.items():
        vals[slot] = t
    for slot, t in zip(model.data_slots, inputs):
        vals[slot] = t
    edge_of = {slot: edge for edge, slot in model.slot_of.items()}
    for st in model.op_steps:
        result = st.fn(*[_fetch(vals, a) for a in st.args], **st.attrs)
        results = (result,) if len(st.outs) == 1 else tuple(result)
        outs = {}
        for slot, r, (dtype, _) in zip(st.outs, results, st.sigs):
            vals[slot] = r
            if isinstance(r, torch.Tensor):
                outs[edge_of[slot]] = r.to(dtype) if dtype is not None else r
        yield st, outs


def _fetch(vals: list[Any], a: Any) -> Any:
    if a is None:
        return None
    return [vals[s] for s in a] if isinstance(a, tuple) else vals[a]


# ---- deciding divergence ------------------------------------------------------------------
def _mismatch(ge: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor | None,
              rtol: float | None, atol: float | None) -> str | None:
    """Why ``ge`` is not eager's ``ref`` (None when it is close enough)."""
    if tuple(ge.shape) != tuple(ref.shape):
        return f"shape {tuple(ge.shape)} vs eager {tuple(ref.shape)}"
    if ge.dtype != ref.dtype:
        return f"dtype {ge.dtype} vs eager {ref.dtype}"
    if not (ref.is_floating_point() or ref.is_complex()):
        bad = ge != ref
        return _describe(bad, ge, ref) if bool(bad.any()) else None
    default = TOLERANCES.get(ref.dtype, (1e-5, 1e-5))
    rtol = default[0] if rtol is None else rtol
    atol = default[1] if atol is None else atol
    wide = torch.complex128 if ref.is_complex() else torch.float64
    a, e = ge.to(wide), ref.to(wide)
    bad = ~torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if bool(bad.any()) and ref64 is not None and ref64.shape == ref.shape:
        r = ref64.to(wide)
        err, eager_err = (a - r).abs(), (e - r).abs()
        worse = err > 2 * eager_err + atol + rtol * r.abs()
        bad &= worse | (torch.isnan(a) != torch.isnan(e))
    return _describe(bad, ge, ref) if bool(bad.any()) else None


def _describe(bad: torch.Tensor, ge: torch.Tensor, ref: torch.Tensor) -> str:
    idx = tuple(int(i) for i in bad.nonzero()[0]) if bad.dim() else ()
    diff = (ge.to(torch.complex128 if ref.is_complex() else torch.float64)
            - ref.to(torch.complex128 if ref.is_complex() else torch.float64)).abs()
    worst = diff[bad].max().item() if bad.any() else 0.0
    worst_s = "nan" if math.isnan(worst) else f"{worst:.3g}"
    return (f"{int(bad.sum())}/{bad.numel()} elements differ, max abs error {worst_s}; "
            f"first at index {list(idx)}: GE {ge[idx].item()!r} vs eager {ref[idx].item()!r}")

