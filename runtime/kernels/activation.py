"""Activation GE ops and their gradients (attrs carry the torch parameters by GE name)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from npu_inductor.runtime.kernels import kernel

aten = torch.ops.aten


@kernel("Relu", out=True)
def relu(x, out=None):
    # aten's relu is clamp_min(x, 0); clamp_min has the out= variant the memory plan uses
    return torch.relu(x) if out is None else torch.clamp_min(x, 0, out=out)


kernel("Sigmoid", out=True)(torch.sigmoid)
kernel("Tanh", out=True)(torch.tanh)
kernel("Mish")(F.mish)
kernel("HardSwish")(F.hardswish)


@kernel("GeluV2", out=True)
def gelu_v2(x, approximate="none", out=None):
    return torch._C._nn.gelu(x, approximate=approximate, out=out) if out is not None else \
        F.gelu(x, approximate=approximate)


@kernel("GeluGradV2")
def gelu_grad_v2(dy, x, approximate="none"):
    return aten.gelu_backward(dy, x, approximate=approximate)


@kernel("Swish", out=True)
def swish(x, scale=1.0, out=None):
    """y = x * sigmoid(scale * x)."""
    if scale == 1.0:
        return F.silu(x) if out is None else torch._C._nn.silu(x, out=out)
    return torch.mul(x, torch.sigmoid(scale * x), out=out)


@kernel("SwishGrad")
def swish_grad(grad, x, y, scale=1.0):
    if scale == 1.0:
        return aten.silu_backward(grad, x)
    s = torch.sigmoid(scale * x)
    return grad * (s + scale * x * s * (1 - s))


@kernel("LeakyRelu")
def leaky_relu(x, negative_slope=0.0):
    return F.leaky_relu(x, negative_slope)


@kernel("LeakyReluGrad")
def leaky_relu_grad(gradients, features, negative_slope=0.0):
    return aten.leaky_relu_backward(gradients, features, negative_slope, False)


@kernel("Elu")
def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return aten.elu(x, alpha, scale, input_scale)


@kernel("CeluV2")
def celu_v2(x, alpha=1.0):
    return F.celu(x, alpha)


@kernel("HardSigmoid")
def hard_sigmoid(input_x, alpha=0.16666666, beta=0.5):
    """y = clamp(alpha * x + beta, 0, 1)."""
    if abs(alpha - 1 / 6) < 1e-7 and beta == 0.5:
        return F.hardsigmoid(input_x)
    return torch.clamp(input_x * alpha + beta, 0, 1)


@kernel("HardSigmoidGrad")
def hard_sigmoid_grad(grads, input_x, alpha=0.16666666, beta=0.5):
    z = input_x * alpha + beta
    return torch.where((z > 0) & (z < 1), grads * alpha, torch.zeros_like(grads))


@kernel("HardSwishGrad")
def hard_swish_grad(grad, x):
    return aten.hardswish_backward(grad, x)


@kernel("HardtanhGrad")
def hardtanh_grad(result, grad, min_val=-1.0, max_val=1.0):
    return aten.hardtanh_backward(grad, result, min_val, max_val)


@kernel("SoftplusV2")
def softplus_v2(x, beta=1.0, threshold=20.0):
    return F.softplus(x, beta, threshold)


@kernel("SoftplusV2Grad")
def softplus_v2_grad(input_gradients, input_features, beta=1.0, threshold=20.0):
    return aten.softplus_backward(input_gradients, input_features, beta, threshold)


@kernel("ThresholdV2")
def threshold_v2(x, threshold, value=None):
    """y = x if x > threshold else value (0 when value is unfed)."""
    other = torch.zeros_like(x) if value is None else value
    return torch.where(x > threshold, x, other)


@kernel("HardShrinkGrad")
def hard_shrink_grad(gradients, features, lambd=0.5):
    return aten.hardshrink_backward(gradients, features, lambd)


@kernel("SoftShrinkGrad")
def soft_shrink_grad(input_grad, input_x, lambd=0.5):
    return aten.softshrink_backward(input_grad, input_x, lambd)


@kernel("TanhGrad")
def tanh_grad(y, dy, complex_conj=False):
    return aten.tanh_backward(dy, y)


@kernel("EluGradV2")
def elu_grad_v2(grads, activations, alpha=1.0, scale=1.0, input_scale=1.0, is_result=False):
    return aten.elu_backward(grads, alpha, scale, input_scale, is_result, activations)


@kernel("MishGrad")
def mish_grad(grad, x, tanhx=None):
    return aten.mish_backward(grad, x)


@kernel("LogSigmoidGrad")
def log_sigmoid_grad(grads, features):
    """d/dx log(sigmoid(x)) = sigmoid(-x), in the overflow-free form of torch's CPU kernel."""
    z = torch.exp(-features.abs())
    negative = features < 0
    return grads * torch.where(negative, 1 - z / (1 + z), z / (1 + z))
