"""Pooling converters: max_pool2d_with_indices (+ backward), avg_pool2d (+ backward).

Max pooling follows torchair's 910B converters (``MaxPoolWithArgmaxV3`` exists only on
Ascend950): ``MaxPoolWithArgmaxV1`` with NCHW descs and ``[1, h, w, 1]`` attrs. Its
``argmax`` is not an index but a uint16 bit mask ``[N, C, kh*kw, ceil(Ho*Wo/16) + 1]``:
bit ``p % 16`` of element ``[n, c, k, p // 16]`` is set when output position ``p`` took its
maximum at window offset ``k`` (row-major over the dilated window). The indices returned
to the user are decoded from that mask in GE ops (torch's per-plane flat ``h * W + w``), so
they match eager; the backward recomputes the mask from ``self`` and feeds it to
``MaxPoolGradWithArgmaxV1``, as torchair does (torch's indices have no V1 form). V1 has
float16/float32 prototypes: bfloat16 pools in float32 (exact for a max). Average pooling
uses ``AvgPoolV2`` / ``AvgPoolV2Grad`` in NCHW with ``exclusive = not count_include_pad``
(``AvgPoolV2`` has no bfloat16 prototype: that forward runs in float32).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.ge import dtypes
from npu_inductor.ge.ir import Value
from npu_inductor.lowering.context import static_shape
from npu_inductor.lowering.helpers import cast, int_list
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import strided_slice
from npu_inductor.lowering.symbolic import reshape_to, scalar, shape_of, sym_sizes, sym_value

aten = torch.ops.aten
MASK_BITS = 16  # output positions per uint16 mask element
_V1_DTYPES = (torch.float16, torch.float32)


def _pair(values: Sequence[int], default: Sequence[int]) -> list[int]:
    values = list(values) if values else list(default)
    return values * 2 if len(values) == 1 else values


def _window(kernel_size, stride, padding, dilation) -> tuple[list[int], ...]:
    k = _pair(kernel_size, ())
    return k, _pair(stride, k), _pair(padding, (0,)), _pair(dilation, (1,))


def _v1_attrs(kernel_size, stride, padding, dilation, ceil_mode) -> dict[str, Any]:
    """torchair's 910B spelling: every list is ``[1, h, w, 1]``."""
    k, s, p, d = _window(kernel_size, stride, padding, dilation)
    return {"ksize": [1, *k, 1], "strides": [1, *s, 1], "pads": [1, *p, 1],
            "dilation": [1, *d, 1], "ceil_mode": bool(ceil_mode)}


def mask_shape(n: int, c: int, ksize: Sequence[int], out_hw: Sequence[int]) -> tuple[int, ...]:
    """The shape of ``MaxPoolWithArgmaxV1``'s ``argmax`` mask (CANN's shape inference)."""
    return (n, c, ksize[0] * ksize[1], math.ceil(out_hw[0] * out_hw[1] / MASK_BITS) + 1)


def _nchw(ctx, x: Value, suffix: str) -> Value:
    """A 4-D float16/float32 view of a (C, H, W) or (N, C, H, W) input."""
    x = x if x.dtype in _V1_DTYPES else cast(ctx, x, torch.float32)
    if x.rank == 4:
        return x
    return ctx.op("Unsqueeze", [x], {"axes": [0]}, out=(x.dtype, (1, *x.shape)), suffix=suffix)


def _pool_v1(ctx, x: Value, kernel_size, stride, padding, dilation, ceil_mode,
             out_sizes: Sequence[Any]) -> tuple[Value, Value]:
    """``MaxPoolWithArgmaxV1`` -> (y, uint16 mask); ``out_sizes`` are y's (ints or SymInts)."""
    k = _pair(kernel_size, ())
    n, c, oh, ow = out_sizes
    words = (oh * ow + MASK_BITS - 1) // MASK_BITS + 1
    return ctx.op("MaxPoolWithArgmaxV1", [x],
                  _v1_attrs(kernel_size, stride, padding, dilation, ceil_mode),
                  out=[(x.dtype, static_shape((n, c, oh, ow))),
                       (torch.uint16, static_shape((n, c, k[0] * k[1], words)))],
                  suffix="pool")


def _planes(sizes: Sequence[Any]) -> tuple[Any, ...]:
    """(N, C, H, W) sizes of a (C, H, W) or (N, C, H, W) tensor."""
    return tuple(sizes) if len(sizes) == 4 else (1, *sizes)


