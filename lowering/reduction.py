"""Reduction and scan converters: sum, mean, prod, amax/amin, max/min (with indices),
argmax/argmin, any/all, var/std, cumsum/cumprod, vector norms.

GE's Reduce* ops take the axes as an int64 ``Const`` input and ``keep_dims`` as an attr;
empty axes reduce nothing in GE, so the axes are always spelled out (all dims for torch's
``dim=None`` / ``dim=[]``). Result dtypes follow torch: ``sum``/``prod``/``cumsum`` of
bool or integers accumulate in int64, ``mean``/``var`` are floating only.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch._ops import OpOverload

from npu_inductor.ge import dtypes
from npu_inductor.ge.ir import DYNAMIC_DIM, Value
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.elementwise import need_dtype, pointwise, select, supports, to_bool
from npu_inductor.lowering.helpers import (
    as_value,
    cast,
    checked,
    int_list,
    norm_axes,
    norm_axis,
)
from npu_inductor.lowering.index import filled, scatter_reduce_along, sorted_along
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import move, reshape, static_dims, strided_slice

aten = torch.ops.aten


def axes_of(dim: Any, rank: int) -> list[int]:
    """torch ``dim`` (None, int, or list; empty = all) -> sorted non-negative GE axes."""
    if isinstance(dim, int):
        dim = [dim]
    return norm_axes(dim, rank)


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keep: bool) -> tuple[int, ...]:
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduce(ctx: LoweringContext, ge_type: str, x: Value, axes: Sequence[int], keep: bool,
           dtype: torch.dtype, *, out: torch.dtype | None = None, suffix: str = "") -> Value:
    """``ge_type(x, axes)[keep_dims]`` computed in ``dtype`` (widened if needed)."""
    cd = need_dtype(ge_type, dtype)
    xv = as_value(ctx, x, cd)
    y = ctx.op(ge_type, [xv, int_list(ctx, axes, "axes")], {"keep_dims": keep},
               out=(cd, reduced_shape(xv.shape, axes, keep)), suffix=suffix)
    return y if out is None else cast(ctx, y, out)


def register_reduce(targets: Sequence[OpOverload], ge_type: str, *, in_out_dtype: bool) -> None:
    """``target(self, dim, keepdim, *, dtype)`` -> ``ge_type``; computes in the output dtype
    (sum, mean, prod: torch accumulates there) or else in the input's (amax, amin)."""

    @register(*targets, capability=supports(ge_type))
    def convert(ctx, self, dim=None, keepdim=False, dtype=None):
        compute = ctx.out_dtype if in_out_dtype else self.dtype
        return reduce(ctx, ge_type, self, axes_of(dim, self.rank), keepdim, compute,
                      out=ctx.out_dtype)


register_reduce([aten.sum.dim_IntList, aten.sum.default], "ReduceSum", in_out_dtype=True)
register_reduce([aten.mean.dim, aten.mean.default], "ReduceMean", in_out_dtype=True)
register_reduce([aten.prod.dim_int, aten.prod.default], "ReduceProd", in_out_dtype=True)
register_reduce([aten.amax.default, aten.max.default], "ReduceMax", in_out_dtype=False)
register_reduce([aten.amin.default, aten.min.default], "ReduceMin", in_out_dtype=False)


def _any_all(ge_type: str):
    def convert(ctx, self, dim=None, keepdim=False):
        axes = axes_of(dim, self.rank)
        return reduce(ctx, ge_type, to_bool(ctx, self), axes, keepdim, torch.bool,
                      out=ctx.out_dtype)
    return convert


register(aten.any.default, aten.any.dim, aten.any.dims)(_any_all("ReduceAny"))
register(aten.all.default, aten.all.dim, aten.all.dims)(_any_all("ReduceAll"))


# ---- arg reductions ------------------------------------------------------------------
def _reshape(ctx: LoweringContext, x: Value, shape: Sequence[int], suffix: str) -> Value:
    return ctx.op("Reshape", [x, int_list(ctx, shape)], out=(x.dtype, tuple(shape)),
                  suffix=suffix)


def arg_reduce(ctx: LoweringContext, ge_type: str, x: Value, dim: int | None, keep: bool,
               suffix: str = "") -> Value:
    """int64 index of the max/min along ``dim`` (over the flattened tensor when None)."""
    cd = need_dtype(ge_type, x.dtype)
    xv = as_value(ctx, x, cd)
    if dim is None:
        numel = math.prod(xv.shape) if DYNAMIC_DIM not in xv.shape else DYNAMIC_DIM
        xv, axis = _reshape(ctx, xv, [numel], "flat"), 0
    else:
        axis = norm_axis(dim, x.rank)
    shape = reduced_shape(xv.shape, [axis], False)
    idx = ctx.op(ge_type, [xv, ctx.const(axis, torch.int64, "dim")], {"dtype": torch.int64},
                 out=(torch.int64, shape), suffix=suffix)
    if keep:
        kept = [1] * x.rank if dim is None else reduced_shape(x.shape, [axis], True)
        idx = _reshape(ctx, idx, kept, "keep")
    return idx


