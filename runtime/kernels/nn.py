"""Neural-network GE ops: convolution, pooling, normalization, softmax, embedding, losses.

Each kernel implements the GE op's semantics with one fast torch CPU kernel (no Python
loops over elements). GE spellings are kept: ``pads`` is ``[top, bottom, left, right]``,
4-element ``strides``/``dilations`` are NCHW-ordered, shape inputs arrive as int tensors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from npu_inductor.ge.dtypes import from_cpp
from npu_inductor.runtime.kernels import as_list, kernel

aten = torch.ops.aten
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


# ---- convolution ----------------------------------------------------------------------
def _hw(values: list[int]) -> list[int]:
    """The spatial entries of an NCHW-ordered 4-element attr."""
    return list(values[2:])


def _pad_input(x: torch.Tensor, pads: list[int]) -> tuple[torch.Tensor, list[int]]:
    """Asymmetric GE pads -> an explicitly padded input and symmetric torch padding."""
    top, bottom, left, right = pads
    if top == bottom and left == right:
        return x, [top, left]
    return F.pad(x, (left, right, top, bottom)), [0, 0]


@kernel("Conv2D")
def conv2d(x, filter, bias=None, offset_w=None, strides=(), pads=(), dilations=(1, 1, 1, 1),
           groups=1, data_format="NHWC", offset_x=0):
    x, padding = _pad_input(x, list(pads))
    return F.conv2d(x, filter, bias, _hw(strides), padding, _hw(dilations), groups)


@kernel("Conv2DBackpropInput")
def conv2d_backprop_input(input_size, filter, out_backprop, strides=(), pads=(),
                          dilations=(1, 1, 1, 1), groups=1, data_format="NHWC"):
    n, c, h, w = input_size.tolist()
    top, left = pads[0], pads[2]
    full = F.conv_transpose2d(out_backprop, filter, None, _hw(strides), 0, 0, groups,
                              _hw(dilations))
    # Rows/cols past the last window get no gradient: crop the padding, zero-fill the rest.
    out = full.new_zeros((n, c, h, w))
    rows = min(h, full.shape[2] - top)
    cols = min(w, full.shape[3] - left)
    out[:, :, :rows, :cols] = full[:, :, top:top + rows, left:left + cols]
    return out


@kernel("Conv2DBackpropFilter")
def conv2d_backprop_filter(x, filter_size, out_backprop, strides=(), pads=(),
                           dilations=(1, 1, 1, 1), groups=1, data_format="NHWC"):
    x, padding = _pad_input(x, list(pads))
    weight = x.new_empty(filter_size.tolist())
    return aten.convolution_backward(out_backprop, x, weight, None, _hw(strides), padding,
                                     _hw(dilations), False, [0, 0], groups,
                                     [False, True, False])[1]


# ---- pooling --------------------------------------------------------------------------
MASK_BITS = 16  # MaxPoolWithArgmaxV1: output positions per uint16 mask element


def _v1_window(ksize, strides, pads, dilation) -> tuple[list[int], ...]:
    """The (h, w) entries of V1's ``[1, h, w, 1]`` attrs."""
    return tuple(list(v[1:3]) for v in (ksize, strides, pads, dilation))


def _window_origin(out_hw, strides, pads, in_w) -> torch.Tensor:
    """Flat input index of each output position's window origin (may be in the padding)."""
    hs = torch.arange(out_hw[0]) * strides[0] - pads[0]
    ws = torch.arange(out_hw[1]) * strides[1] - pads[1]
    return (hs[:, None] * in_w + ws[None, :]).reshape(-1)


