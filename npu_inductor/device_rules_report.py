"""``npu_inductor.device_report(model, *inputs)``: how the compiled GE graphs sit on the
target SoC (option ``soc_version``, default ``Ascend910B1``).

For every GE graph: its ops by kernel kind on the SoC (AI Core, AI CPU, HCCL, unproven =
the kernel table has no evidence either way; structural = Data/Const/Reshape..., GE-local
with no kernel), which op types run on AI CPU or are unproven, and every device rule that
made the compiler lower something differently (e.g. fp32 attention kept unfused because
PromptFlashAttention has no fp32 kernel, an op computed in float32 because the SoC has no
bf16 kernel for it). The decisions are recorded where they are made (FX passes and
converters); ``explain`` shows the same section.
(Named ``device_rules_report.py``: a submodule ``device_report`` would shadow the function.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from npu_inductor.ge import soc as kernels

_LABELS = {"aicore": "AI Core", "aicpu": "AI CPU", "hccl": "HCCL", "unproven": "unproven",
           "structural": "structural"}


@dataclass(frozen=True)
class GraphDevice:
    """One GE graph on the target SoC."""

    name: str
    kind: str  # FX graph kind: inference / forward / backward
    soc: str
    counts: dict[str, int]  # kernel kind -> ops
    aicpu_ops: dict[str, int]  # op type -> count (AI CPU kernels)
    unproven_ops: dict[str, int]  # op type -> count (no evidence in the kernel table)
    decisions: tuple[kernels.Decision, ...] = ()

    def lines(self) -> list[str]:
        c = self.counts
        head = ", ".join(f"{c[k]} {_LABELS[k]}" for k in ("aicore", "aicpu", "unproven", "hccl"))
        out = [f"  {self.name} ({self.kind}, {self.soc}): {head} ({c['structural']} structural)"]
        for label, ops in (("AI CPU", self.aicpu_ops), ("unproven", self.unproven_ops)):
            if ops:
                listed = ", ".join(f"{t} x{n}" for t, n in sorted(ops.items()))
                out.append(f"    {label}: {listed}")
        out += [f"    rule {d}" for d in self.decisions]
        return out


@dataclass
class DeviceReport:
    """Every GE graph the model compiled to, on the target SoC."""

    soc: str
    graphs: list[GraphDevice] = field(default_factory=list)

    def total(self, kind: str) -> int:
        """Ops of one kernel kind (``aicore``, ``aicpu``, ``hccl``, ``unproven``) in all graphs."""
        return sum(g.counts[kind] for g in self.graphs)

    @property
    def decisions(self) -> list[kernels.Decision]:
        return [d for g in self.graphs for d in g.decisions]

    def __str__(self) -> str:
        lines = [f"Device report for {self.soc}: {len(self.graphs)} GE graph(s), "
                 f"{self.total('aicore')} AI Core, {self.total('aicpu')} AI CPU, "
                 f"{self.total('unproven')} unproven, {self.total('hccl')} HCCL op(s), "
                 f"{len(self.decisions)} device rule decision(s)"]
        for g in self.graphs:
            lines += g.lines()
        return "\n".join(lines)


def graph_device(compiled: Any, kind: str, pass_decisions: list[Any]) -> GraphDevice:
    """The ``GraphDevice`` of one ``CompiledGraph`` (``pass_decisions``: its FX graph's)."""
    lowered = compiled.lowered
    soc = lowered.soc or "Ascend910B1"
    graph = lowered.graph
    return GraphDevice(compiled.name, kind, soc, kernels.kernel_counts(graph, soc),
                       kernels.ops_of_kind(graph, soc, "aicpu"),
                       kernels.ops_of_kind(graph, soc, "unproven"),
                       tuple(pass_decisions) + tuple(lowered.decisions))


def from_reports(reports: list[Any], soc: str) -> DeviceReport:
    """A ``DeviceReport`` from the ``GraphReport`` objects of one compile."""
    return DeviceReport(soc, [graph_device(g, r.kind, r.decisions)
                              for r in reports for g in r.ge_graphs])


def device_report(model: Callable, *inputs: Any, options: dict[str, Any] | None = None,
                  **kwargs: Any) -> DeviceReport:
    """Compile ``model`` with ``backend="npu"`` (``options`` as for torch.compile; fallback
    forced to ``eager``), run it on ``inputs``, and report each GE graph's ops by kernel kind
    on the target SoC and the device rules that changed the lowering."""
    from npu_inductor.compile_fx import quiet_fallbacks, record_reports
    from npu_inductor.config import resolve, target_soc

    opts = {**(options or {}), "fallback": "eager"}
    soc = target_soc(resolve(opts))
    torch._dynamo.reset()
    try:
        with record_reports() as reports, quiet_fallbacks():
            torch.compile(model, backend="npu", options=opts)(*inputs, **kwargs)
    finally:
        torch._dynamo.reset()
    return from_reports(reports, soc)
