"""Convolution converters: convolution (1d/2d, plain and transposed) and its backward.

2-D convolutions map to ``Conv2D`` / ``Conv2DBackpropInput`` / ``Conv2DBackpropFilter`` in
NCHW; a 1-D convolution runs as a 2-D one over an inserted ``H = 1`` axis. A transposed
convolution is the input-gradient of the plain one, so it lowers to ``Conv2DBackpropInput``
(``Conv2DTranspose`` has no float32 prototype). ``Conv3D`` is float16-only in GE: a plain
3-D convolution runs as one ``Conv2D`` with the depth taps folded into the input channels;
transposed 3-D convolutions and 3-D backward are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.ge.ir import Value
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.helpers import cast, int_list
from npu_inductor.lowering.index import filled
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import move, reshape, static_dims, strided_slice, transpose
from npu_inductor.lowering.symbolic import shape_of

aten = torch.ops.aten
# Conv2DBackpropInput / Conv2DBackpropFilter take no bfloat16: they run in float32.
_BACKPROP_DTYPES = (torch.float16, torch.float32)


def _spatial_rank(node: torch.fx.Node) -> int:
    weight = node.args[2] if node.target is aten.convolution_backward.default else node.args[1]
    return weight.meta["val"].dim() - 2


def _conv_capability(node: torch.fx.Node) -> str | None:
    if _spatial_rank(node) == 3 and node.target is aten.convolution.default:
        return None
    if _spatial_rank(node) not in (1, 2):
        return f"{_spatial_rank(node)}-d convolution: GE Conv3D has no float32 prototype"
    return None


def _nchw(values: Sequence[int], fill: int) -> list[int]:
    """A 1- or 2-element spatial attr -> GE's NCHW-ordered 4-element list."""
    hw = list(values) if len(values) == 2 else [fill, *values]
    return [fill, fill, *hw]


def _pads(padding: Sequence[int]) -> list[int]:
    hw = list(padding) if len(padding) == 2 else [0, *padding]
    return [hw[0], hw[0], hw[1], hw[1]]


def _conv_attrs(stride, padding, dilation, groups) -> dict[str, Any]:
    return {"strides": _nchw(stride, 1), "pads": _pads(padding),
            "dilations": _nchw(dilation, 1), "groups": int(groups), "data_format": "NCHW"}


def _to_2d(ctx: LoweringContext, v: Value | None, suffix: str) -> Value | None:
    """Insert ``H = 1`` before the last axis of a 1-D conv operand (N,C,L) -> (N,C,1,L)."""
    if v is None or v.rank == 4:
        return v
    if sum(d < 0 for d in v.shape) > 1:
        static_dims(ctx, v)  # one Reshape can infer a single dynamic dim only
    shape = (*v.shape[:-1], 1, v.shape[-1])
    return ctx.op("Reshape", [v, int_list(ctx, shape)], out=(v.dtype, shape), suffix=suffix)


def _from_2d(ctx: LoweringContext, v: Value, shape: Sequence[int], suffix: str) -> Value:
    if tuple(shape) == v.shape:
        return v
    return ctx.op("Reshape", [v, int_list(ctx, shape)], out=(v.dtype, tuple(shape)),
                  suffix=suffix)


