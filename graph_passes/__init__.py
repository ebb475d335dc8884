"""FX -> FX passes, run in the order of ``PASSES`` by ``run_passes``.

The runner logs each pass with node counts before/after, dumps the FX graph before and
after each pass into ``<dump_dir>/<graph>/passes/`` when ``dump_dir`` is set, and runs the
verifier (``verify.py``) after each pass when ``verify`` (``NPU_INDUCTOR_VERIFY=1``) is on.
Every replacement bumps a named counter in ``counters`` (tests assert on them).
Fusion passes (``FUSIONS``) run only with ``fusions=True`` (the default).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from pathlib import Path

import torch

from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import counters, lint_once, real_inputs
from npu_inductor.graph_passes.constant_fold import constant_fold
from npu_inductor.graph_passes.cse import cse
from npu_inductor.graph_passes.dce import dce
from npu_inductor.graph_passes.freeze import freeze_parameters
from npu_inductor.graph_passes.fuse_attention import fuse_attention
from npu_inductor.graph_passes.fuse_conv_bn import fuse_conv_bn
from npu_inductor.graph_passes.fuse_flash_attention_score import fuse_flash_attention_score
from npu_inductor.graph_passes.fuse_gelu import fuse_gelu
from npu_inductor.graph_passes.fuse_matmul import fuse_matmul
from npu_inductor.graph_passes.fuse_projections import fuse_projections
from npu_inductor.graph_passes.fuse_rms_norm import fuse_add_rms_norm, fuse_rms_norm
from npu_inductor.graph_passes.fuse_rotary import fuse_rotary
from npu_inductor.graph_passes.fuse_swiglu import fuse_swiglu
from npu_inductor.graph_passes.input_writes import place_input_writes
from npu_inductor.graph_passes.moe import moe
from npu_inductor.graph_passes.noop import remove_noops
from npu_inductor.graph_passes.report import fusion_report
from npu_inductor.graph_passes.verify import GraphVerificationError, verify

log = logging.getLogger("npu_inductor.passes")

Pass = Callable[[torch.fx.GraphModule, NpuConfig], torch.fx.GraphModule]

FUSIONS: frozenset[Pass] = frozenset({
    fuse_conv_bn, fuse_rms_norm, fuse_add_rms_norm, fuse_rotary, fuse_attention,
    fuse_flash_attention_score, fuse_swiglu, fuse_gelu, fuse_matmul, fuse_projections,
})

PASSES: list[Pass] = [
    freeze_parameters,
    remove_noops,
    constant_fold,
    cse,
    dce,
    moe,  # MoE grouped matmuls and expert-id sort in the device's forms (not a fusion)
    fuse_conv_bn,  # before noop/matmul rewrites: matches aten.convolution + batch norm
    fuse_rms_norm,
    fuse_add_rms_norm,  # consumes rms_norm nodes whose input is a residual add
    fuse_rotary,
    fuse_attention,
    fuse_flash_attention_score,  # training graphs (fp16/bf16), forward and backward
    fuse_swiglu,  # merges frozen gate/up mm pairs, so before fuse_matmul
    fuse_gelu,
    fuse_matmul,  # folds the transposes/bias the other fusions left
    remove_noops,
    fuse_projections,  # groups fuse_matmul's projections of one input (no-op views gone)
    cse,  # fusions insert identical views (cos/sin per layer)
    dce,
    place_input_writes,  # last: each copy_ into an input right where its value is ready
]

_GRAPH_IDS = itertools.count()


def _dump(folder: Path | None, step: int, name: str, gm: torch.fx.GraphModule) -> None:
    if folder is not None:
        (folder / f"{step:02d}_{name}.py").write_text(gm.print_readable(print_output=False))


def run_passes(gm: torch.fx.GraphModule, config: NpuConfig,
               name: str | None = None) -> torch.fx.GraphModule:
    """Run ``PASSES`` over ``gm`` (fusions only when ``config.fusions``). Per-pass dumps go
    to ``<dump_dir>/<name>/passes/`` (the graph's dump folder)."""
    folder = None
    if config.dump_dir:
        sub = Path(name) if name else Path("passes_unnamed") / f"graph_{next(_GRAPH_IDS)}"
        folder = Path(config.dump_dir) / sub / "passes"
        folder.mkdir(parents=True, exist_ok=True)
        _dump(folder, 0, "input", gm)
    with lint_once(lambda: gm):  # the verifier, when on, still lints after every pass
        for step, p in enumerate(PASSES, 1):
            if p in FUSIONS and not config.fusions:
                continue
            before, start = len(gm.graph.nodes), time.perf_counter()
            gm = p(gm, config)
            log.info("pass %-18s %4d -> %4d nodes (%.1f ms)", p.__name__, before,
                     len(gm.graph.nodes), 1e3 * (time.perf_counter() - start))
            _dump(folder, step, p.__name__, gm)
            if config.verify:
                verify(gm, after=p.__name__)
    return gm


__all__ = ["FUSIONS", "PASSES", "GraphVerificationError", "counters", "fusion_report",
           "real_inputs", "run_passes", "verify"]