def _mask_indices(ctx, mask: Value, in_sizes: Sequence[Any], out_sizes: Sequence[Any],
                  window) -> Value:
    """torch's int64 indices (``h * W + w`` per plane) from a V1 mask, in GE ops. Sizes are
    ints or SymInts (dynamic N, C, H, W are rebuilt at run time)."""
    k, s, p, d = window
    n, c, oh, ow = out_sizes
    i32, i64 = torch.int32, torch.int64
    m = ctx.op("Unsqueeze", [cast(ctx, mask, i32)], {"axes": [4]}, out=(i32, (*mask.shape, 1)),
               suffix="mask_words")
    bits_shape = (*mask.shape, MASK_BITS)
    shifts = ctx.const(torch.arange(MASK_BITS, dtype=i32), i32, "mask_shifts")
    m = ctx.op("RightShift", [m, shifts], out=(i32, bits_shape), suffix="mask_shift")
    bits = ctx.op("BitwiseAnd", [m, ctx.const(1, i32, "one")], out=(i32, bits_shape),
                  suffix="mask_bits")
    taps = mask.shape[2]
    offsets = ctx.const(torch.arange(taps, dtype=i32).reshape(taps, 1, 1), i32, "window_offsets")
    tap = ctx.op("Mul", [bits, offsets], out=(i32, bits_shape), suffix="mask_taps")
    tap_shape = (*mask.shape[:2], mask.shape[3], MASK_BITS)
    tap = ctx.op("ReduceSum", [tap, int_list(ctx, [2], "axes")], {"keep_dims": False},
                 out=(i32, tap_shape), suffix="window_offset")  # [N, C, words, 16]
    positions = oh * ow
    words = (positions + MASK_BITS - 1) // MASK_BITS + 1
    tap = reshape_to(ctx, tap, [n, c, words * MASK_BITS], "window_offset_flat")
    tap = strided_slice(ctx, tap, [2], [0], [sym_value(ctx, positions)], [1],
                        suffix="window_offset_valid", shape=static_shape((n, c, positions)))
    tap = cast(ctx, reshape_to(ctx, tap, [n, c, oh, ow], "window_offset_planes"), i64)
    kw = ctx.const(k[1], i64, "kw")
    row = ctx.op("FloorDiv", [tap, kw], out=(i64, tap.shape), suffix="window_row")
    col = ctx.op("FloorMod", [tap, kw], out=(i64, tap.shape), suffix="window_col")
    h = _axis_origin(ctx, oh, s[0], p[0], row, d[0], True, "h")
    w = _axis_origin(ctx, ow, s[1], p[1], col, d[1], False, "w")
    width = scalar(ctx, sym_value(ctx, in_sizes[3]))
    h = ctx.op("Mul", [h, width], out=(i64, tap.shape), suffix="row_start")
    return ctx.op("Add", [h, w], out=(i64, tap.shape), suffix="indices")


def _axis_origin(ctx, size: Any, stride: int, pad: int, tap: Value, dilation: int,
                 column: bool, axis: str) -> Value:
    """Input coordinate along one axis: window start ``i * stride - pad`` of output ``i``
    plus the tap's ``tap * dilation`` (``column``: ``i`` runs down dim -2, else dim -1)."""
    i64 = torch.int64
    limit = scalar(ctx, sym_value(ctx, size))
    start = ctx.op("Range", [ctx.const(0, i64, "zero"), limit, ctx.const(1, i64, "step")],
                   out=(i64, static_shape((size,))), suffix=f"{axis}_outputs")
    start = ctx.op("Mul", [start, ctx.const(stride, i64, f"{axis}_stride")],
                   out=(i64, start.shape), suffix=f"{axis}_strided")
    start = ctx.op("Sub", [start, ctx.const(pad, i64, f"{axis}_pad")], out=(i64, start.shape),
                   suffix=f"{axis}_window_start")
    if column:
        start = ctx.op("Unsqueeze", [start], {"axes": [1]}, out=(i64, (*start.shape, 1)),
                       suffix=f"{axis}_column")
    offset = ctx.op("Mul", [tap, ctx.const(dilation, i64, f"{axis}_dilation")],
                    out=(i64, tap.shape), suffix=f"{axis}_tap_offset")
    return ctx.op("Add", [offset, start], out=(i64, tap.shape), suffix=f"{axis}_input")


def _restore(ctx, v: Value, like_rank: int, dtype: torch.dtype, suffix: str) -> Value:
    v = cast(ctx, v, dtype)
    if like_rank == 4:
        return v
    return ctx.op("Squeeze", [v], {"axis": [0]}, out=(v.dtype, v.shape[1:]), suffix=suffix)


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(ctx, self, kernel_size, stride=(), padding=(0,), dilation=(1,),
                            ceil_mode=False):
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""  # noqa: E501
    in_sizes = _planes(sym_sizes(ctx, self))
    out_sizes = _planes(tuple(ctx.meta[0].shape))
    x = _nchw(ctx, self, "x4d")
    y, mask = _pool_v1(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, out_sizes)
    idx = _mask_indices(ctx, mask, in_sizes, out_sizes,
                        _window(kernel_size, stride, padding, dilation))
    return (_restore(ctx, y, self.rank, self.dtype, "y3d"),
            _restore(ctx, idx, self.rank, torch.int64, "indices3d"))


