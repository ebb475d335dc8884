"""Indexing converters: index/index_put (GatherNd / TensorScatterUpdate /
ScatterNonAliasingAdd), index_select/take (GatherV2), gather/scatter (GatherElements /
ScatterElements), index_add/copy/fill, the functional ``*_scatter`` ops, masked_fill/scatter,
sort/topk.

Advanced indexing follows torch's layout rule: the broadcast index shape ``B`` replaces the
indexed dims in place when they are adjacent, and goes first otherwise. GE's ``*Nd`` ops
index leading dims, so indexed dims are transposed to the front and the result back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.ge.dtypes import ge_name
from npu_inductor.ge.ir import Value
from npu_inductor.ge.soc import DeviceDtypeError, has_kernel
from npu_inductor.lowering import int_sort
from npu_inductor.lowering.elementwise import select, to_bool
from npu_inductor.lowering.helpers import broadcast_shape, cast, int_list, norm_axis, promote
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import (
    broadcast_to,
    clamp_slice,
    dim_const,
    move,
    reshape,
    static_dims,
    strided_slice,
    transpose,
)
from npu_inductor.lowering.symbolic import (
    DynamicShapeError,
    is_symbolic,
    shape_value,
    size_op,
    sym_sizes,
    sym_value,
)

aten = torch.ops.aten


def _no_bool_index(node: torch.fx.Node) -> str | None:
    for i in node.args[1]:
        if isinstance(i, torch.fx.Node) and i.meta["val"].dtype in (torch.bool, torch.uint8):
            return "boolean-mask indexing has a data-dependent shape"
    return None


# ---- advanced indexing -----------------------------------------------------------------------
def _layout(self: Value, indices: Sequence[Value | None]) -> tuple[list[int], tuple[int, ...],
                                                                   bool]:
    """Indexed dims, broadcast index shape, and whether torch keeps ``B`` in place."""
    dims = [d for d, i in enumerate(indices) if i is not None]
    b = broadcast_shape(*[indices[d].shape for d in dims])
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    return dims, b, adjacent and dims[0] > 0


def _normalized(ctx, index: Value, size: int) -> Value:
    """Negative indices wrapped: a lookup into ``arange(size)`` with GatherV2's
    negative-index support."""
    if size < 0:
        raise DynamicShapeError("wrapping negative indices needs the indexed dim's static size")
    table = ctx.const(torch.arange(size), torch.int64, "table")
    return ctx.op("GatherV2", [table, cast(ctx, index, torch.int64), dim_const(ctx, 0)],
                  {"negative_index_support": True}, out=(torch.int64, index.shape),
                  suffix="wrap")


def _packed(ctx, self: Value, indices: Sequence[Value | None], dims: list[int],
            b: tuple[int, ...]) -> Value:
    """The indices of ``dims`` broadcast to ``b`` and packed as ``B + [k]`` (GE ``*Nd``)."""
    parts = [broadcast_to(ctx, _normalized(ctx, indices[d], self.shape[d]), b) for d in dims]
    return ctx.op("Pack", [parts], {"axis": len(b), "N": len(parts)},
                  out=(torch.int64, b + (len(parts),)), suffix="indices")


def _front(ctx, self: Value, dims: list[int]) -> tuple[Value, list[int]]:
    perm = dims + [d for d in range(self.rank) if d not in dims]
    return transpose(ctx, self, perm, suffix="front"), perm


def _in_place_perm(nb: int, pre: int, rank: int) -> list[int]:
    """Moves ``pre`` leading dims behind ``nb`` index dims: (B, pre, post) -> (pre, B, post)."""
    return list(range(nb, nb + pre)) + list(range(nb)) + list(range(nb + pre, rank))


def _index(ctx, self: Value, indices: Sequence[Value | None]) -> Value:
    indices = list(indices) + [None] * (self.rank - len(indices))
    dims, b, in_place = _layout(self, indices)
    if len(dims) == 1:  # GatherV2 places the index shape exactly where torch does
        index = cast(ctx, indices[dims[0]], torch.int64)
        return move(ctx, "GatherV2", [self, index, dim_const(ctx, dims[0])],
                    {"negative_index_support": True})
    x, _ = _front(ctx, self, dims)
    rest = tuple(x.shape[len(dims):])
    g = move(ctx, "GatherNd", [x, _packed(ctx, self, indices, dims, b)],
             out=(self.dtype, b + rest), suffix="gather")
    if not in_place:
        return g
    return transpose(ctx, g, _in_place_perm(len(b), dims[0], len(b) + len(rest)), suffix="")


@register(aten.index.Tensor, aten._unsafe_index.Tensor, capability=_no_bool_index)
def index_tensor(ctx, self, indices):
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"""
    return _index(ctx, self, indices)


