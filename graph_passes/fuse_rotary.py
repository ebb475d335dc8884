"""Rotary position embedding, rotate-half form  ==>  ``npu::rotary_mul`` (GE ``RotaryMul``);
the query/key pair sharing cos/sin  ==>  ``npu::apply_rotary_pos_emb`` (GE
``ApplyRotaryPosEmb``, layout BSND).

    a, b = split(x, [d/2, d/2], -1)
    y = add(mul(x, cos), mul(cat([neg(b), a], -1), sin))      ==>  rotary_mul(x, cos, sin)

    rotary_mul(q, cos, sin), rotary_mul(k, cos, sin)          (q, k: [B, N, S, D])
      ==>  permute(apply_rotary_pos_emb(permute(q), permute(k), cos', sin'), BNSD)

where cos' = cos viewed as [1, S, 1, D]. The permutes cancel against the BSND->BNSD
transposes LLaMA applies before RoPE (``remove_noops`` folds permute pairs). Inference
graphs only: in training graphs the backward is already written in plain ops.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule, Node

from npu_inductor import ops  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import (
    Match,
    aten,
    bump,
    call,
    finish,
    fuse_matches,
    is_op,
    is_training,
    only_used_by,
    shape,
    skip,
)

npu = torch.ops.npu
_BNSD_BSND = [0, 2, 1, 3]


def _mul_operands(node: Node) -> tuple[Node, Node] | None:
    if is_op(node, aten.mul.Tensor) and all(isinstance(a, Node) for a in node.args[:2]):
        return node.args[0], node.args[1]
    return None


def _split_halves(a: Node, b: Node) -> tuple[Node, list[Node]] | None:
    """a, b = split(x, [d/2, d/2], -1)  ->  (x, [split, a, b])."""
    if not (a.target is operator.getitem and b.target is operator.getitem):
        return None
    split = a.args[0]
    if split is not b.args[0] or (a.args[1], b.args[1]) != (0, 1):
        return None
    if not is_op(split, aten.split_with_sizes.default, aten.split.Tensor):
        return None
    x = split.args[0]
    rank = len(shape(x))
    dim = split.args[2] if len(split.args) > 2 else 0
    half = shape(x)[-1] // 2
    sizes = split.args[1]
    ok_sizes = list(sizes) == [half, half] if isinstance(sizes, (list, tuple)) else sizes == half
    if dim % rank != rank - 1 or not ok_sizes or len(split.users) != 2:
        return None
    return x, [split, a, b]


def _slice_halves(a: Node, b: Node) -> tuple[Node, list[Node]] | None:
    """a = x[..., :d/2], b = x[..., d/2:]  (transformers' ``rotate_half``)  ->  (x, [a, b])."""
    if not (is_op(a, aten.slice.Tensor) and is_op(b, aten.slice.Tensor)):
        return None
    x = a.args[0]
    if b.args[0] is not x:
        return None
    rank, d = len(shape(x)), shape(x)[-1]
    if not isinstance(d, int) or d % 2:
        return None
    bounds = [_slice_bounds(s, rank, d) for s in (a, b)]
    if bounds != [(rank - 1, 0, d // 2, 1), (rank - 1, d // 2, d, 1)]:
        return None
    return x, [a, b]


def _slice_bounds(s: Node, rank: int, d: int) -> tuple:
    """slice(x, dim, start, end, step) -> (dim, start, end clamped to d, step)."""
    args = list(s.args) + [None] * (5 - len(s.args))
    dim, start, end, step = args[1:5]
    end = d if end is None else end
    return (dim % rank, start or 0, min(end, d) if isinstance(end, int) else end, step or 1)


def _halves(cat: Node) -> tuple[Node, list[Node]] | None:
    """cat([neg(b), a], -1) with a, b the two halves of one x  ->  (x, inner nodes)."""
    if not is_op(cat, aten.cat.default) or len(cat.args[0]) != 2:
        return None
    rank = len(shape(cat))
    if (cat.args[1] if len(cat.args) > 1 else 0) % rank != rank - 1:
        return None
    neg, a = cat.args[0]
    if not is_op(neg, aten.neg.default):
        return None
    found = _split_halves(a, neg.args[0]) or _slice_halves(a, neg.args[0])
    return None if found is None else (found[0], [neg, *found[1]])


def match_rotary(add: Node) -> dict | None:
    """``add(mul(x, cos), mul(rotate_half(x), sin))`` (either operand order) or None."""
    if not is_op(add, aten.add.Tensor) or add.kwargs.get("alpha", 1) != 1:
        return None
    for first, second in (add.args[:2], add.args[1::-1]):
        m1, m2 = _mul_operands(first), _mul_operands(second)
        if m1 is None or m2 is None:
            continue
        for cat, sin in (m2, m2[::-1]):
            found = _halves(cat)
            if found is None:
                continue
            x, halves = found
            if x not in m1:
                continue
            cos = m1[1] if m1[0] is x else m1[0]
            inner = [first, second, cat, *halves]
            if shape(add) != shape(x) or not only_used_by(inner, set(inner) | {add}):
                continue
            return {"x": x, "cos": cos, "sin": sin, "out": add}
    return None


def _rotary_match(gm: GraphModule, add: Node) -> Match | None:
    m = match_rotary(add)
    return None if m is None else Match(add, (add,), "fuse_rotary", m)


def _rotary(gm: GraphModule, m: Match) -> Node:
    p = m.parts
    return call(gm, npu.rotary_mul.default, (p["x"], p["cos"], p["sin"]), like=m.at)


def fuse_rotary(gm: GraphModule, config: NpuConfig) -> GraphModule:
    if is_training(gm):
        skip("fuse_rotary", gm, "the backward is already decomposed; RotaryMulGrad unused")
        return gm
    fuse_matches(gm, "fuse_rotary", aten.add.Tensor, _rotary_match, _rotary)
    _pair_query_key(gm)
    return finish(gm)


def _cos_bsnd(gm: GraphModule, cos: Node, s: int, d: int) -> Node | None:
    """cos/sin as [1, S, 1, D] (BSND), from [S, D] or [1, 1, S, D]."""
    if tuple(shape(cos)) in ((s, d), (1, 1, s, d), (1, s, d)):
        if isinstance(s, torch.SymInt):  # FX args hold the node computing a size, not a SymInt
            s = call(gm, aten.sym_size.int, (cos, len(shape(cos)) - 2))
        return call(gm, aten.view.default, (cos, [1, s, 1, d]))
    return None


def _pairable(a: Node, b: Node, order: dict) -> bool:
    qa, ka = a.args[0], b.args[0]
    if a.args[1:] != b.args[1:] or len(shape(qa)) != 4 or len(shape(ka)) != 4:
        return False
    same_bs = shape(qa)[0] == shape(ka)[0] and shape(qa)[2:] == shape(ka)[2:]
    # a's result must not be read before b, where the fused op goes
    return same_bs and all(order[u] > order[b] for u in a.users)


def _pair_query_key(gm: GraphModule) -> None:
    nodes = list(gm.graph.find_nodes(op="call_function", target=npu.rotary_mul.default))
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    used: set[Node] = set()
    views: dict = {}  # every layer's pair views the same cos/sin: one view each
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            if a in used or b in used or not _pairable(a, b, order):
                continue
            if _fuse_pair(gm, a, b, lambda t, s, d, b=b: _bsnd_once(gm, views, order, b, t, s, d)):
                used |= {a, b}


def _bsnd_once(gm: GraphModule, views: dict, order: dict, at: Node, t: Node, s: Any,
               d: int) -> Node | None:
    """``_cos_bsnd`` inserted before ``at``, or the view an earlier pair made (inserted
    before a node that precedes ``at``) of the same ``t`` at the same static sizes."""
    if isinstance(s, torch.SymInt):
        return _cos_bsnd(gm, t, s, d)
    made = views.get((t, s, d))
    if made is not None and order[made[1]] < order[at]:
        return made[0]
    view = _cos_bsnd(gm, t, s, d)
    if view is not None:
        views[(t, s, d)] = (view, at)
    return view


def _fuse_pair(gm: GraphModule, a: Node, b: Node,
               bsnd: Callable[[Node, Any, int], Node | None]) -> bool:
    q, k, cos, sin = a.args[0], b.args[0], a.args[1], a.args[2]
    _, _, s, d = shape(q)
    with gm.graph.inserting_before(b):
        cos4, sin4 = bsnd(cos, s, d), bsnd(sin, s, d)
        if cos4 is None or sin4 is None:
            return False
        qs, ks = (call(gm, aten.permute.default, (t, _BNSD_BSND)) for t in (q, k))
        fused = call(gm, npu.apply_rotary_pos_emb.default, (qs, ks, cos4, sin4), like=a)
        outs = [call(gm, operator.getitem, (fused, i)) for i in range(2)]
        back = [call(gm, aten.permute.default, (o, _BNSD_BSND)) for o in outs]
    a.replace_all_uses_with(back[0])
    b.replace_all_uses_with(back[1])
    bump("fuse_apply_rotary_pos_emb")
    return True
