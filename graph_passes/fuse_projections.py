"""Linear projections of one input  ==>  one GE ``GroupedMatmul`` (``npu::grouped_linear*``).

    mul(silu(matmul(h, Wg)), matmul(h, Wu))     (gated MLP, weights not frozen)
        ==>  view(swiglu(grouped_linear_stacked(view(h, [M, K]), [Wg, Wu]), 0), [..., F])
    matmul(h, W1), ..., matmul(h, Wn)           (q/k/v projections, n >= 2)
        ==>  grouped_linear(h, [W1, ..., Wn])[i]

(``matmul`` = ``npu::matmul(h, W, b, False, True)``, what ``fuse_matmul`` makes of
``nn.Linear``; with frozen small weights ``constant_fold`` may have stored ``W^T``: then
``matmul(h, W^T, b, False, False)``, grouped with ``transpose_weight=False``.)
The stacked form puts gate rows above up rows, so ``SwiGlu``
on dim 0 is ``silu(gate) * up``: gate/up without frozen weights costs two GE ops (one
matmul + ``SwiGlu``) instead of four, with no weight concatenation per call. With
``freeze_parameters=True`` ``fuse_swiglu`` already merged the frozen gate/up into one
matmul; the q/k/v grouping fires either way.

The 910B's GroupedMatmul (aclnnGroupedMatmulV4, Atlas A2) takes these forms in fp16/bf16
only (float32 is single-tensor only), weights 2-D and all transposed alike, x not
transposed, at most 128 groups, x's and each weight's last dim below 65536; the stacked
form needs a 2-D x and equal N. Projections with a bias (Qwen2's q/k/v) group when all
of them have one: fp16 as is; bf16 only with frozen weights, since the bf16 GroupedMatmul
takes a float32 bias (made once from the constant). Inference graphs only (the backward
reads the projections one by one), static shapes only.
"""

from __future__ import annotations

import math
import operator

import torch
from torch.fx import GraphModule, Node

from npu_inductor import ops, ops_projections  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import (
    aten,
    bump,
    call,
    const_node,
    const_value,
    dtype,
    eliminate_dead_code,
    finish,
    is_op,
    is_training,
    only_used_by,
    shape,
    skip,
    static,
    val,
)
from npu_inductor.graph_passes.fuse_swiglu import _gated

npu = torch.ops.npu
LOW_PRECISION = (torch.float16, torch.bfloat16)
MAX_GROUPS = 128
MAX_LAST_DIM = 65536


def _projection(node: object, bias: bool = False) -> tuple[Node, Node] | None:
    """``matmul(h, W, b, False, True)`` the device can group -> (h, W); ``b`` None, or with
    ``bias`` one the device takes (``_bias_ok``)."""
    if not is_op(node, npu.matmul.default):
        return None
    h, w, b, th, tw = node.args
    if th or len(shape(w)) != 2 or (b is not None and not bias):
        return None
    if not (static(shape(h)) and static(shape(w)) and 2 <= len(shape(h)) <= 6):
        return None
    if dtype(node) not in LOW_PRECISION or {dtype(h), dtype(w)} != {dtype(node)}:
        return None
    return (h, w) if shape(h)[-1] < MAX_LAST_DIM and shape(w)[-1] < MAX_LAST_DIM else None


def _bias_ok(gm: GraphModule, node: Node) -> bool:
    """A 1-D bias of the matmul's dtype; bf16 only as a constant (frozen), since the 910B's
    bf16 GroupedMatmul takes a float32 bias, made once at compile time."""
    b = node.args[2]
    if len(shape(b)) != 1 or dtype(b) != dtype(node):
        return False
    return dtype(node) == torch.float16 or const_value(gm, b) is not None


def _biases(gm: GraphModule, members: list[Node]) -> list[Node]:
    if members[0].args[2] is None:
        return []
    if dtype(members[0]) == torch.float16:
        return [m.args[2] for m in members]
    return [const_node(gm, const_value(gm, m.args[2]).float(), "bias_f32") for m in members]


def _gated_mlp(gm: GraphModule, mul: Node) -> bool:
    """mul(silu(gate(h)), up(h))  ->  swiglu over the stacked gate/up rows."""
    found = _gated(mul)
    if found is None:
        return False
    a, b, inner = found
    pa, pb = _projection(a), _projection(b)
    if pa is None or pb is None or pa[0] is not pb[0] or shape(pa[1]) != shape(pb[1]):
        return False
    if not (a.args[4] and b.args[4]):  # (frozen gate/up merged already in fuse_swiglu)
        return False
    if not only_used_by([a, b, *inner], {*inner, mul}) or not val(pa[0]).is_contiguous():
        return False
    h, lead, f = pa[0], list(shape(a)[:-1]), shape(a)[-1]
    with gm.graph.inserting_before(mul):
        flat = [math.prod(lead), shape(h)[-1]]
        h2 = h if len(lead) == 1 else call(gm, aten.view.default, (h, flat))
        rows = call(gm, npu.grouped_linear_stacked.default, (h2, [pa[1], pb[1]]), like=a)
        y = call(gm, npu.swiglu.default, (rows, 0), like=mul)
        if len(lead) > 1:
            y = call(gm, aten.view.default, (y, [*lead, f]), like=mul)
    mul.replace_all_uses_with(y)
    return True


def _groups(gm: GraphModule) -> list[list[Node]]:
    """Projections of one h, in graph order, whose weights and biases precede the first of
    them or are constants (moved there)."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    by_input: dict[tuple[Node, bool, bool], list[Node]] = {}
    for node in gm.graph.nodes:
        p = _projection(node, bias=True)
        biased = p is not None and node.args[2] is not None
        if p is not None and (not biased or _bias_ok(gm, node)):  # one transposition each
            by_input.setdefault((p[0], biased, bool(node.args[4])), []).append(node)
    groups = []
    for members in by_input.values():
        first = order[members[0]]
        members = [m for m in members if all(
            a is None or a.op == "get_attr" or order[a] < first for a in m.args[1:3])]
        members = members[:MAX_GROUPS]
        if len(members) >= 2:
            groups.append(members)
    return groups


def _group(gm: GraphModule, members: list[Node]) -> None:
    h = members[0].args[0]
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for m in members[1:]:  # constants read by later members: defined before the group
        for a in m.args[1:3]:
            if isinstance(a, Node) and order[a] > order[members[0]]:
                members[0].prepend(a)  # (a get_attr: _groups let no other node through)
    with gm.graph.inserting_before(members[0]):
        args = (h, [m.args[1] for m in members], _biases(gm, members), bool(members[0].args[4]))
        ys = call(gm, npu.grouped_linear.default, args, like=members[0])
        outs = [call(gm, operator.getitem, (ys, i), like=m) for i, m in enumerate(members)]
    for m, y in zip(members, outs):
        m.replace_all_uses_with(y)


def fuse_projections(gm: GraphModule, config: NpuConfig) -> GraphModule:
    if is_training(gm):
        skip("fuse_projections", gm, "the backward reads each projection's weight on its own")
        return gm
    changed = False
    for mul in list(gm.graph.find_nodes(op="call_function", target=aten.mul.Tensor)):
        if _gated_mlp(gm, mul):
            bump("fuse_swiglu_grouped")
            changed = True
    if changed:
        eliminate_dead_code(gm)  # the gate/up matmuls it replaced, before grouping
    for members in _groups(gm):
        _group(gm, members)
        bump("fuse_grouped_matmul")
        changed = True
    return finish(gm) if changed else gm
