"""Spectral and complex-number converters (spectral.py): every torch.fft function compiled
with fallback="error" vs eager over dims, norms, odd and even lengths, float32 and float64;
complex / polar / view_as_complex / view_as_real / conj; half precision is refused (eager)."""

from __future__ import annotations

import pytest
import torch
from harness import STRICT, check_fn, check_ge_ops, check_grad, check_refused, ge_op_types
from harness import random_tensor as make

from npu_inductor.compile_fx import quiet_fallbacks, record_reports

fft = torch.fft
NORMS = [None, "ortho", "forward"]


def cplx(shape, dtype=torch.complex64) -> torch.Tensor:
    return torch.randn(shape, dtype=dtype)


# ---- real-to-complex ---------------------------------------------------------------------
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n,dim", [(None, -1), (7, -1), (12, 1), (5, 0), (None, 1)])
def test_rfft(n, dim, norm):
    check_ge_ops(lambda x: fft.rfft(x, n=n, dim=dim, norm=norm), make((4, 6, 9)), ge="RFFT")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("s,dim", [(None, (-2, -1)), ((5, 8), (0, 2)), ((3, 7), (2, 0))])
def test_rfft2(s, dim, norm):
    check_ge_ops(lambda x: fft.rfft2(x, s=s, dim=dim, norm=norm), make((4, 6, 9)),
                 ge=("RFFT", "FFT"))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dim", [None, (0, 1, 2), (1, 0, 2), (0, 1, 3)])
def test_rfftn(dim, norm):
    check_ge_ops(lambda x: fft.rfftn(x, dim=dim, norm=norm), make((3, 4, 5, 6)), ge="RFFT")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n,dim", [(None, -1), (11, 0), (6, 1)])
def test_fft_of_real(n, dim, norm):
    """A full spectrum of a real signal: Cast to complex, then FFT."""
    check_ge_ops(lambda x: fft.fft(x, n=n, dim=dim, norm=norm), make((5, 7)), ge="FFT")


@pytest.mark.parametrize("n", [None, 8, 9])
def test_ihfft(n):
    check_ge_ops(lambda x: fft.ihfft(x, n=n, norm="ortho"), make((3, 7)), ge="Conj")


def test_rfft_float64_without_rfft():
    """GE RFFT is float32-only: float64 goes through complex128 FFT + slice, no precision lost."""
    graphs = check_ge_ops(lambda x: fft.rfft2(x, norm="ortho"), make((4, 7), torch.float64),
                          ge="FFT2D", rtol=1e-12, atol=1e-12)
    assert "RFFT" not in ge_op_types(graphs)


# ---- complex-to-complex ------------------------------------------------------------------
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("fn,ge", [(fft.fft, "FFT"), (fft.ifft, "IFFT")])
@pytest.mark.parametrize("n,dim", [(None, -1), (5, 0), (10, 1), (None, 1)])
def test_fft_ifft(fn, ge, n, dim, norm):
    check_ge_ops(lambda x: fn(x, n=n, dim=dim, norm=norm), cplx((6, 7)), ge=ge)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("fn,ge", [(fft.fft2, "FFT2D"), (fft.ifft2, "IFFT2D")])
@pytest.mark.parametrize("s,dim", [(None, (-2, -1)), ((4, 9), (0, 2)), ((3, 6), (2, 1))])
def test_fft2_ifft2(fn, ge, s, dim, norm):
    check_ge_ops(lambda x: fn(x, s=s, dim=dim, norm=norm), cplx((5, 6, 7)), ge=ge)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("fn", [fft.fftn, fft.ifftn])
@pytest.mark.parametrize("dim", [None, (0,), (0, 2, 3), (3, 1, 0)])
def test_fftn_ifftn(fn, dim, norm):
    check_ge_ops(lambda x: fn(x, dim=dim, norm=norm), cplx((3, 4, 5, 6)))


@pytest.mark.fallback("complex128 FFT is refused by the 910B dtype gate")
def test_fft_complex128_refused():
    # the 910B has no complex128 kernels (FFT, Transpose...) and complex64 would round: the
    # FFTs run in eager, with a warning naming them, COMPLEX128 and the SoC
    x = cplx((5, 6), torch.complex128)
    check_refused(lambda x: fft.ifftn(fft.fft(x, dim=0), norm="ortho"), x,
                  ops=("aten._fft_c2c.default",), dtype="COMPLEX128", rtol=1e-12, atol=1e-12)


def test_fft_of_conj():
    check_ge_ops(lambda x: fft.fft(x.conj()), cplx((4, 8)), ge=("Conj", "FFT"))


# ---- complex-to-real ---------------------------------------------------------------------
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n,dim", [(None, -1), (7, -1), (8, 0), (3, 1), (14, 1)])
def test_irfft(n, dim, norm):
    """Random bins: the imaginary parts of the DC and Nyquist bins must be ignored."""
    check_ge_ops(lambda x: fft.irfft(x, n=n, dim=dim, norm=norm), cplx((5, 6)), ge="IRFFT")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("fn,s,dim", [(fft.irfft2, None, (-2, -1)), (fft.irfft2, (4, 9), (2, 0)),
                                      (fft.irfftn, None, None), (fft.irfftn, (3, 5, 6), None)])
def test_irfft_nd(fn, s, dim, norm):
    check_ge_ops(lambda x: fn(x, s=s, dim=dim, norm=norm), cplx((4, 5, 6)), ge="IRFFT")