def _index_put(ctx, self: Value, indices: Sequence[Value | None], values: Value,
               accumulate: bool) -> Value:
    indices = list(indices) + [None] * (self.rank - len(indices))
    dims, b, in_place = _layout(self, indices)
    x, perm = _front(ctx, self, dims)
    rest = tuple(x.shape[len(dims):])
    pre = dims[0] if in_place else 0
    # values broadcast to torch's indexing-result shape, then laid out as B + rest
    result = rest[:pre] + b + rest[pre:]
    v = broadcast_to(ctx, cast(ctx, values, self.dtype), result, suffix="values")
    v = transpose(ctx, v, _in_place_perm(pre, len(b), len(result)), suffix="values_front")
    ge_type = "ScatterNonAliasingAdd" if accumulate else "TensorScatterUpdate"
    y = move(ctx, ge_type, [x, _packed(ctx, self, indices, dims, b), v],
             out=(self.dtype, x.shape), data=(0, 2), suffix="scatter")
    inverse = sorted(range(len(perm)), key=perm.__getitem__)
    return transpose(ctx, y, inverse, suffix="")


def _mask_put_ok(node: torch.fx.Node) -> str | None:
    """Boolean-mask index_put keeps self's shape: lowered when one mask indexes and the
    values are one scalar, or (mask over leading dims) one row per selected element or a
    row broadcast to every selected element."""
    indices = node.args[1]
    masks = [i for i in indices if isinstance(i, torch.fx.Node)
             and i.meta["val"].dtype in (torch.bool, torch.uint8)]
    if not masks:
        return None
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    values = node.args[2].meta["val"]
    present = [i for i in indices if i is not None]
    if len(present) != 1 or masks[0].meta["val"].dtype != torch.bool or accumulate:
        return "boolean-mask index_put mixed with other indices or accumulating"
    if values.numel() != 1 and indices[0] is None:
        return "boolean-mask index_put of a tensor into inner dims"
    return None


def _mask_put(ctx, self: Value, indices: Sequence[Value | None], values: Value) -> Value:
    d = next(k for k, i in enumerate(indices) if i is not None)
    row = self.shape[d + indices[d].rank:]  # the dims each selected element carries
    lifted = (1,) * d + indices[d].shape + (1,) * len(row)
    mask = broadcast_to(ctx, reshape(ctx, indices[d], lifted, "mask"), self.shape, "mask_spread")
    v = cast(ctx, values, self.dtype)
    if math.prod(v.shape) == 1:
        return move(ctx, "MaskedFill", [self, mask, reshape(ctx, v, (), "value")], data=(0, 2))
    if v.rank == 1 + len(row) and v.shape[0] != 1:  # one row per selected element, in order
        return move(ctx, "MaskedScatter", [self, mask, v], data=(0, 2))
    spread = broadcast_to(ctx, v, self.shape, "values")
    return move(ctx, "SelectV2", [mask, spread, self], data=(1, 2))


