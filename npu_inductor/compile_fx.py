"""Compile one aten FX graph: passes -> lower to GE -> serialize -> render executor -> load.

The returned callable is boxed (AOTAutograd's calling convention): it takes the list of
graph inputs and returns the list of graph outputs.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from npu_inductor import codegen
from npu_inductor.atc import compile_om
from npu_inductor.config import NpuConfig
from npu_inductor.ge import format_graph, to_air, to_pbtxt
from npu_inductor.graph_passes import run_passes
from npu_inductor.lowering import LoweredGraph, lower_graph
from npu_inductor.runtime import get_device

log = logging.getLogger("npu_inductor")
_GRAPH_IDS = itertools.count()
# Callbacks run with every CompiledGraph (tests and explain() observe compiles here).
COMPILE_HOOKS: list[Callable[["CompiledGraph"], None]] = []


@dataclass
class CompiledGraph:
    """A GE graph loaded on a device, callable with the FX graph's inputs."""

    name: str
    lowered: LoweredGraph
    executor: Any
    air: bytes

    def __call__(self, args: list[Any]) -> list[Any]:
        ge_outs = self.executor.run([args[i] for i in self.lowered.data_inputs])
        outs = []
        for slot in self.lowered.outputs:
            if slot.kind == "ge":
                outs.append(ge_outs[slot.index])
            elif slot.kind == "input":
                outs.append(args[slot.index])
            else:
                outs.append(slot.value)
        args.clear()
        return outs


def _boxed(compiled: CompiledGraph) -> Any:
    def run(args: list[Any]) -> list[Any]:
        return compiled(args)

    run._boxed_call = True  # type: ignore[attr-defined]
    run.compiled_graph = compiled  # type: ignore[attr-defined]
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
    gm = run_passes(gm, config)
    lowered = lower_graph(gm, name, config)
    compiled = load_graph(lowered, config)
    log.info("compiled GE graph %s: %d ops", name, len(lowered.graph.ops))
    for hook in COMPILE_HOOKS:
        hook(compiled)
    if config.dump_dir:
        write_dump(Path(config.dump_dir) / name, compiled, before,
                   gm.print_readable(print_output=False))
    return _boxed(compiled)


def load_graph(lowered: LoweredGraph, config: NpuConfig) -> CompiledGraph:
    """Serialize ``lowered`` and load it on the configured device through its executor."""
    device = get_device(config.device)
    air = to_air(lowered.graph)
    source = codegen.executor_source(lowered.graph, device.kind)
    module = codegen.load_executor(source, lowered.graph.name)
    model = compile_om(lowered.graph, air, config) if device.kind == "acl" else air
    executor = module.Executor(device, model)
    executor.source = source
    device.configure_model(executor.model_id, config)  # memory_plan / memory_limit
    return CompiledGraph(lowered.graph.name, lowered, executor, air)


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
