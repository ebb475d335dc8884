"""Host kernels of the training fusions' backward ops (runtime/kernels/fused.py) against
float64 autograd of the forward formulas they differentiate: RmsNormGrad and
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
