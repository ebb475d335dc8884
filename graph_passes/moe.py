"""Mixture-of-experts layers as the device runs them (not a fusion: runs with fusions off).

transformers' ``grouped_mm`` experts (``transformers/integrations/moe.py``) sort the routed
(token, expert) pairs by expert, multiply each expert's rows with its weights through a
grouped matmul, and scatter the rows back. On a 910B:

    transformers.grouped_mm_fallback(x, w, offs)          (float32/float16: its custom op)
    aten._grouped_mm(x, w, offs)                           (bfloat16: torch's op)
      ==>  npu::grouped_matmul(x, w, int64(offs), group_type=0)           (GE GroupedMatmul)
    transformers.grouped_mm_fallback_backward(x, w, offs, dy)
      ==>  dx = grouped_matmul(dy, w, offs, 0, transpose_weight=True)
           dw = grouped_matmul(x, dy, offs, 2, transpose_x=True)          (split K)
    aten._grouped_mm(x^T [K, S], dy [S, N], offs)  (bf16 backward)  ==>  group_type 2

A transposed weight (``w.transpose(-2, -1)``, how transformers passes [E, N, K] experts)
folds into ``transpose_weight``. The routing stays in the same graph: ``sort`` of the int64
expert ids has no int64 kernel on 910B (Sort: fp16/bf16/fp32), and the ids are topk indices
over the experts, below 2^24, so they sort exactly as float32:

    sort(ids)  ==>  sort(float32(ids)), values cast back to int64
"""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from npu_inductor import ops_moe  # noqa: F401  (registers torch.ops.npu.grouped_matmul)
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import aten, bump, call, dtype, finish, is_op, shape

npu = torch.ops.npu
_FALLBACK = "transformers.grouped_mm_fallback.default"
_FALLBACK_BWD = "transformers.grouped_mm_fallback_backward.default"
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default,
          aten.clone.default)
_EXACT_F32 = 1 << 24


def _int64(gm: GraphModule, offs: Node) -> Node:
    if dtype(offs) == torch.int64:
        return offs
    return call(gm, torch.ops.prims.convert_element_type.default, (offs, torch.int64))


def _weight(w: Node, transposed: bool) -> tuple[Node, bool]:
    """A 3-D weight that is ``transpose(base, -2, -1)`` -> (base, flipped flag)."""
    if is_op(w, aten.transpose.int) and len(shape(w)) == 3 and \
            sorted(d % 3 for d in w.args[1:3]) == [1, 2]:
        return w.args[0], not transposed
    if is_op(w, aten.permute.default) and list(w.args[1]) == [0, 2, 1]:
        return w.args[0], not transposed
    return w, transposed


def _gmm(gm: GraphModule, x: Node, w: Node, offs: Node, group_type: int, tx: bool,
         tw: bool, like: Node) -> Node:
    if group_type == 0:
        w, tw = _weight(w, tw)
    args = (x, w, _int64(gm, offs), group_type, tx, tw)
    return call(gm, npu.grouped_matmul.default, args, like=like)


def _rewrite_forward(gm: GraphModule, node: Node) -> Node | None:
    """grouped_mm(x [S, K], w [E, K, N], offs) -> y [S, N]."""
    x, w, offs = node.args[:3] if len(node.args) >= 3 else (*node.args, node.kwargs["offs"])
    if len(shape(x)) != 2 or len(shape(w)) != 3 or offs is None:
        return None
    return _gmm(gm, x, w, offs, 0, False, False, node)


def _rewrite_aten(gm: GraphModule, node: Node) -> Node | None:
    """aten._grouped_mm(a, b, offs, bias=None, out_dtype=None): 2-D x 3-D (split M) or
    2-D x 2-D (split K, the weight gradient)."""
    a, b = node.args[:2]
    offs = node.args[2] if len(node.args) > 2 else node.kwargs.get("offs")
    bias = node.args[3] if len(node.args) > 3 else node.kwargs.get("bias")
    out_dtype = node.args[4] if len(node.args) > 4 else node.kwargs.get("out_dtype")
    if offs is None or bias is not None or out_dtype not in (None, dtype(node)):
        return None
    if len(shape(a)) == 2 and len(shape(b)) == 3:
        return _gmm(gm, a, b, offs, 0, False, False, node)
    if len(shape(a)) == 2 and len(shape(b)) == 2:  # a: [M, K] = x^T with K split
        transposed = is_op(a, aten.t.default) or is_op(a, aten.transpose.int)
        stored = a.args[0] if transposed else call(gm, aten.t.default, (a,), like=node)
        return _gmm(gm, stored, b, offs, 2, True, False, node)
    return None


def _rewrite_backward(gm: GraphModule, node: Node) -> bool:
    x, w, offs, dy = node.args[:4]
    grads = {u.args[1]: u for u in node.users if u.target is operator.getitem}
    with gm.graph.inserting_before(node):
        dx = _gmm(gm, dy, w, offs, 0, False, True, node)
        dw = _gmm(gm, x, dy, offs, 2, True, False, node)
        if shape(dw) != shape(w):
            return False
    for i, new in ((0, dx), (1, dw)):
        if i in grads:
            grads[i].replace_all_uses_with(new)
    return True


def _topk_index(node: object) -> Node | None:
    """node is (a view chain of) topk(...)[1] -> the topk node."""
    while is_op(node, *_VIEWS):
        node = node.args[0]
    if isinstance(node, Node) and node.target is operator.getitem and node.args[1] == 1 \
            and is_op(node.args[0], aten.topk.default):
        return node.args[0]
    return None


def _sort_small_ids(gm: GraphModule, sort: Node) -> bool:
    """sort(int64 topk indices)  ->  sort of their exact float32 copy."""
    x = sort.args[0]
    topk = _topk_index(x)
    if dtype(x) != torch.int64 or topk is None:
        return False
    dim = topk.args[2] if len(topk.args) > 2 else -1
    if shape(topk.args[0])[dim] > _EXACT_F32:
        return False
    convert = torch.ops.prims.convert_element_type.default
    with gm.graph.inserting_before(sort):
        xf = call(gm, convert, (x, torch.float32), like=sort)
        fsort = call(gm, sort.target, (xf, *sort.args[1:]), sort.kwargs, like=sort)
        values = call(gm, operator.getitem, (fsort, 0))
        indices = call(gm, operator.getitem, (fsort, 1))
        back = call(gm, convert, (values, torch.int64), like=sort)
    for u in list(sort.users):
        u.replace_all_uses_with(back if u.args[1] == 0 else indices)
    return True


def moe(gm: GraphModule, config: NpuConfig) -> GraphModule:
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        name = str(node.target)
        if is_op(node, aten.sort.default, aten.sort.stable):
            if _sort_small_ids(gm, node):
                bump("moe_sort_ids_f32")
                changed = True
            continue
        if name == _FALLBACK_BWD:
            if _rewrite_backward(gm, node):
                bump("moe_grouped_matmul", 2)
                changed = True
            continue
        if name == _FALLBACK or node.target is aten._grouped_mm.default:
            rewrite = _rewrite_forward if name == _FALLBACK else _rewrite_aten
            with gm.graph.inserting_before(node):
                new = rewrite(gm, node)
            if new is not None:
                node.replace_all_uses_with(new)
                bump("moe_grouped_matmul")
                changed = True
    return finish(gm) if changed else gm