@register(aten.index_put.default, aten._unsafe_index_put.default, capability=_mask_put_ok)
def index_put(ctx, self, indices, values, accumulate=False):
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False)
    -> Tensor"""
    if any(i is not None and i.dtype == torch.bool for i in indices):
        return _mask_put(ctx, self, indices, values)
    return _index_put(ctx, self, indices, values, accumulate)


@register(aten.index_select.default)
def index_select(ctx, self, dim, index):
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    x = reshape(ctx, self, (1,), "lift") if self.rank == 0 else self
    idx = reshape(ctx, index, (1,), "index") if index.rank == 0 else index
    dim = norm_axis(dim, x.rank)
    shape = x.shape[:dim] + idx.shape + x.shape[dim + 1:]
    y = move(ctx, "GatherV2", [x, idx, dim_const(ctx, dim)], out=(x.dtype, shape))
    return reshape(ctx, y, ctx.out_specs()[0][1], "squeeze")


@register(aten.take.default)
def take(ctx, self, index):
    """take(Tensor self, Tensor index) -> Tensor"""
    static_dims(ctx, self, index)
    flat = reshape(ctx, self, (math.prod(self.shape),), "flat")
    return move(ctx, "GatherV2", [flat, cast(ctx, index, torch.int64), dim_const(ctx, 0)],
                {"negative_index_support": True})


# ---- gather / scatter along a dim ------------------------------------------------------------
@register(aten.gather.default)
def gather(ctx, self, dim, index, sparse_grad=False):
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    attrs = {"dim": norm_axis(dim, max(self.rank, 1))}
    return move(ctx, "GatherElements", [self, _int_index(ctx, index)], attrs)


def _int_index(ctx, index: Value) -> Value:
    """GE index inputs take int32/int64 only (torch also allows smaller integer types)."""
    return index if index.dtype in (torch.int32, torch.int64) else cast(ctx, index, torch.int64)


def _scatter_elements(ctx, self: Value, dim: int, index: Value, updates: Value,
                      reduction: str = "none") -> Value:
    index = _int_index(ctx, index)
    updates = cast(ctx, updates, self.dtype)
    if updates.shape != index.shape:  # torch reads only src[:index.shape]
        updates = strided_slice(ctx, updates, list(range(index.rank)), [0] * index.rank,
                                list(index.shape), [1] * index.rank, suffix="src")
    attrs = {"axis": norm_axis(dim, max(self.rank, 1)), "reduction": reduction}
    return move(ctx, "ScatterElements", [self, index, updates], attrs,
                out=(self.dtype, self.shape), data=(0, 2))


def filled(ctx, shape: Sequence[int], value: Any, dtype: torch.dtype) -> Value:
    """A ``Fill`` of ``shape`` with a scalar (or 0-d ``Value``) ``value``."""
    fill = cast(ctx, value, dtype) if isinstance(value, Value) else ctx.const(value, dtype,
                                                                               "value")
    return ctx.op("Fill", [int_list(ctx, shape, "dims"), fill], out=(dtype, tuple(shape)),
                  suffix="fill")


_REDUCTIONS = {"add": "add", "multiply": "mul", "sum": "add", "prod": "mul"}


@register(aten.scatter.src)
def scatter_src(ctx, self, dim, index, src):
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter_elements(ctx, self, dim, index, src)


@register(aten.scatter.value)
def scatter_value(ctx, self, dim, index, value):
    """scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor"""
    return _scatter_elements(ctx, self, dim, index,
                             filled(ctx, index.shape, value, self.dtype))


@register(aten.scatter.reduce)
def scatter_reduce_src(ctx, self, dim, index, src, reduce):
    """scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor"""
    return _scatter_elements(ctx, self, dim, index, src, _REDUCTIONS[reduce])


@register(aten.scatter.value_reduce)
def scatter_value_reduce(ctx, self, dim, index, value, reduce):
    """scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce)
    -> Tensor"""
    return _scatter_elements(ctx, self, dim, index,
                             filled(ctx, index.shape, value, self.dtype), _REDUCTIONS[reduce])


@register(aten.scatter_add.default)
def scatter_add(ctx, self, dim, index, src):
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter_elements(ctx, self, dim, index, src, "add")


def _scatter_reduce_ok(node: torch.fx.Node) -> str | None:
    reduce = node.args[4] if len(node.args) > 4 else node.kwargs.get("reduce")
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        return f"no GE scatter reduction {reduce!r}"
    return None


def _cleared(ctx, self: Value, dim: int, index: Value, value: Any) -> Value:
    """``self`` with every position ``index`` targets set to ``value`` (include_self=False)."""
    return _scatter_elements(ctx, self, dim, index, filled(ctx, index.shape, value, self.dtype))


def _scatter_mean(ctx, self: Value, dim: int, index: Value, src: Value,
                  include_self: bool) -> Value:
    """Sum of the reduced values over their count (1 for positions nothing targets);
    integers divide with floor rounding, as torch does."""
    ones = filled(ctx, self.shape, 1, self.dtype)
    base, counts = self, ones
    if not include_self:
        base, counts = _cleared(ctx, self, dim, index, 0), _cleared(ctx, ones, dim, index, 0)
    total = _scatter_elements(ctx, base, dim, index, src, "add")
    count = _scatter_elements(ctx, counts, dim, index,
                              filled(ctx, index.shape, 1, self.dtype), "add")
    div = "RealDiv" if self.dtype.is_floating_point else "FloorDiv"
    return move(ctx, div, [total, count], out=(self.dtype, self.shape), data=(0, 1),
                suffix="mean")


def _extreme(dtype: torch.dtype, largest: bool) -> Any:
    """The identity of amin (``largest``) / amax over ``dtype``."""
    if dtype.is_floating_point:
        return math.inf if largest else -math.inf
    if dtype == torch.bool:
        return largest
    info = torch.iinfo(dtype)
    return info.max if largest else info.min


def _positions_along(ctx, dim: int, index: Value) -> Value:
    """GE ``*Nd`` indices (``index.shape + [rank]``) of ScatterElements' targets: each
    position of ``index`` with its ``dim`` coordinate replaced by the index value."""
    static_dims(ctx, index)
    parts = []
    for d, n in enumerate(index.shape):
        if d == dim:
            parts.append(cast(ctx, index, torch.int64))
            continue
        lifted = [1] * index.rank
        lifted[d] = n
        coord = reshape(ctx, ctx.const(torch.arange(n), torch.int64, f"coord{d}"), lifted,
                        f"coord{d}_lift")
        parts.append(broadcast_to(ctx, coord, index.shape, f"coord{d}_spread"))
    return ctx.op("Pack", [parts], {"axis": index.rank, "N": len(parts)},
                  out=(torch.int64, index.shape + (index.rank,)), suffix="positions")


def _scatter_extreme(ctx, self: Value, dim: int, index: Value, src: Value, reduce: str,
                     include_self: bool) -> Value:
    """amax / amin along ``dim``: ScatterElements reduces only by add / mul, so the targets
    become ``*Nd`` positions for TensorScatterMax / TensorScatterMin."""
    if not include_self:
        self = _cleared(ctx, self, dim, index, _extreme(self.dtype, reduce == "amin"))
    src = cast(ctx, src, self.dtype)
    if src.shape != index.shape:  # torch reads only src[:index.shape]
        src = strided_slice(ctx, src, list(range(index.rank)), [0] * index.rank,
                            list(index.shape), [1] * index.rank, suffix="src")
    ge_type = "TensorScatterMax" if reduce == "amax" else "TensorScatterMin"
    return move(ctx, ge_type, [self, _positions_along(ctx, dim, index), src],
                out=(self.dtype, self.shape), data=(0, 2), suffix="scatter")


def scatter_reduce_along(ctx, self: Value, dim: int, index: Value, src: Value, reduce: str,
                         include_self: bool) -> Value:
    """torch ``scatter_reduce`` (sum, prod, mean, amax, amin) along ``dim``."""
    dim = norm_axis(dim, max(self.rank, 1))
    if reduce == "mean":
        return _scatter_mean(ctx, self, dim, index, cast(ctx, src, self.dtype), include_self)
    if reduce in ("amax", "amin"):
        return _scatter_extreme(ctx, self, dim, index, src, reduce, include_self)
    base = self if include_self else _cleared(ctx, self, dim, index, int(reduce == "prod"))
    return _scatter_elements(ctx, base, dim, index, src, _REDUCTIONS[reduce])


@register(aten.scatter_reduce.two, capability=_scatter_reduce_ok)
def scatter_reduce_two(ctx, self, dim, index, src, reduce, include_self=True):
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *,
    bool include_self=True) -> Tensor"""
    return scatter_reduce_along(ctx, self, dim, index, src, reduce, include_self)


