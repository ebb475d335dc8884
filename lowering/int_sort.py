"""A stable sort of int32/int64 data for a SoC whose ``Sort`` takes floating dtypes only.

[Note: integer sort by rank]
The Ascend 910B's ``Sort`` and ``TopKV2`` have float16/bfloat16/float32 kernels only, and
float32 does not hold every int32/int64 value, so an integer row cannot be sorted through
a float cast. Instead each element's rank in the stable order is counted exactly in the
input's dtype:

    rank_i = #{j : x_j < x_i} + #{j < i : x_j == x_i}       (``>`` when descending)

which is a permutation (ties keep input order, as ``stable=True`` and eager's int sort do).
Position k of the result is the element of rank k: ``sum_i x_i [rank_i == k]`` and
``sum_i i [rank_i == k]`` (one term is non-zero, so the int sums are exact). Everything is
``Less``/``Equal``/``ReduceSum``/``Mul`` with int kernels on the AI Core; the cost is
``n`` comparisons per element, so rows are bounded by ``MAX_PAIRS``; a longer row is
refused (the op runs in eager with that reason).
"""

from __future__ import annotations

import math

import torch

from npu_inductor.ge.ir import Value
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.elementwise import pointwise
from npu_inductor.lowering.shape import reshape

# pairs compared per graph (numel * row length): 16M int64 compare results at most
MAX_PAIRS = 1 << 24
INT_DTYPES = (torch.int32, torch.int64)


def refusal(x: Value, axis: int) -> str | None:
    """Why the rank sort cannot take ``x`` along ``axis`` (None: it can)."""
    n, numel = x.shape[axis], math.prod(x.shape)
    if numel * n > MAX_PAIRS:
        return (f"no integer Sort kernel, and rows of {n} elements ({numel} in all) are too "
                f"long for the exact rank form ({numel * n} pairs > {MAX_PAIRS})")
    return None


def _lift(ctx: LoweringContext, v: Value, at: int, suffix: str) -> Value:
    shape = v.shape[:at] + (1,) + v.shape[at:]
    return reshape(ctx, v, shape, suffix)


def rank_sort(ctx: LoweringContext, x: Value, axis: int,
              descending: bool) -> tuple[Value, Value]:
    """(values, int64 indices) of a stable sort of int ``x`` along ``axis``."""
    n, dt = x.shape[axis], x.dtype
    xi = _lift(ctx, x, axis + 1, "rank_xi")  # i along ``axis``, j along ``axis + 1``
    xj = _lift(ctx, x, axis, "rank_xj")
    before = "Greater" if descending else "Less"
    lower = pointwise(ctx, before, [xj, xi], dt, y_dtype=torch.bool, suffix="rank_before")
    equal = pointwise(ctx, "Equal", [xj, xi], dt, y_dtype=torch.bool, suffix="rank_tie")
    pair = [1] * (x.rank + 1)
    pair[axis], pair[axis + 1] = n, n
    earlier = ctx.const(torch.ones(n, n, dtype=torch.bool).tril(-1).reshape(pair), torch.bool,
                        "rank_earlier")  # [i, j] = j < i
    tie = ctx.op("LogicalAnd", [equal, earlier], out=(torch.bool, equal.shape),
                 suffix="rank_tie_before")
    counted = ctx.op("LogicalOr", [lower, tie], out=(torch.bool, equal.shape),
                     suffix="rank_counted")
    rank = _sum(ctx, _as(ctx, counted, torch.int64), axis + 1, "rank")  # x's shape
    # onehot[i, k] = rank_i == k, with i along ``axis`` and k along ``axis + 1``
    ks = ctx.const(torch.arange(n, dtype=torch.int64).reshape(
        [n if d == axis + 1 else 1 for d in range(x.rank + 1)]), torch.int64, "rank_k")
    onehot = pointwise(ctx, "Equal", [_lift(ctx, rank, axis + 1, "rank_lift"), ks],
                       torch.int64, y_dtype=torch.bool, suffix="rank_onehot")
    hot = _as(ctx, onehot, dt)
    values = _sum(ctx, pointwise(ctx, "Mul", [hot, xi], dt, suffix="rank_pick"), axis, "sorted")
    pos = ctx.const(torch.arange(n, dtype=torch.int64).reshape(
        [n if d == axis else 1 for d in range(x.rank + 1)]), torch.int64, "rank_i")
    hot64 = hot if dt == torch.int64 else _as(ctx, onehot, torch.int64)
    indices = _sum(ctx, pointwise(ctx, "Mul", [hot64, pos], torch.int64, suffix="rank_where"),
                   axis, "order")
    return values, indices


def _as(ctx: LoweringContext, b: Value, dtype: torch.dtype) -> Value:
    from npu_inductor.lowering.helpers import cast

    return cast(ctx, b, dtype)


def _sum(ctx: LoweringContext, v: Value, axis: int, suffix: str) -> Value:
    from npu_inductor.lowering.reduction import reduce

    return reduce(ctx, "ReduceSum", v, [axis], False, v.dtype, suffix=suffix)
