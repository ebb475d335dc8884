"""Loss converters: NLL (1-d and 2-d), MSE, binary cross-entropy (plain and with logits),
smooth L1, soft margin -> GE's loss ops and their ``*Grad`` ops.

aten's int ``reduction`` becomes GE's string attr; ops without a bfloat16 prototype run in
float32 (``precision.op_in_float32``). GE's NLL ops are float32-only and take
(N, C) input: other dtypes run through casts, and ``nll_loss2d`` moves the class axis last
and flattens the pixels into the batch (and back for the gradient).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from npu_inductor.ge.ir import Value
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.helpers import cast, int_list
from npu_inductor.lowering.precision import op_in_float32
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import static_dims

aten = torch.ops.aten
REDUCTIONS = ("none", "mean", "sum")  # aten's int reduction -> GE's string
F32 = torch.float32


def _reshape(ctx: LoweringContext, v: Value, shape: Sequence[int], suffix: str) -> Value:
    shape = tuple(shape)
    if shape == v.shape:
        return v
    return ctx.op("Reshape", [v, int_list(ctx, shape)], out=(v.dtype, shape), suffix=suffix)


def _transpose(ctx: LoweringContext, v: Value, perm: Sequence[int], suffix: str) -> Value:
    shape = tuple(v.shape[p] for p in perm)
    return ctx.op("Transpose", [v, int_list(ctx, perm, "perm")], out=(v.dtype, shape),
                  suffix=suffix)


def _classes_last(ctx: LoweringContext, x: Value) -> Value:
    """(N, C, d1..dk) -> (N * d1 * .. * dk, C): the (batch, class) layout GE's NLL ops take."""
    static_dims(ctx, x)
    moved = _transpose(ctx, x, [0, *range(2, x.rank), 1], "classes_last")
    return _reshape(ctx, moved, (_rows(x), x.shape[1]), "rows")


def _rows(x: Value) -> int:
    rows = x.shape[0]
    for d in x.shape[2:]:
        rows *= d
    return rows


def _nll_weight(ctx: LoweringContext, weight: Value | None, classes: int,
                fill: bool) -> Value | None:
    if weight is not None:
        return cast(ctx, weight, F32)
    return ctx.const(torch.ones(classes), F32, "weight") if fill else None


def _nll_attrs(reduction: int, ignore_index: int) -> dict:
    return {"reduction": REDUCTIONS[reduction], "ignore_index": int(ignore_index)}


def _nll(ctx: LoweringContext, x: Value, target: Value, weight, reduction, ignore_index):
    classes = x.shape[-1] if x.rank == 1 else x.shape[1]
    outs = [(F32, shape) for _, shape in ctx.out_specs()]
    if x.rank > 2:
        outs[0] = (F32, (_rows(x),) if reduction == 0 else ())
        x, target = _classes_last(ctx, x), _reshape(ctx, target, (_rows(x),), "target_rows")
    y, total = ctx.op("NLLLoss", [cast(ctx, x, F32), target,
                                  _nll_weight(ctx, weight, classes, False)],
                      _nll_attrs(reduction, ignore_index), out=outs)
    (dtype, y_shape), (_, total_shape) = ctx.out_specs()
    return (cast(ctx, _reshape(ctx, y, y_shape, "y_shape"), dtype),
            cast(ctx, _reshape(ctx, total, total_shape, "total_shape"), dtype))


@register(aten.nll_loss_forward.default, aten.nll_loss2d_forward.default)
def nll_loss_forward(ctx, self, target, weight, reduction, ignore_index):
    """nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> (Tensor output, Tensor total_weight)"""  # noqa: E501
    return _nll(ctx, self, target, weight, reduction, ignore_index)


@register(aten.nll_loss_backward.default, aten.nll_loss2d_backward.default)
def nll_loss_backward(ctx, grad_output, self, target, weight, reduction, ignore_index,
                      total_weight):
    """nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index, Tensor total_weight) -> Tensor"""  # noqa: E501
    classes = self.shape[-1] if self.rank == 1 else self.shape[1]
    x, dy, tgt = self, grad_output, target
    if self.rank > 2:
        x, tgt = _classes_last(ctx, self), _reshape(ctx, target, (_rows(self),), "target_rows")
        if reduction == 0:
            dy = _reshape(ctx, grad_output, (_rows(self),), "dy_rows")
    grad = ctx.op("NLLLossGrad", [cast(ctx, x, F32), cast(ctx, dy, F32), tgt,
                                  _nll_weight(ctx, weight, classes, True),
                                  cast(ctx, total_weight, F32)],
                  _nll_attrs(reduction, ignore_index), out=(F32, x.shape), suffix="grad")
    if self.rank > 2:
        moved = (self.shape[0], *self.shape[2:], classes)
        grad = _reshape(ctx, grad, moved, "grad_unflat")
        grad = _transpose(ctx, grad, [0, self.rank - 1, *range(1, self.rank - 1)],
                          "classes_back")
    return cast(ctx, grad, self.dtype)