@register(aten.argmax.default, capability=supports("ArgMaxV2"))
def argmax(ctx, self, dim=None, keepdim=False):
    """argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return arg_reduce(ctx, "ArgMaxV2", self, dim, keepdim)


@register(aten.argmin.default, capability=supports("ArgMin"))
def argmin(ctx, self, dim=None, keepdim=False):
    """argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return arg_reduce(ctx, "ArgMin", self, dim, keepdim)


def _max_min_dim(value_type: str, index_type: str):
    def convert(ctx, self, dim, keepdim=False):
        if self.rank == 0:  # a 0-d tensor is its own max (empty axes: no reduction), index 0
            values = reduce(ctx, value_type, self, [], keepdim, self.dtype, out=self.dtype,
                            suffix="values")
            return values, ctx.const(0, torch.int64, "indices")
        axis = norm_axis(dim, self.rank)
        values = reduce(ctx, value_type, self, [axis], keepdim, self.dtype, out=self.dtype,
                        suffix="values")
        return values, arg_reduce(ctx, index_type, self, axis, keepdim, suffix="indices")
    return convert


register(aten.max.dim, capability=supports("ReduceMax", "ArgMaxV2"))(
    _max_min_dim("ReduceMax", "ArgMaxV2"))
register(aten.min.dim, capability=supports("ReduceMin", "ArgMin"))(
    _max_min_dim("ReduceMin", "ArgMin"))


# ---- variance and standard deviation ---------------------------------------------------
def _denominator(ctx: LoweringContext, x: Value, axes: Sequence[int], correction: float,
                 dtype: torch.dtype) -> float | Value:
    """max(N - correction, 0), N the element count over ``axes``: a number when static,
    else computed at run time from ``Shape(x)``."""
    dims = [x.shape[a] for a in axes]
    if DYNAMIC_DIM not in dims:
        return float(max(math.prod(dims) - correction, 0))
    shape = ctx.op("Shape", [x], {"dtype": dtypes.to_cpp(torch.int64)},
                   out=(torch.int64, (x.rank,)), suffix="shape")
    picked = ctx.op("GatherV2", [shape, int_list(ctx, axes, "axes"),
                                 ctx.const(0, torch.int64, "axis")],
                    out=(torch.int64, (len(axes),)), suffix="dims")
    count = reduce(ctx, "ReduceProd", picked, [0], False, torch.int64, out=dtype, suffix="count")
    less = pointwise(ctx, "Sub", [count, correction], dtype, suffix="dof")
    return pointwise(ctx, "Maximum", [less, 0.0], dtype, suffix="denom")


def moments(ctx: LoweringContext, x: Value, dim: Any, correction: Any, keep: bool,
            dtype: torch.dtype) -> tuple[Value, Value]:
    """(variance, mean) in ``dtype`` (two-pass: mean, then sum of squared differences)."""
    # No GE variance op takes torch's arbitrary correction with an axes list (ReduceStdV2
    # returns std, ReduceMeanVariance has no correction): compose Reduce* ops instead.
    axes = axes_of(dim, x.rank)
    cd = need_dtype("SquaredDifference", dtype)
    xv = as_value(ctx, x, cd)
    mean_kept = reduce(ctx, "ReduceMean", xv, axes, True, cd, suffix="mean_kept")
    sq = pointwise(ctx, "SquaredDifference", [xv, mean_kept], cd, suffix="sqdiff")
    total = reduce(ctx, "ReduceSum", sq, axes, keep, cd, suffix="sumsq")
    correction = 1 if correction is None else correction
    denom = _denominator(ctx, xv, axes, correction, cd)
    var = pointwise(ctx, "RealDiv", [total, denom], cd, suffix="var")
    mean = mean_kept if keep else reduce(ctx, "ReduceMean", xv, axes, False, cd, suffix="mean")
    return var, mean


def _var_std(sqrt: bool, with_mean: bool):
    def convert(ctx, self, dim=None, correction=None, keepdim=False):
        var, mean = moments(ctx, self, dim, correction, keepdim, ctx.out_dtype)
        y = pointwise(ctx, "Sqrt", [var], var.dtype, suffix="std") if sqrt else var
        y = cast(ctx, y, ctx.out_dtype)
        return (y, cast(ctx, mean, ctx.out_dtype)) if with_mean else y
    return convert


_VAR_CAP = supports("SquaredDifference", "ReduceMean")
register(aten.var.correction, capability=_VAR_CAP)(_var_std(False, False))
register(aten.std.correction, capability=_VAR_CAP)(_var_std(True, False))
register(aten.var_mean.correction, capability=_VAR_CAP)(_var_std(False, True))
register(aten.std_mean.correction, capability=_VAR_CAP)(_var_std(True, True))


# ---- scans and norms -------------------------------------------------------------------
def _scan(ge_type: str):
    def convert(ctx, self, dim, dtype=None):
        cd = need_dtype(ge_type, ctx.out_dtype)
        axis = norm_axis(dim, self.rank) if self.rank else 0
        y = ctx.op(ge_type, [as_value(ctx, self, cd), ctx.const(axis, torch.int64, "axis")],
                   {"exclusive": False, "reverse": False}, out=(cd, self.shape))
        return cast(ctx, y, ctx.out_dtype)
    return convert