def _along(ctx, index: Value, dim: int, shape: Sequence[int]) -> Value:
    """A 1-D ``index`` of ``dim`` broadcast over ``shape`` (ScatterElements' index form)."""
    index = reshape(ctx, index, (1,)) if index.rank == 0 else index
    lifted = [1] * len(shape)
    lifted[dim] = index.shape[0]
    return broadcast_to(ctx, reshape(ctx, index, lifted, "lift"), shape, "spread")


def _as_1d(ctx, v: Value) -> Value:
    return reshape(ctx, v, (1,), "lift") if v.rank == 0 else v


@register(aten.index_add.default)
def index_add(ctx, self, dim, index, source, alpha=1):
    """index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1)
    -> Tensor"""
    x, src = _as_1d(ctx, self), _as_1d(ctx, cast(ctx, source, self.dtype))
    dim = norm_axis(dim, x.rank)
    if alpha != 1:
        src = ctx.op("Mul", [src, ctx.const(alpha, self.dtype, "alpha")],
                     out=(self.dtype, src.shape), suffix="alpha")
    y = _scatter_elements(ctx, x, dim, _along(ctx, index, dim, src.shape), src, "add")
    return reshape(ctx, y, self.shape, "")


@register(aten.index_reduce.default)
def index_reduce(ctx, self, dim, index, source, reduce, include_self=True):
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *,
    bool include_self=True) -> Tensor"""
    x, src = _as_1d(ctx, self), _as_1d(ctx, cast(ctx, source, self.dtype))
    dim = norm_axis(dim, x.rank)
    y = scatter_reduce_along(ctx, x, dim, _along(ctx, index, dim, src.shape), src, reduce,
                        include_self)
    return reshape(ctx, y, self.shape, "")


@register(aten.index_copy.default)
def index_copy(ctx, self, dim, index, source):
    """index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor"""
    x, src = _as_1d(ctx, self), _as_1d(ctx, source)
    dim = norm_axis(dim, x.rank)
    y = _scatter_elements(ctx, x, dim, _along(ctx, index, dim, src.shape), src)
    return reshape(ctx, y, self.shape, "")


def _index_fill(ctx, self: Value, dim: int, index: Value, value: Any) -> Value:
    x = _as_1d(ctx, self)
    dim = norm_axis(dim, x.rank)
    shape = list(x.shape)
    shape[dim] = max(index.shape[0] if index.rank else 1, 0)
    fill = filled(ctx, shape, value, self.dtype)
    y = _scatter_elements(ctx, x, dim, _along(ctx, index, dim, shape), fill)
    return reshape(ctx, y, self.shape, "")


@register(aten.index_fill.int_Scalar)
def index_fill_scalar(ctx, self, dim, index, value):
    """index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor"""
    return _index_fill(ctx, self, dim, index, value)


@register(aten.index_fill.int_Tensor)
def index_fill_tensor(ctx, self, dim, index, value):
    """index_fill.int_Tensor(Tensor self, int dim, Tensor index, Tensor value) -> Tensor"""
    return _index_fill(ctx, self, dim, index, value)


# ---- functional scatters of views (functionalized in-place updates) -------------------------
def _slice_scatter(ctx, self: Value, src: Value, dim: int, start: int, end: int,
                   step: int) -> Value:
    static_dims(ctx, self, src)
    src = cast(ctx, src, self.dtype)
    n = self.shape[dim]
    if step != 1:
        idx = ctx.const(torch.arange(start, end, step), torch.int64, "index")
        return _scatter_elements(ctx, self, dim, _along(ctx, idx, dim, src.shape), src)
    parts = []
    if start > 0:
        parts.append(strided_slice(ctx, self, [dim], [0], [start], [1], suffix="head"))
    parts.append(src)
    if end < n:
        parts.append(strided_slice(ctx, self, [dim], [end], [n], [1], suffix="tail"))
    if len(parts) == 1:
        return src
    return move(ctx, "ConcatV2", [parts, dim_const(ctx, dim)], {"N": len(parts)})


@register(aten.slice_scatter.default, dynamic=False)
def slice_scatter(ctx, self, src, dim=0, start=None, end=None, step=1):
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None,
    SymInt? end=None, SymInt step=1) -> Tensor"""
    dim = norm_axis(dim, self.rank)
    begin, stop = clamp_slice(self.shape[dim], start, end)
    return _slice_scatter(ctx, self, src, dim, begin, stop, step)


