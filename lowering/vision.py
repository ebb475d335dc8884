"""Spatial converters: adaptive average pooling, 3-d average pooling, grid sampling
(each with its backward), all in NCHW / NCDHW. bfloat16 grid sampling is left to eager:
GE has no bfloat16 GridSampler2D, and sampling in float32 moves the sample points away
from eager's bfloat16 ones."""

from __future__ import annotations

import torch

from npu_inductor.lowering.helpers import cast
from npu_inductor.lowering.precision import op_in_float32
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import static_dims

aten = torch.ops.aten
INTERPOLATION = ("bilinear", "nearest", "bicubic")  # aten's int mode -> GE's string
PADDING = ("zeros", "border", "reflection")
# AdaptiveAvgPool2dGrad takes no bfloat16: that backward runs in float32.
_GRAD_DTYPES = (torch.float16, torch.float32)


@register(aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(ctx, self, output_size):
    """_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor"""
    return ctx.op("AdaptiveAvgPool2d", [self], {"output_size": [int(s) for s in output_size]})


@register(aten._adaptive_avg_pool2d_backward.default)
def adaptive_avg_pool2d_backward(ctx, grad_output, self):
    """_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor"""
    static_dims(ctx, self)  # the input size becomes an attr
    dtype = grad_output.dtype if grad_output.dtype in _GRAD_DTYPES else torch.float32
    grad = ctx.op("AdaptiveAvgPool2dGrad", [cast(ctx, grad_output, dtype)],
                  {"orig_input_shape": list(self.shape)}, out=(dtype, self.shape), suffix="grad")
    return cast(ctx, grad, self.dtype)


def _triple(values, default) -> list[int]:
    values = list(values) if values else list(default)
    return values * 3 if len(values) == 1 else values


def _pool3d_attrs(kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override) -> dict:
    k = _triple(kernel_size, ())
    s, p = _triple(stride, k), _triple(padding, (0,))
    return {"ksize": [1, 1, *k], "strides": [1, 1, *s],
            "pads": [p[0], p[0], p[1], p[1], p[2], p[2]], "ceil_mode": bool(ceil_mode),
            "count_include_pad": bool(count_include_pad),
            "divisor_override": int(divisor_override or 0), "data_format": "NCDHW"}


@register(aten.avg_pool3d.default)
def avg_pool3d(ctx, self, kernel_size, stride=(), padding=(0,), ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"""  # noqa: E501
    return ctx.op("AvgPool3D", [self], _pool3d_attrs(kernel_size, stride, padding, ceil_mode,
                                                     count_include_pad, divisor_override))


@register(aten.avg_pool3d_backward.default)
def avg_pool3d_backward(ctx, grad_output, self, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    """avg_pool3d_backward(Tensor grad_output, Tensor self, int[3] kernel_size, int[3] stride, int[3] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor"""  # noqa: E501
    static_dims(ctx, self)  # the input size becomes a Const input
    shape = ctx.const(torch.tensor(list(self.shape), dtype=torch.int32), torch.int32,
                      "orig_input_shape")
    return ctx.op("AvgPool3DGrad", [shape, grad_output],
                  _pool3d_attrs(kernel_size, stride, padding, ceil_mode, count_include_pad,
                                divisor_override))


def _grid_attrs(interpolation_mode, padding_mode, align_corners) -> dict:
    return {"interpolation_mode": INTERPOLATION[interpolation_mode],
            "padding_mode": PADDING[padding_mode], "align_corners": bool(align_corners)}


@register(aten.grid_sampler_2d.default)
def grid_sampler_2d(ctx, input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor"""  # noqa: E501
    return ctx.op("GridSampler2D", [input, grid],
                  _grid_attrs(interpolation_mode, padding_mode, align_corners))


@register(aten.grid_sampler_2d_backward.default)
def grid_sampler_2d_backward(ctx, grad_output, input, grid, interpolation_mode, padding_mode,
                             align_corners, output_mask):
    """grid_sampler_2d_backward(Tensor grad_output, Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners, bool[2] output_mask) -> (Tensor, Tensor)"""  # noqa: E501
    dx, dgrid = ctx.op("GridSampler2DGrad", [grad_output, input, grid],
                       _grid_attrs(interpolation_mode, padding_mode, align_corners),
                       out=[(input.dtype, input.shape), (grid.dtype, grid.shape)])
    return tuple(v if keep else None for v, keep in zip((dx, dgrid), output_mask))


@register(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(ctx, self, output_size):
    """adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)"""
    return op_in_float32(ctx, "AdaptiveMaxPool2d", [self],
                         {"output_size": [int(s) for s in output_size]})


def _im2col_attrs(kernel_size, dilation, padding, stride) -> dict:
    return {"ksizes": list(kernel_size), "strides": list(stride), "dilations": list(dilation),
            "padding_mode": "CALCULATED",
            "pads": [padding[0], padding[0], padding[1], padding[1]]}


def _col2im_attrs(kernel_size, dilation, padding, stride) -> dict:
    return {"kernel_size": list(kernel_size), "dilation": list(dilation),
            "padding": list(padding), "stride": list(stride)}


def _col2im(ctx, cols, output_size, kernel_size, dilation, padding, stride, out=None):
    size = ctx.const(torch.tensor(list(output_size), dtype=torch.int32), torch.int32,
                     "output_size")
    return ctx.op("Col2im", [cols, size], _col2im_attrs(kernel_size, dilation, padding, stride),
                  out=out)


@register(aten.im2col.default)
def im2col(ctx, self, kernel_size, dilation, padding, stride):
    """im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor"""  # noqa: E501
    return ctx.op("Im2col", [self], _im2col_attrs(kernel_size, dilation, padding, stride))


@register(aten.col2im.default)
def col2im(ctx, self, output_size, kernel_size, dilation, padding, stride):
    """col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor"""  # noqa: E501
    return _col2im(ctx, self, output_size, kernel_size, dilation, padding, stride)
