"""Matrix-multiply converters: mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot ->
MatMulV2 / BatchMatMulV2 (vectors run as one-column matrices)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from npu_inductor.ge.ir import Value
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.helpers import broadcast_shape, int_list
from npu_inductor.lowering.reduction import reduce
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import reshape, static_dims, transpose

aten = torch.ops.aten


def _reshape(ctx: LoweringContext, v: Value, shape: Sequence[int], suffix: str) -> Value:
    return ctx.op("Reshape", [v, int_list(ctx, shape)], out=(v.dtype, tuple(shape)),
                  suffix=suffix)


def _scale(ctx: LoweringContext, v: Value, factor, suffix: str) -> Value:
    if factor == 1:
        return v
    return ctx.op("Mul", [v, ctx.const(factor, v.dtype)], out=(v.dtype, v.shape), suffix=suffix)


def _beta_self_plus_alpha_prod(ctx: LoweringContext, self: Value, prod: Value, beta,
                               alpha) -> Value:
    """``beta * self + alpha * prod``; torch ignores ``self`` entirely when beta is 0."""
    prod = _scale(ctx, prod, alpha, "alpha")
    if beta == 0:
        return ctx.op("Identity", [prod]) if ctx.out_specs()[0][1] == prod.shape else \
            ctx.op("BroadcastTo", [prod, int_list(ctx, ctx.out_specs()[0][1])])
    return ctx.op("Add", [prod, _scale(ctx, self, beta, "beta")])


@register(aten.mm.default)
def mm(ctx, self, mat2):
    """mm(Tensor self, Tensor mat2) -> Tensor"""
    return ctx.op("MatMulV2", [self, mat2])


@register(aten.bmm.default)
def bmm(ctx, self, mat2):
    """bmm(Tensor self, Tensor mat2) -> Tensor"""
    return ctx.op("BatchMatMulV2", [self, mat2])


@register(aten.addmm.default)
def addmm(ctx, self, mat1, mat2, beta=1, alpha=1):
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    if beta == 1 and alpha == 1 and self.rank == 1:
        return ctx.op("MatMulV2", [mat1, mat2, self])  # bias input of MatMulV2
    prod = ctx.op("MatMulV2", [mat1, mat2], out=(mat1.dtype, (mat1.shape[0], mat2.shape[1])),
                  suffix="mm")
    return _beta_self_plus_alpha_prod(ctx, self, prod, beta, alpha)


@register(aten.baddbmm.default)
def baddbmm(ctx, self, batch1, batch2, beta=1, alpha=1):
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""  # noqa: E501
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    prod = ctx.op("BatchMatMulV2", [batch1, batch2], out=(batch1.dtype, shape), suffix="bmm")
    return _beta_self_plus_alpha_prod(ctx, self, prod, beta, alpha)


@register(aten.addbmm.default)
def addbmm(ctx, self, batch1, batch2, beta=1, alpha=1):
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""  # noqa: E501
    # sum_b batch1[b] @ batch2[b] is one matmul over the joint (b, k) reduction axis
    static_dims(ctx, batch1, batch2)
    b, n, k = batch1.shape
    m = batch2.shape[2]
    lhs = ctx.op("Transpose", [batch1, int_list(ctx, [1, 0, 2], "perm")],
                 out=(batch1.dtype, (n, b, k)), suffix="nbk")
    lhs = _reshape(ctx, lhs, (n, b * k), "lhs")
    rhs = _reshape(ctx, batch2, (b * k, m), "rhs")
    prod = ctx.op("MatMulV2", [lhs, rhs], out=(batch1.dtype, (n, m)), suffix="mm")
    return _beta_self_plus_alpha_prod(ctx, self, prod, beta, alpha)


def _mv(ctx: LoweringContext, mat: Value, vec: Value) -> Value:
    static_dims(ctx, mat, vec)
    col = _reshape(ctx, vec, (vec.shape[0], 1), "col")
    prod = ctx.op("MatMulV2", [mat, col], out=(mat.dtype, (mat.shape[0], 1)), suffix="mm")
    return _reshape(ctx, prod, (mat.shape[0],), "vec")


@register(aten.mv.default)
def mv(ctx, self, vec):
    """mv(Tensor self, Tensor vec) -> Tensor"""
    return _mv(ctx, self, vec)


@register(aten.addmv.default)
def addmv(ctx, self, mat, vec, beta=1, alpha=1):
    """addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return _beta_self_plus_alpha_prod(ctx, self, _mv(ctx, mat, vec), beta, alpha)