@register(aten.select_scatter.default, dynamic=False)
def select_scatter(ctx, self, src, dim, index):
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor"""
    dim = norm_axis(dim, self.rank)
    index = index + self.shape[dim] if index < 0 else index
    shape = src.shape[:dim] + (1,) + src.shape[dim:]
    lifted = ctx.op("Unsqueeze", [src], {"axes": [dim]}, out=(src.dtype, shape), suffix="src")
    return _slice_scatter(ctx, self, lifted, dim, index, index + 1, 1)


def _flat_scatter(ctx, self: Value, src: Value, positions: torch.Tensor) -> Value:
    """Writes ``src`` at the flat ``positions`` of ``self`` (TensorScatterUpdate)."""
    static_dims(ctx, self, src)
    flat = reshape(ctx, self, (math.prod(self.shape),), "flat")
    idx = ctx.const(positions.reshape(-1, 1), torch.int64, "positions")
    updates = reshape(ctx, cast(ctx, src, self.dtype), (positions.numel(),), "src")
    y = move(ctx, "TensorScatterUpdate", [flat, idx, updates], out=(self.dtype, flat.shape),
             data=(0, 2), suffix="scatter")
    return reshape(ctx, y, self.shape, "")


def _positions(shape: Sequence[int]) -> torch.Tensor:
    return torch.arange(math.prod(shape)).reshape(tuple(shape))


@register(aten.diagonal_scatter.default)
def diagonal_scatter(ctx, self, src, offset=0, dim1=0, dim2=1):
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1)
    -> Tensor"""
    static_dims(ctx, self)
    positions = _positions(self.shape).diagonal(offset, dim1, dim2)
    return _flat_scatter(ctx, self, src, positions)


def _self_contiguous(node: torch.fx.Node) -> str | None:
    val = node.args[0].meta["val"]
    if not val.is_contiguous() or val.storage_offset() != 0:
        return "as_strided_scatter on a non-contiguous input depends on its storage layout"
    return None


@register(aten.as_strided_scatter.default, capability=_self_contiguous)
def as_strided_scatter(ctx, self, src, size, stride, storage_offset=None):
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride,
    SymInt? storage_offset=None) -> Tensor"""
    static_dims(ctx, self)
    positions = _positions(self.shape).as_strided(size, stride, storage_offset or 0)
    return _flat_scatter(ctx, self, src, positions)


# ---- masks -----------------------------------------------------------------------------------
def _masked_fill(ctx, self: Value, mask: Value, value: Any) -> Value:
    dtype, shape = ctx.out_specs()[0]
    x = broadcast_to(ctx, cast(ctx, self, dtype), shape, "self")
    fill = cast(ctx, value, dtype) if isinstance(value, Value) else ctx.const(value, dtype,
                                                                               "value")
    soc = ctx.builder.soc
    if soc is not None and not has_kernel(soc, "MaskedFill", x=dtype):  # 910B: no int64
        return select(ctx, mask, fill, x, dtype)
    return move(ctx, "MaskedFill", [x, mask, fill], data=(0, 2))


@register(aten.masked_fill.Scalar)
def masked_fill_scalar(ctx, self, mask, value):
    """masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor"""
    return _masked_fill(ctx, self, mask, value)


@register(aten.masked_fill.Tensor)
def masked_fill_tensor(ctx, self, mask, value):
    """masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor"""
    return _masked_fill(ctx, self, mask, value)


@register(aten.masked_scatter.default)
def masked_scatter(ctx, self, mask, source):
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor"""
    _, shape = ctx.out_specs()[0]
    x = broadcast_to(ctx, self, shape, "self")
    m = broadcast_to(ctx, mask, shape, "mask")
    return move(ctx, "MaskedScatter", [x, m, cast(ctx, source, self.dtype)], data=(0, 2))


def _nonzero_static_ok(node: torch.fx.Node) -> str | None:
    return "nonzero_static of complex" if node.args[0].meta["val"].is_complex() else None


