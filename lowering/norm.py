"""Normalization converters: batch norm (training, inference, backward), layer norm (+ backward).

Training batch norm is ``BatchNormV3``: one op returns the output, the new running
statistics (momentum update, unbiased running variance, as torch) and the saved mean and
inverse std; its backward is ``BatchNormGradV3``. Inference uses ``BNInfer``. Layer norm is
``LayerNormV4`` / ``LayerNormGradV3`` (mean and rstd keep the normalized axes as size 1).
Absent optional affine parameters or statistics are fed as constants.

The device's batch-norm kernels take NCHW (4-D) or NCDHW (5-D) tensors: other ranks are
unsqueezed / reshaped around the op as torchair does. ``BatchNormV3`` is a ref op (it
writes ``running_mean``/``running_var`` in place), so it gets float32 copies of its own
(``TensorMove``, or a ``Cast`` from a half type; the 910B kernel takes float32 statistics).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from npu_inductor.ge import dtypes
from npu_inductor.ge.ir import Value
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.helpers import cast, int_list
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import reshape, static_dims

aten = torch.ops.aten
_BN_INFER_DTYPES = (torch.float16, torch.float32)  # BNInfer has no bfloat16 prototype


def _or_fill(ctx: LoweringContext, v: Value | None, fill: float, shape, dtype) -> Value:
    """``v``, or a constant tensor of ``fill`` where an optional input is absent."""
    if v is not None:
        return v
    return ctx.const(torch.full(tuple(shape), fill, dtype=dtype), dtype, f"fill{int(fill)}")


def _channels(ctx: LoweringContext, x: Value) -> int:
    static_dims(ctx, x, dim=1)  # absent parameters become (C,) constants
    return x.shape[1]


def _fmap(ctx: LoweringContext, x: Value, max_rank: int, suffix: str) -> Value:
    """``x`` as a 4-D (NCHW) or, up to ``max_rank``, 5-D (NCDHW) feature map: lower ranks
    gain trailing 1s, higher ones fold their trailing dims (per-channel statistics are the
    same over any arrangement of the non-channel dims)."""
    if x.rank < 4:
        return ctx.op("Unsqueeze", [x], {"axes": list(range(x.rank, 4))},
                      out=(x.dtype, x.shape + (1,) * (4 - x.rank)), suffix=suffix)
    if x.rank <= max_rank:
        return x
    static_dims(ctx, x)
    return reshape(ctx, x, x.shape[:max_rank - 1] + (math.prod(x.shape[max_rank - 1:]),),
                   suffix)


def _unfmap(ctx: LoweringContext, y: Value, shape: Sequence[int], suffix: str) -> Value:
    """Undo ``_fmap``: ``y`` back to ``shape``."""
    shape = tuple(shape)
    if y.shape == shape:
        return y
    if len(shape) < 4:
        return ctx.op("Squeeze", [y], {"axis": list(range(len(shape), 4))},
                      out=(y.dtype, shape), suffix=suffix)
    return reshape(ctx, y, shape, suffix)


def _own_stat(ctx: LoweringContext, v: Value, suffix: str) -> Value:
    """A float32 running statistic ``BatchNormV3`` may write in place: a ``TensorMove``
    copy (torchair does the same), or the fresh result of a ``Cast`` from another dtype."""
    if v.dtype == torch.float32:
        return ctx.op("TensorMove", [v], out=(v.dtype, v.shape), suffix=suffix)
    return ctx.op("Cast", [v], {"dst_type": dtypes.to_cpp(torch.float32)},
                  out=(torch.float32, v.shape), suffix=suffix)


def _batch_norm_v3(ctx: LoweringContext, input: Value, weight: Value, bias: Value,
                   running_mean: Value, running_var: Value, attrs: dict,
                   outs: Sequence) -> tuple[Value, ...]:
    """``BatchNormV3`` on a 4-D/5-D view of ``input`` with float32 statistics of its own;
    returns (y, new_mean, new_var, save_mean, save_rstd) at the FX node's ``outs``."""
    x = _fmap(ctx, input, 5, "x_fmap")
    stats = [_own_stat(ctx, v, s) for v, s in ((running_mean, "mean_copy"),
                                               (running_var, "var_copy"))]
    (ydt, _), (mdt, mshape), (vdt, vshape) = outs[:3]
    r = ctx.op("BatchNormV3", [x, weight, bias, *stats], attrs,
               out=[(ydt, x.shape), (torch.float32, mshape), (torch.float32, vshape),
                    *outs[3:]])
    y = _unfmap(ctx, r[0], input.shape, "y_shape")
    return y, cast(ctx, r[1], mdt), cast(ctx, r[2], vdt), r[3], r[4]


