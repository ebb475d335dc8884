"""Removal of no-op views, clones and casts.

    _to_copy(x, dtype=x.dtype)   ==>  x        clone(x) / alias(x)              ==>  x
    view(x, x.shape)             ==>  x        expand(x, x.shape)               ==>  x
    view(view(x, s1), s2)        ==>  view(x, s2)
    permute(x, identity)         ==>  x        permute(permute(x, p), q)        ==>  permute(x, p∘q)
    (transpose and t count as permutes)
    slice(x, d, 0, >=size, 1)    ==>  x

Every op here is a copy or a metadata change in eager; on GE each one is a real op and a
buffer. A node feeding the graph output directly is kept when its replacement would be
a graph input (the output must not alias an input AOTAutograd believes is fresh).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._prims_common import is_contiguous_or_false
from torch.fx import GraphModule, Node
from torch.fx.experimental.symbolic_shapes import statically_known_true

from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import (
    aten,
    bump,
    finish,
    is_op,
    permutation,
    set_val,
    val,
)

_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
# Users whose eager meaning depends on their input's strides: a copy feeding them stays.
_STRIDE_SENSITIVE = (*_VIEWS, aten.view_as_complex.default)
_COPY_KWARGS = {"dtype", "memory_format", "layout", "device", "pin_memory", "non_blocking"}


def _same(node: Node, src: Any) -> bool:
    a, b = val(node), val(src)
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and _same_sizes(a.shape, b.shape) and a.dtype == b.dtype and a.device == b.device)


def _same_sizes(a: Any, b: Any) -> bool:
    """Sizes provably equal for every value of their symbols. ``a == b`` on symbolic sizes
    would install a guard (``s0*s1 != s0`` for a flatten), and the first call that breaks
    it (a size 1) would recompile the graph."""
    return len(a) == len(b) and all(statically_known_true(x == y) for x, y in zip(a, b))


def _noop_source(node: Node) -> Node | None:
    """The node ``node`` is a no-op of, or None."""
    src = node.args[0] if node.args else None
    if not isinstance(src, Node):
        return None
    if is_op(node, aten.clone.default, aten.alias.default, *_VIEWS, aten.expand.default):
        return src if _same(node, src) else None
    if is_op(node, aten._to_copy.default):
        ok = set(node.kwargs) <= _COPY_KWARGS
        return src if ok and _same(node, src) else None
    perm = permutation(node)
    if perm is not None:
        return src if perm[1] == list(range(len(perm[1]))) else None
    if is_op(node, aten.slice.Tensor):
        return src if _full_slice(node) and _same(node, src) else None
    return None


def _full_slice(node: Node) -> bool:
    args = list(node.args) + [None] * (5 - len(node.args))
    start, step = args[2] or 0, args[4] if args[4] is not None else 1
    return start == 0 and step == 1


def _feeds_view_of_strided(node: Node, src: Node) -> bool:
    """Removing a copy of a strided tensor would leave its view users without an eager
    meaning (``view`` needs compatible strides, ``view_as_complex`` a stride-1 last dim); GE
    would not care, eager fallback and the verifier's fake re-propagation would."""
    strided = not is_contiguous_or_false(val(src))  # unknown (unbacked sizes): keep the copy
    return strided and any(is_op(u, *_STRIDE_SENSITIVE) for u in node.users)


def _output_alias(node: Node, src: Node) -> bool:
    return src.op == "placeholder" and any(u.op == "output" for u in node.users)


def _collapse(gm: GraphModule, node: Node) -> bool:
    """view(view(x)) -> view(x); permute(permute(x)) -> permute(x)."""
    src = node.args[0] if node.args else None
    if is_op(node, *_VIEWS) and is_op(src, *_VIEWS) and is_contiguous_or_false(val(src.args[0])):
        node.args = (src.args[0], *node.args[1:])  # (a view of a strided tensor may not exist)
        return True
    outer, inner = permutation(node), permutation(src)
    if outer is not None and inner is not None:
        node.target = aten.permute.default
        node.args = (inner[0], [inner[1][i] for i in outer[1]])
        node.kwargs = {}
        set_val(gm, node)
        return True
    return False


def remove_noops(gm: GraphModule, config: NpuConfig) -> GraphModule:
    removed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if _collapse(gm, node):
            removed += 1
        src = _noop_source(node)
        if src is not None and not _output_alias(node, src) and not (
                is_op(node, aten.clone.default, aten._to_copy.default)
                and _feeds_view_of_strided(node, src)):
            node.replace_all_uses_with(src)
            removed += 1
    bump("remove_noops", removed)
    return finish(gm)