@register(aten.nonzero_static.default, capability=_nonzero_static_ok, dynamic=False)
def nonzero_static(ctx, self, size, fill_value=-1):
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor"""
    # No GE op has a fixed-size nonzero: the k-th nonzero (row-major) is the element with k
    # nonzeros before it (exclusive Cumsum), so its coordinates scatter into row k; the
    # rest (and nonzeros past ``size``) go to a spare row, dropped with the fill rows kept.
    static_dims(ctx, self)
    n, rank = math.prod(self.shape), self.rank
    if n == 0 or rank == 0 or size == 0:  # nothing to scatter (0-d: rows of no coordinates)
        return filled(ctx, (size, rank), fill_value, torch.int64)
    out = filled(ctx, (size + 1, rank), fill_value, torch.int64)
    flags = cast(ctx, to_bool(ctx, reshape(ctx, self, (n,), "flat")), torch.int64)
    before = ctx.op("Cumsum", [flags, dim_const(ctx, 0)], {"exclusive": True},
                    out=(torch.int64, (n,)), suffix="rank")
    kept = ctx.op("Less", [before, ctx.const(size, torch.int64, "size")],
                  out=(torch.bool, (n,)), suffix="kept")
    picked = ctx.op("LogicalAnd", [to_bool(ctx, flags), kept], out=(torch.bool, (n,)),
                    suffix="picked")
    spare = ctx.const(size, torch.int64, "spare")
    row = ctx.op("SelectV2", [picked, before, spare], out=(torch.int64, (n,)), suffix="row")
    y = move(ctx, "TensorScatterUpdate", [out, reshape(ctx, row, (n, 1), "nd"),
                                          _coordinates(ctx, self.shape)],
             out=(torch.int64, (size + 1, rank)), data=(0, 2), suffix="scatter")
    return strided_slice(ctx, y, [0], [0], [size], [1], suffix="rows")


def _coordinates(ctx, shape: Sequence[int]) -> Value:
    """``(numel, rank)`` int64 row-major coordinates of every element of ``shape``."""
    n = math.prod(shape)
    flat = ctx.op("Range", [ctx.const(0, torch.int64, "start"), ctx.const(n, torch.int64, "n"),
                            ctx.const(1, torch.int64, "delta")],
                  out=(torch.int64, (n,)), suffix="positions")
    parts, stride = [], n
    for d in shape:
        stride //= d
        q = ctx.op("FloorDiv", [flat, ctx.const(stride, torch.int64, "stride")],
                   out=(torch.int64, (n,)), suffix="coord_div")
        parts.append(ctx.op("FloorMod", [q, ctx.const(d, torch.int64, "extent")],
                            out=(torch.int64, (n,)), suffix="coord"))
    return ctx.op("Pack", [parts], {"axis": 1, "N": len(parts)},
                  out=(torch.int64, (n, len(parts))), suffix="coords")


# ---- sort / topk -----------------------------------------------------------------------------
def _with_int64_indices(ctx, ys: tuple) -> tuple:
    values, indices = ys
    return values, cast(ctx, indices, torch.int64)


def sorted_along(ctx, self: Value, dim: int, descending: bool, stable: bool) -> tuple:
    """(values, int64 indices) of GE ``Sort`` along ``dim`` (a 0-d tensor sorts as itself)."""
    x = reshape(ctx, self, (1,)) if self.rank == 0 else self
    if _rank_sorted(ctx, x, norm_axis(dim, x.rank)):  # see [Note: integer sort by rank]
        values, indices = int_sort.rank_sort(ctx, x, norm_axis(dim, x.rank), descending)
    else:
        out = [(x.dtype, x.shape), (torch.int32, x.shape)]
        attrs = {"axis": norm_axis(dim, x.rank), "descending": bool(descending),
                 "stable": bool(stable)}
        values, indices = _with_int64_indices(ctx, move(ctx, "Sort", [x], attrs, out=out))
    if self.rank == 0:
        return reshape(ctx, values, (), "values"), reshape(ctx, indices, (), "indices")
    return values, indices


def _rank_sorted(ctx, x: Value, axis: int) -> bool:
    """Whether ``x`` sorts by rank: int32/int64 on a SoC without an int ``Sort`` kernel
    (a row too long for that form is refused with the reason)."""
    soc = ctx.builder.soc
    if soc is None or x.dtype not in int_sort.INT_DTYPES or has_kernel(soc, "Sort", x=x.dtype):
        return False
    why = int_sort.refusal(x, axis)
    if why is not None:
        raise DeviceDtypeError(f"{soc} has no kernel for GE op Sort with input 'x' of dtype "
                               f"{ge_name(x.dtype).removeprefix('DT_')}: {why}")
    return True


@register(aten.sort.default)
def sort(ctx, self, dim=-1, descending=False):
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)"""
    return sorted_along(ctx, self, dim, descending, False)


@register(aten.sort.stable)
def sort_stable(ctx, self, stable=None, dim=-1, descending=False):
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False)
    -> (Tensor values, Tensor indices)"""
    return sorted_along(ctx, self, dim, descending, bool(stable))


@register(aten.topk.default)
def topk(ctx, self, k, dim=-1, largest=True, sorted=True):
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True)
    -> (Tensor values, Tensor indices)"""
    (dtype, shape), _ = ctx.out_specs()
    out = [(dtype, shape), (torch.int32, shape)]
    attrs = {"dim": norm_axis(dim, max(self.rank, 1)), "largest": bool(largest),
             "sorted": bool(sorted)}
    kc = ctx.const(torch.tensor(k, dtype=torch.int32), torch.int32, "k")
    return _with_int64_indices(ctx, move(ctx, "TopKV2", [self, kc], attrs, out=out))