def _stat_dtype(x: Value) -> torch.dtype:
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


@register(aten._native_batch_norm_legit_functional.default)
def batch_norm_functional(ctx, input, weight, bias, running_mean, running_var, training,
                          momentum, eps):
    """_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)"""  # noqa: E501
    c, pdtype = _channels(ctx, input), running_mean.dtype
    w = _or_fill(ctx, weight, 1.0, (c,), pdtype)
    b = _or_fill(ctx, bias, 0.0, (c,), pdtype)
    y, save_mean, save_rstd, new_mean, new_var = ctx.out_specs()
    outs = [y, new_mean, new_var, save_mean, save_rstd]  # GE output order
    r = _batch_norm_v3(ctx, input, w, b, running_mean, running_var,
                       {"epsilon": float(eps), "momentum": float(momentum),
                        "is_training": bool(training)}, outs)
    return r[0], r[3], r[4], r[1], r[2]


@register(aten._batch_norm_with_update_functional.default)
def batch_norm_with_update(ctx, input, weight, bias, running_mean, running_var, momentum, eps):
    """_batch_norm_with_update_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)"""  # noqa: E501
    c, pdtype = _channels(ctx, input), running_mean.dtype
    y, save_mean, save_rstd, reserve, new_mean, new_var = ctx.out_specs()
    r = _batch_norm_v3(ctx, input, _or_fill(ctx, weight, 1.0, (c,), pdtype),
                       _or_fill(ctx, bias, 0.0, (c,), pdtype), running_mean, running_var,
                       {"epsilon": float(eps), "momentum": float(momentum), "is_training": True},
                       [y, new_mean, new_var, save_mean, save_rstd])
    empty = ctx.const(torch.empty(reserve[1], dtype=reserve[0]), reserve[0], "reserve")
    return r[0], r[3], r[4], empty, r[1], r[2]


@register(aten._native_batch_norm_legit_no_training.default)
def batch_norm_no_training(ctx, input, weight, bias, running_mean, running_var, momentum, eps):
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    c = _channels(ctx, input)
    params = [cast(ctx, v, torch.float32) for v in (
        _or_fill(ctx, weight, 1.0, (c,), running_mean.dtype),
        _or_fill(ctx, bias, 0.0, (c,), running_mean.dtype), running_mean, running_var)]
    x = input if input.dtype in _BN_INFER_DTYPES else cast(ctx, input, torch.float32)
    x = _fmap(ctx, x, 4, "x_fmap")
    y = ctx.op("BNInfer", [x, *params], {"epsilon": float(eps)}, out=(x.dtype, x.shape))
    y = cast(ctx, _unfmap(ctx, y, input.shape, "y_shape"), input.dtype)
    # torch returns empty saved statistics in inference mode
    empties = [ctx.const(torch.empty(shape, dtype=dt), dt, "empty")
               for dt, shape in ctx.out_specs()[1:]]
    return (y, *empties)


