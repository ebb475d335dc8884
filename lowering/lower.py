"""FX (aten) graph -> GE graph: placeholders become ``Data``, each call becomes the GE ops
its converter emits, the output becomes ``NetOutput``."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.node import map_arg

from npu_inductor.config import NpuConfig, target_soc
from npu_inductor.ge.ir import Graph, GraphBuilder, Value
from npu_inductor.ge.soc import Decision
from npu_inductor.lowering.context import LoweringContext, static_shape
from npu_inductor.lowering.inplace import writes_input
from npu_inductor.lowering.output_views import output_only_views, split_view
from npu_inductor.lowering.registry import bind, lookup, refusal


class LoweringError(RuntimeError):
    """An FX node that cannot become GE ops; the message names the op and source line.
    ``node`` is the FX node's name when one node is to blame, ``reason`` the short why."""

    def __init__(self, message: str, node: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.node = node
        self.reason = reason or message


@dataclass(frozen=True)
class OutputSlot:
    """Where one FX output comes from: a GE output, a graph input, or a constant."""

    kind: str  # "ge" | "int" (a size computed in GE) | "input" | "const"
    #          | "input_view" | "ge_view" (views of an input / a GE output: lowering/output_views)
    index: int = 0
    value: Any = None


@dataclass(frozen=True)
class LoweredGraph:
    graph: Graph
    data_inputs: tuple[int, ...]  # FX placeholder positions feeding Data 0..n-1
    outputs: tuple[OutputSlot, ...]
    decisions: tuple[Decision, ...] = ()  # device rules that changed the lowering
    soc: str | None = None  # the SoC version the graph was dtype-gated for
    # FX node name -> the GE edge (``"op:index"``) holding its value (debug.compare)
    fx_edges: dict[str, str] = field(default_factory=dict)


def source_line(node: torch.fx.Node) -> str:
    """The user's source line recorded by Dynamo for ``node`` (best effort)."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
    if not frames:
        return "<unknown source>"
    path, line, fn, code = frames[-1]
    return f"{path}:{line} in {fn}: {code.strip()}"


def describe(node: torch.fx.Node) -> str:
    return f"{node.target} (FX node {node.name!r}) at {source_line(node)}"


def lower_graph(gm: torch.fx.GraphModule, name: str, config: NpuConfig) -> LoweredGraph:
    """Lower ``gm`` (real tensors only: constants are built outside any fake mode)."""
    with unset_fake_temporarily():
        return _lower_graph(gm, name, config, None)


def try_lower(gm: torch.fx.GraphModule, name: str,
              config: NpuConfig) -> tuple[LoweredGraph | None, dict[str, str]]:
    """Lower ``gm`` while collecting every node that cannot be lowered (FX node name ->
    reason) instead of stopping at the first. The graph is returned only when none failed."""
    failures: dict[str, str] = {}
    with unset_fake_temporarily():
        lowered = _lower_graph(gm, name, config, failures)
    return (None if failures else lowered), failures


def _lower_graph(gm: torch.fx.GraphModule, name: str, config: NpuConfig,
                 failures: dict[str, str] | None) -> LoweredGraph:
    builder = GraphBuilder(name, target_soc(config))
    ctx = LoweringContext(builder, config)
    env: dict[torch.fx.Node, Any] = {}
    ctx.env = env  # symbolic sizes are read from the graph inputs (lowering/symbolic.py)
    data_inputs: list[int] = []
    placeholders: dict[torch.fx.Node, int] = {}
    outputs: tuple[OutputSlot, ...] = ()
    replayed = output_only_views(gm)
    for node in gm.graph.nodes:
        ctx.node = node
        if node in replayed:  # the wrapper applies it to the returned base
            continue
        if node.op == "placeholder":
            position = len(placeholders)
            placeholders[node] = position
            val = node.meta.get("val")
            if _effect_token(node):  # AOTAutograd passes None: no data, not a graph input
                env[node] = builder.const(torch.empty(0), node.name)
            elif isinstance(val, torch.Tensor) and node.users:  # frozen params have none
                data_inputs.append(position)
                # a padded input is a copy: writing it would be lost; padding safety refuses
                # graphs that write padded inputs, so only pad='trust' must not write
                lost = config.shape_buckets is not None and config.pad == "trust"
                ref = not lost and any(writes_input(u) for u in node.users)
                env[node] = builder.data(val.dtype, static_shape(val.shape), node.name, ref)
            elif isinstance(val, torch.SymInt) and node.users:  # a size: 0-d int64 input
                data_inputs.append(position)
                env[node] = builder.data(torch.int64, (), node.name)
            else:
                env[node] = val
        elif node.op == "get_attr":  # constants made by graph_passes (folding, freezing)
            env[node] = builder.const(operator.attrgetter(node.target)(gm), node.name)
        elif node.op == "output":
            outputs = _lower_output(builder, node.args[0], env, placeholders)
        elif failures is None:
            env[node] = _lower_node(ctx, node, env)
        else:
            env[node] = _lower_or_stand_in(ctx, node, env, failures)
    fx_edges = {n.name: v.edge for n, v in env.items()
                if n.op == "call_function" and isinstance(v, Value)}
    return LoweredGraph(builder.build(), tuple(data_inputs), outputs, tuple(ctx.decisions),
                        target_soc(config), fx_edges)


def _effect_token(node: torch.fx.Node) -> bool:
    """A placeholder that only threads ``with_effects`` ordering (an effect token)."""
    return bool(node.users) and all(
        u.target is torch.ops.higher_order.with_effects and u.args[0] is node
        for u in node.users)


def _lower_node(ctx: LoweringContext, node: torch.fx.Node, env: dict) -> Any:
    if node.op != "call_function":
        raise LoweringError(f"unsupported FX node kind {node.op!r}: {node.format_node()}",
                            node.name)
    return _lower_call(ctx, node, env)


def _lower_or_stand_in(ctx: LoweringContext, node: torch.fx.Node, env: dict,
                       failures: dict[str, str]) -> Any:
    try:
        return _lower_node(ctx, node, env)
    except LoweringError as e:
        failures[node.name] = e.reason
    # Later nodes still get lowered (so one pass finds every failure): they read stand-in
    # Data ops with this node's dtype and shape.
    return _stand_in(ctx.builder, node.meta.get("val"), node.name)


def _stand_in(builder: GraphBuilder, val: Any, name: str) -> Any:
    if isinstance(val, torch.Tensor):
        return builder.data(val.dtype, static_shape(val.shape), name)
    if isinstance(val, (tuple, list)):
        return tuple(_stand_in(builder, v, name) for v in val)
    return val


def _lower_call(ctx: LoweringContext, node: torch.fx.Node, env: dict) -> Any:
    if node.target is operator.getitem:
        return env[node.args[0]][node.args[1]]
    reason = refusal(node)
    if reason is not None:
        raise LoweringError(f"cannot lower {describe(node)}: {reason}", node.name, reason)
    spec = lookup(node.target)
    args = map_arg(node.args, lambda n: env[n])
    kwargs = map_arg(node.kwargs, lambda n: env[n])
    try:
        return spec.fn(ctx, **bind(node.target, args, kwargs))
    except LoweringError as e:
        e.node = e.node or node.name
        raise
    except Exception as e:  # converter bugs and spec violations name the op and source
        why = f"converter failed: {type(e).__name__}: {e}"
        raise LoweringError(f"lowering {describe(node)} failed: {type(e).__name__}: {e}",
                            node.name, why) from e


def _lower_output(builder: GraphBuilder, results: Any, env: dict,
                  placeholders: dict) -> tuple[OutputSlot, ...]:
    slots: list[OutputSlot] = []
    values: list[Value] = []
    for r in (results if isinstance(results, (tuple, list)) else (results,)):
        base, chain = split_view(r) if isinstance(r, torch.fx.Node) else (r, ())
        if chain and base in placeholders:
            slots.append(OutputSlot("input_view", placeholders[base], chain))
        elif chain and isinstance(env.get(base), Value):
            slots.append(OutputSlot("ge_view", _ge_index(values, env[base]), chain))
        elif isinstance(r, torch.fx.Node) and r in placeholders:
            slots.append(OutputSlot("input", placeholders[r]))
        elif isinstance(r, torch.fx.Node) and isinstance(env[r], Value):
            kind = "int" if isinstance(r.meta.get("val"), torch.SymInt) else "ge"
            slots.append(OutputSlot(kind, len(values)))
            values.append(env[r])
        else:
            slots.append(OutputSlot("const", value=env[r] if isinstance(r, torch.fx.Node) else r))
    builder.output(values)
    return tuple(slots)


def _ge_index(values: list[Value], value: Value) -> int:
    """The NetOutput index of ``value`` (added once however many views read it)."""
    for k, v in enumerate(values):
        if v.edge == value.edge:
            return k
    values.append(value)
    return len(values) - 1