@register(aten.kthvalue.default)
def kthvalue(ctx, self, k, dim=-1, keepdim=False):
    """kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False)
    -> (Tensor values, Tensor indices)"""
    x = reshape(ctx, self, (1,), "lift") if self.rank == 0 else self
    dim = norm_axis(dim, x.rank)
    shape = x.shape[:dim] + (k,) + x.shape[dim + 1:]
    attrs = {"dim": dim, "largest": False, "sorted": True}
    kc = ctx.const(torch.tensor(k, dtype=torch.int32), torch.int32, "k")
    ys = move(ctx, "TopKV2", [x, kc], attrs, out=[(x.dtype, shape), (torch.int32, shape)],
              suffix="topk")
    last = ctx.const(torch.tensor(k - 1), torch.int64, "last")
    outs = ctx.out_specs()
    picked = []
    for y, (dtype, out_shape), name in zip(ys, outs, ("values", "indices")):
        kept = x.shape[:dim] + x.shape[dim + 1:]
        v = move(ctx, "GatherV2", [y, last, dim_const(ctx, dim)], out=(y.dtype, kept),
                 suffix=name)
        picked.append(reshape(ctx, cast(ctx, v, dtype), out_shape, name + "_shape"))
    return tuple(picked)


def _flat_index(ctx, self: Value, index: Value) -> Value:
    """Flat positions ``index`` of ``self`` (negatives wrapped) as GE ``*Nd`` indices."""
    flat = _normalized(ctx, reshape(ctx, index, (math.prod(index.shape),), "index"),
                       math.prod(self.shape))
    return reshape(ctx, flat, (math.prod(index.shape), 1), "nd")


@register(aten.put.default)
def put(ctx, self, index, source, accumulate=False):
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor"""
    static_dims(ctx, self, index, source)
    flat = reshape(ctx, self, (math.prod(self.shape),), "flat")
    updates = reshape(ctx, cast(ctx, source, self.dtype), (math.prod(source.shape),), "src")
    ge_type = "ScatterNonAliasingAdd" if accumulate else "TensorScatterUpdate"
    y = move(ctx, ge_type, [flat, _flat_index(ctx, self, index), updates],
             out=(self.dtype, flat.shape), data=(0, 2), suffix="scatter")
    return reshape(ctx, y, self.shape, "")


def _searchsorted(ctx, sorted_sequence: Value, values: Value, out_int32: bool, right: bool,
                  side: str | None, sorter: Value | None) -> Value:
    right = side == "right" if side is not None else bool(right)
    dtype = torch.int32 if out_int32 else torch.int64
    attrs = {"dtype": dtype, "right": right}
    return move(ctx, "SearchSorted", [sorted_sequence, values, sorter], attrs, data=(0, 1))


@register(aten.searchsorted.Tensor)
def searchsorted(ctx, sorted_sequence, self, out_int32=False, right=False, side=None,
                 sorter=None):
    """searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False,
    bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""
    dtype = promote(sorted_sequence, self)
    return _searchsorted(ctx, cast(ctx, sorted_sequence, dtype), cast(ctx, self, dtype),
                         out_int32, right, side, sorter)


@register(aten.searchsorted.Scalar)
def searchsorted_scalar(ctx, sorted_sequence, self, out_int32=False, right=False, side=None,
                        sorter=None):
    """searchsorted.Scalar(Tensor sorted_sequence, Scalar self, *, bool out_int32=False,
    bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""
    value = ctx.const(torch.tensor(self, dtype=sorted_sequence.dtype), sorted_sequence.dtype,
                      "value")
    return _searchsorted(ctx, sorted_sequence, value, out_int32, right, side, sorter)


@register(aten.bucketize.Tensor)
def bucketize(ctx, self, boundaries, out_int32=False, right=False):
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False,
    bool right=False) -> Tensor"""
    dtype = promote(boundaries, self)
    return _searchsorted(ctx, cast(ctx, boundaries, dtype), cast(ctx, self, dtype), out_int32,
                         right, None, None)


# ---- backward of views: the gradient scattered into zeros ------------------------------------
def _zeros(ctx, shape: Sequence[int], dtype: torch.dtype) -> Value:
    return filled(ctx, shape, 0, dtype)


@register(aten.slice_backward.default, dynamic=False)
def slice_backward(ctx, grad_output, input_sizes, dim, start, end, step):
    """slice_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt start,
    SymInt end, SymInt step) -> Tensor"""
    dim = norm_axis(dim, len(input_sizes))
    if is_symbolic(input_sizes):
        return _slice_backward_dynamic(ctx, grad_output, input_sizes, dim, start, step)
    begin, stop = clamp_slice(input_sizes[dim], start, end)
    zeros = _zeros(ctx, input_sizes, grad_output.dtype)
    return _slice_scatter(ctx, zeros, grad_output, dim, begin, stop, step)


@register(aten.select_backward.default, dynamic=False)
def select_backward(ctx, grad_output, input_sizes, dim, index):
    """select_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt index)
    -> Tensor"""
    if is_symbolic(input_sizes):
        dim = norm_axis(dim, len(input_sizes))
        begin = index if index >= 0 else size_op(ctx, "Add", input_sizes[dim], index)
        shape = grad_output.shape[:dim] + (1,) + grad_output.shape[dim:]
        lifted = ctx.op("Unsqueeze", [grad_output], {"axes": [dim]},
                        out=(grad_output.dtype, shape), suffix="grad")
        return _zero_pad(ctx, lifted, input_sizes, dim, begin, 1)
    zeros = _zeros(ctx, input_sizes, grad_output.dtype)
    return select_scatter(ctx, zeros, grad_output, dim, index)