register(aten.cumsum.default, capability=supports("Cumsum"))(_scan("Cumsum"))
register(aten.cumprod.default, capability=supports("Cumprod"))(_scan("Cumprod"))


def vector_norm(ctx: LoweringContext, x: Value, ord: float, axes: Sequence[int], keep: bool,
                dtype: torch.dtype) -> Value:
    """The ``ord``-norm of ``x`` over ``axes`` (LpNormV2; inf norms as max/min of |x|)."""
    if ord == 0:  # the count of nonzeros, exact in int64, rounded once as eager does
        nonzero = pointwise(ctx, "NotEqual", [x, 0], dtype, y_dtype=torch.bool,
                            suffix="nonzero")
        return reduce(ctx, "ReduceSum", cast(ctx, nonzero, torch.int64), axes, keep,
                      torch.int64, out=dtype, suffix="count")
    cd = need_dtype("LpNormV2", dtype)
    x = as_value(ctx, x, cd)
    if math.isinf(ord):  # max / min of |x|: plain reductions, no p-th powers
        ge_type = "ReduceMax" if ord > 0 else "ReduceMin"
        absx = pointwise(ctx, "Abs", [x], cd, suffix="abs")
        return reduce(ctx, ge_type, absx, axes, keep, cd, out=dtype)
    # epsilon 0: LpNormV2 clamps the norm from below by epsilon; torch does not.
    y = ctx.op("LpNormV2", [x], {"p": float(ord), "axes": list(axes), "keepdim": keep,
                                 "epsilon": 0.0}, out=(cd, reduced_shape(x.shape, axes, keep)))
    return cast(ctx, y, dtype)


@register(aten.linalg_vector_norm.default, capability=supports("LpNormV2"))
def linalg_vector_norm(ctx, self, ord=2, dim=None, keepdim=False, dtype=None):
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False,
    *, ScalarType? dtype=None) -> Tensor"""
    return vector_norm(ctx, self, ord, axes_of(dim, self.rank), keepdim, ctx.out_dtype)


@register(aten.dist.default, capability=supports("LpNormV2"))
def dist(ctx, self, other, p=2):
    """dist(Tensor self, Tensor other, Scalar p=2) -> Tensor"""
    dtype = ctx.out_dtype
    diff = pointwise(ctx, "Sub", [self, other], dtype, suffix="diff")
    return vector_norm(ctx, diff, p, list(range(diff.rank)), False, dtype)


def _cum_extreme(ge_type: str, dim_attr: str):
    def convert(ctx, self, dim):
        axis = norm_axis(dim, self.rank) if self.rank else 0
        cd = need_dtype(ge_type, self.dtype)
        values, indices = ctx.op(ge_type, [as_value(ctx, self, cd)], {dim_attr: axis},
                                 out=[(cd, self.shape), (torch.int64, self.shape)])
        return cast(ctx, values, self.dtype), indices
    return convert


# GE names the axis attr differently on the two prototypes (Cummax.dim, Cummin.axis).
register(aten.cummax.default, capability=supports("Cummax"))(_cum_extreme("Cummax", "dim"))
register(aten.cummin.default, capability=supports("Cummin"))(_cum_extreme("Cummin", "axis"))


@register(aten.logcumsumexp.default, capability=supports("CumulativeLogsumexp"))
def logcumsumexp(ctx, self, dim):
    """logcumsumexp(Tensor self, int dim) -> Tensor"""
    cd = need_dtype("CumulativeLogsumexp", ctx.out_dtype)
    axis = norm_axis(dim, self.rank) if self.rank else 0
    # CumulativeLogsumexp takes its axis as int32/int16 only.
    y = ctx.op("CumulativeLogsumexp", [as_value(ctx, self, cd), ctx.const(axis, torch.int32,
                                                                          "axis")],
               {"exclusive": False, "reverse": False}, out=(cd, self.shape))
    return cast(ctx, y, ctx.out_dtype)


@register(aten.aminmax.default, capability=supports("ReduceMin", "ReduceMax"))
def aminmax(ctx, self, dim=None, keepdim=False):
    """aminmax(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)"""
    axes = axes_of(dim, self.rank)
    return tuple(reduce(ctx, ge_type, self, axes, keepdim, self.dtype, out=self.dtype,
                        suffix=suffix)
                 for ge_type, suffix in (("ReduceMin", "min"), ("ReduceMax", "max")))


@register(aten.nansum.default, capability=supports("ReduceSum"))
def nansum(ctx, self, dim=None, keepdim=False, dtype=None):
    """nansum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)
    -> Tensor"""
    # No GE NanSum: NaNs become 0 (SelectV2 on IsNan), then ReduceSum.
    x = self
    if self.dtype.is_floating_point:
        nan = pointwise(ctx, "IsNan", [self], self.dtype, y_dtype=torch.bool, suffix="nan")
        x = select(ctx, nan, 0, self, self.dtype, suffix="zeroed")
    return reduce(ctx, "ReduceSum", x, axes_of(dim, self.rank), keepdim, ctx.out_dtype,
                  out=ctx.out_dtype)


# ---- order statistics: median, nanmedian ------------------------------------------------
# No GE median op: a stable ascending Sort (NaN last, ties in input order) and a gather at
# the median's rank reproduce torch CPU exactly, indices included: its nth_element breaks
# value ties by index, and torch.median returns the first NaN of a row holding any.
def _take(ctx: LoweringContext, x: Value, k: Value, axis: int, suffix: str) -> Value:
    return move(ctx, "GatherElements", [x, k], {"dim": axis}, out=(x.dtype, k.shape),
                suffix=suffix)


def _all_nan_index(n: int) -> int:
    """The index torch.nanmedian returns for a row of ``n`` NaNs: NaNs are unordered, so it
    is wherever libstdc++'s nth_element leaves position 0, a function of ``n`` alone."""
    return int(torch.full((n,), math.nan).nanmedian(0).indices)