@register(aten.native_batch_norm_backward.default)
def batch_norm_backward(ctx, grad_out, input, weight, running_mean, running_var, save_mean,
                        save_invstd, train, eps, output_mask):
    """native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    c, sdt = _channels(ctx, input), _stat_dtype(input)
    pdt = weight.dtype if weight is not None else sdt
    ins = [_fmap(ctx, grad_out, 5, "dy_fmap"), _fmap(ctx, input, 5, "x_fmap"),
           _or_fill(ctx, weight, 1.0, (c,), pdt),
           _or_fill(ctx, running_mean, 0.0, (c,), pdt), _or_fill(ctx, running_var, 1.0, (c,), pdt),
           cast(ctx, _or_fill(ctx, save_mean, 0.0, (c,), sdt), torch.float32),
           cast(ctx, _or_fill(ctx, save_invstd, 1.0, (c,), sdt), torch.float32)]
    outs = [(input.dtype, ins[1].shape), (pdt, (c,)), (pdt, (c,))]
    dx, dw, db = ctx.op("BatchNormGradV3", ins, {"is_training": bool(train),
                                                "epsilon": float(eps)}, out=outs)
    dx = _unfmap(ctx, dx, input.shape, "dx_shape")
    return tuple(v if keep else None for v, keep in zip((dx, dw, db), output_mask))


def _int32_dims(ctx: LoweringContext, sizes) -> Value:
    if all(isinstance(d, int) for d in sizes):
        return ctx.const(torch.tensor(list(sizes), dtype=torch.int32), torch.int32,
                         "normalized_shape")
    return cast(ctx, int_list(ctx, sizes, "normalized_shape"), torch.int32)


@register(aten.native_layer_norm.default)
def native_layer_norm(ctx, input, normalized_shape, weight, bias, eps):
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    # the 910B kernel takes normalized_shape as int32 and returns mean/rstd in float32
    dims = _int32_dims(ctx, normalized_shape)
    (y, y_shape), (stat, stat_shape), _ = ctx.out_specs()
    y, mean, rstd = ctx.op("LayerNormV4", [input, dims, weight, bias], {"epsilon": float(eps)},
                           out=[(y, y_shape), (torch.float32, stat_shape),
                                (torch.float32, stat_shape)])
    return y, cast(ctx, mean, stat), cast(ctx, rstd, stat)


@register(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(ctx, grad_out, input, normalized_shape, mean, rstd, weight, bias,
                               output_mask):
    """native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    shape = tuple(normalized_shape)
    gamma = _or_fill(ctx, weight, 1.0, shape, input.dtype)
    outs = [(input.dtype, input.shape), (gamma.dtype, shape), (gamma.dtype, shape)]
    stats = [cast(ctx, v, torch.float32) for v in (rstd, mean)]  # 910B: float32 statistics
    r = ctx.op("LayerNormGradV3", [grad_out, input, *stats, gamma], out=outs)
    return tuple(v if keep else None for v, keep in zip(r, output_mask))


@register(aten.native_group_norm.default)
def native_group_norm(ctx, input, weight, bias, N, C, HxW, group, eps):
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    c = _channels(ctx, input)
    gamma = _or_fill(ctx, weight, 1.0, (c,), input.dtype)
    beta = _or_fill(ctx, bias, 0.0, (c,), input.dtype)
    return ctx.op("GroupNormV2", [input, gamma, beta],
                  {"num_groups": int(group), "data_format": "NCHW", "eps": float(eps),
                   "is_training": True})


@register(aten.native_group_norm_backward.default)
def native_group_norm_backward(ctx, grad_out, input, mean, rstd, weight, N, C, HxW, group,
                               output_mask):
    """native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    c = _channels(ctx, input)
    gamma = _or_fill(ctx, weight, 1.0, (c,), input.dtype)
    outs = [(input.dtype, input.shape), (gamma.dtype, (c,)), (gamma.dtype, (c,))]
    r = ctx.op("GroupNormGrad", [grad_out, mean, rstd, input, gamma],
               {"num_groups": int(group), "data_format": "NCHW",
                "dx_is_require": bool(output_mask[0]), "dgamma_is_require": bool(output_mask[1]),
                "dbeta_is_require": bool(output_mask[2])}, out=outs)
    return tuple(v if keep else None for v, keep in zip(r, output_mask))


@register(aten._native_batch_norm_legit.no_stats)
def batch_norm_no_stats(ctx, input, weight, bias, training, momentum, eps):
    """_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    c, sdt = _channels(ctx, input), _stat_dtype(input)
    pdt = weight.dtype if weight is not None else sdt
    stats = [_or_fill(ctx, None, 0.0, (c,), sdt), _or_fill(ctx, None, 1.0, (c,), sdt)]
    y, save_mean, save_rstd = ctx.out_specs()
    r = _batch_norm_v3(ctx, input, _or_fill(ctx, weight, 1.0, (c,), pdt),
                       _or_fill(ctx, bias, 0.0, (c,), pdt), *stats,
                       {"epsilon": float(eps), "momentum": float(momentum), "is_training": True},
                       [y, (sdt, (c,)), (sdt, (c,)), save_mean, save_rstd])
    return r[0], r[3], r[4]