@register(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(ctx, grad_output, self, kernel_size, stride, padding,
                                     dilation, ceil_mode, indices):
    """max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor"""  # noqa: E501
    x, dy = _nchw(ctx, self, "x4d"), _nchw(ctx, grad_output, "dy4d")
    dy = cast(ctx, dy, x.dtype)
    _, mask = _pool_v1(ctx, x, kernel_size, stride, padding, dilation, ceil_mode,
                       _planes(sym_sizes(ctx, grad_output)))
    dx = ctx.op("MaxPoolGradWithArgmaxV1", [x, dy, mask],
                _v1_attrs(kernel_size, stride, padding, dilation, ceil_mode),
                out=(x.dtype, x.shape), suffix="grad")
    return _restore(ctx, dx, self.rank, self.dtype, "dx3d")


def batched(ctx, x: Value, rank: int, suffix: str = "batched") -> Value:
    """An unbatched pooling input as a batch of one (torchair: ``Unsqueeze`` axes [0]): the
    device's pooling kernels take NCHW (``rank`` 4) / NCDHW (5) tensors only."""
    if x.rank == rank:
        return x
    return ctx.op("Unsqueeze", [x], {"axes": [0]}, out=(x.dtype, (1, *x.shape)), suffix=suffix)


def unbatched(ctx, y: Value, rank: int, suffix: str = "unbatched") -> Value:
    """Undo ``batched`` for a result that should have rank ``rank``."""
    if y.rank == rank:
        return y
    return ctx.op("Squeeze", [y], {"axis": [0]}, out=(y.dtype, y.shape[1:]), suffix=suffix)


def _avg_attrs(kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override) -> dict[str, Any]:
    k = _pair(kernel_size, ())
    s = _pair(stride, k)
    p = _pair(padding, (0,))
    return {"ksize": [1, 1, *k], "strides": [1, 1, *s], "padding_mode": "CALCULATED",
            "pads": [p[0], p[0], p[1], p[1]], "data_format": "NCHW",
            "ceil_mode": bool(ceil_mode), "exclusive": not count_include_pad,
            "divisor_override": int(divisor_override or 0)}


@register(aten.avg_pool2d.default)
def avg_pool2d(ctx, self, kernel_size, stride=(), padding=(0,), ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"""  # noqa: E501
    x = self if self.dtype != torch.bfloat16 else cast(ctx, self, torch.float32)
    x = batched(ctx, x, 4)
    out = _planes(ctx.out_specs()[0][1])
    y = ctx.op("AvgPoolV2", [x], _avg_attrs(kernel_size, stride, padding, ceil_mode,
                                            count_include_pad, divisor_override),
               out=(x.dtype, out))
    return cast(ctx, unbatched(ctx, y, self.rank), self.dtype)


@register(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(ctx, grad_output, self, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    """avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor"""  # noqa: E501
    x = batched(ctx, self, 4, "x4d")
    shape = shape_of(ctx, x, torch.int32, "orig_input_shape")
    dx = ctx.op("AvgPoolV2Grad", [shape, batched(ctx, grad_output, 4, "dy4d")],
                _avg_attrs(kernel_size, stride, padding, ceil_mode, count_include_pad,
                           divisor_override), out=(grad_output.dtype, x.shape))
    return unbatched(ctx, dx, self.rank)


def _triple(values: Sequence[int], default: Sequence[int]) -> list[int]:
    values = list(values) if values else list(default)
    return values * 3 if len(values) == 1 else values


@register(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(ctx, self, kernel_size, stride=(), padding=(0,), dilation=(1,),
                            ceil_mode=False):
    """max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, int[3] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""  # noqa: E501
    k = _triple(kernel_size, ())
    attrs = {"ksize": k, "strides": _triple(stride, k), "pads": _triple(padding, (0,)),
             "dilation": _triple(dilation, (1,)), "ceil_mode": bool(ceil_mode),
             "data_format": "NCDHW", "dtype": dtypes.to_cpp(torch.int32)}
    # GE has no argmax-driven 3-d max-pool gradient: the backward runs in eager on these
    # torch-layout indices. The 910B kernel's argmax is int32; torch's indices are int64.
    x = batched(ctx, self, 5)
    outs = [(dt, (1, *shape) if self.rank == 4 else shape)
            for dt, (_, shape) in zip((self.dtype, torch.int32), ctx.out_specs())]
    y, idx = ctx.op("MaxPool3DWithArgmaxV2", [x], attrs, out=outs)
    return (unbatched(ctx, y, self.rank, "values"),
            cast(ctx, unbatched(ctx, idx, self.rank, "indices"), torch.int64))
