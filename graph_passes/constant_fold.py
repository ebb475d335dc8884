"""Constant folding of small tensors.

    f(const, const, 3)  ==>  const'         (f pure, result <= MAX_FOLD_ELEMENTS elements)

A call whose tensor inputs are all ``get_attr`` constants (or that has none:
``arange``, ``full``, ``scalar_tensor``) is evaluated once at compile time and becomes a
``get_attr`` constant, which lowers to a GE ``Const``. LLaMA's causal mask
(arange/sub/le/where) folds to one [S, S] constant this way. Big results are left alone:
they would travel inside the ``.air`` bytes.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.fx import GraphModule, Node

from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import (
    bump,
    const_node,
    const_value,
    finish,
    static,
    val,
)

MAX_FOLD_ELEMENTS = 1024


def _foldable(node: Node) -> bool:
    target = node.target
    if node.op != "call_function" or target is operator.getitem:
        return False
    if isinstance(target, torch._ops.OpOverload) and (
            target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags):
        return False
    out = val(node)
    if not isinstance(out, torch.Tensor) or not static(out.shape):
        return False
    if out.numel() > MAX_FOLD_ELEMENTS:
        return False
    ok = True

    def check(a: Any) -> Any:
        nonlocal ok
        if isinstance(a, Node):
            ok = ok and a.op == "get_attr"
        elif isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            ok = False
        return a
    torch.fx.node.map_aggregate((node.args, node.kwargs), check)
    return ok


def _evaluate(gm: GraphModule, node: Node) -> torch.Tensor:
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs),
                                         lambda n: const_value(gm, n))
    return node.target(*args, **kwargs)


def constant_fold(gm: GraphModule, config: NpuConfig) -> GraphModule:
    folded = 0
    for node in list(gm.graph.nodes):
        if not _foldable(node):
            continue
        result = _evaluate(gm, node)
        with gm.graph.inserting_before(node):
            const = const_node(gm, result.contiguous(), "fold")
        const.meta["stack_trace"] = node.meta.get("stack_trace")
        node.replace_all_uses_with(const)
        gm.graph.erase_node(node)
        folded += 1
    bump("constant_fold", folded)
    return finish(gm)
