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

import sympy
import torch
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

from npu_inductor.ge import dtypes
from npu_inductor.ge.ir import DYNAMIC_DIM, Value
from npu_inductor.lowering.context import LoweringContext, static_shape
from npu_inductor.lowering.helpers import as_value, cast, int_list
from npu_inductor.lowering.registry import register

aten = torch.ops.aten
prims = torch.ops.prims
INT = torch.int64
_SCALAR = (INT, ())


def is_symbolic(values: Sequence[Any]) -> bool:
    return any(isinstance(v, Value) for v in values)


def scalar(ctx: LoweringContext, x: Any) -> Value:
    """An int64 0-d GE tensor for an int or a symbolic size."""
    if isinstance(x, torch.SymInt):  # a raw SymInt: int() on it would specialise the graph
        x = sym_value(ctx, x)
    return as_value(ctx, x, INT)


def shape_value(ctx: LoweringContext, sizes: Sequence[Any], suffix: str = "shape") -> Value:
    """A 1-D int64 shape tensor: a Const when every size is static, else a ``Pack`` of the
    static and symbolic sizes."""
    if not is_symbolic(sizes):
        return int_list(ctx, [int(s) for s in sizes], suffix)
    parts = [scalar(ctx, s) for s in sizes]
    return ctx.op("Pack", [parts], {"axis": 0, "N": len(parts)}, out=(INT, (len(parts),)),
                  suffix=suffix)


_FOLDS = {"Add": operator.add, "Sub": operator.sub, "Mul": operator.mul,
          "Maximum": max, "Minimum": min}


def size_op(ctx: LoweringContext, ge_type: str, a: Any, b: Any) -> Any:
    """Size arithmetic (``Add``, ``Sub``, ``Mul``, ``Maximum``, ``Minimum``) on ints or 0-d
    int64 tensors: folded in Python when both are ints, a scalar GE op otherwise."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        return _FOLDS[ge_type](int(a), int(b))
    return ctx.op(ge_type, [scalar(ctx, a), scalar(ctx, b)], out=_SCALAR, suffix="size")


def shape_of(ctx: LoweringContext, x: Value, dtype: torch.dtype = INT,
             suffix: str = "shape") -> Value:
    """``x``'s shape as a 1-D tensor: a ``Const`` when static, else ``Shape(x)``."""
    if DYNAMIC_DIM not in x.shape:
        return ctx.const(torch.tensor(list(x.shape), dtype=dtype), dtype, suffix)
    return ctx.op("Shape", [x], {"dtype": dtypes.to_cpp(dtype)}, out=(dtype, (x.rank,)),
                  suffix=suffix)


def sym_sizes(ctx: LoweringContext, x: Value) -> tuple[Any, ...]:
    """The sizes of a converter input as ints and SymInts, read from the FX node that
    produced it (a fully static ``x`` needs no lookup)."""
    sizes = _known_sizes(ctx, x)
    if sizes is None:
        raise DynamicShapeError(f"{ctx.node.target}: no symbolic sizes for an input of shape "
                                f"{list(x.shape)}")
    return sizes


def _known_sizes(ctx: LoweringContext, x: Value) -> tuple[Any, ...] | None:
    if DYNAMIC_DIM not in x.shape:
        return tuple(x.shape)
    for n in (*ctx.node.all_input_nodes, ctx.node):
        val = n.meta.get("val")
        if ctx.env.get(n) is x and isinstance(val, torch.Tensor):
            return tuple(val.shape)
    return None


def _exprs(sizes: Sequence[Any]) -> tuple[Any, ...]:
    """Sizes compared without guarding on them (sympy expressions, not SymInt ``==``)."""
    return tuple(s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(s) for s in sizes)


def sizes_value(ctx: LoweringContext, sizes: Sequence[Any], suffix: str = "shape") -> Value:
    """``shape_value`` of ints and SymInts (symbolic sizes lowered from their expressions)."""
    return shape_value(ctx, [sym_value(ctx, s) for s in sizes], suffix)


def reshape_to(ctx: LoweringContext, x: Value, sizes: Sequence[Any],
               suffix: str = "reshape") -> Value:
    """``Reshape`` to sizes given as ints and SymInts (no op when statically equal)."""
    shape = static_shape(sizes)
    known = _known_sizes(ctx, x)
    if shape == tuple(x.shape) and known is not None and _exprs(known) == _exprs(sizes):
        return x
    return ctx.op("Reshape", [x, sizes_value(ctx, sizes)], out=(x.dtype, shape), suffix=suffix)


def upper_mask(ctx: LoweringContext, rows: Any, cols: Any, diagonal: int = 1,
               dtype: torch.dtype = torch.bool, suffix: str = "mask") -> Value:
    """A ``(rows, cols)`` mask, 1/True where ``col - row >= diagonal`` (``triu``); sizes are
    ints or SymInts: a ``Const`` when static, else built from ``Range`` at run time."""
    if DYNAMIC_DIM not in static_shape((rows, cols)):
        mask = torch.ones(int(rows), int(cols), dtype=torch.bool).triu(diagonal)
        return ctx.const(mask.to(dtype), dtype, suffix)
    row = _arange(ctx, rows, f"{suffix}_rows")
    if diagonal != 1:  # col > row + diagonal - 1
        row = ctx.op("Add", [row, ctx.const(diagonal - 1, INT)], out=(INT, row.shape),
                     suffix=f"{suffix}_shift")
    row = ctx.op("Unsqueeze", [row], {"axes": [1]}, out=(INT, (*row.shape, 1)),
                 suffix=f"{suffix}_col")
    col = _arange(ctx, cols, f"{suffix}_cols")
    col = ctx.op("Unsqueeze", [col], {"axes": [0]}, out=(INT, (1, *col.shape)),
                 suffix=f"{suffix}_row")
    mask = ctx.op("Greater", [col, row], out=(torch.bool, static_shape((rows, cols))),
                  suffix=suffix)
    return cast(ctx, mask, dtype)