def _median(ctx: LoweringContext, self: Value, dim: int, keep: bool,
            ignore_nan: bool) -> tuple[Value, Value]:
    static_dims(ctx, self)
    x = reshape(ctx, self, (1,), "lift") if self.rank == 0 else self
    axis = norm_axis(dim, x.rank)
    n, kept = x.shape[axis], reduced_shape(x.shape, [axis], True)
    values, perm = sorted_along(ctx, x, axis, descending=False, stable=True)
    if not x.dtype.is_floating_point:  # no NaN: the ((n-1)//2)-th smallest
        mid = (n - 1) // 2
        picked = [strided_slice(ctx, v, [axis], [mid], [mid + 1], [1], suffix=s)
                  for v, s in ((values, "value"), (perm, "index"))]
    else:
        same = pointwise(ctx, "Equal", [x, x], x.dtype, y_dtype=torch.bool, suffix="not_nan")
        count = reduce(ctx, "ReduceSum", cast(ctx, same, torch.int64), [axis], True,
                       torch.int64, suffix="count")
        if ignore_nan:  # the median of the non-NaN values
            less = pointwise(ctx, "Maximum", [pointwise(ctx, "Sub", [count, 1], torch.int64,
                                                        suffix="less"), 0], torch.int64,
                             suffix="clamp")
            k = pointwise(ctx, "FloorDiv", [less, 2], torch.int64, suffix="rank")
        else:  # rank ``count`` is the row's first NaN when it holds any
            has_nan = pointwise(ctx, "Less", [count, n], torch.int64, y_dtype=torch.bool,
                                suffix="has_nan")
            k = select(ctx, has_nan, count, (n - 1) // 2, torch.int64, suffix="rank")
        picked = [_take(ctx, values, k, axis, "value"), _take(ctx, perm, k, axis, "index")]
        if ignore_nan:
            empty = pointwise(ctx, "Equal", [count, 0], torch.int64, y_dtype=torch.bool,
                              suffix="all_nan")
            picked[1] = select(ctx, empty, _all_nan_index(n), picked[1], torch.int64,
                               suffix="index_all_nan")
    shape = kept if keep else reduced_shape(x.shape, [axis], False)
    shape = shape if self.rank else ()
    return tuple(reshape(ctx, v, shape, s) for v, s in zip(picked, ("values", "indices")))


def _median_dim(ignore_nan: bool):
    def convert(ctx, self, dim, keepdim=False):
        return _median(ctx, self, dim, keepdim, ignore_nan)
    return convert


def _median_all(ignore_nan: bool):
    def convert(ctx, self):
        flat = reshape(ctx, self, (math.prod(self.shape),), "flat")
        return _median(ctx, flat, 0, False, ignore_nan)[0]
    return convert


_MEDIAN_CAP = supports("Sort")
register(aten.median.dim, capability=_MEDIAN_CAP, dynamic=False)(_median_dim(False))
register(aten.nanmedian.dim, capability=_MEDIAN_CAP, dynamic=False)(_median_dim(True))
register(aten.median.default, capability=_MEDIAN_CAP, dynamic=False)(_median_all(False))
register(aten.nanmedian.default, capability=_MEDIAN_CAP, dynamic=False)(_median_all(True))


# ---- histc --------------------------------------------------------------------------------
# torch CPU's histc (HistogramKernel.cpp, LINEAR_INTERPOLATION): an element x in
# [left, right] goes to bin trunc((x - left) * bins / (right - left)), each step rounded in
# x's dtype, the last bin closed; others (and NaN) are skipped. Counts accumulate in that
# dtype too, so they are exact only while a bin can hold every element.
_EXACT_COUNT = {torch.float16: 2048, torch.bfloat16: 256, torch.float32: 2 ** 24,
                torch.float64: 2 ** 53}


def _histc_ok(node: torch.fx.Node) -> str | None:
    x = node.args[0].meta["val"]
    lo, hi = (node.kwargs.get(k, node.args[i] if len(node.args) > i else 0)
              for i, k in ((2, "min"), (3, "max")))
    if x.dtype not in _EXACT_COUNT:
        return f"histc of {x.dtype}"
    if x.numel() > _EXACT_COUNT[x.dtype]:
        return f"histc counts of {x.numel()} elements are inexact in {x.dtype}"
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        return "histc range that eager rejects"
    return None


def _bin_targets(ctx: LoweringContext, x: Value, pos: Value, lo: Value, hi: Value,
                 spare: int) -> Value:
    """Scatter targets (n, 1) of the 1-D ``x``: its bin ``pos`` inside [lo, hi], else the
    spare bin ``spare`` (dropped afterwards; NaN is outside too)."""
    n, dtype = x.shape[0], x.dtype
    inside = ctx.op("LogicalAnd", [
        pointwise(ctx, "GreaterEqual", [x, lo], dtype, y_dtype=torch.bool, suffix="ge"),
        pointwise(ctx, "LessEqual", [x, hi], dtype, y_dtype=torch.bool, suffix="le")],
        out=(torch.bool, (n,)), suffix="inside")
    return reshape(ctx, select(ctx, inside, pos, spare, torch.int64, suffix="target"), (n, 1),
                   "nd")


def _histc_range(ctx: LoweringContext, x: Value, lo: float, hi: float) -> tuple[Value, Value]:
    """(left, right) edges as 0-d ``x.dtype`` values: min/max of the data when lo == hi, and
    widened by 1 either way when they are still equal."""
    if lo != hi:
        return ctx.const(lo, x.dtype, "left"), ctx.const(hi, x.dtype, "right")
    left = reduce(ctx, "ReduceMin", x, [0], False, x.dtype, suffix="data_min")
    right = reduce(ctx, "ReduceMax", x, [0], False, x.dtype, suffix="data_max")
    # eager raises "range of [min, max] is not finite" (inf or NaN data): so does the graph
    lr = ctx.op("Pack", [[left, right]], {"axis": 0, "N": 2}, out=(x.dtype, (2,)),
                suffix="range")
    finite = pointwise(ctx, "Equal", [pointwise(ctx, "Sub", [lr, lr], x.dtype, suffix="nan_inf"),
                                      0], x.dtype, y_dtype=torch.bool, suffix="finite")
    all_finite = reduce(ctx, "ReduceAll", finite, [0], False, torch.bool, suffix="all_finite")
    shown = cast(ctx, lr, torch.float32) if x.dtype == torch.bfloat16 else lr  # Assert data
    same = pointwise(ctx, "Equal", [left, right], x.dtype, y_dtype=torch.bool, suffix="same")
    same = checked(ctx, same, all_finite, [shown], "histc_range_is_finite")  # bool: any dtype
    return (select(ctx, same, pointwise(ctx, "Sub", [left, 1], x.dtype, suffix="left_m1"),
                   left, x.dtype, suffix="left"),
            select(ctx, same, pointwise(ctx, "Add", [right, 1], x.dtype, suffix="right_p1"),
                   right, x.dtype, suffix="right"))


@register(aten.histc.default, capability=_histc_ok, dynamic=False)
def histc(ctx, self, bins=100, min=0, max=0):
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor"""
    static_dims(ctx, self)
    n, dtype = math.prod(self.shape), self.dtype
    if n == 0:
        return filled(ctx, (bins,), 0, dtype)
    x = reshape(ctx, self, (n,), "flat")
    left, right = _histc_range(ctx, x, float(min), float(max))
    offset = pointwise(ctx, "Sub", [x, left], dtype, suffix="offset")
    scaled = pointwise(ctx, "Mul", [offset, bins], dtype, suffix="scaled")
    width = pointwise(ctx, "Sub", [right, left], dtype, suffix="width")
    ratio = pointwise(ctx, "RealDiv", [scaled, width], dtype, suffix="ratio")
    pos = pointwise(ctx, "Minimum", [cast(ctx, ratio, torch.int64), bins - 1], torch.int64,
                    suffix="bin")
    target = _bin_targets(ctx, x, pos, left, right, bins)
    counts = ctx.op("ScatterNonAliasingAdd", [filled(ctx, (bins + 1,), 0, torch.int32), target,
                                              filled(ctx, (n,), 1, torch.int32)],
                    out=(torch.int32, (bins + 1,)), suffix="count")
    counts = strided_slice(ctx, counts, [0], [0], [bins], [1], suffix="drop_spare")
    return cast(ctx, counts, dtype)


# ---- mode ---------------------------------------------------------------------------------
# torch CPU's mode: std::sort of (value, index) pairs by value, then the first longest run
# (so the smallest most frequent value) and the index at the run's end. std::sort is an
# insertion sort, so stable, up to 16 elements; past that its tie order (the index) is
# introsort's. A stable Sort reproduces it: runs from neighbour comparisons, run lengths
# from a Cummax of run starts, the first longest run from ArgMaxV2. NaN rows are outside
# this: std::sort's order around NaN (unordered) is its own, and which NaN a row may hold is
# data, so floating-point mode stays in eager (measured: 33 of 42 random NaN rows differed).
_STABLE_STD_SORT = 16


def _mode_ok(node: torch.fx.Node) -> str | None:
    x = node.args[0].meta["val"]
    if x.dtype.is_floating_point:
        return "mode of floating-point data: eager's order around NaN is std::sort's own"
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", -1)
    n = x.shape[dim] if x.dim() else 1
    uses_index = any(u.target is operator.getitem and u.args[1] == 1 and u.users
                     for u in node.users)
    if n > _STABLE_STD_SORT and uses_index:
        return f"mode's index over {n} > {_STABLE_STD_SORT} elements follows std::sort's order"
    return supports("Sort")(node)


def _shifted_differs(ctx: LoweringContext, s: Value, axis: int) -> Value:
    """``s[i] != s[i - 1]`` along ``axis`` (length n - 1)."""
    n = s.shape[axis]
    head = strided_slice(ctx, s, [axis], [0], [n - 1], [1], suffix="head")
    tail = strided_slice(ctx, s, [axis], [1], [n], [1], suffix="tail")
    return pointwise(ctx, "NotEqual", [tail, head], s.dtype, y_dtype=torch.bool,
                     suffix="differs")


def _edge(ctx: LoweringContext, differs: Value, axis: int, first: bool, suffix: str) -> Value:
    """``differs`` with a True row added at the start (run starts) or end (run ends)."""
    shape = list(differs.shape)
    shape[axis] = 1
    true = filled(ctx, shape, True, torch.bool)
    parts = [true, differs] if first else [differs, true]
    out = list(differs.shape)
    out[axis] += 1
    return move(ctx, "ConcatV2", [parts, ctx.const(axis, torch.int64, "axis")], {"N": 2},
                out=(torch.bool, tuple(out)), suffix=suffix)


@register(aten.mode.default, capability=_mode_ok, dynamic=False)
def mode(ctx, self, dim=-1, keepdim=False):
    """mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    static_dims(ctx, self)
    x = reshape(ctx, self, (1,), "lift") if self.rank == 0 else self
    axis = norm_axis(dim, x.rank)
    n, kept = x.shape[axis], reduced_shape(x.shape, [axis], True)
    values, perm = sorted_along(ctx, x, axis, descending=False, stable=True)
    if n == 1:
        best = filled(ctx, kept, 0, torch.int64)
    else:
        differs = _shifted_differs(ctx, values, axis)
        lifted = [1] * x.rank
        lifted[axis] = n
        pos = reshape(ctx, ctx.const(torch.arange(n), torch.int64, "pos"), lifted, "pos_lift")
        pos = ctx.op("BroadcastTo", [pos, int_list(ctx, x.shape)], out=(torch.int64, x.shape),
                     suffix="pos_spread")
        starts = select(ctx, _edge(ctx, differs, axis, True, "starts"), pos, 0, torch.int64,
                        suffix="start_pos")
        start, _ = ctx.op("Cummax", [starts], {"dim": axis},
                          out=[(torch.int64, x.shape), (torch.int64, x.shape)],
                          suffix="run_start")
        length = pointwise(ctx, "Add", [pointwise(ctx, "Sub", [pos, start], torch.int64,
                                                  suffix="offset"), 1], torch.int64,
                           suffix="length")
        runs = select(ctx, _edge(ctx, differs, axis, False, "ends"), length, 0, torch.int64,
                      suffix="run_length")
        best = reshape(ctx, arg_reduce(ctx, "ArgMaxV2", runs, axis, False, suffix="best"),
                       kept, "best_keep")
    picked = [_take(ctx, values, best, axis, "value"), _take(ctx, perm, best, axis, "index")]
    shape = (kept if keepdim else reduced_shape(x.shape, [axis], False)) if self.rank else ()
    return tuple(reshape(ctx, v, shape, s) for v, s in zip(picked, ("values", "indices")))


# ---- segment_reduce -----------------------------------------------------------------------
# torch reduces each segment of rows together with ``initial`` (max(initial, rows...),
# initial + sum, ...; an empty segment is ``initial``, else the identity, NaN for mean).
# Rows get their segment id from a SearchSorted over the segment ends; rows outside every
# segment go to a spare segment. The reduction is a scatter_reduce into a base of
# ``initial`` (or the identity), so ``initial`` takes part exactly as in torch.
_SEGMENT_REDUCE = {"sum": "sum", "prod": "prod", "max": "amax", "min": "amin", "mean": "sum"}


def _segment_reduce_ok(node: torch.fx.Node) -> str | None:
    kw = node.kwargs
    bounds = kw.get("lengths", kw.get("offsets"))
    if kw.get("indices") is not None or bounds is None or bounds.meta["val"].dim() != 1:
        return "segment_reduce with indices or batched (N-D) lengths/offsets"
    if (node.args[1] if len(node.args) > 1 else kw.get("reduce")) not in _SEGMENT_REDUCE:
        return "unknown segment reduction"
    return None


def _segment_ids(ctx: LoweringContext, rows: int, lengths: Value | None,
                 offsets: Value | None) -> tuple[Value, int]:
    """(int64 segment id of every row, segment count); out-of-segment rows get the count."""
    pos = ctx.const(torch.arange(rows), torch.int64, "rows")
    if lengths is not None:
        count = lengths.shape[0]
        ends = ctx.op("Cumsum", [cast(ctx, lengths, torch.int64),
                                 ctx.const(0, torch.int64, "axis")],
                      {"exclusive": False, "reverse": False}, out=(torch.int64, (count,)),
                      suffix="ends")
        start = None
    else:
        count = offsets.shape[0] - 1
        bounds = cast(ctx, offsets, torch.int64)
        ends = strided_slice(ctx, bounds, [0], [1], [count + 1], [1], suffix="ends")
        start = strided_slice(ctx, bounds, [0], [0], [1], [1], suffix="start")
    ids = ctx.op("SearchSorted", [ends, pos], {"dtype": torch.int64, "right": True},
                 out=(torch.int64, (rows,)), suffix="ids")
    if start is not None:  # rows before the first offset belong to no segment
        before = pointwise(ctx, "Less", [pos, start], torch.int64, y_dtype=torch.bool,
                           suffix="before")
        ids = select(ctx, before, count, ids, torch.int64, suffix="ids_in")
    return ids, count


@register(aten.segment_reduce.default, capability=_segment_reduce_ok, dynamic=False)
def segment_reduce(ctx, data, reduce, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """segment_reduce(Tensor data, str reduce, *, Tensor? lengths=None, Tensor? indices=None,
    Tensor? offsets=None, int axis=0, bool unsafe=False, Scalar? initial=None) -> Tensor"""
    static_dims(ctx, data)
    out_dtype = data.dtype
    if data.dtype in (torch.float16, torch.bfloat16):  # eager accumulates in float32
        data = cast(ctx, data, torch.float32)
    ids, count = _segment_ids(ctx, data.shape[0], lengths, offsets)
    rest = data.shape[1:]
    index = ctx.op("BroadcastTo", [reshape(ctx, ids, (data.shape[0],) + (1,) * len(rest),
                                           "ids_lift"), int_list(ctx, data.shape)],
                   out=(torch.int64, data.shape), suffix="ids_spread")
    identity = {"sum": 0, "mean": 0, "prod": 1, "max": -math.inf, "min": math.inf}[reduce]
    start = identity if initial is None else initial
    base = filled(ctx, (count + 1,) + rest, start, data.dtype)
    y = scatter_reduce_along(ctx, base, 0, index, data, _SEGMENT_REDUCE[reduce], True)
    if reduce == "mean":  # (initial + sum) / length; an empty segment keeps initial
        ones = filled(ctx, data.shape, 1, data.dtype)
        size = scatter_reduce_along(ctx, filled(ctx, (count + 1,) + rest, 0, data.dtype), 0,
                                    index, ones, "sum", True)
        mean = pointwise(ctx, "RealDiv", [y, size], data.dtype, suffix="mean")
        if initial is not None:
            empty = pointwise(ctx, "Equal", [size, 0], data.dtype, y_dtype=torch.bool,
                              suffix="empty")
            mean = select(ctx, empty, y, mean, data.dtype, suffix="mean_or_initial")
        y = mean
    y = strided_slice(ctx, y, [0], [0], [count], [1], suffix="segments")
    return cast(ctx, _segments_valid(ctx, y, data.shape[0], lengths, offsets, unsafe),
                out_dtype)


def _segments_valid(ctx: LoweringContext, y: Value, rows: int, lengths: Value | None,
                    offsets: Value | None, unsafe: bool) -> Value:
    """``y`` behind GE Asserts of what eager checks: lengths are >= 0 and sum to the row
    count (unless ``unsafe``); offsets never decrease."""
    if lengths is not None:
        if unsafe:
            return y
        n = cast(ctx, lengths, torch.int64)
        total = reduce(ctx, "ReduceSum", n, [0], False, torch.int64, suffix="lengths_sum")
        ok = pointwise(ctx, "LogicalAnd", [
            pointwise(ctx, "Equal", [total, rows], torch.int64, y_dtype=torch.bool,
                      suffix="all_rows"),
            reduce(ctx, "ReduceAll", pointwise(ctx, "GreaterEqual", [n, 0], torch.int64,
                                               y_dtype=torch.bool, suffix="nonneg"),
                   [0], False, torch.bool, suffix="all_nonneg")], torch.bool, suffix="ok")
        return checked(ctx, y, ok, [n], "segment_lengths_valid")
    count = offsets.shape[0] - 1
    if count < 1:
        return y
    o = cast(ctx, offsets, torch.int64)
    ends = strided_slice(ctx, o, [0], [1], [count + 1], [1], suffix="off_ends")
    starts = strided_slice(ctx, o, [0], [0], [count], [1], suffix="off_starts")
    ok = reduce(ctx, "ReduceAll", pointwise(ctx, "GreaterEqual", [ends, starts], torch.int64,
                                            y_dtype=torch.bool, suffix="ordered"),
                [0], False, torch.bool, suffix="all_ordered")
    return checked(ctx, y, ok, [o], "segment_offsets_valid")


# ---- histogram ------------------------------------------------------------------------------
# torch CPU's histogram: an element x in [e_0, e_last] goes to bin upper_bound(edges, x) - 1,
# the last bin closed; weights (else 1) accumulate per bin; density divides by the total and
# the bin widths. bin_ct edges are linspace(left, right, bins + 1) in x's dtype: computed
# here with torch.linspace when the range is static (a runtime linspace would have to match
# torch's kernel bit for bit), or just [min, max] for one bin over the data's range.
def _histogram_ok(node: torch.fx.Node) -> str | None:
    x = node.args[0].meta["val"]
    if x.dtype != torch.float32:  # SearchSorted has no float64
        return f"histogram of {x.dtype}"
    weight = node.kwargs.get("weight")
    if weight is None and x.numel() > _EXACT_COUNT[x.dtype]:
        return f"histogram counts of {x.numel()} elements are inexact in {x.dtype}"
    if node.target is aten.histogram.bin_ct:
        bins = node.args[1] if len(node.args) > 1 else node.kwargs.get("bins", 100)
        rng = node.kwargs.get("range")
        if rng is None and (bins != 1 or x.numel() == 0):
            return "histogram edges over the data's range need a runtime linspace"
        if rng is not None and not (math.isfinite(rng[0]) and math.isfinite(rng[1])
                                    and rng[0] <= rng[1]):
            return "histogram range that eager rejects"
    return None


def _histogram(ctx: LoweringContext, x: Value, edges: Value, weight: Value | None,
               density: bool) -> tuple[Value, Value]:
    static_dims(ctx, x, edges)
    n, k, dtype = math.prod(x.shape), edges.shape[0] - 1, x.dtype
    flat = reshape(ctx, x, (n,), "flat")
    pos = ctx.op("SearchSorted", [edges, flat], {"dtype": torch.int64, "right": True},
                 out=(torch.int64, (n,)), suffix="upper")
    pos = pointwise(ctx, "Minimum", [pointwise(ctx, "Sub", [pos, 1], torch.int64,
                                               suffix="below"), k - 1], torch.int64,
                    suffix="bin")
    first = strided_slice(ctx, edges, [0], [0], [1], [1], suffix="first")
    last = strided_slice(ctx, edges, [0], [k], [k + 1], [1], suffix="last")
    target = _bin_targets(ctx, flat, pos, first, last, k)
    amount = (reshape(ctx, cast(ctx, weight, dtype), (n,), "weights") if weight is not None
              else filled(ctx, (n,), 1, dtype))
    hist = ctx.op("ScatterNonAliasingAdd", [filled(ctx, (k + 1,), 0, dtype), target, amount],
                  out=(dtype, (k + 1,)), suffix="count")
    hist = strided_slice(ctx, hist, [0], [0], [k], [1], suffix="drop_spare")
    if density:
        total = reduce(ctx, "ReduceSum", hist, [0], False, dtype, suffix="total")
        widths = pointwise(ctx, "Sub", [
            strided_slice(ctx, edges, [0], [1], [k + 1], [1], suffix="rights"),
            strided_slice(ctx, edges, [0], [0], [k], [1], suffix="lefts")], dtype,
            suffix="widths")
        hist = pointwise(ctx, "RealDiv", [pointwise(ctx, "RealDiv", [hist, total], dtype,
                                                    suffix="share"), widths], dtype,
                         suffix="density")
    return hist, ctx.op("Identity", [edges], out=(dtype, edges.shape), suffix="edges")


@register(aten.histogram.bins_tensor, capability=_histogram_ok, dynamic=False)
def histogram_bins_tensor(ctx, self, bins, weight=None, density=False):
    """histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None,
    bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    return _histogram(ctx, self, cast(ctx, bins, self.dtype), weight, density)


@register(aten.histogram.bin_ct, capability=_histogram_ok, dynamic=False)
def histogram_bin_ct(ctx, self, bins=100, range=None, weight=None, density=False):
    """histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None,
    Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    if range is not None:
        lo, hi = range if range[0] != range[1] else (range[0] - 0.5, range[1] + 0.5)
        edges = ctx.const(torch.linspace(lo, hi, bins + 1, dtype=self.dtype), self.dtype,
                          "edges")
    else:  # one bin over [min, max] (widened by 0.5 when they are equal)
        flat = reshape(ctx, self, (math.prod(self.shape),), "flat_range")
        lo = reduce(ctx, "ReduceMin", flat, [0], True, self.dtype, suffix="data_min")
        hi = reduce(ctx, "ReduceMax", flat, [0], True, self.dtype, suffix="data_max")
        same = pointwise(ctx, "Equal", [lo, hi], self.dtype, y_dtype=torch.bool, suffix="same")
        lo = select(ctx, same, pointwise(ctx, "Sub", [lo, 0.5], self.dtype, suffix="lo_w"),
                    lo, self.dtype, suffix="left")
        hi = select(ctx, same, pointwise(ctx, "Add", [hi, 0.5], self.dtype, suffix="hi_w"),
                    hi, self.dtype, suffix="right")
        edges = ctx.op("ConcatV2", [[lo, hi], ctx.const(0, torch.int64, "axis")], {"N": 2},
                       out=(self.dtype, (2,)), suffix="edges")
    return _histogram(ctx, self, edges, weight, density)