def _shape_2d(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(shape) if len(shape) == 4 else (*shape[:-1], 1, shape[-1])


def _add_bias(ctx: LoweringContext, y: Value, bias: Value) -> Value:
    shape = (bias.shape[0], 1, 1)
    b = ctx.op("Reshape", [cast(ctx, bias, y.dtype), int_list(ctx, shape)],
               out=(y.dtype, shape), suffix="bias_shape")
    return ctx.op("Add", [y, b], out=(y.dtype, y.shape), suffix="bias")


def _backprop_input(ctx: LoweringContext, size: Sequence[int], weight: Value, grad: Value,
                    attrs: dict[str, Any], suffix: str, like: Value | None = None) -> Value:
    """``like`` (shaped as the input) gives dynamic input sizes at run time."""
    dtype = grad.dtype if grad.dtype in _BACKPROP_DTYPES else torch.float32
    if like is not None:
        sizes = shape_of(ctx, like, torch.int32, "input_size")
    else:
        sizes = ctx.const(torch.tensor(list(size), dtype=torch.int32), torch.int32, "input_size")
    y = ctx.op("Conv2DBackpropInput", [sizes, cast(ctx, weight, dtype), cast(ctx, grad, dtype)],
               attrs, out=(dtype, tuple(size)), suffix=suffix)
    return cast(ctx, y, grad.dtype)


def _backprop_filter(ctx: LoweringContext, x: Value, size: Sequence[int], grad: Value,
                     attrs: dict[str, Any], suffix: str) -> Value:
    dtype = grad.dtype if grad.dtype in _BACKPROP_DTYPES else torch.float32
    sizes = ctx.const(torch.tensor(list(size), dtype=torch.int32), torch.int32, "filter_size")
    y = ctx.op("Conv2DBackpropFilter", [cast(ctx, x, dtype), sizes, cast(ctx, grad, dtype)],
               attrs, out=(dtype, tuple(size)), suffix=suffix)
    return cast(ctx, y, grad.dtype)


@register(aten.convolution.default, capability=_conv_capability)
def convolution(ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""  # noqa: E501
    out_dtype, out_shape = ctx.out_specs()[0]
    if weight.rank == 5 and transposed:
        return _conv_transpose3d(ctx, input, weight, bias, stride, padding, dilation,
                                 output_padding, groups, out_shape)
    if weight.rank == 5:
        return _conv3d(ctx, input, weight, bias, stride, padding, dilation, groups, out_shape)
    x, w = _to_2d(ctx, input, "x2d"), _to_2d(ctx, weight, "w2d")
    attrs = _conv_attrs(stride, padding, dilation, groups)
    shape2d = _shape_2d(out_shape)
    if transposed:
        static_dims(ctx, x, w)  # the output size becomes a Const input
        y = _backprop_input(ctx, shape2d, w, x, attrs, "")
    elif bias is not None and bias.dtype != torch.bfloat16:
        y = ctx.op("Conv2D", [x, w, bias], attrs, out=(out_dtype, shape2d))
        bias = None
    else:
        y = ctx.op("Conv2D", [x, w], attrs, out=(out_dtype, shape2d))
    if bias is not None:
        y = _add_bias(ctx, y, bias)
    return _from_2d(ctx, y, out_shape, "y")


def _conv3d(ctx: LoweringContext, x: Value, w: Value, bias: Value | None, stride, padding,
            dilation, groups, out_shape: Sequence[int]) -> Value:
    """conv3d as one Conv2D: output depth od reads input depths od*sd + t*dd (t < kd), so
    those kd slices stacked as channels (c, t) -> c*kd + t meet the weight reshaped to
    (O, C/g*kd, kh, kw); channel groups stay contiguous. Same products, same sums."""
    static_dims(ctx, x, w)
    stride, padding, dilation = (_three(v) for v in (stride, padding, dilation))
    n, c, _, h, wd = x.shape
    o, cg, kd, kh, kw = w.shape
    od, oh, ow = out_shape[2:]
    sd, pd, dd = stride[0], padding[0], dilation[0]
    if pd:
        pads = [0, 0, 0, 0, pd, pd, 0, 0, 0, 0]
        x = ctx.op("PadV3", [x, int_list(ctx, pads, "paddings"), ctx.const(0, x.dtype, "zero")],
                   {"mode": "constant"}, out=(x.dtype, (n, c, x.shape[2] + 2 * pd, h, wd)),
                   suffix="pad_depth")
    taps = [strided_slice(ctx, x, [2], [t * dd], [t * dd + sd * (od - 1) + 1], [sd],
                          suffix=f"tap{t}") for t in range(kd)]
    stacked = ctx.op("Pack", [taps], {"axis": 2, "N": kd}, out=(x.dtype, (n, c, kd, od, h, wd)),
                     suffix="taps")
    x2 = reshape(ctx, transpose(ctx, stacked, [0, 3, 1, 2, 4, 5], "depth_major"),
                 (n * od, c * kd, h, wd), "x2d")
    w2 = reshape(ctx, w, (o, cg * kd, kh, kw), "w2d")
    attrs = _conv_attrs(stride[1:], padding[1:], dilation[1:], groups)
    inputs = [x2, w2] + ([bias] if bias is not None and bias.dtype != torch.bfloat16 else [])
    y = ctx.op("Conv2D", inputs, attrs, out=(x.dtype, (n * od, o, oh, ow)))
    if bias is not None and len(inputs) == 2:
        y = _add_bias(ctx, y, bias)
    return transpose(ctx, reshape(ctx, y, (n, od, o, oh, ow), "y5d"), [0, 2, 1, 3, 4], "y")


def _three(values: Sequence[int]) -> list[int]:
    return [*values] * 3 if len(values) == 1 else list(values)


def _spread(ctx: LoweringContext, x: Value, axis: int, step: int) -> Value:
    """``step - 1`` zeros inserted between neighbours along ``axis``."""
    if step == 1 or x.shape[axis] == 1:
        return x
    n = x.shape[axis]
    lifted = x.shape[:axis + 1] + (1,) + x.shape[axis + 1:]
    zeros_shape = x.shape[:axis + 1] + (step - 1,) + x.shape[axis + 1:]
    zeros = filled(ctx, zeros_shape, 0, x.dtype)
    pair = ctx.op("ConcatV2", [[reshape(ctx, x, lifted, f"lift{axis}"), zeros],
                               ctx.const(axis + 1, torch.int64, "axis")], {"N": 2},
                  out=(x.dtype, x.shape[:axis + 1] + (step,) + x.shape[axis + 1:]),
                  suffix=f"interleave{axis}")
    merged = reshape(ctx, pair, x.shape[:axis] + (n * step,) + x.shape[axis + 1:],
                     f"merge{axis}")
    return strided_slice(ctx, merged, [axis], [0], [(n - 1) * step + 1], [1],
                         suffix=f"spread{axis}")


def _conv_transpose3d(ctx: LoweringContext, x: Value, w: Value, bias: Value | None, stride,
                      padding, dilation, output_padding, groups,
                      out_shape: Sequence[int]) -> Value:
    """conv_transpose3d by its defining identity: a stride-1 conv3d of the input with
    ``stride - 1`` zeros between elements, edges padded by ``d*(k-1) - p`` (``+ op`` after;
    cropped where negative), and the weight flipped with in/out channels swapped per group.
    The inserted zeros add exact zeros to each sum."""
    static_dims(ctx, x, w)
    s, p, d, op = (_three(v) for v in (stride, padding, dilation, output_padding))
    cin, cog, *k = w.shape
    for axis in range(3):
        x = _spread(ctx, x, axis + 2, s[axis])
    before = [d[i] * (k[i] - 1) - p[i] for i in range(3)]
    after = [before[i] + op[i] for i in range(3)]
    pads = [0, 0, 0, 0] + [v for i in range(3) for v in (max(before[i], 0), max(after[i], 0))]
    if any(pads):
        shape = x.shape[:2] + tuple(x.shape[2 + i] + pads[4 + 2 * i] + pads[5 + 2 * i]
                                    for i in range(3))
        x = ctx.op("PadV3", [x, int_list(ctx, pads, "paddings"), ctx.const(0, x.dtype, "zero")],
                   {"mode": "constant"}, out=(x.dtype, shape), suffix="pad")
    if min(before + after) < 0:  # negative padding crops
        lo = [max(-b, 0) for b in before]
        hi = [x.shape[2 + i] - max(-after[i], 0) for i in range(3)]
        x = strided_slice(ctx, x, [2, 3, 4], lo, hi, [1, 1, 1], suffix="crop")
    g = int(groups)
    wt = reshape(ctx, w, (g, cin // g, cog, *k), "w_groups")
    wt = transpose(ctx, wt, [0, 2, 1, 3, 4, 5], "w_swap")
    wt = reshape(ctx, wt, (g * cog, cin // g, *k), "w_swapped")
    wt = move(ctx, "ReverseV2", [wt, int_list(ctx, [2, 3, 4], "flip_axes")],
              out=(wt.dtype, wt.shape), suffix="w_flip")
    return _conv3d(ctx, x, wt, bias, [1], [0], d, g, out_shape)


@register(aten.convolution_backward.default, capability=_conv_capability)
def convolution_backward(ctx, grad_output, input, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask):
    """convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    dy, x, w = (_to_2d(ctx, v, s) for v, s in ((grad_output, "dy2d"), (input, "x2d"),
                                                (weight, "w2d")))
    static_dims(ctx, w)  # the filter size becomes a Const input; the input's is Shape(x)
    attrs = _conv_attrs(stride, padding, dilation, groups)
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if transposed:  # d(conv_transpose)/dx is the plain convolution of dy
            grad_input = ctx.op("Conv2D", [dy, w], attrs, out=(dy.dtype, x.shape),
                                suffix="dx")
        else:
            grad_input = _backprop_input(ctx, x.shape, w, dy, attrs, "dx", like=x)
        grad_input = _from_2d(ctx, grad_input, input.shape, "dx_shape")
    if output_mask[1]:
        src, grad = (dy, x) if transposed else (x, dy)
        grad_weight = _backprop_filter(ctx, src, w.shape, grad, attrs, "dw")
        grad_weight = _from_2d(ctx, grad_weight, weight.shape, "dw_shape")
    if output_mask[2]:
        axes = [0, *range(2, grad_output.rank)]
        grad_bias = ctx.op("ReduceSum", [grad_output, int_list(ctx, axes, "axes")],
                           {"keep_dims": False}, out=(grad_output.dtype, (grad_output.shape[1],)),
                           suffix="db")
    return grad_input, grad_weight, grad_bias
