"""Where graph mode's compile time goes: cProfile over one cold compile per model."""

from __future__ import annotations

import cProfile
import io
import pstats
from pathlib import Path

import torch

from npu_inductor.benchmarks.runner import Settings, prepare, step_fn
from npu_inductor.benchmarks.zoo import ZooModel

TOP = 30
# pstats restriction selecting the project's own functions (paths of its top-level folders)
OURS = r"(npu_inductor|graph_passes|lowering|runtime|codegen_templates)/"


def profile_cold_compile(entry: ZooModel, mode: str, settings: Settings) -> pstats.Stats:
    """cProfile of graph mode's first call (inference) or first training step."""
    case = prepare(entry, mode, settings)
    model = case.model
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="npu")
    opt = torch.optim.SGD(model.parameters(), lr=0.0) if case.train else None
    step = step_fn(case, model, compiled, opt)
    prof = cProfile.Profile()
    prof.enable()
    step(False)
    prof.disable()
    return pstats.Stats(prof)


def profile_models(models: list[ZooModel], modes: list[str], settings: Settings,
                   out: Path | None) -> str:
    """Top functions by cumulative time per model and mode; the npu_inductor-only view
    shows what graph mode adds on top of Dynamo and AOTAutograd."""
    texts = []
    for entry in models:
        for mode in modes:
            if mode == "dynamic" or (mode == "training" and not entry.trainable):
                continue
            stats = profile_cold_compile(entry, mode, settings)
            texts.append(f"== cold compile profile: {entry.name}/{mode}\n"
                         + _top(stats) + _top(stats, OURS))
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                stats.dump_stats(str(out / f"compile_{entry.name}_{mode}.prof"))
    return "\n".join(texts)


def _top(stats: pstats.Stats, *restrictions: str) -> str:
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(*restrictions, TOP)
    return buf.getvalue()
