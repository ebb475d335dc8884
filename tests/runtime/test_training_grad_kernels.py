"""Host kernels of the training fusions' backward ops (runtime/kernels/fused.py) against
float64 autograd of the forward formulas they differentiate: RmsNormGrad, SwiGluGrad and
RotaryPositionEmbeddingGrad (rotate-half, no x: dx only, dcos / dsin zeros)."""

import pytest
import torch

from npu_inductor.runtime.kernels import KERNELS

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 5, 16), (16,)], ids=["3d", "1d"])
def test_rms_norm_grad_matches_float64_autograd(dtype, shape):
    x, gamma, dy = _rand(*shape, seed=1).requires_grad_(), _rand(shape[-1], seed=2), \
        _rand(*shape, seed=3)
    gamma.requires_grad_()
    rstd = (x.square().mean(-1, keepdim=True) + 1e-6).rsqrt()
    (x * rstd * gamma).backward(dy)
    dx, dgamma = KERNELS["RmsNormGrad"](dy.to(dtype), x.detach().to(dtype),
                                        rstd.detach().float(), gamma.detach().to(dtype))
    assert dx.dtype == dtype and dx.shape == x.shape and dgamma.shape == gamma.shape
    torch.testing.assert_close(dx.double(), x.grad, **TOL[dtype])
    torch.testing.assert_close(dgamma.double(), gamma.grad, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_grad_without_x_matches_float64_autograd(dtype):
    x, cos, sin, dy = (_rand(2, 3, 6, 8, seed=1).requires_grad_(), _rand(6, 8, seed=2),
                       _rand(6, 8, seed=3), _rand(2, 3, 6, 8, seed=4))
    x1, x2 = x.chunk(2, -1)
    (x * cos + torch.cat((-x2, x1), -1) * sin).backward(dy)
    dx, dcos, dsin = KERNELS["RotaryPositionEmbeddingGrad"](dy.to(dtype), cos.to(dtype),
                                                            sin.to(dtype))
    assert dx.dtype == dtype and dx.shape == x.shape
    torch.testing.assert_close(dx.double(), x.grad, **TOL[dtype])
    for z, ref in ((dcos, cos), (dsin, sin)):
        assert z.shape == ref.shape and z.dtype == dtype and not z.any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_swiglu_grad_matches_float64_autograd(dtype):
    x, dy = _rand(2, 5, 12, seed=1).requires_grad_(), _rand(2, 5, 6, seed=2)
    a, b = x.chunk(2, -1)
    (torch.nn.functional.silu(a) * b).backward(dy)
    dx = KERNELS["SwiGluGrad"](dy.to(dtype), x.detach().to(dtype), dim=-1)
    assert dx.dtype == dtype and dx.shape == x.shape
    torch.testing.assert_close(dx.double(), x.grad, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_swiglu_grad_low_precision_is_eager_autograd(dtype):
    """fp16/bf16 SwiGluGrad runs eager autograd's ops in the tensor dtype: bitwise eager's
    gradient of silu(a) * b (with and without ``out=``)."""
    x = (_rand(2, 5, 24, seed=4) * 2).to(dtype).requires_grad_()
    dy = _rand(2, 5, 12, seed=5).to(dtype)
    a, b = x.chunk(2, -1)
    (torch.nn.functional.silu(a) * b).backward(dy)
    assert torch.equal(KERNELS["SwiGluGrad"](dy, x.detach(), dim=-1), x.grad)
    out = torch.full(x.shape, float("nan"), dtype=dtype)
    assert KERNELS["SwiGluGrad"](dy, x.detach(), dim=-1, out=out) is out
    assert torch.equal(out, x.grad)