def _indices_to_mask(idx: torch.Tensor, in_w: int, k, s, p, d) -> torch.Tensor:
    """torch indices -> V1's mask: bit ``q % 16`` of ``[n, c, tap, q // 16]`` marks output
    position ``q`` taking its maximum at window offset ``tap``."""
    n, c, oh, ow = idx.shape
    rows = idx // in_w - (torch.arange(oh) * s[0] - p[0])[:, None]
    cols = idx % in_w - (torch.arange(ow) * s[1] - p[1])[None, :]
    tap = ((rows // d[0]) * k[1] + cols // d[1]).reshape(n, c, -1)
    taps, positions = k[0] * k[1], oh * ow
    words = -(-positions // MASK_BITS) + 1
    hit = tap[:, :, None, :] == torch.arange(taps)[:, None]
    bits = hit.new_zeros((n, c, taps, words * MASK_BITS))
    bits[..., :positions] = hit
    weights = torch.ones(MASK_BITS, dtype=torch.int32) << torch.arange(MASK_BITS, dtype=torch.int32)
    packed = (bits.view(n, c, taps, words, MASK_BITS).int() * weights).sum(-1, dtype=torch.int32)
    return packed.to(torch.uint16)


def _mask_to_indices(mask: torch.Tensor, in_w: int, out_hw, k, s, p, d) -> torch.Tensor:
    """V1's mask -> torch indices; a mask without exactly one bit per output is refused."""
    n, c, taps, words = mask.shape
    positions = out_hw[0] * out_hw[1]
    if taps != k[0] * k[1] or words != -(-positions // MASK_BITS) + 1:
        raise ValueError(f"MaxPoolGradWithArgmaxV1: argmax mask shape {list(mask.shape)} is "
                         f"not [N, C, {k[0] * k[1]}, {-(-positions // MASK_BITS) + 1}]")
    shifts = torch.arange(MASK_BITS, dtype=torch.int32)
    bits = (mask.to(torch.int32)[..., None] >> shifts) & 1
    bits = bits.reshape(n, c, taps, -1)[..., :positions]
    if not bool((bits.sum(2) == 1).all()):
        raise ValueError("MaxPoolGradWithArgmaxV1: argmax mask must mark exactly one window "
                         "offset per output position")
    tap = bits.argmax(2)
    offset = (tap // k[1]) * d[0] * in_w + (tap % k[1]) * d[1]
    idx = _window_origin(out_hw, s, p, in_w) + offset
    return idx.reshape(n, c, *out_hw)


@kernel("MaxPoolWithArgmaxV1")
def max_pool_with_argmax_v1(x, ksize=(), strides=(), pads=(), dtype=3,
                            dilation=(1, 1, 1, 1), ceil_mode=False):
    k, s, p, d = _v1_window(ksize, strides, pads, dilation)
    y, idx = aten.max_pool2d_with_indices(x, k, s, p, d, ceil_mode)
    return y, _indices_to_mask(idx, x.shape[-1], k, s, p, d)


@kernel("MaxPoolGradWithArgmaxV1")
def max_pool_grad_with_argmax_v1(x, grad, argmax, ksize=(), strides=(), pads=(), dtype=3,
                                 dilation=(1, 1, 1, 1), ceil_mode=False):
    k, s, p, d = _v1_window(ksize, strides, pads, dilation)
    idx = _mask_to_indices(argmax, x.shape[-1], grad.shape[-2:], k, s, p, d)
    return aten.max_pool2d_with_indices_backward(grad, x, k, s, p, d, ceil_mode, idx)


def _avg_args(ksize, strides, pads, ceil_mode, exclusive, divisor_override):
    top, bottom, left, right = pads
    if top != bottom or left != right:
        raise ValueError(f"asymmetric pads {pads} are not supported by the host AvgPoolV2")
    return (_hw(ksize), _hw(strides), [top, left], ceil_mode, not exclusive,
            divisor_override or None)


@kernel("AvgPoolV2")
def avg_pool_v2(x, ksize=(), strides=(), padding_mode="CALCULATED", pads=(0, 0, 0, 0),
                data_format="NCHW", global_pooling=False, ceil_mode=False, exclusive=True,
                divisor_override=0):
    return F.avg_pool2d(x, *_avg_args(ksize, strides, pads, ceil_mode, exclusive,
                                      divisor_override))


@kernel("AvgPoolV2Grad")
def avg_pool_v2_grad(orig_input_shape, input_grad, ksize=(), strides=(),
                     padding_mode="CALCULATED", pads=(0, 0, 0, 0), data_format="NCHW",
                     global_pooling=False, ceil_mode=False, exclusive=True, divisor_override=0):
    like = input_grad.new_empty(()).expand(orig_input_shape.tolist())
    return aten.avg_pool2d_backward(input_grad, like, *_avg_args(
        ksize, strides, pads, ceil_mode, exclusive, divisor_override))


# ---- normalization --------------------------------------------------------------------
@kernel("BatchNormV3")
def batch_norm_v3(x, weight, bias, running_mean, running_var, epsilon=1e-5, momentum=0.1,
                  is_training=True):
    # GE keeps running statistics in float32 whatever the parameters' dtype; torch wants
    # them in the parameters' dtype (exact here: they were cast up from it)
    stat = running_mean.dtype
    y, save_mean, save_rstd, mean, var = aten._native_batch_norm_legit_functional(
        x, weight, bias, running_mean.to(weight.dtype), running_var.to(weight.dtype),
        is_training, momentum, epsilon)
    return y, mean.to(stat), var.to(stat), save_mean, save_rstd


@kernel("BNInfer")
def bn_infer(x, scale, offset, mean, variance, epsilon):
    y = F.batch_norm(x.float(), mean, variance, scale, offset, False, 0.0, epsilon)
    return y.to(x.dtype)


@kernel("BatchNormGradV3")
def batch_norm_grad_v3(dy, x, weight, running_mean, running_var, save_mean, save_rstd,
                       is_training=True, epsilon=1e-5):
    # GE keeps the saved statistics in float32; torch wants them in the parameters' dtype
    save_mean, save_rstd = save_mean.to(weight.dtype), save_rstd.to(weight.dtype)
    return aten.native_batch_norm_backward(dy, x, weight, running_mean, running_var, save_mean,
                                           save_rstd, is_training, epsilon, [True, True, True])


@kernel("LayerNormV4", const_inputs=(1,))
def layer_norm_v4(x, normalized_shape, gamma=None, beta=None, epsilon=1e-5):
    # torch.native_layer_norm: the same kernel as aten's, ~1.5 us less Python dispatch
    return torch.native_layer_norm(x, as_list(normalized_shape), gamma, beta, epsilon)


@kernel("LayerNormGradV3")
def layer_norm_grad_v3(dy, x, rstd, mean, gamma):
    return aten.native_layer_norm_backward(dy, x, list(gamma.shape), mean, rstd, gamma, gamma,
                                           [True, True, True])


# ---- softmax --------------------------------------------------------------------------
@kernel("SoftmaxV2", out=True)
def softmax_v2(x, axes=(-1,), half_to_float=False, out=None):
    (axis,) = axes
    if out is not None:
        src = x.float() if half_to_float and x.dtype != torch.float32 else x
        return aten._softmax.out(src, axis, False, out=out)
    return torch.softmax(x, axis, torch.float32 if half_to_float else None)


@kernel("SoftmaxGrad", out=True)
def softmax_grad(softmax, grad_softmax, axes=(-1,), out=None):
    (axis,) = axes
    if out is not None:
        return aten._softmax_backward_data.out(grad_softmax, softmax, axis, softmax.dtype,
                                               grad_input=out)
    return aten._softmax_backward_data(grad_softmax, softmax, axis, softmax.dtype)


@kernel("LogSoftmaxV2")
def log_softmax_v2(logits, axes=(-1,)):
    (axis,) = axes
    return aten._log_softmax(logits, axis, False)


@kernel("LogSoftmaxGrad")
def log_softmax_grad(grad, x, axis=(-1,)):
    (dim,) = axis
    return aten._log_softmax_backward_data(grad, x, dim, x.dtype)


@kernel("ReduceLogSumExp")
def reduce_log_sum_exp(x, axes, keep_dims=False):
    return torch.logsumexp(x, axes.tolist(), keep_dims)


# ---- embedding ------------------------------------------------------------------------
@kernel("GatherV2", out=True, const_inputs=(2,))
def gather_v2(x, indices, axis, batch_dims=0, is_preprocessed=False,
              negative_index_support=False, out=None):
    a = axis if isinstance(axis, int) else as_list(axis)  # pre-decoded Const: int or list
    a = (a[0] if isinstance(a, list) else a) % x.dim()
    if indices.dim() == 0:  # one index (aten.select): a copy of the selected slice
        i = int(indices)
        if negative_index_support and i < 0:
            i += x.shape[a]
        if 0 <= i < x.shape[a]:  # (out of range: index_select's error below)
            picked = x.select(a, i)  # ~3 us against index_select's ~6
            if out is not None:
                out.view(picked.shape).copy_(picked)
                return out
            return picked.clone(memory_format=torch.contiguous_format)
    flat = indices.reshape(-1).long()
    if negative_index_support:
        flat = torch.where(flat < 0, flat + x.shape[a], flat)
    shape = x.shape[:a] + indices.shape + x.shape[a + 1:]
    if out is not None:  # index_select writes the flat-index shape; out is contiguous
        torch.index_select(x, a, flat, out=out.view(x.shape[:a] + flat.shape + x.shape[a + 1:]))
        return out
    return x.index_select(a, flat).reshape(shape)


@kernel("EmbeddingDenseGrad")
def embedding_dense_grad(grad, indices, num_weights, padding_idx=-1, scale_grad_by_freq=False):
    return aten.embedding_dense_backward(grad, indices, num_weights, padding_idx,
                                         scale_grad_by_freq)


# ---- losses ---------------------------------------------------------------------------
@kernel("NLLLoss")
def nll_loss(x, target, weight=None, reduction="mean", ignore_index=-100):
    return aten.nll_loss_forward(x, target, weight, REDUCTIONS[reduction], ignore_index)


@kernel("NLLLossGrad")
def nll_loss_grad(x, y_grad, target, weight, total_weight, reduction="mean", ignore_index=-100):
    return aten.nll_loss_backward(y_grad, x, target, weight, REDUCTIONS[reduction],
                                  ignore_index, total_weight)


@kernel("MseLoss")
def mse_loss(predict, label, reduction="mean"):
    return aten.mse_loss(predict, label, REDUCTIONS[reduction])


@kernel("MseLossGrad")
def mse_loss_grad(predict, label, dout, reduction="mean"):
    return aten.mse_loss_backward(dout, predict, label, REDUCTIONS[reduction])


# ---- spatial --------------------------------------------------------------------------
@kernel("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(x, output_size=()):
    return aten._adaptive_avg_pool2d(x, list(output_size))


@kernel("AdaptiveAvgPool2dGrad")
def adaptive_avg_pool2d_grad(input_grad, orig_input_shape=()):
    like = input_grad.new_empty(()).expand(list(orig_input_shape))
    return aten._adaptive_avg_pool2d_backward(input_grad, like)


def _pool3d_args(ksize, strides, pads, ceil_mode, count_include_pad, divisor_override):
    front, back, top, bottom, left, right = pads
    if front != back or top != bottom or left != right:
        raise ValueError(f"asymmetric pads {pads} are not supported by the host AvgPool3D")
    return (list(ksize[-3:]), list(strides[-3:]), [front, top, left], ceil_mode,
            count_include_pad, divisor_override or None)


@kernel("AvgPool3D")
def avg_pool3d(x, ksize=(), strides=(), pads=(), ceil_mode=False, count_include_pad=True,
               divisor_override=0, data_format="NDHWC"):
    return F.avg_pool3d(x, *_pool3d_args(ksize, strides, pads, ceil_mode, count_include_pad,
                                         divisor_override))


@kernel("AvgPool3DGrad")
def avg_pool3d_grad(orig_input_shape, grads, ksize=(), strides=(), pads=(), ceil_mode=False,
                    count_include_pad=True, divisor_override=0, data_format="NDHWC"):
    like = grads.new_empty(()).expand(orig_input_shape.tolist())
    return aten.avg_pool3d_backward(grads, like, *_pool3d_args(
        ksize, strides, pads, ceil_mode, count_include_pad, divisor_override))


_INTERPOLATION = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADDING = {"zeros": 0, "border": 1, "reflection": 2}


def _grid_sampler_kernels(d: int) -> None:
    """GridSampler{d}D(x, grid, **attrs) and GridSampler{d}DGrad(grad, x, grid, **attrs)."""
    fwd, bwd = getattr(aten, f"grid_sampler_{d}d"), getattr(aten, f"grid_sampler_{d}d_backward")

    @kernel(f"GridSampler{d}D")
    def sample(x, grid, interpolation_mode="bilinear", padding_mode="zeros",
               align_corners=False, data_format=None):
        return fwd(x, grid, _INTERPOLATION[interpolation_mode], _PADDING[padding_mode],
                   align_corners)

    @kernel(f"GridSampler{d}DGrad")
    def sample_grad(grad, x, grid, interpolation_mode="bilinear", padding_mode="zeros",
                    align_corners=False):
        return bwd(grad, x, grid, _INTERPOLATION[interpolation_mode], _PADDING[padding_mode],
                   align_corners, [True, True])


_grid_sampler_kernels(2)
_grid_sampler_kernels(3)


# ---- group norm, distances ------------------------------------------------------------
def _group_dims(x: torch.Tensor) -> tuple[int, int, int]:
    n, c = x.shape[0], x.shape[1]
    return n, c, x.numel() // max(n * c, 1)


@kernel("GroupNormV2")
def group_norm_v2(x, gamma, beta, num_groups, data_format="NHWC", eps=1e-5, is_training=True):
    return aten.native_group_norm(x, gamma, beta, *_group_dims(x), num_groups, eps)


@kernel("GroupNormGrad")
def group_norm_grad(dy, mean, rstd, x, gamma, num_groups, data_format="NCHW",
                    dx_is_require=True, dgamma_is_require=True, dbeta_is_require=True):
    # every output is computed (an unrequired one is simply not consumed downstream)
    return aten.native_group_norm_backward(dy, x, mean, rstd, gamma, *_group_dims(x),
                                           num_groups, [True, True, True])


@kernel("Cdist")
def cdist(x1, x2, p=2.0):
    return aten._cdist_forward(x1, x2, p, None)


@kernel("CdistGrad")
def cdist_grad(grad, x1, x2, cdist, p=2.0):
    return aten._cdist_backward(grad, x1, x2, p, cdist)


@kernel("BinaryCrossEntropy")
def binary_cross_entropy(x, y, weight=None, reduction="mean"):
    return aten.binary_cross_entropy(x, y, weight, REDUCTIONS[reduction])


@kernel("BinaryCrossEntropyGrad")
def binary_cross_entropy_grad(x, y, grad_output, weight=None, reduction="mean"):
    return aten.binary_cross_entropy_backward(grad_output, x, y, weight, REDUCTIONS[reduction])


@kernel("SigmoidCrossEntropyWithLogitsV2")
def sigmoid_cross_entropy_with_logits_v2(predict, target, weight=None, pos_weight=None,
                                         reduction="mean"):
    return aten.binary_cross_entropy_with_logits(predict, target, weight, pos_weight,
                                                 REDUCTIONS[reduction])


@kernel("SmoothL1LossV2")
def smooth_l1_loss_v2(predict, label, sigma=1.0, reduction="mean"):
    return aten.smooth_l1_loss(predict, label, REDUCTIONS[reduction], sigma)


@kernel("SmoothL1LossGradV2")
def smooth_l1_loss_grad_v2(predict, label, dout, sigma=1.0, reduction="mean"):
    return aten.smooth_l1_loss_backward(dout, predict, label, REDUCTIONS[reduction], sigma)


@kernel("SoftMarginLoss")
def soft_margin_loss(input_x, input_y, reduction="mean"):
    return aten.soft_margin_loss(input_x, input_y, REDUCTIONS[reduction])


@kernel("SoftMarginLossGrad")
def soft_margin_loss_grad(predict, label, dout, reduction="mean"):
    return aten.soft_margin_loss_backward(dout, predict, label, REDUCTIONS[reduction])


# ---- patches --------------------------------------------------------------------------
@kernel("Im2col")
def im2col(x, ksizes=(), strides=(1,), dilations=(1,), padding_mode="CALCULATED", pads=(0,)):
    pads = list(pads) * 4 if len(pads) == 1 else list(pads)
    return aten.im2col(x, list(ksizes), list(dilations), [pads[0], pads[2]], list(strides))


@kernel("Col2im")
def col2im(x, output_size, kernel_size=(), dilation=(), padding=(), stride=()):
    return aten.col2im(x, output_size.tolist(), list(kernel_size), list(dilation),
                       list(padding), list(stride))


@kernel("AdaptiveMaxPool2d")
def adaptive_max_pool2d(x, output_size=()):
    return aten.adaptive_max_pool2d(x, list(output_size))


@kernel("Pdist")
def pdist(x, p=2.0):
    return aten._pdist_forward(x, p)


_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


@kernel("EmbeddingBag")
def embedding_bag(weight, indices, offsets=None, per_sample_weights=None, mode="mean",
                  scale_grad_by_freq=False, sparse=False, include_last_offset=False,
                  padding_idx=-1):
    return aten._embedding_bag(weight, indices, offsets, scale_grad_by_freq, _BAG_MODES[mode],
                               sparse, per_sample_weights, include_last_offset, padding_idx)


@kernel("MaxPool3DWithArgmaxV2")
def max_pool3d_with_argmax_v2(x, ksize=(), strides=(), pads=(), dilation=(1, 1, 1),
                              ceil_mode=False, data_format="NCDHW", dtype=3):
    y, argmax = aten.max_pool3d_with_indices(x, ksize, strides, pads, dilation, ceil_mode)
    return y, argmax.to(from_cpp(dtype))
