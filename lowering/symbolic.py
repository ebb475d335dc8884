"""Symbolic sizes: SymInt arithmetic and ``sym_size`` as int64 scalar GE tensors.

With dynamic shapes AOT graphs carry sizes as SymInt placeholders (bound as 0-d int64
``Data``) and compute with them (``s0 * s1``). Those computations become scalar GE ops,
and shape arguments that mix ints and SymInts become 1-D int64 tensors (``shape_value``),
so one GE graph with ``-1`` dims runs for every size.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.helpers import as_value, int_list
from npu_inductor.lowering.registry import register

from npu_inductor.ge import dtypes
from npu_inductor.ge.ir import Value

aten = torch.ops.aten
INT = torch.int64
_SCALAR = (INT, ())


def is_symbolic(values: Sequence[Any]) -> bool:
    return any(isinstance(v, Value) for v in values)


def scalar(ctx: LoweringContext, x: Any) -> Value:
    """An int64 0-d GE tensor for an int or a symbolic size."""
    return as_value(ctx, x, INT)


def shape_value(ctx: LoweringContext, sizes: Sequence[Any], suffix: str = "shape") -> Value:
    """A 1-D int64 shape tensor: a Const when every size is static, else a ``Pack`` of the
    static and symbolic sizes."""
    if not is_symbolic(sizes):
        return int_list(ctx, [int(s) for s in sizes], suffix)
    parts = [scalar(ctx, s) for s in sizes]
    return ctx.op("Pack", [parts], {"axis": 0, "N": len(parts)}, out=(INT, (len(parts),)),
                  suffix=suffix)


def _binary(ge_type: str):
    def convert(ctx, a, b):
        return ctx.op(ge_type, [scalar(ctx, a), scalar(ctx, b)], out=_SCALAR)
    return convert


for _op, _ge in ((operator.mul, "Mul"), (operator.add, "Add"), (operator.sub, "Sub"),
                 (operator.floordiv, "FloorDiv"), (operator.mod, "FloorMod")):
    register(_op)(_binary(_ge))


@register(operator.neg)
def neg(ctx, a):
    return ctx.op("Neg", [scalar(ctx, a)], out=_SCALAR)


@register(aten.sym_size.int)
def sym_size(ctx, self, dim):
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    shape = ctx.op("Shape", [self], {"dtype": dtypes.to_cpp(INT)}, out=(INT, (self.rank,)),
                   suffix="shape")
    index = ctx.const(dim % self.rank, INT, "dim")
    return ctx.op("GatherV2", [shape, index, ctx.const(0, INT, "axis")], out=_SCALAR)


@register(aten.sym_numel.default)
def sym_numel(ctx, self):
    """sym_numel(Tensor self) -> SymInt"""
    shape = ctx.op("Shape", [self], {"dtype": dtypes.to_cpp(INT)}, out=(INT, (self.rank,)),
                   suffix="shape")
    return ctx.op("ReduceProd", [shape, ctx.const([0], INT, "axes")], {"keep_dims": False},
                  out=_SCALAR)