def _slice_backward_dynamic(ctx, grad: Value, sizes: Sequence[Any], dim: int, start: Any,
                            step: int) -> Value:
    """Under dynamic sizes the gradient of a unit-step slice is ``grad`` zero-padded to
    ``sizes``, with paddings computed at run time (clamped like torch's slice bounds)."""
    if step != 1 or isinstance(start, Value):
        raise DynamicShapeError(f"{ctx.node.target}: step {step} or a symbolic start under "
                                "dynamic sizes")
    n, start = sizes[dim], 0 if start is None else start
    begin = (size_op(ctx, "Minimum", start, n) if start >= 0
             else size_op(ctx, "Maximum", size_op(ctx, "Add", n, start), 0))
    length = sym_value(ctx, sym_sizes(ctx, grad)[dim])
    return _zero_pad(ctx, grad, sizes, dim, begin, length)


def _zero_pad(ctx, grad: Value, sizes: Sequence[Any], dim: int, begin: Any,
              length: Any) -> Value:
    """``grad`` (``length`` long along ``dim``) placed at ``begin`` in zeros of ``sizes``."""
    after = size_op(ctx, "Sub", size_op(ctx, "Sub", sizes[dim], begin), length)
    pads: list[Any] = [0] * (2 * len(sizes))
    pads[2 * dim], pads[2 * dim + 1] = begin, after
    zero = ctx.const(0, grad.dtype, "value")
    return move(ctx, "PadV3", [grad, shape_value(ctx, pads, "paddings"), zero],
                {"mode": "constant"}, data=(0, 2))


@register(aten.diagonal_backward.default)
def diagonal_backward(ctx, grad_output, input_sizes, offset, dim1, dim2):
    """diagonal_backward(Tensor grad_output, SymInt[] input_sizes, int offset, int dim1,
    int dim2) -> Tensor"""
    positions = _positions(input_sizes).diagonal(offset, dim1, dim2)
    return _flat_scatter(ctx, _zeros(ctx, input_sizes, grad_output.dtype), grad_output,
                         positions)


@register(aten.unfold_backward.default)
def unfold_backward(ctx, grad_in, input_sizes, dim, size, step):
    """unfold_backward(Tensor grad_in, SymInt[] input_sizes, int dim, int size, int step)
    -> Tensor"""
    dim = norm_axis(dim, max(len(input_sizes), 1))
    windows = grad_in.shape[dim]
    last = grad_in.rank - 1
    g = transpose(ctx, grad_in, list(range(dim + 1)) + [last] + list(range(dim + 1, last)))
    merged = g.shape[:dim] + (windows * size,) + g.shape[dim + 2:]
    g = reshape(ctx, g, merged, "merge")
    positions = (torch.arange(windows).unsqueeze(1) * step + torch.arange(size)).reshape(-1)
    index = _along(ctx, ctx.const(positions, torch.int64, "positions"), dim, merged)
    zeros = _zeros(ctx, tuple(input_sizes) or (1,), grad_in.dtype)
    y = _scatter_elements(ctx, zeros, dim, index, g, "add")
    return reshape(ctx, y, tuple(input_sizes), "")


@register(aten.masked_scatter_backward.default, dynamic=False)
def masked_scatter_backward(ctx, grad_output, mask, sizes):
    """masked_scatter_backward(Tensor grad_output, Tensor mask, SymInt[] sizes) -> Tensor"""
    static_dims(ctx, grad_output, mask)
    n, shape = math.prod(sizes), broadcast_shape(grad_output.shape, mask.shape)
    m = math.prod(shape)
    g = reshape(ctx, broadcast_to(ctx, grad_output, shape, "grad"), (m,), "grad_flat")
    flags = cast(ctx, reshape(ctx, broadcast_to(ctx, mask, shape, "mask"), (m,), "mask_flat"),
                 torch.int64)
    rank = ctx.op("Cumsum", [flags, dim_const(ctx, 0)], {"exclusive": True},
                  out=(torch.int64, (m,)), suffix="rank")
    # selected elements go to their rank among the selected, the rest to a spare slot n
    total = ctx.const(torch.tensor(n), torch.int64, "n")
    shifted = ctx.op("Sub", [rank, total], out=(torch.int64, (m,)), suffix="shift")
    picked = ctx.op("Mul", [flags, shifted], out=(torch.int64, (m,)), suffix="pick")
    target = ctx.op("Add", [picked, total], out=(torch.int64, (m,)), suffix="target")
    target = reshape(ctx, target, (m, 1), "nd")
    y = move(ctx, "ScatterNonAliasingAdd", [_zeros(ctx, (n + 1,), g.dtype), target, g],
             out=(g.dtype, (n + 1,)), data=(0, 2), suffix="scatter")
    y = strided_slice(ctx, y, [0], [0], [n], [1], suffix="drop_spare")
    return reshape(ctx, y, tuple(sizes), "")
