"""FX -> FX passes, run in the order of ``PASSES`` by ``run_passes``."""

from __future__ import annotations

import logging
from typing import Callable

import torch

from npu_inductor.config import NpuConfig

log = logging.getLogger("npu_inductor.passes")

Pass = Callable[[torch.fx.GraphModule, NpuConfig], torch.fx.GraphModule]

PASSES: list[Pass] = []


def run_passes(gm: torch.fx.GraphModule, config: NpuConfig) -> torch.fx.GraphModule:
    for p in PASSES:
        before = len(gm.graph.nodes)
        gm = p(gm, config)
        log.debug("pass %s: %d -> %d nodes", p.__name__, before, len(gm.graph.nodes))
    return gm
