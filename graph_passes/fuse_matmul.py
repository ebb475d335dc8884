"""Transposes and linear bias folded into the matmul  ==>  ``npu::matmul`` (GE ``MatMulV2``
``transpose_x1/x2`` + ``bias`` input; ``BatchMatMulV2`` ``adj_x1/x2`` for bmm).

    mm(x, t(W))                     ==>  matmul(x, W, None, False, True)
    addmm(b, x, t(W))               ==>  matmul(x, W, b, False, True)      (beta = alpha = 1)
    bmm(permute(x, [0, 2, 1]), y)   ==>  matmul(x, y, None, True, False)
    view(mm(view(x, [B*S, K]), w), [B, S, N])  ==>  matmul(x', w)    (x' = x as [B, S, K]:
                          BatchMatMulV2 with a 2-D x2; the Reshape back disappears, and so
                          does the flattening one when x already is [B, S, K])

Without it every ``nn.Linear`` costs a GE ``Transpose`` of its weight per call. Fires in
training graphs too: it changes how one forward (or backward) op reads its operands, not
what any other graph saves or recomputes.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from npu_inductor import ops  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import aten, bump, call, finish, is_op, shape, static, val

npu = torch.ops.npu
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _untransposed(node: object) -> Node | None:
    """t(x) / permute(x, swap of the last two dims) -> x."""
    if is_op(node, aten.t.default) and len(shape(node.args[0])) == 2:
        return node.args[0]
    if is_op(node, aten.permute.default, aten.transpose.int):
        rank = len(shape(node))
        if node.target is aten.transpose.int:
            dims = sorted(d % rank for d in node.args[1:3])
            swap = dims == [rank - 2, rank - 1]
        else:
            swap = list(node.args[1]) == [*range(rank - 2), rank - 1, rank - 2]
        return node.args[0] if swap and rank in (2, 3) else None
    return None


def _operand(node: Node) -> tuple[Node, bool]:
    base = _untransposed(node)
    return (base, True) if base is not None else (node, False)


def _leading(dims: tuple, m: int) -> list[int] | None:
    """The shortest prefix of ``dims`` (two dims or more) whose product is ``m``."""
    prod = 1
    for j, d in enumerate(dims[:-1]):
        prod *= d
        if prod == m and j >= 1:
            return list(dims[: j + 1])
    return None


def _unflattened(gm: GraphModule, node: Node, x1: Node) -> Node | None:
    """The N-D operand for ``node`` when ``x1 = view(x, [M, K])`` flattens x's leading dims
    and every user views the product again: fires when that saves a Reshape (x already
    is [*leading, K], or a user views back to exactly [*leading, N])."""
    if not is_op(x1, *_VIEWS) or node.target not in (aten.mm.default, aten.addmm.default):
        return None
    if not node.users or not all(is_op(u, *_VIEWS) for u in node.users):
        return None
    x = x1.args[0]
    (m, k), dims = shape(x1), shape(x)
    if not static(dims) or len(dims) < 3:
        return None
    lead = _leading(dims, m)
    if lead is None:
        return None
    if list(dims) == [*lead, k]:
        return x
    back = any(list(shape(u)) == [*lead, shape(node)[-1]] for u in node.users)
    if not back or not val(x).is_contiguous():  # (no view of a strided x exists in eager)
        return None
    return call(gm, aten.view.default, (x, [*lead, k]))


def _rewrite(gm: GraphModule, node: Node, x1: Node, x2: Node, bias: Node | None) -> bool:
    a, ta = _operand(x1)
    b, tb = _operand(x2)
    with gm.graph.inserting_before(node):
        nd = None if ta else _unflattened(gm, node, x1)
        if not (ta or tb or bias is not None or nd is not None):
            return False
        fused = call(gm, npu.matmul.default, (nd or a, b, bias, ta, tb), like=node)
    node.replace_all_uses_with(fused)
    return True


def _addmm_bias(node: Node) -> Node | None:
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    bias = node.args[0]
    if beta != 1 or alpha != 1 or not isinstance(bias, Node):
        return None
    return bias if len(shape(bias)) == 1 and shape(bias)[0] == shape(node)[-1] else None


def fuse_matmul(gm: GraphModule, config: NpuConfig) -> GraphModule:
    for node in list(gm.graph.nodes):
        done = False
        if is_op(node, aten.mm.default, aten.bmm.default):
            done = _rewrite(gm, node, node.args[0], node.args[1], None)
        elif is_op(node, aten.addmm.default):
            bias = _addmm_bias(node)
            done = bias is not None and _rewrite(gm, node, node.args[1], node.args[2], bias)
        if done:
            bump("fuse_matmul")
    return finish(gm)