def _arange(ctx: LoweringContext, n: Any, suffix: str) -> Value:
    limit = scalar(ctx, sym_value(ctx, n))
    return ctx.op("Range", [ctx.const(0, INT), limit, ctx.const(1, INT)],
                  out=(INT, static_shape((n,))), suffix=suffix)


class DynamicShapeError(ValueError):
    """A converter asked for a shape with dynamic dims that cannot be rebuilt here; the node
    falls back to eager."""


def dynamic_shape(ctx: LoweringContext, values: Sequence[int], suffix: str) -> Value:
    """``values`` is the static view (``-1`` = dynamic) of one of the node's output shapes:
    rebuild it from the symbolic sizes in the node's ``meta['val']``."""
    vals = ctx.meta if isinstance(ctx.meta, (tuple, list)) else (ctx.meta,)
    for val in vals:
        if isinstance(val, torch.Tensor) and static_shape(val.shape) == tuple(values):
            return shape_value(ctx, [sym_value(ctx, s) for s in val.shape], suffix)
    raise DynamicShapeError(f"{ctx.node.target}: cannot express shape {list(values)} with "
                            "dynamic dims (not an output shape of this node)")


def sym_value(ctx: LoweringContext, size: Any) -> Any:
    """An int for a static size, an int64 0-d GE tensor for a symbolic one."""
    if isinstance(size, torch.SymInt) and not size.node.is_constant():
        return lower_expr(ctx, size.node.expr)
    return int(size)


def lower_expr(ctx: LoweringContext, expr: sympy.Expr) -> Value:
    """Evaluate a sympy size expression with scalar GE ops (cached per graph)."""
    cache = ctx.__dict__.setdefault("_sym_values", {})
    if expr not in cache:
        cache[expr] = _lower_expr(ctx, expr)
    return cache[expr]


def _lower_expr(ctx: LoweringContext, expr: sympy.Expr) -> Value:
    if expr.is_Integer:
        return ctx.const(int(expr), INT, "size")
    if expr.is_Symbol:
        return _symbol_source(ctx, expr)
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        expr = sympy.Mul(*[expr.base] * int(expr.exp), evaluate=False)  # s**2 = s * s
    folds = {sympy.Add: "Add", sympy.Mul: "Mul", FloorDiv: "FloorDiv", PythonMod: "FloorMod",
             Mod: "FloorMod", sympy.Max: "Maximum", sympy.Min: "Minimum"}
    ge_type = next((g for t, g in folds.items() if isinstance(expr, t)), None)
    if ge_type is None:
        raise DynamicShapeError(f"size expression {expr} has no GE scalar form here")
    args = [lower_expr(ctx, a) for a in expr.args]
    acc = args[0]
    for a in args[1:]:
        acc = ctx.op(ge_type, [acc, a], out=_SCALAR, suffix="size")
    return acc


def _symbol_source(ctx: LoweringContext, sym: sympy.Symbol) -> Value:
    """A size symbol's value: its SymInt graph input, else ``Shape`` of a tensor input."""
    for p in ctx.node.graph.nodes:
        # placeholders without users are not graph inputs: their env entry is no Value
        if p.op != "placeholder" or not isinstance(ctx.env.get(p), Value):
            continue
        val = p.meta.get("val")
        if isinstance(val, torch.SymInt) and val.node.expr == sym:
            return ctx.env[p]
        if isinstance(val, torch.Tensor):
            for d, s in enumerate(val.shape):
                if isinstance(s, torch.SymInt) and s.node.expr == sym:
                    return _dim_of(ctx, ctx.env[p], d)
    raise DynamicShapeError(f"size symbol {sym} is not an input of this graph")


def _dim_of(ctx: LoweringContext, x: Value, dim: int) -> Value:
    shape = ctx.op("Shape", [x], {"dtype": dtypes.to_cpp(INT)}, out=(INT, (x.rank,)),
                   suffix="shape")
    return ctx.op("GatherV2", [shape, ctx.const(dim, INT, "dim"), ctx.const(0, INT, "axis")],
                  out=_SCALAR, suffix="size")


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
    return _dim_of(ctx, self, dim % self.rank)


@register(aten.sym_numel.default)
def sym_numel(ctx, self):
    """sym_numel(Tensor self) -> SymInt"""
    shape = ctx.op("Shape", [self], {"dtype": dtypes.to_cpp(INT)}, out=(INT, (self.rank,)),
                   suffix="shape")
    return ctx.op("ReduceProd", [shape, ctx.const([0], INT, "axes")], {"keep_dims": False},
                  out=_SCALAR)


@register(prims.convert_element_type.default)
def convert_element_type(ctx, a, dtype):
    """convert_element_type(Tensor a, ScalarType dtype) -> Tensor"""
    # dynamic=True makes Python float attributes (an RMSNorm eps) 0-d float64 graph inputs,
    # which AOT converts with this prim
    return cast(ctx, a, dtype)
