"""Activation converters and their backward ops (GE ``*Grad`` ops where GE has one).

Parameters travel as the GE op's attrs (``LeakyRelu.negative_slope``, ``Elu.alpha``...);
every op computes in the output dtype, widened when the prototype lacks it.
"""

from __future__ import annotations

from typing import Any

import torch

from npu_inductor.lowering.elementwise import need_dtype, pointwise, select, supports
from npu_inductor.lowering.helpers import as_value
from npu_inductor.lowering.registry import register

aten = torch.ops.aten


def _act(ctx, ge_type: str, inputs: list[Any], attrs: dict[str, Any] | None = None) -> Any:
    return pointwise(ctx, ge_type, inputs, ctx.out_dtype, attrs, out=ctx.out_dtype)


def register_activation(target, ge_type: str) -> None:
    """``target(self)`` -> ``ge_type(x)``."""

    @register(target, capability=supports(ge_type))
    def convert(ctx, self):
        return _act(ctx, ge_type, [self])


for _target, _ge in ((aten.relu.default, "Relu"), (aten.sigmoid.default, "Sigmoid"),
                     (aten.tanh.default, "Tanh"), (aten.mish.default, "Mish"),
                     (aten.hardswish.default, "HardSwish")):
    register_activation(_target, _ge)


@register(aten.silu.default, capability=supports("Swish"))
def silu(ctx, self):
    """silu(Tensor self) -> Tensor"""
    return _act(ctx, "Swish", [self], {"scale": 1.0})


@register(aten.silu_backward.default, capability=supports("SwishGrad"))
def silu_backward(ctx, grad_output, self):
    """silu_backward(Tensor grad_output, Tensor self) -> Tensor"""
    cd = need_dtype("SwishGrad", ctx.out_dtype)
    x = as_value(ctx, self, cd)
    y = pointwise(ctx, "Swish", [x], cd, {"scale": 1.0}, suffix="fwd")
    return pointwise(ctx, "SwishGrad", [grad_output, x, y], cd, {"scale": 1.0},
                     out=ctx.out_dtype)


@register(aten.gelu.default, capability=supports("GeluV2"))
def gelu(ctx, self, approximate="none"):
    """gelu(Tensor self, *, str approximate='none') -> Tensor"""
    return _act(ctx, "GeluV2", [self], {"approximate": approximate})


@register(aten.gelu_backward.default, capability=supports("GeluGradV2"))
def gelu_backward(ctx, grad_output, self, approximate="none"):
    """gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor"""
    return _act(ctx, "GeluGradV2", [grad_output, self], {"approximate": approximate})


@register(aten.leaky_relu.default, capability=supports("LeakyRelu"))
def leaky_relu(ctx, self, negative_slope=0.01):
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    return _act(ctx, "LeakyRelu", [self], {"negative_slope": float(negative_slope)})


@register(aten.leaky_relu_backward.default, capability=supports("LeakyReluGrad"))
def leaky_relu_backward(ctx, grad_output, self, negative_slope, self_is_result):
    """leaky_relu_backward(Tensor grad_output, Tensor self, Scalar negative_slope,
    bool self_is_result) -> Tensor"""
    # self_is_result: torch requires slope > 0 then, so the result has the input's sign.
    return _act(ctx, "LeakyReluGrad", [grad_output, self],
                {"negative_slope": float(negative_slope)})


@register(aten.elu.default, capability=supports("Elu"))
def elu(ctx, self, alpha=1, scale=1, input_scale=1):
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor"""
    return _act(ctx, "Elu", [self], {"alpha": float(alpha), "scale": float(scale),
                                     "input_scale": float(input_scale)})


@register(aten.celu.default, capability=supports("CeluV2"))
def celu(ctx, self, alpha=1.0):
    """celu(Tensor self, Scalar alpha=1.0) -> Tensor"""
    return _act(ctx, "CeluV2", [self], {"alpha": float(alpha)})


@register(aten.hardtanh.default, capability=supports("ClipByValue"))
def hardtanh(ctx, self, min_val=-1, max_val=1):
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor"""
    return _act(ctx, "ClipByValue", [self, min_val, max_val])


@register(aten.hardtanh_backward.default, capability=supports("HardtanhGrad"))
def hardtanh_backward(ctx, grad_output, self, min_val, max_val):
    """hardtanh_backward(Tensor grad_output, Tensor self, Scalar min_val, Scalar max_val)
    -> Tensor"""
    # HardtanhGrad masks on the forward result; result is strictly inside (min, max)
    # exactly where the input is, so the input serves as ``result``.
    return _act(ctx, "HardtanhGrad", [self, grad_output],
                {"min_val": float(min_val), "max_val": float(max_val)})


@register(aten.hardsigmoid.default, capability=supports("HardSigmoid"))
def hardsigmoid(ctx, self):
    """hardsigmoid(Tensor self) -> Tensor"""
    return _act(ctx, "HardSigmoid", [self], {"alpha": 1.0 / 6.0, "beta": 0.5})


