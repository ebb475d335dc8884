"""Softmax, embedding and loss converters.

softmax / log_softmax and their backwards map 1:1 onto ``SoftmaxV2`` / ``SoftmaxGrad`` /
``LogSoftmaxV2`` / ``LogSoftmaxGrad`` (GE's grads take the forward *output*, as aten's do).
embedding is ``GatherV2`` on axis 0 and its backward ``EmbeddingDenseGrad``. NLL and MSE
losses map onto ``NLLLoss(Grad)`` / ``MseLoss(Grad)``; GE's NLL ops are float32-only, so
other dtypes run through casts.
"""

from __future__ import annotations

import torch
from npu_inductor.lowering.helpers import cast, norm_axis
from npu_inductor.lowering.registry import register

aten = torch.ops.aten
REDUCTIONS = ("none", "mean", "sum")  # aten's int reduction -> GE's string


# ---- softmax --------------------------------------------------------------------------
@register(aten._softmax.default)
def softmax(ctx, self, dim, half_to_float):
    """_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return ctx.op("SoftmaxV2", [self], {"axes": [norm_axis(dim, self.rank)],
                                        "half_to_float": bool(half_to_float)})


@register(aten._softmax_backward_data.default)
def softmax_backward(ctx, grad_output, output, dim, input_dtype):
    """_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor"""
    grad = ctx.op("SoftmaxGrad", [output, cast(ctx, grad_output, output.dtype)],
                  {"axes": [norm_axis(dim, output.rank)]}, out=(output.dtype, output.shape),
                  suffix="grad")
    return cast(ctx, grad, ctx.out_dtype)


@register(aten._log_softmax.default)
def log_softmax(ctx, self, dim, half_to_float):
    """_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return ctx.op("LogSoftmaxV2", [cast(ctx, self, ctx.out_dtype)],
                  {"axes": [norm_axis(dim, self.rank)]})


@register(aten._log_softmax_backward_data.default)
def log_softmax_backward(ctx, grad_output, output, dim, input_dtype):
    """_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor"""
    grad = ctx.op("LogSoftmaxGrad", [cast(ctx, grad_output, output.dtype), output],
                  {"axis": [norm_axis(dim, output.rank)]}, out=(output.dtype, output.shape),
                  suffix="grad")
    return cast(ctx, grad, ctx.out_dtype)


# ---- embedding ------------------------------------------------------------------------
@register(aten.embedding.default)
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor"""
    return ctx.op("GatherV2", [weight, indices, ctx.const(0, torch.int64, "axis")])


@register(aten.embedding_dense_backward.default)
def embedding_dense_backward(ctx, grad_output, indices, num_weights, padding_idx,
                             scale_grad_by_freq):
    """embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, bool scale_grad_by_freq) -> Tensor"""
    return ctx.op("EmbeddingDenseGrad", [grad_output, indices],
                  {"num_weights": int(num_weights), "padding_idx": int(padding_idx),
                   "scale_grad_by_freq": bool(scale_grad_by_freq)})


# ---- losses ---------------------------------------------------------------------------
def _nll_weight(ctx, weight, x, fill: bool):
    if weight is not None:
        return cast(ctx, weight, torch.float32)
    if not fill:
        return None
    classes = x.shape[-1] if x.rank > 0 else 1
    return ctx.const(torch.ones(classes), torch.float32, "weight")


@register(aten.nll_loss_forward.default)
def nll_loss_forward(ctx, self, target, weight, reduction, ignore_index):
    """nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> (Tensor output, Tensor total_weight)"""
    outs = [(torch.float32, shape) for _, shape in ctx.out_specs()]
    y, total = ctx.op("NLLLoss", [cast(ctx, self, torch.float32), target,
                                  _nll_weight(ctx, weight, self, False)],
                      {"reduction": REDUCTIONS[reduction], "ignore_index": int(ignore_index)},
                      out=outs)
    return cast(ctx, y, self.dtype), cast(ctx, total, self.dtype)


@register(aten.nll_loss_backward.default)
def nll_loss_backward(ctx, grad_output, self, target, weight, reduction, ignore_index,
                      total_weight):
    """nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index, Tensor total_weight) -> Tensor"""
    f32 = torch.float32
    grad = ctx.op("NLLLossGrad", [cast(ctx, self, f32), cast(ctx, grad_output, f32), target,
                                  _nll_weight(ctx, weight, self, True),
                                  cast(ctx, total_weight, f32)],
                  {"reduction": REDUCTIONS[reduction], "ignore_index": int(ignore_index)},
                  out=(f32, self.shape))
    return cast(ctx, grad, self.dtype)


@register(aten.mse_loss.default)
def mse_loss(ctx, self, target, reduction=1):
    """mse_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor"""
    return ctx.op("MseLoss", [self, cast(ctx, target, self.dtype)],
                  {"reduction": REDUCTIONS[reduction]})


@register(aten.mse_loss_backward.default)
def mse_loss_backward(ctx, grad_output, self, target, reduction):
    """mse_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction) -> Tensor"""
    return ctx.op("MseLossGrad", [self, cast(ctx, target, self.dtype),
                                  cast(ctx, grad_output, self.dtype)],
                  {"reduction": REDUCTIONS[reduction]})


# ---- distances ------------------------------------------------------------------------
@register(aten._cdist_forward.default)
def cdist_forward(ctx, x1, x2, p, compute_mode):
    """_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor"""
    return ctx.op("Cdist", [x1, x2], {"p": float(p)})


@register(aten._cdist_backward.default)
def cdist_backward(ctx, grad, x1, x2, p, cdist):
    """_cdist_backward(Tensor grad, Tensor x1, Tensor x2, float p, Tensor cdist) -> Tensor"""
    return ctx.op("CdistGrad", [grad, x1, x2, cdist], {"p": float(p)})
