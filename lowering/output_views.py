"""Graph outputs that are views: replayed on the returned tensors, not copied out of GE.

    out = t(primals_6)          (a weight's transpose saved for the backward)
    out = view(rms_norm[0], …)  (an activation reshaped for a matmul, saved)
    ==>  GE returns the base (or nothing, for a graph input); the wrapper applies the views

A GE graph's outputs are buffers of their own: an output that is a view of a graph input
or of a workspace intermediate had to be copied into fresh memory on every call (a
training forward saves ~30 transposed weights and as many reshaped activations, a copy
of the model per step). Eager and ``aot_eager`` save those as views. Here such an output
is the chain of view ops over its base, recorded as data (op name, static arguments);
``CompiledGraph`` applies it to the graph input, or to the base returned by GE, so the
result aliases its base exactly as the eager tensor would. View nodes whose only readers
are such outputs are not lowered at all.

Not replayed: views of inputs the graph writes (``RefData``: the output must be the value
before the write), and views with symbolic arguments (their sizes exist only at run time).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from npu_inductor.lowering.inplace import writes_input

aten = torch.ops.aten

# aten view ops a host tensor replays exactly (same storage, same strides as eager). A
# view replays as ``reshape``: GE's Reshape reads logical order, and after graph passes
# (a contiguous clone removed) the base may be strided where the traced tensor was not.
REPLAYABLE = {aten.view.default: "reshape.default", aten._unsafe_view.default: "reshape.default"}
REPLAYABLE.update({op: str(op).removeprefix("aten.") for op in (
    aten.t.default, aten.permute.default,
    aten.transpose.int, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
    aten.expand.default, aten.slice.Tensor, aten.select.int, aten.alias.default,
    aten.detach.default)})

Chain = tuple[tuple[str, tuple[Any, ...]], ...]  # (op name, arguments after the tensor)


def _static(a: Any) -> bool:
    if isinstance(a, (list, tuple)):
        return all(_static(x) for x in a)
    return a is None or type(a) in (bool, int)


def _replayable(node: torch.fx.Node) -> bool:
    return (node.op == "call_function" and node.target in REPLAYABLE and not node.kwargs
            and bool(node.args) and isinstance(node.args[0], torch.fx.Node)
            and _static(node.args[1:]))


def _written(node: torch.fx.Node) -> bool:
    return node.op == "placeholder" and any(writes_input(u) and u.args[0] is node
                                            for u in node.users)


def split_view(node: torch.fx.Node) -> tuple[torch.fx.Node, Chain]:
    """``node`` as (base, chain of views from the base); the chain is empty when ``node``
    is no replayable view (or its base is an input the graph writes)."""
    chain: list[tuple[str, tuple[Any, ...]]] = []
    base = node
    while _replayable(base):
        chain.append((REPLAYABLE[base.target], tuple(base.args[1:])))
        base = base.args[0]
    if _written(base) or not isinstance(base.meta.get("val"), torch.Tensor):
        return node, ()
    return base, tuple(reversed(chain))


def output_only_views(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """View nodes read only by the output (directly or through other such views): the
    wrapper replays them, so they need no GE op."""
    skip: set[torch.fx.Node] = set()
    for node in reversed(gm.graph.nodes):
        if (_replayable(node) and node.users and split_view(node)[1]
                and all(u.op == "output" or u in skip for u in node.users)):
            skip.add(node)
    return skip


@functools.cache
def _op(name: str) -> Any:
    packet, _, overload = name.partition(".")
    return getattr(getattr(aten, packet), overload)


# The same aten ops called as Tensor methods (their positional arguments are the op's):
# a training forward replays ~50 saved views per call, and an OpOverload call costs
# several times the method's Python overhead.
_METHODS = {"detach.default": torch.Tensor.detach, "t.default": torch.Tensor.t,
            "reshape.default": torch.Tensor.reshape, "transpose.int": torch.Tensor.transpose,
            "permute.default": torch.Tensor.permute, "unsqueeze.default": torch.Tensor.unsqueeze,
            "select.int": torch.Tensor.select, "squeeze.dim": torch.Tensor.squeeze}


def replay(t: torch.Tensor, chain: Any) -> torch.Tensor:
    """Apply a recorded chain (tuples, or the lists a JSON cache entry gives back)."""
    for name, args in chain:
        t = (_METHODS.get(name) or _op(name))(t, *args)
    return t


def outputs_function(slots: Any) -> Any:
    """The FX outputs of a compiled graph as one generated function ``(args, ge_outs) ->
    list``: every slot (``lowering.lower.OutputSlot``) an expression, view chains written
    as their calls (the same calls as ``replay``, without its per-call loop and lookups)."""
    names: dict[str, Any] = {}

    def const(value: Any) -> str:
        name = f"c{len(names)}"
        names[name] = value
        return name

    exprs = []
    for slot in slots:
        if slot.kind in ("ge", "int", "ge_view"):
            expr = f"g[{slot.index}]"
        elif slot.kind in ("input", "input_view"):
            expr = f"a[{slot.index}]"
        else:
            exprs.append(const(slot.value))
            continue
        if slot.kind == "int":  # a symbolic size computed in the graph
            expr = f"int({expr})"
        for name, args in slot.value if slot.kind.endswith("_view") else ():
            fn = const(_METHODS.get(name) or _op(name))
            expr = f"{fn}({', '.join([expr] + [const(x) for x in args])})"
        exprs.append(expr)
    source = f"def outputs(a, g):\n    return [{', '.join(exprs)}]\n"
    exec(compile(source, "<npu_inductor graph outputs>", "exec"), names)
    return names["outputs"]
