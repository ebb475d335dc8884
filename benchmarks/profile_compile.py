"""Where graph mode's compile time goes: cProfile over one cold compile per model."""

from __future__ import annotations

import cProfile
import io
import pstats
from pathlib import Path

import torch

from npu_inductor.benchmarks.runner import Settings, prepare
from npu_inductor.benchmarks.zoo import ZooModel

TOP = 30


def profile_cold_compile(entry: ZooModel, settings: Settings) -> pstats.Stats:
    """cProfile of ``torch.compile(model, backend="npu")``'s first inference call."""
    case = prepare(entry, "inference", settings)
    torch._dynamo.reset()
    compiled = torch.compile(case.model, backend="npu")
    prof = cProfile.Profile()
    with torch.no_grad():
        prof.enable()
        compiled(*case.inputs)
        prof.disable()
    return pstats.Stats(prof)


def profile_models(models: list[ZooModel], settings: Settings, out: Path | None) -> str:
    """Top functions by cumulative time per model; also written to ``out`` when given."""
    texts = []
    for entry in models:
        buf = io.StringIO()
        stats = profile_cold_compile(entry, settings)
        stats.stream = buf  # type: ignore[attr-defined]
        stats.sort_stats("cumulative").print_stats(TOP)
        texts.append(f"== cold compile profile: {entry.name}\n{buf.getvalue()}")
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            stats.dump_stats(str(out / f"compile_{entry.name}.prof"))
    return "\n".join(texts)
