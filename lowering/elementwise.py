"""Elementwise converters: unary math, binary arithmetic with torch's type promotion."""

from __future__ import annotations

import torch

from npu_inductor.lowering.helpers import as_value, cast, promote
from npu_inductor.lowering.registry import register

aten = torch.ops.aten


def register_unary(target: torch._ops.OpOverload, ge_type: str) -> None:
    """``target(self)`` -> ``ge_type(x)`` computed in the output dtype."""

    @register(target)
    def convert(ctx, self):
        return ctx.op(ge_type, [cast(ctx, self, ctx.out_dtype)])


def register_binary(target: torch._ops.OpOverload, ge_type: str) -> None:
    """``target(self, other)`` -> ``ge_type(x1, x2)`` with operands promoted as torch does."""

    @register(target)
    def convert(ctx, self, other):
        dtype = promote(self, other)
        return ctx.op(ge_type, [as_value(ctx, self, dtype), as_value(ctx, other, dtype)])


for _t, _g in ((aten.relu.default, "Relu"),):
    register_unary(_t, _g)

for _t, _g in ((aten.mul.Tensor, "Mul"), (aten.div.Tensor, "RealDiv")):
    register_binary(_t, _g)


@register(aten.add.Tensor)
def add_tensor(ctx, self, other, alpha=1):
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    dtype = promote(self, other)
    rhs = as_value(ctx, other, dtype)
    if alpha != 1:
        rhs = ctx.op("Mul", [rhs, ctx.const(alpha, dtype)], out=(dtype, rhs.shape), suffix="alpha")
    return ctx.op("Add", [as_value(ctx, self, dtype), rhs])


@register(aten.sub.Tensor)
def sub_tensor(ctx, self, other, alpha=1):
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    dtype = promote(self, other)
    rhs = as_value(ctx, other, dtype)
    if alpha != 1:
        rhs = ctx.op("Mul", [rhs, ctx.const(alpha, dtype)], out=(dtype, rhs.shape), suffix="alpha")
    return ctx.op("Sub", [as_value(ctx, self, dtype), rhs])
