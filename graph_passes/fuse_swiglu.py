"""SiLU-gated MLP  ==>  ``npu::swiglu`` (GE ``SwiGlu``).

    a, b = split(x, [f, f], dim)
    mul(silu(a), b)                                     ==>  swiglu(x, dim)

    a = view(mm(h, t(Wg))), b = view(mm(h, t(Wu)))      (LLaMA gate/up, frozen weights)
    mul(silu(a), b)                                     ==>  swiglu(view(mm(h, t(cat(Wg, Wu)))), -1)

``silu(a)`` is ``aten.silu`` or its decomposition ``mul(a, sigmoid(a))``. The gate/up
merge needs ``freeze_parameters=True`` (the weights must be constants to concatenate
once, at compile time). Inference graphs only (SwiGluGrad would need the backward
rewritten too).
"""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from npu_inductor import ops  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import (
    Match,
    aten,
    call,
    const_node,
    const_value,
    fuse_matches,
    is_op,
    log,
    only_used_by,
    shape,
)

npu = torch.ops.npu
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _silu_input(node: Node) -> tuple[Node, list[Node]] | None:
    """silu(a) or mul(a, sigmoid(a)) -> (a, the nodes)."""
    if is_op(node, aten.silu.default):
        return node.args[0], [node]
    if not is_op(node, aten.mul.Tensor):
        return None
    for a, s in (node.args[:2], node.args[1::-1]):
        if is_op(s, aten.sigmoid.default) and s.args[0] is a:
            return a, [node, s]
    return None


def _gated(mul: Node) -> tuple[Node, Node, list[Node]] | None:
    """mul(silu(a), b) (either order) -> (a, b, inner nodes)."""
    if not is_op(mul, aten.mul.Tensor):
        return None
    for s, b in (mul.args[:2], mul.args[1::-1]):
        found = _silu_input(s) if isinstance(s, Node) else None
        if found is not None and isinstance(b, Node) and shape(found[0]) == shape(b):
            return found[0], b, found[1]
    return None


def _halves(a: Node, b: Node) -> tuple[Node, int, list[Node]] | None:
    if not (a.target is operator.getitem and b.target is operator.getitem):
        return None
    split = a.args[0]
    if split is not b.args[0] or (a.args[1], b.args[1]) != (0, 1) or len(split.users) != 2:
        return None
    if not is_op(split, aten.split_with_sizes.default, aten.split.Tensor):
        return None
    x, sizes = split.args[0], split.args[1]
    dim = split.args[2] if len(split.args) > 2 else 0
    full = shape(x)[dim]
    ok = list(sizes) == [full // 2] * 2 if isinstance(sizes, (list, tuple)) else sizes * 2 == full
    return (x, dim, [split, a, b]) if ok and full % 2 == 0 else None


def _frozen_projection(gm: GraphModule, node: Node) -> tuple[Node, torch.Tensor, list] | None:
    """view(mm(h, t(W))) with W a constant -> (h, W [out, in], nodes)."""
    if not is_op(node, *_VIEWS) or not is_op(node.args[0], aten.mm.default):
        return None
    mm = node.args[0]
    h, wt = mm.args
    if is_op(wt, aten.t.default, aten.permute.default) and const_value(gm, wt.args[0]) is not None:
        return h, const_value(gm, wt.args[0]), [node, mm, wt]
    w = const_value(gm, wt)
    return (h, w.t(), [node, mm]) if w is not None else None


def _merge_projections(gm: GraphModule, a: Node, b: Node, mul: Node,
                       inner: list[Node]) -> Node | None:
    pa, pb = _frozen_projection(gm, a), _frozen_projection(gm, b)
    if pa is None or pb is None:
        if is_op(a, *_VIEWS) and is_op(a.args[0], aten.mm.default):
            log.info("fuse_swiglu: %s: gate/up merge needs freeze_parameters=True", mul.name)
        return None
    if pa[0] is not pb[0] or pa[1].shape != pb[1].shape:
        return None
    if not only_used_by(pa[2] + pb[2], set(pa[2] + pb[2] + inner) | {mul}):
        return None
    merged = torch.cat([pa[1], pb[1]], 0).contiguous()  # [2F, H]
    w = const_node(gm, merged, "gate_up")
    wt = call(gm, aten.t.default, (w,))
    mm = call(gm, aten.mm.default, (pa[0], wt), like=a.args[0])
    return call(gm, aten.view.default, (mm, [*shape(a)[:-1], 2 * shape(a)[-1]]), like=a)


def _swiglu_match(gm: GraphModule, mul: Node) -> Match | None:
    found = _gated(mul)
    if found is None or not only_used_by(found[2], set(found[2]) | {mul}):
        return None
    a, b, inner = found
    halves = _halves(a, b)
    if halves is not None:
        return Match(mul, (mul,), "fuse_swiglu", {"x": halves[0], "dim": halves[1]})
    return Match(mul, (mul,), "fuse_swiglu_merged", {"a": a, "b": b, "inner": inner})


def _swiglu(gm: GraphModule, m: Match) -> Node | None:
    p = m.parts
    if "x" in p:
        x, dim = p["x"], p["dim"]
    else:
        x, dim = _merge_projections(gm, p["a"], p["b"], m.at, p["inner"]), -1
    return None if x is None else call(gm, npu.swiglu.default, (x, dim), like=m.at)


def fuse_swiglu(gm: GraphModule, config: NpuConfig) -> GraphModule:
    return fuse_matches(gm, "fuse_swiglu", aten.mul.Tensor, _swiglu_match, _swiglu,
                        inference_only="the backward is already decomposed; SwiGluGrad unused")
