"""``npu_inductor.explain(fn, *args, **kwargs)``: what torch.compile(backend="npu") makes of
``fn``: Dynamo graph breaks with reasons, the GE graphs with op counts by GE type, and the
ops that fall back to eager with reasons.

A last section reports the GE graphs on the target SoC (``device_report``).
``fn`` runs twice: once under ``torch._dynamo.explain`` (graph breaks), once compiled with
this backend (GE graphs and fallbacks). Like ``torch._dynamo.explain``, it resets Dynamo
before and after, so earlier compiled code recompiles on its next call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from npu_inductor.buckets import REPORTS as bucket_reports
from npu_inductor.buckets import BucketReport, install_compile_callbacks
from npu_inductor.compile_fx import GraphReport, quiet_fallbacks, record_reports
from npu_inductor.config import resolve, target_soc
from npu_inductor.device_rules_report import DeviceReport, from_reports
from npu_inductor.graph_passes.partition import Fallback


@dataclass(frozen=True)
class GraphBreak:
    reason: str
    user_stack: tuple[str, ...]


@dataclass(frozen=True)
class GEGraphSummary:
    """One GE graph: its name, the FX graph kind it came from, op counts by GE type."""

    name: str
    kind: str
    op_counts: dict[str, int]

    @property
    def num_ops(self) -> int:
        return sum(self.op_counts.values())


@dataclass
class ExplainReport:
    dynamo_graph_count: int = 0
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    ge_graphs: list[GEGraphSummary] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    buckets: list[BucketReport] = field(default_factory=list)
    device: DeviceReport | None = None  # ops by kernel kind on the target SoC, device rules
    cache_hits: int = 0  # FX graphs loaded from the compile cache (npu_inductor/cache.py)
    cache_misses: int = 0  # FX graphs compiled and stored

    @property
    def fallback_counts(self) -> dict[str, int]:
        """Fallback node count per op type."""
        return dict(Counter(f.target for f in self.fallbacks))

    def __str__(self) -> str:
        return "\n".join([*self._dynamo_lines(), *self._ge_lines(), *self._fallback_lines(),
                          *self._bucket_lines(), *self._device_lines()])

    def _device_lines(self) -> list[str]:
        return str(self.device).splitlines() if self.device is not None else []

    def _dynamo_lines(self) -> list[str]:
        lines = [f"Dynamo graphs: {self.dynamo_graph_count}",
                 f"Graph breaks: {len(self.graph_breaks)}"]
        for i, b in enumerate(self.graph_breaks, 1):
            lines.append(f"  {i}. {b.reason}")
            lines.extend(f"       at {frame}" for frame in b.user_stack[-2:])
        return lines

    def _ge_lines(self) -> list[str]:
        lines = [f"GE graphs: {len(self.ge_graphs)}",
                 f"Compile cache: {self.cache_hits} hit(s), {self.cache_misses} miss(es)"]
        for g in self.ge_graphs:
            counts = ", ".join(f"{t} x{n}" for t, n in sorted(g.op_counts.items(),
                                                             key=lambda kv: (-kv[1], kv[0])))
            lines.append(f"  {g.name} ({g.kind}, {g.num_ops} ops): {counts}")
        return lines

    def _fallback_lines(self) -> list[str]:
        lines = [f"Fallback ops: {len(self.fallbacks)} node(s)"]
        for target, count in sorted(self.fallback_counts.items()):
            first = next(f for f in self.fallbacks if f.target == target)
            lines.append(f"  {target} x{count}: {first.reason}")
            lines.append(f"       at {first.source}")
        return lines


    def _bucket_lines(self) -> list[str]:
        lines = []
        for b in self.buckets:
            lines.append(f"Shape buckets on {', '.join(b.dims)}: {b.compiles} compile(s), "
                         f"{b.calls} call(s), padding overhead {b.padding_overhead:.1%}")
            lines.extend(f"  {note}" for note in b.notes)
            lines.extend(f"  compiled exactly: {why}" for why in b.exact_reasons)
        return lines




def _summaries(reports: list[GraphReport]) -> list[GEGraphSummary]:
    return [GEGraphSummary(g.name, r.kind, _op_counts(g.lowered.graph))
            for r in reports for g in r.ge_graphs]


def _op_counts(graph: Any) -> dict[str, int]:
    skip = {"Data", "RefData", "NetOutput"}  # graph plumbing, not work
    return dict(Counter(op.type for op in graph.ops if op.type not in skip))


def _dynamo_part(fn: Callable, args: tuple, kwargs: dict, report: ExplainReport) -> None:
    out = torch._dynamo.explain(fn)(*args, **kwargs)
    report.dynamo_graph_count = out.graph_count
    report.graph_breaks = [GraphBreak(str(b.reason), tuple(str(f) for f in b.user_stack))
                           for b in out.break_reasons]


def explain(fn: Callable, *args: Any, **kwargs: Any) -> ExplainReport:
    """Compile ``fn`` with ``backend="npu"``, run it on ``args``/``kwargs``, and report
    graph breaks, GE graphs (op counts by GE type) and eager fallbacks with reasons."""
    report = ExplainReport()
    _dynamo_part(fn, args, kwargs, report)
    torch._dynamo.reset()
    install_compile_callbacks()  # reset() dropped set_buckets' (its tensors are in args)
    first_bucket_report = len(bucket_reports)
    try:
        with record_reports() as reports, quiet_fallbacks():  # the report lists them
            # fallback="eager" whatever the settings: explain reports fallbacks, not raises
            torch.compile(fn, backend="npu", options={"fallback": "eager"})(*args, **kwargs)
    finally:
        torch._dynamo.reset()
    report.ge_graphs = _summaries(reports)
    report.fallbacks = [f for r in reports for f in r.fallbacks]
    report.cache_hits = sum(r.cache == "hit" for r in reports)
    report.cache_misses = sum(r.cache == "miss" for r in reports)
    report.buckets = bucket_reports[first_bucket_report:]
    report.device = from_reports(reports, target_soc(resolve({"fallback": "eager"})))
    return report
