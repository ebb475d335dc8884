"""Common-subexpression elimination: two calls of the same pure op on the same inputs
(``view(x, [16, 32])`` three times, one per projection)  ==>  one call."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node

from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import bump


def _key(node: Node) -> Any:
    def freeze(a: Any) -> Any:
        if isinstance(a, (list, tuple)):
            return (type(a).__name__, tuple(freeze(x) for x in a))
        if isinstance(a, dict):
            return tuple(sorted((k, freeze(v)) for k, v in a.items()))
        if isinstance(a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
            return str(a)
        if isinstance(a, bool):
            return ("bool", a)  # True == 1 for hashing but not for type promotion
        if isinstance(a, float):
            return ("float", repr(a))  # 0.0 vs -0.0, nan
        return a
    return (node.target, freeze(node.args), freeze(node.kwargs))


def _pure(node: Node) -> bool:
    if node.op != "call_function":
        return False
    target = node.target
    return not (isinstance(target, torch._ops.OpOverload) and (
        target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags))


def cse(gm: GraphModule, config: NpuConfig) -> GraphModule:
    seen: dict[Any, Node] = {}
    removed = 0
    for node in list(gm.graph.nodes):
        if not _pure(node):
            continue
        try:
            key = _key(node)
            hash(key)
        except TypeError:
            continue
        first = seen.setdefault(key, node)
        if first is not node:
            node.replace_all_uses_with(first)
            gm.graph.erase_node(node)
            removed += 1
    bump("cse", removed)
    gm.recompile()
    return gm