@pytest.mark.parametrize("n", [None, 9, 10, 1])
@pytest.mark.parametrize("fn", [fft.hfft, fft.hfft2, fft.hfftn])
def test_hfft(fn, n):
    kwargs = {"n": n} if fn is fft.hfft else {"s": None if n is None else (3, n)}
    check_ge_ops(lambda x: fn(x, norm="ortho", **kwargs), cplx((3, 6)), ge=("Conj", "IRFFT"))


@pytest.mark.fallback("complex128 irfft is refused by the 910B dtype gate")
@pytest.mark.parametrize("n", [None, 7])
def test_irfft_complex128_refused(n):
    check_refused(lambda x: fft.irfft2(x, s=None if n is None else (4, n)),
                  cplx((4, 5), torch.complex128), ops=("aten._fft_c2r.default",),
                  dtype="COMPLEX128", rtol=1e-12, atol=1e-12)


def test_roundtrip_and_stft():
    x = make((64,))
    check_ge_ops(lambda x: fft.irfft(fft.rfft(x, norm="ortho"), n=64, norm="ortho"), x)
    win = torch.hann_window(16)
    check_ge_ops(lambda x, w: torch.stft(x, 16, hop_length=4, window=w, return_complex=True),
                 x, win, ge="RFFT")
    check_ge_ops(lambda x: torch.stft(x, 10, normalized=True, onesided=False,
                                      return_complex=False), make((2, 50)), ge=("FFT", "Pack"))


# ---- complex numbers ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32])  # float64: test_complex128_build_refused
def test_complex_and_polar(dtype):
    re, im = make((3, 4), dtype), make((4,), dtype)
    check_ge_ops(lambda a, b: torch.complex(a, b), re, im, ge="Complex")
    check_ge_ops(lambda a, b: torch.polar(a.abs(), b), re, im, ge=("Complex", "Cos", "Sin"))


@pytest.mark.parametrize("dtype", [torch.float32])  # float64: test_complex128_build_refused
def test_view_as_complex_real(dtype):
    check_ge_ops(lambda x: torch.view_as_complex(x + 1), make((3, 5, 2), dtype),
                 ge=("Unpack", "Complex"))
    cdtype = torch.complex64 if dtype == torch.float32 else torch.complex128
    check_ge_ops(lambda x: torch.view_as_real(fft.fft(x)) * 2, cplx((3, 5), cdtype),
                 ge=("Real", "Imag", "Pack"))
    check_ge_ops(lambda x: torch.view_as_real(torch.conj_physical(x)) + 1, cplx((), cdtype),
                 ge="Conj")


@pytest.mark.fallback("complex128 from float64 is refused by the 910B dtype gate")
@pytest.mark.parametrize("fn, op", [(lambda a: torch.complex(a, a * 2), "aten.complex.default"),
                                    (lambda a: torch.view_as_complex(a + 1),
                                     "aten.view_as_complex.default")])
def test_complex128_build_refused(fn, op):
    # GE Complex has float32/float16 kernels only on the 910B
    check_refused(fn, make((3, 5, 2), torch.float64), ops=op, dtype="DOUBLE")


@pytest.mark.parametrize("fn", [
    lambda x: torch.view_as_real(fft.rfft(x, norm="ortho")).sum(-1),
    lambda x: torch.view_as_real(fft.fft2(x)).sum(-1),
    lambda x: fft.irfft(fft.rfft(x), n=9, norm="forward"),
    lambda x: torch.view_as_real(torch.polar(x, x)).sum(-1),
])
def test_backward(fn):
    """The backward graphs (c2c/c2r/r2c, conj, complex Mul, Sign of complex) stay in GE."""
    check_grad(fn, make((4, 9)))


def test_complex_elementwise():
    """Complex Mul (the FFT backward's scale) and sgn of complex (x / |x|, 0 at 0) lower; the
    910B has no complex64 Sign, so sgn is built from the float32 parts."""
    x, y = cplx((3, 4)), cplx((3, 4))
    x[0, 0] = 0
    graphs = check_ge_ops(lambda x, y: x * y * 2.0 - x.sgn(), x, y,
                          ge=("Mul", "Real", "Imag", "Sqrt", "RealDiv", "Complex"))
    assert "Sign" not in ge_op_types(graphs)


@pytest.mark.fallback("real-valued converters refuse complex operands")
@pytest.mark.parametrize("fn", [torch.abs, torch.angle, lambda x: torch.isnan(x / x)])
def test_complex_to_real_refused(fn):
    """Real-valued converters would Cast the complex operand (dropping its imaginary part):
    refused, so they run in eager."""
    x = cplx((6,))
    x[0] = 0
    torch._dynamo.reset()
    with pytest.raises(Exception, match="complex operand"):
        torch.compile(lambda x: fn(fft.fft(x)), backend="npu", options=STRICT)(x)
    with record_reports() as reports, quiet_fallbacks():
        check_fn(lambda x: fn(fft.fft(x)), x)
    assert any(r.fallbacks for r in reports)


# ---- refusals: half precision falls back, never approximated -----------------------------
@pytest.mark.parametrize("fn", [
    lambda a, b: torch.complex(a * 2, b),
    lambda a, b: torch.view_as_complex(torch.stack([a, b], -1)),
])
@pytest.mark.fallback("half-precision complex is refused")
def test_half_complex_refused(fn):
    a, b = make((4,), torch.float16), make((4,), torch.float16)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="does not lower|GE has no"):
        torch.compile(fn, backend="npu", options=STRICT)(a, b)
    with record_reports() as reports, quiet_fallbacks():
        check_fn(fn, a, b)
    assert any(r.fallbacks for r in reports)
