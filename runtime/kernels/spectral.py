"""Spectral and complex-number GE ops (TensorFlow semantics, as GE defines them).

The FFT family transforms the innermost axis (``FFT2D``: the innermost two). Forward
transforms are unnormalized, inverse ones scale by ``1 / n`` (TF's ``fft``/``ifft``).
``RFFT``/``IRFFT`` take ``fft_length`` as an int32 input: ``RFFT`` crops or zero-pads the
signal to ``fft_length`` and returns ``fft_length // 2 + 1`` bins; ``IRFFT`` crops or pads
the bins to ``fft_length // 2 + 1`` and returns ``fft_length`` real samples, ignoring the
imaginary parts of the DC and Nyquist bins.
"""

from __future__ import annotations

import torch

from npu_inductor.runtime.kernels import as_list, kernel


@kernel("FFT")
def fft(x):
    return torch.fft.fft(x, dim=-1)


@kernel("IFFT")
def ifft(x):
    return torch.fft.ifft(x, dim=-1)


@kernel("FFT2D")
def fft2d(x):
    return torch.fft.fft2(x, dim=(-2, -1))


@kernel("IFFT2D")
def ifft2d(x):
    return torch.fft.ifft2(x, dim=(-2, -1))


@kernel("RFFT", const_inputs=(1,))
def rfft(input, fft_length):  # noqa: A002 - the GE input's name
    return torch.fft.rfft(input, n=int(as_list(fft_length)[0]), dim=-1)


@kernel("IRFFT", const_inputs=(1,))
def irfft(x, fft_length):
    return torch.fft.irfft(x, n=int(as_list(fft_length)[0]), dim=-1)


@kernel("Complex")
def complex_(real, imag, Tout=torch.complex64):
    return torch.complex(real, imag).to(Tout)


@kernel("Real")
def real(input, Tout=torch.float32):  # noqa: A002
    return torch.real(input).to(Tout)


@kernel("Imag")
def imag(input, Tout=torch.float32):  # noqa: A002
    return torch.imag(input).to(Tout)


@kernel("Conj")
def conj(input):  # noqa: A002
    return torch.conj_physical(input)

