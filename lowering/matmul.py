"""Matrix-multiply converters: mm, bmm, addmm -> MatMulV2 / BatchMatMulV2."""

from __future__ import annotations

import torch

from npu_inductor.lowering.registry import register

aten = torch.ops.aten


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
    prod = ctx.op("MatMulV2", [mat1, mat2], suffix="mm")
    if alpha != 1:
        prod = ctx.op("Mul", [prod, ctx.const(alpha, prod.dtype)], out=(prod.dtype, prod.shape),
                      suffix="alpha")
    bias = self
    if beta != 1:
        bias = ctx.op("Mul", [self, ctx.const(beta, self.dtype)], out=(self.dtype, self.shape),
                      suffix="beta")
    return ctx.op("Add", [prod, bias])
