"""Backward ``npu::*`` ops and the autograd formulas that make the fused forward ops
differentiable, so that a training graph fused before AOTAutograd traces (see
``graph_passes/training_fusions.py``) gets GE's backward ops in its backward graph:

    npu::rms_norm    -> npu::rms_norm_grad    (GE RmsNormGrad: dx, dgamma in fp32)
    npu::rotary_mul  -> npu::rotary_mul_grad  (GE RotaryPositionEmbeddingGrad, mode 0)
    npu::swiglu      -> npu::swiglu_grad      (GE SwiGluGrad)

The CPU implementations compute in fp32 and round once to the input dtype, as the GE
kernels do.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from npu_inductor import ops


# ---- RmsNorm ------------------------------------------------------------------------------
@torch.library.custom_op("npu::rms_norm_grad", mutates_args=())
def rms_norm_grad(dy: Tensor, x: Tensor, rstd: Tensor, gamma: Tensor) -> tuple[Tensor, Tensor]:
    """GE ``RmsNormGrad``: (dx in x's dtype, dgamma in fp32) of y = x * rstd * gamma."""
    xf, dyf = x.float(), dy.float()
    normed = xf * rstd
    dn = dyf * gamma.float()
    dx = rstd * (dn - normed * (dn * normed).mean(-1, keepdim=True))
    dgamma = (dyf * normed).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dgamma


@rms_norm_grad.register_fake
def _(dy: Tensor, x: Tensor, rstd: Tensor, gamma: Tensor) -> tuple[Tensor, Tensor]:
    return x.new_empty(x.shape), gamma.new_empty(gamma.shape, dtype=torch.float32)


def _rms_norm_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    x, gamma, _ = inputs
    ctx.save_for_backward(x, output[1], gamma)


def _rms_norm_backward(ctx: Any, dy: Tensor, _drstd: Tensor) -> tuple:
    x, rstd, gamma = ctx.saved_tensors
    dx, dgamma = rms_norm_grad(dy, x, rstd, gamma)
    return dx, dgamma.to(gamma.dtype), None


ops.rms_norm.register_autograd(_rms_norm_backward, setup_context=_rms_norm_setup)


# ---- rotary ---------------------------------------------------------------------------------
@torch.library.custom_op("npu::rotary_mul_grad", mutates_args=())
def rotary_mul_grad(dy: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """GE ``RotaryPositionEmbeddingGrad`` (mode 0, rotate-half) dx of
    y = x * cos + rotate_half(x) * sin: dy * cos + rotate_half^T(dy * sin)."""
    g = dy.float() * sin.float()
    g1, g2 = g.chunk(2, dim=-1)
    return (dy.float() * cos.float() + torch.cat((g2, -g1), dim=-1)).to(dy.dtype)


@rotary_mul_grad.register_fake
def _(dy: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return dy.new_empty(dy.shape)


def _rotary_setup(ctx: Any, inputs: tuple, output: Tensor) -> None:
    _, cos, sin = inputs
    ctx.save_for_backward(cos, sin)


def _rotary_backward(ctx: Any, dy: Tensor) -> tuple:
    cos, sin = ctx.saved_tensors
    return rotary_mul_grad(dy, cos, sin), None, None  # cos/sin: no grad (checked by the pass)


ops.rotary_mul.register_autograd(_rotary_backward, setup_context=_rotary_setup)


# ---- SwiGlu ---------------------------------------------------------------------------------
@torch.library.custom_op("npu::swiglu_grad", mutates_args=())
def swiglu_grad(dy: Tensor, x: Tensor, dim: int) -> Tensor:
    """GE ``SwiGluGrad``: dx of y = silu(a) * b with a, b = x.chunk(2, dim)."""
    a, b = (t.float() for t in x.chunk(2, dim=dim))
    dyf = dy.float()
    s = torch.sigmoid(a)
    da = dyf * b * s * (1 + a * (1 - s))
    db = dyf * a * s
    return torch.cat((da, db), dim=dim).to(x.dtype)


@swiglu_grad.register_fake
def _(dy: Tensor, x: Tensor, dim: int) -> Tensor:
    return x.new_empty(x.shape)


def _swiglu_setup(ctx: Any, inputs: tuple, output: Tensor) -> None:
    x, dim = inputs
    ctx.save_for_backward(x)
    ctx.dim = dim


def _swiglu_backward(ctx: Any, dy: Tensor) -> tuple:
    (x,) = ctx.saved_tensors
    return swiglu_grad(dy, x, ctx.dim), None


ops.swiglu.register_autograd(_swiglu_backward, setup_context=_swiglu_setup)