@register(aten.dot.default)
def dot(ctx, self, tensor):
    """dot(Tensor self, Tensor tensor) -> Tensor"""
    static_dims(ctx, self, tensor)
    row = _reshape(ctx, self, (1, self.shape[0]), "row")
    col = _reshape(ctx, tensor, (tensor.shape[0], 1), "col")
    prod = ctx.op("MatMulV2", [row, col], out=(self.dtype, (1, 1)), suffix="mm")
    return _reshape(ctx, prod, (), "scalar")


# ---- _trilinear (nn.functional.bilinear) ----------------------------------------------------
def _sumproduct_pair(ctx: LoweringContext, left: Value, right: Value,
                     sum_dims: Sequence[int]) -> Value:
    """``(left * right).sum(sum_dims, keepdim=True)`` for equal-rank operands as one
    BatchMatMulV2, as torch's ``sumproduct_pair`` computes it: dims in both operands batch,
    dims in one only are rows / columns, summed dims are the contraction."""
    if not sum_dims:
        return ctx.op("Mul", [left, right], out=(left.dtype, broadcast_shape(left.shape,
                                                                            right.shape)),
                      suffix="mul")
    lro, lo, ro, summed = [], [], [], []
    for i in range(left.rank):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in sum_dims:
            if sl and sr:
                summed.append(i)
            elif sl:  # in one operand only: summed right away
                left = reduce(ctx, "ReduceSum", left, [i], True, left.dtype, suffix=f"sum{i}")
            elif sr:
                right = reduce(ctx, "ReduceSum", right, [i], True, right.dtype,
                               suffix=f"sum{i}")
        elif sl and sr:
            lro.append(i)
        elif sl:
            lo.append(i)
        else:
            ro.append(i)
    ones = [i for i in sum_dims if i not in summed]
    size = lambda v, dims: math.prod(v.shape[d] for d in dims)  # noqa: E731
    b, m, k, n = size(left, lro), size(left, lo), size(left, summed), size(right, ro)
    lhs = reshape(ctx, transpose(ctx, left, lro + lo + summed + ro + ones, "lperm"), (b, m, k),
                  "lhs")
    rhs = reshape(ctx, transpose(ctx, right, lro + summed + ro + lo + ones, "rperm"),
                  (b, k, n), "rhs")
    y = ctx.op("BatchMatMulV2", [lhs, rhs], out=(left.dtype, (b, m, n)), suffix="bmm")
    order = lro + lo + summed + ones + ro
    shape = [left.shape[d] for d in lro + lo] + [1] * (len(summed) + len(ones)) + \
        [right.shape[d] for d in ro]
    y = reshape(ctx, y, shape, "unflat")
    return transpose(ctx, y, sorted(range(len(order)), key=order.__getitem__), "operm")


def _float_matmul(node: torch.fx.Node) -> str | None:
    dtype = node.meta["val"].dtype
    floats = (torch.float32, torch.float16, torch.bfloat16)
    return None if dtype in floats else f"no float BatchMatMulV2 for {dtype}"


@register(aten._trilinear.default, capability=_float_matmul, dynamic=False)
def trilinear(ctx, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """_trilinear(Tensor i1, Tensor i2, Tensor i3, int[] expand1, int[] expand2,
    int[] expand3, int[] sumdim, int unroll_dim=1) -> Tensor"""
    # torch: sum over ``sumdim`` of i1 * i2 * i3 (each unsqueezed at its ``expand`` dims),
    # in two sumproduct_pair steps: dims i3 lacks with (i1, i2), the rest with i3. Its loop
    # over ``unroll_dim`` computes the same dot products, so one BatchMatMulV2 per step.
    static_dims(ctx, i1, i2, i3)
    total = i1.rank + len(expand1)
    ops = [ctx.op("Unsqueeze", [v], {"axes": sorted(e)},
                  out=(v.dtype, _unsqueezed(v.shape, e, total)), suffix=f"in{n}")
           if e else v for n, (v, e) in enumerate(((i1, expand1), (i2, expand2), (i3, expand3)))]
    sum12 = [i for i in sumdim if i in expand3]
    sum23 = [i for i in sumdim if i not in expand3]
    buf = _sumproduct_pair(ctx, ops[0], ops[1], sorted(sum12))
    y = _sumproduct_pair(ctx, buf, ops[2], sorted(sum23))
    return reshape(ctx, y, ctx.out_specs()[0][1], "")


def _unsqueezed(shape: Sequence[int], axes: Sequence[int], rank: int) -> tuple[int, ...]:
    dims = iter(shape)
    return tuple(1 if i in axes else next(dims) for i in range(rank))
