"""Pooling converters: max_pool2d_with_indices (+ backward), avg_pool2d (+ backward).

Max pooling uses ``MaxPoolWithArgmaxV3`` whose int64 ``argmax`` is torch's per-plane flat
index (``h * W + w``), so indices returned to the user match eager and the backward
(``MaxPoolGradWithArgmaxV3``) consumes them as saved. Average pooling uses ``AvgPoolV2`` /
``AvgPoolV2Grad`` in NCHW with ``exclusive = not count_include_pad`` (``AvgPoolV2`` has no
bfloat16 prototype: that forward runs in float32).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.ge import dtypes
from npu_inductor.lowering.helpers import cast
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.symbolic import shape_of

aten = torch.ops.aten


def _pair(values: Sequence[int], default: Sequence[int]) -> list[int]:
    values = list(values) if values else list(default)
    return values * 2 if len(values) == 1 else values


def _max_attrs(kernel_size, stride, padding, dilation, ceil_mode) -> dict[str, Any]:
    k = _pair(kernel_size, ())
    return {"ksize": k, "strides": _pair(stride, k), "pads": _pair(padding, (0,)),
            "dtype": dtypes.to_cpp(torch.int64), "dilation": _pair(dilation, (1,)),
            "ceil_mode": bool(ceil_mode), "data_format": "NCHW"}


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(ctx, self, kernel_size, stride=(), padding=(0,), dilation=(1,),
                            ceil_mode=False):
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""  # noqa: E501
    return ctx.op("MaxPoolWithArgmaxV3", [self],
                  _max_attrs(kernel_size, stride, padding, dilation, ceil_mode))


@register(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(ctx, grad_output, self, kernel_size, stride, padding,
                                     dilation, ceil_mode, indices):
    """max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor"""  # noqa: E501
    return ctx.op("MaxPoolGradWithArgmaxV3", [self, grad_output, indices],
                  _max_attrs(kernel_size, stride, padding, dilation, ceil_mode))


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
             "data_format": "NCDHW", "dtype": dtypes.to_cpp(torch.int32)}
    # GE has no argmax-driven 3-d max-pool gradient: the backward runs in eager on these
    # torch-layout indices. The 910B kernel writes int32 argmax: widened to torch's int64.
    return argmax_int32(ctx, "MaxPool3DWithArgmaxV2", self, attrs, ctx.out_specs())


def argmax_int32(ctx, op_type: str, x, attrs: dict, out: list) -> tuple:
    """``op_type`` with its argmax output in int32 (the 910B kernel's), cast to ``out``'s."""
    (vt, vs), (it, shape) = out
    y, idx = ctx.op(op_type, [x], attrs, out=[(vt, vs), (torch.int32, shape)])
    return y, cast(ctx, idx, it)
