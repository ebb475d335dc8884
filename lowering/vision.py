"""Spatial converters: adaptive average pooling (2-d with its backward, 3-d), 3-d adaptive
max pooling, 3-d average pooling, 2-d / 3-d grid sampling (with backward), all in NCHW /
NCDHW. bfloat16 grid sampling is left to eager: GE has no bfloat16 GridSampler2D/3D, and
sampling in float32 moves the sample points away from eager's bfloat16 ones."""

from __future__ import annotations

import functools
import math

import torch

from npu_inductor.ge import dtypes
from npu_inductor.ge.ir import Value
from npu_inductor.lowering.helpers import cast
from npu_inductor.lowering.index import filled
from npu_inductor.lowering.pool import batched, unbatched
from npu_inductor.lowering.precision import op_in_float32
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import reshape, static_dims, transpose

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
    out_dtype, out_shape = ctx.out_specs()[0]
    y = ctx.op("AvgPool3D", [batched(ctx, self, 5)],
               _pool3d_attrs(kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override),
               out=(out_dtype, (1, *out_shape) if self.rank == 4 else out_shape))
    return unbatched(ctx, y, self.rank)


@register(aten.avg_pool3d_backward.default)
def avg_pool3d_backward(ctx, grad_output, self, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    """avg_pool3d_backward(Tensor grad_output, Tensor self, int[3] kernel_size, int[3] stride, int[3] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor"""  # noqa: E501
    static_dims(ctx, self)  # the input size becomes a Const input
    x_shape = (1, *self.shape) if self.rank == 4 else tuple(self.shape)
    shape = ctx.const(torch.tensor(list(x_shape), dtype=torch.int32), torch.int32,
                      "orig_input_shape")
    dx = ctx.op("AvgPool3DGrad", [shape, batched(ctx, grad_output, 5)],
                _pool3d_attrs(kernel_size, stride, padding, ceil_mode, count_include_pad,
                              divisor_override), out=(grad_output.dtype, x_shape))
    return unbatched(ctx, dx, self.rank)


def _grid_attrs(interpolation_mode, padding_mode, align_corners) -> dict:
    return {"interpolation_mode": INTERPOLATION[interpolation_mode],
            "padding_mode": PADDING[padding_mode], "align_corners": bool(align_corners)}


def _grid_sampler(ctx, input, grid, interpolation_mode, padding_mode, align_corners, *,
                  ge_type):
    """grid_sampler_{2,3}d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor"""  # noqa: E501
    return ctx.op(ge_type, [input, grid],
                  _grid_attrs(interpolation_mode, padding_mode, align_corners))


def _grid_sampler_backward(ctx, grad_output, input, grid, interpolation_mode, padding_mode,
                           align_corners, output_mask, *, ge_type):
    """grid_sampler_{2,3}d_backward(Tensor grad_output, Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners, bool[2] output_mask) -> (Tensor, Tensor)"""  # noqa: E501
    dx, dgrid = ctx.op(ge_type, [grad_output, input, grid],
                       _grid_attrs(interpolation_mode, padding_mode, align_corners),
                       out=[(input.dtype, input.shape), (grid.dtype, grid.shape)])
    return tuple(v if keep else None for v, keep in zip((dx, dgrid), output_mask))


for _d in (2, 3):
    register(getattr(aten, f"grid_sampler_{_d}d").default)(
        functools.partial(_grid_sampler, ge_type=f"GridSampler{_d}D"))
    register(getattr(aten, f"grid_sampler_{_d}d_backward").default)(
        functools.partial(_grid_sampler_backward, ge_type=f"GridSampler{_d}DGrad"))


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


# ---- 3-d adaptive pooling ------------------------------------------------------------------
# GE has no 3-d adaptive pooling. Output cell o of a dim averages input [floor(o*I/O),
# ceil((o+1)*I/O)): a box average is separable, so it is one MatMulV2 per spatial dim with a
# constant (I, O) averaging matrix, in float32 (low precision rounds once, at the end).
def _averaging(n_in: int, n_out: int) -> torch.Tensor:
    a = torch.zeros(n_in, n_out, dtype=torch.float64)
    for o in range(n_out):
        start, end = o * n_in // n_out, -(-(o + 1) * n_in // n_out)
        a[start:end, o] = 1.0 / (end - start)
    return a


def _pool_last(ctx, x: Value, n_out: int, suffix: str) -> Value:
    """Adaptive average over the last dim of ``x``."""
    lead, n_in = x.shape[:-1], x.shape[-1]
    rows = reshape(ctx, x, (math.prod(lead), n_in), f"{suffix}_rows")
    weights = ctx.const(_averaging(n_in, n_out), x.dtype, f"{suffix}_weights")
    y = ctx.op("MatMulV2", [rows, weights], {"transpose_x1": False, "transpose_x2": False},
               out=(x.dtype, (math.prod(lead), n_out)), suffix=f"{suffix}_avg")
    return reshape(ctx, y, lead + (n_out,), f"{suffix}_unrows")


def _float32_enough(node: torch.fx.Node) -> str | None:
    dtype = node.meta["val"].dtype
    return None if dtype != torch.float64 else "no float64 MatMulV2 for adaptive_avg_pool3d"


@register(aten._adaptive_avg_pool3d.default, capability=_float32_enough, dynamic=False)
def adaptive_avg_pool3d(ctx, self, output_size):
    """_adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor"""
    static_dims(ctx, self)
    dtype, (od, oh, ow) = self.dtype, [int(s) for s in output_size]
    if math.prod(ctx.out_specs()[0][1]) == 0:
        return filled(ctx, ctx.out_specs()[0][1], 0, dtype)
    *lead, d, h, w = self.shape
    x = reshape(ctx, cast(ctx, self, torch.float32), (math.prod(lead), d, h, w), "planes")
    x = _pool_last(ctx, x, ow, "w")                                    # (B, D, H, OW)
    x = _pool_last(ctx, transpose(ctx, x, [0, 1, 3, 2], "dh"), oh, "h")  # (B, D, OW, OH)
    x = _pool_last(ctx, transpose(ctx, x, [0, 2, 3, 1], "hd"), od, "d")  # (B, OW, OH, OD)
    y = transpose(ctx, x, [0, 3, 2, 1], "back")
    return cast(ctx, reshape(ctx, y, tuple(lead) + (od, oh, ow), ""), dtype)


def _divisible(node: torch.fx.Node) -> str | None:
    x, size = node.args[0].meta["val"], node.args[1]
    if any(int(i) % int(o) for i, o in zip(x.shape[-3:], size)):
        return "adaptive max pooling with uneven windows (only even ones are a MaxPool3D)"
    return None


@register(aten.adaptive_max_pool3d.default, capability=_divisible, dynamic=False)
def adaptive_max_pool3d(ctx, self, output_size):
    """adaptive_max_pool3d(Tensor self, int[3] output_size) -> (Tensor, Tensor)"""
    # Even windows: exactly max pooling with kernel = stride = input / output size, whose
    # argmax is the same per-plane flat index with the same tie rule (first max, or NaN).
    static_dims(ctx, self)
    k = [int(i) // int(o) for i, o in zip(self.shape[-3:], output_size)]
    x = reshape(ctx, self, (1,) + self.shape, "batch") if self.rank == 4 else self
    # the 910B kernel's argmax is int32; torch's indices are int64
    out = [(dt, (1,) + s if self.rank == 4 else s)
           for dt, s in zip((self.dtype, torch.int32), (s for _, s in ctx.out_specs()))]
    attrs = {"ksize": k, "strides": k, "pads": [0, 0, 0], "dilation": [1, 1, 1],
             "ceil_mode": False, "data_format": "NCDHW", "dtype": dtypes.to_cpp(torch.int32)}
    ys = ctx.op("MaxPool3DWithArgmaxV2", [x], attrs, out=out, suffix="pool")
    values, indices = (reshape(ctx, y, s, n) for y, (_, s), n in zip(ys, ctx.out_specs(),
                                                                     ("values", "indices")))
    return values, cast(ctx, indices, torch.int64)


# ---- anti-aliased bilinear resize ------------------------------------------------------------
# No GE resize takes an anti-aliasing filter. The op is separable and linear: torch runs a
# horizontal then a vertical pass of fixed per-output weights, so each pass is a MatMulV2 with
# those weights, taken from the op itself applied to a float32 identity (1-row images).
def _aa_weights(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> torch.Tensor:
    """(n_in, n_out): the weight of input i in output o."""
    eye = torch.eye(n_in, dtype=torch.float32).reshape(n_in, 1, 1, n_in)
    y = aten._upsample_bilinear2d_aa(eye, [1, n_out], align_corners, None, scale)
    return y.reshape(n_in, n_out)


def _only_float32(node: torch.fx.Node) -> str | None:
    dtype = node.meta["val"].dtype
    return None if dtype == torch.float32 else f"anti-aliased resize of {dtype}"


@register(aten._upsample_bilinear2d_aa.default, capability=_only_float32, dynamic=False)
def upsample_bilinear2d_aa(ctx, self, output_size, align_corners, scales_h=None,
                           scales_w=None):
    """_upsample_bilinear2d_aa(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"""  # noqa: E501
    static_dims(ctx, self)
    n, c, h, w = self.shape
    oh, ow = (int(s) for s in output_size)
    x = reshape(ctx, self, (n * c * h, w), "rows")
    ww = ctx.const(_aa_weights(w, ow, align_corners, scales_w), torch.float32, "w_weights")
    x = ctx.op("MatMulV2", [x, ww], out=(self.dtype, (n * c * h, ow)), suffix="horizontal")
    x = transpose(ctx, reshape(ctx, x, (n * c, h, ow), "planes"), [0, 2, 1], "columns")
    wh = ctx.const(_aa_weights(h, oh, align_corners, scales_h), torch.float32, "h_weights")
    x = ctx.op("MatMulV2", [reshape(ctx, x, (n * c * ow, h), "cols"), wh],
               out=(self.dtype, (n * c * ow, oh)), suffix="vertical")
    return transpose(ctx, reshape(ctx, x, (n, c, ow, oh), "unflat"), [0, 1, 3, 2], "")