def _same(ctx: LoweringContext, v: Value | None, like: Value, suffix: str) -> Value | None:
    """``v`` in ``like``'s dtype and shape (GE's loss ops take no implicit broadcast)."""
    if v is None:
        return None
    v = cast(ctx, v, like.dtype)
    if v.shape == like.shape:
        return v
    static_dims(ctx, like)
    return ctx.op("BroadcastTo", [v, int_list(ctx, like.shape)], out=(like.dtype, like.shape),
                  suffix=suffix)


def _reduction(reduction: int, **floats: float) -> dict:
    return {"reduction": REDUCTIONS[reduction], **{k: float(v) for k, v in floats.items()}}


def _loss(ctx: LoweringContext, ge_type: str, self: Value, others: Sequence[Value | None],
          attrs: dict) -> Value:
    """``ge_type(self, *others)`` with the others in ``self``'s dtype and shape."""
    operands = [self, *(_same(ctx, v, self, f"in{i}") for i, v in enumerate(others))]
    return op_in_float32(ctx, ge_type, operands, attrs)


@register(aten.mse_loss.default)
def mse_loss(ctx, self, target, reduction=1):
    """mse_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor"""
    return _loss(ctx, "MseLoss", self, [target], _reduction(reduction))


@register(aten.mse_loss_backward.default)
def mse_loss_backward(ctx, grad_output, self, target, reduction):
    """mse_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction) -> Tensor"""
    return _loss(ctx, "MseLossGrad", self, [target, grad_output], _reduction(reduction))


@register(aten.binary_cross_entropy.default)
def binary_cross_entropy(ctx, self, target, weight=None, reduction=1):
    """binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean) -> Tensor"""  # noqa: E501
    return _loss(ctx, "BinaryCrossEntropy", self, [target, weight], _reduction(reduction))


@register(aten.binary_cross_entropy_backward.default)
def binary_cross_entropy_backward(ctx, grad_output, self, target, weight=None, reduction=1):
    """binary_cross_entropy_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean) -> Tensor"""  # noqa: E501
    return _loss(ctx, "BinaryCrossEntropyGrad", self, [target, grad_output, weight],
                 _reduction(reduction))


@register(aten.binary_cross_entropy_with_logits.default)
def binary_cross_entropy_with_logits(ctx, self, target, weight=None, pos_weight=None,
                                     reduction=1):
    """binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, Tensor? pos_weight=None, int reduction=Mean) -> Tensor"""  # noqa: E501
    return _loss(ctx, "SigmoidCrossEntropyWithLogitsV2", self, [target, weight, pos_weight],
                 _reduction(reduction))


@register(aten.smooth_l1_loss.default)
def smooth_l1_loss(ctx, self, target, reduction=1, beta=1.0):
    """smooth_l1_loss(Tensor self, Tensor target, int reduction=Mean, float beta=1.) -> Tensor"""
    return _loss(ctx, "SmoothL1LossV2", self, [target], _reduction(reduction, sigma=beta))


@register(aten.smooth_l1_loss_backward.default)
def smooth_l1_loss_backward(ctx, grad_output, self, target, reduction, beta):
    """smooth_l1_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction, float beta) -> Tensor"""  # noqa: E501
    return _loss(ctx, "SmoothL1LossGradV2", self, [target, grad_output],
                 _reduction(reduction, sigma=beta))


@register(aten.soft_margin_loss.default)
def soft_margin_loss(ctx, self, target, reduction=1):
    """soft_margin_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor"""
    return _loss(ctx, "SoftMarginLoss", self, [target], _reduction(reduction))


@register(aten.soft_margin_loss_backward.default)
def soft_margin_loss_backward(ctx, grad_output, self, target, reduction):
    """soft_margin_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction) -> Tensor"""  # noqa: E501
    return _loss(ctx, "SoftMarginLossGrad", self, [target, grad_output], _reduction(reduction))
