"""Fusion report: per model, GE op counts with fusions on and off and the counters fired.

    from npu_inductor.graph_passes import fusion_report
    fusion_report(model, inputs)   # {"fusions_on": {...}, "fusions_off": {...}, "fired": {...}}

Each side compiles the model (inference, ``torch.no_grad``) with
``options={"fusions": True|False, **options}`` and sums the GE op types of every graph.
"""

from __future__ import annotations

import collections
from typing import Any

import torch

from npu_inductor.graph_passes.common import counters


def _op_counts(model: torch.nn.Module, inputs: tuple, options: dict) -> dict[str, int]:
    from npu_inductor.compile_fx import COMPILE_HOOKS  # lazy: compile_fx imports this package

    seen: list = []
    COMPILE_HOOKS.append(seen.append)
    try:
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(model, backend="npu", options=options)(*inputs)
    finally:
        COMPILE_HOOKS.remove(seen.append)
    total: collections.Counter[str] = collections.Counter()
    for compiled in seen:
        total.update(compiled.lowered.graph.op_counts())
    return dict(total)


def fusion_report(model: torch.nn.Module, inputs: tuple,
                  options: dict | None = None) -> dict[str, Any]:
    """GE op counts (per type and ``total``, Data/Const/NetOutput excluded) with fusions on
    vs off, and the pass counters the fused compile bumped."""
    options = dict(options or {})
    off = _op_counts(model, inputs, {**options, "fusions": False})
    before = collections.Counter(counters)
    on = _op_counts(model, inputs, {**options, "fusions": True})
    fired = {k: v for k, v in (collections.Counter(counters) - before).items() if v}
    result = {}
    for name, counts in (("fusions_off", off), ("fusions_on", on)):
        compute = {k: v for k, v in counts.items()
                   if k not in ("Data", "RefData", "Const", "NetOutput")}
        result[name] = {**compute, "total": sum(compute.values())}
    result["fired"] = fired
    return result