@register(aten.hardsigmoid_backward.default, capability=supports("HardSigmoidGrad"))
def hardsigmoid_backward(ctx, grad_output, self):
    """hardsigmoid_backward(Tensor grad_output, Tensor self) -> Tensor"""
    return _act(ctx, "HardSigmoidGrad", [grad_output, self], {"alpha": 1.0 / 6.0, "beta": 0.5})


@register(aten.hardswish_backward.default, capability=supports("HardSwishGrad"))
def hardswish_backward(ctx, grad_output, self):
    """hardswish_backward(Tensor grad_output, Tensor self) -> Tensor"""
    return _act(ctx, "HardSwishGrad", [grad_output, self])


@register(aten.softplus.default, capability=supports("SoftplusV2"))
def softplus(ctx, self, beta=1, threshold=20):
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor"""
    return _act(ctx, "SoftplusV2", [self], {"beta": float(beta), "threshold": float(threshold)})


@register(aten.softplus_backward.default, capability=supports("SoftplusV2Grad"))
def softplus_backward(ctx, grad_output, self, beta, threshold):
    """softplus_backward(Tensor grad_output, Tensor self, Scalar beta, Scalar threshold)
    -> Tensor"""
    return _act(ctx, "SoftplusV2Grad", [grad_output, self],
                {"beta": float(beta), "threshold": float(threshold)})


@register(aten.hardshrink_backward.default, capability=supports("HardShrinkGrad"))
def hardshrink_backward(ctx, grad_out, self, lambd):
    """hardshrink_backward(Tensor grad_out, Tensor self, Scalar lambd) -> Tensor"""
    return _act(ctx, "HardShrinkGrad", [grad_out, self], {"lambd": float(lambd)})


@register(aten.softshrink_backward.default, capability=supports("SoftShrinkGrad"))
def softshrink_backward(ctx, grad_output, self, lambd):
    """softshrink_backward(Tensor grad_output, Tensor self, Scalar lambd) -> Tensor"""
    return _act(ctx, "SoftShrinkGrad", [grad_output, self], {"lambd": float(lambd)})


@register(aten.threshold.default, capability=supports("ThresholdV2"))
def threshold(ctx, self, threshold, value):
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor"""
    return _act(ctx, "ThresholdV2", [self, threshold, value])


@register(aten.threshold_backward.default, capability=supports("LessEqual", "SelectV2"))
def threshold_backward(ctx, grad_output, self, threshold):
    """threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor"""
    # ThresholdGradV2D takes only int32/float16; torch's rule: grad where self > threshold.
    dtype = ctx.out_dtype
    off = pointwise(ctx, "LessEqual", [self, threshold], self.dtype, y_dtype=torch.bool,
                    suffix="off")
    return select(ctx, off, as_value(ctx, 0, dtype), grad_output, dtype)


@register(aten.sigmoid_backward.default, capability=supports("Sub", "Mul"))
def sigmoid_backward(ctx, grad_output, output):
    """sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor"""
    # SigmoidGrad's reference types read "TensorType(UnaryDataType)", which the op-spec
    # table parses as no dtype at all: compose torch's formula grad * (1 - y) * y instead.
    dtype = ctx.out_dtype
    y = as_value(ctx, output, need_dtype("Mul", dtype))
    one_minus = pointwise(ctx, "Sub", [1, y], y.dtype, suffix="one_minus")
    scaled = pointwise(ctx, "Mul", [grad_output, one_minus], y.dtype, suffix="scaled")
    return pointwise(ctx, "Mul", [scaled, y], y.dtype, out=dtype)


@register(aten.tanh_backward.default, capability=supports("TanhGrad"))
def tanh_backward(ctx, grad_output, output):
    """tanh_backward(Tensor grad_output, Tensor output) -> Tensor"""
    return _act(ctx, "TanhGrad", [output, grad_output])



@register(aten.elu_backward.default, capability=supports("EluGradV2"))
def elu_backward(ctx, grad_output, alpha, scale, input_scale, is_result, self_or_result):
    """elu_backward(Tensor grad_output, Scalar alpha, Scalar scale, Scalar input_scale,
    bool is_result, Tensor self_or_result) -> Tensor"""
    return _act(ctx, "EluGradV2", [grad_output, self_or_result],
                {"alpha": float(alpha), "scale": float(scale),
                 "input_scale": float(input_scale), "is_result": bool(is_result)})


@register(aten.mish_backward.default, capability=supports("MishGrad"))
def mish_backward(ctx, grad_output, self):
    """mish_backward(Tensor grad_output, Tensor self) -> Tensor"""
    return _act(ctx, "MishGrad", [grad_output, self])  # tanhx unfed: GE recomputes it


@register(aten.log_sigmoid_backward.default, capability=supports("LogSigmoidGrad"))
def log_sigmoid_backward(ctx, grad_output, self, buffer):
    """log_sigmoid_backward(Tensor grad_output, Tensor self, Tensor buffer) -> Tensor"""
    # ``buffer`` is the CPU kernel's scratch; LogSigmoidGrad needs only the input.
    return _act(ctx, "LogSigmoidGrad", [grad_output, self])
