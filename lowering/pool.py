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
from npu_inductor.lowering.helpers import cast, int_list
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import reshape, static_dims, strided_slice
from npu_inductor.lowering.symbolic import shape_of

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
             out_hw: Sequence[int]) -> tuple[Value, Value]:
    k = _pair(kernel_size, ())
    n, c = x.shape[:2]
    return ctx.op("MaxPoolWithArgmaxV1", [x],
                  _v1_attrs(kernel_size, stride, padding, dilation, ceil_mode),
                  out=[(x.dtype, (n, c, *out_hw)), (torch.uint16, mask_shape(n, c, k, out_hw))],
                  suffix="pool")


def _mask_indices(ctx, mask: Value, in_w: int, out_hw: Sequence[int], window) -> Value:
    """torch's int64 indices (``h * W + w`` per plane) from a V1 mask, in GE ops."""
    k, s, p, d = window
    n, c, taps, words = mask.shape
    oh, ow = out_hw
    i32 = torch.int32
    bits_shape = (n, c, taps, words, MASK_BITS)
    m = reshape(ctx, cast(ctx, mask, i32), (n, c, taps, words, 1), "mask_words")
    shifts = ctx.const(torch.arange(MASK_BITS, dtype=i32), i32, "mask_shifts")
    m = ctx.op("RightShift", [m, shifts], out=(i32, bits_shape), suffix="mask_shift")
    bits = ctx.op("BitwiseAnd", [m, ctx.const(1, i32, "one")], out=(i32, bits_shape),
                  suffix="mask_bits")
    flat = (n, c, taps, words * MASK_BITS)
    offsets = ctx.const(torch.arange(taps, dtype=i32).reshape(taps, 1), i32, "window_offsets")
    tap = ctx.op("Mul", [reshape(ctx, bits, flat, "mask_flat"), offsets], out=(i32, flat),
                 suffix="mask_taps")
    tap = ctx.op("ReduceSum", [tap, int_list(ctx, [2], "axes")], {"keep_dims": False},
                 out=(i32, (n, c, flat[3])), suffix="window_offset")
    tap = strided_slice(ctx, tap, [2], [0], [oh * ow], [1], suffix="window_offset_valid")
    kw = ctx.const(k[1], i32, "kw")
    row = ctx.op("FloorDiv", [tap, kw], out=(i32, tap.shape), suffix="window_row")
    col = ctx.op("FloorMod", [tap, kw], out=(i32, tap.shape), suffix="window_col")
    row = ctx.op("Mul", [row, ctx.const(d[0] * in_w, i32, "row_step")], out=(i32, tap.shape),
                 suffix="row_offset")
    col = ctx.op("Mul", [col, ctx.const(d[1], i32, "col_step")], out=(i32, tap.shape),
                 suffix="col_offset")
    hs = torch.arange(oh, dtype=i32) * s[0] - p[0]
    ws = torch.arange(ow, dtype=i32) * s[1] - p[1]
    base = ctx.const((hs[:, None] * in_w + ws[None, :]).reshape(-1), i32, "window_base")
    idx = ctx.op("Add", [ctx.op("Add", [row, col], out=(i32, tap.shape), suffix="offset"),
                         base], out=(i32, tap.shape), suffix="flat_index")
    return reshape(ctx, cast(ctx, idx, torch.int64), (n, c, oh, ow), "indices")


def _restore(ctx, v: Value, like_rank: int, dtype: torch.dtype, suffix: str) -> Value:
    v = cast(ctx, v, dtype)
    if like_rank == 4:
        return v
    return ctx.op("Squeeze", [v], {"axis": [0]}, out=(v.dtype, v.shape[1:]), suffix=suffix)


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(ctx, self, kernel_size, stride=(), padding=(0,), dilation=(1,),
                            ceil_mode=False):
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""  # noqa: E501
    static_dims(ctx, self)  # the mask's shape and the index decoding use the sizes
    out_hw = ctx.out_specs()[0][1][-2:]
    x = _nchw(ctx, self, "x4d")
    y, mask = _pool_v1(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, out_hw)
    idx = _mask_indices(ctx, mask, x.shape[3], out_hw,
                        _window(kernel_size, stride, padding, dilation))
    return (_restore(ctx, y, self.rank, self.dtype, "y3d"),
            _restore(ctx, idx, self.rank, torch.int64, "indices3d"))


@register(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(ctx, grad_output, self, kernel_size, stride, padding,
                                     dilation, ceil_mode, indices):
    """max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor"""  # noqa: E501
    static_dims(ctx, self, grad_output)
    x, dy = _nchw(ctx, self, "x4d"), _nchw(ctx, grad_output, "dy4d")
    dy = cast(ctx, dy, x.dtype)
    _, mask = _pool_v1(ctx, x, kernel_size, stride, padding, dilation, ceil_mode,
                       dy.shape[-2:])
    dx = ctx.op("MaxPoolGradWithArgmaxV1", [x, dy, mask],
                _v1_attrs(kernel_size, stride, padding, dilation, ceil_mode),
                out=(x.dtype, x.shape), suffix="grad")
    return _restore(ctx, dx, self.rank, self.dtype, "dx3d")


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
    y = ctx.op("AvgPoolV2", [x], _avg_attrs(kernel_size, stride, padding, ceil_mode,
                                            count_include_pad, divisor_override),
               out=(x.dtype, ctx.out_specs()[0][1]))
    return cast(ctx, y, self.dtype)


@register(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(ctx, grad_output, self, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    """avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor"""  # noqa: E501
    shape = shape_of(ctx, self, torch.int32, "orig_input_shape")
    return ctx.op("AvgPoolV2Grad", [shape, grad_output],
                  _avg_attrs(kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override))


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
             "data_format": "NCDHW", "dtype": dtypes.to_cpp(torch.int64)}
    # GE has no argmax-driven 3-d max-pool gradient: the backward runs in eager on these
    # torch-layout indices.
    return ctx.op("MaxPool3DWithArgmaxV2", [self], attrs)
