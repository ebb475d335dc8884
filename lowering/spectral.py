"""Spectral (FFT) and complex-number converters.

[Note: aten FFTs on GE's innermost-axis FFTs]
aten's ``_fft_r2c`` / ``_fft_c2c`` / ``_fft_c2r`` transform any list of dims and scale by
``normalization`` (0: none, 1: 1/sqrt(n), 2: 1/n, n = the transformed elements), whatever
the direction. GE's FFTs follow TensorFlow: ``FFT``/``IFFT`` transform the innermost axis,
``FFT2D``/``IFFT2D`` the innermost two, ``RFFT`` / ``IRFFT`` the innermost axis with an
int32 ``fft_length`` input; forward ones are unnormalized, inverse ones scale by 1/n. So a
converter transposes each group of dims (two at a time) to the end, transforms it, moves
on to the next group (one Transpose per group, none when already last), transposes back
once, and fixes the scale with one ``Mul``. ``RFFT``/``IRFFT`` exist only for float32 /
complex64; in float64 a real-to-complex transform is ``Cast`` to complex128 + ``FFT`` (then
the half spectrum is sliced off) and a complex-to-real one rebuilds the full Hermitian
spectrum (``ConcatV2`` of the bins and their mirrored ``Conj``) for ``IFFT`` + ``Real``,
which equals a c2r transform exactly (the imaginary parts of the DC and Nyquist bins drop
out, as in pocketfft's c2r). Half-precision FFTs do not exist on CPU eager or in GE:
refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from npu_inductor.ge.ir import Value
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.elementwise import pointwise
from npu_inductor.lowering.helpers import cast, int_list, norm_axis
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import dim_const, static_dims, strided_slice, transpose

aten = torch.ops.aten

_TO_COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}
_TO_REAL = {c: r for r, c in _TO_COMPLEX.items()}


# ---- capability checks -------------------------------------------------------------------
def _arg_dtype(node: torch.fx.Node, i: int = 0) -> torch.dtype | None:
    val = node.args[i].meta.get("val") if isinstance(node.args[i], torch.fx.Node) else None
    return val.dtype if isinstance(val, torch.Tensor) else None


def _takes(allowed: dict[torch.dtype, torch.dtype], *positions: int):
    """Capability: every tensor input at ``positions`` has a dtype in ``allowed``."""
    def check(node: torch.fx.Node) -> str | None:
        for i in positions or (0,):
            dtype = _arg_dtype(node, i)
            if dtype not in allowed:
                return f"GE has no {node.target} lowering for {dtype}"
        return None
    return check


def _fft_check(allowed: dict[torch.dtype, torch.dtype]):
    takes = _takes(allowed)

    def check(node: torch.fx.Node) -> str | None:
        if not node.args[1]:
            return "FFT over no dims"
        return takes(node)
    return check


def _c2r_check(node: torch.fx.Node) -> str | None:
    why = _fft_check(_TO_REAL)(node)
    if why is not None:
        return why
    val, dims, n = node.args[0].meta["val"], node.args[1], node.args[3]
    if not isinstance(n, int) or n < 1 or val.shape[dims[-1]] < n // 2 + 1:
        return f"c2r needs at least last_dim_size // 2 + 1 input bins, got {val.shape}, n={n}"
    return None


# ---- building blocks ---------------------------------------------------------------------
def _to_end(ctx: LoweringContext, x: Value, order: list[int],
            axes: Sequence[int]) -> tuple[Value, list[int]]:
    """Transpose ``x`` (its axis i is original axis ``order[i]``) so ``axes`` come last."""
    new = [a for a in order if a not in axes] + list(axes)
    return transpose(ctx, x, [order.index(a) for a in new], suffix="to_end"), new


def _restore(ctx: LoweringContext, x: Value, order: list[int]) -> Value:
    return transpose(ctx, x, [order.index(a) for a in range(len(order))], suffix="restore")


def _c2c(ctx: LoweringContext, x: Value, dims: Sequence[int], forward: bool,
         order: list[int]) -> tuple[Value, list[int]]:
    """GE FFT/IFFT (2-D where two dims remain) over original axes ``dims``."""
    dims = list(dims)
    while dims:
        group, dims = dims[-2:], dims[:-2]
        x, order = _to_end(ctx, x, order, group)
        ge_type = ("FFT" if forward else "IFFT") + ("2D" if len(group) == 2 else "")
        x = ctx.op(ge_type, [x], out=(x.dtype, x.shape), suffix=ge_type.lower())
    return x, order


def _scale(ctx: LoweringContext, x: Value, normalization: int, n: int, inverse: bool) -> Value:
    """Turn an unnormalized (forward) or 1/n-scaled (inverse) transform into aten's mode."""
    if inverse:
        factor = (float(n), math.sqrt(n), 1.0)[normalization]
    else:
        factor = (1.0, 1.0 / math.sqrt(n), 1.0 / n)[normalization]
    if factor == 1.0:
        return x
    return pointwise(ctx, "Mul", [x, factor], x.dtype, suffix="norm")


def _numel(shape: Sequence[int], dims: Sequence[int]) -> int:
    return math.prod(shape[d] for d in dims)


def _fft_length(ctx: LoweringContext, n: int) -> Value:
    return ctx.const(torch.tensor([n], dtype=torch.int32), torch.int32, "fft_length")


def _irfft_hermitian(ctx: LoweringContext, x: Value, n: int) -> Value:
    """c2r over the last axis without IRFFT (complex128): IFFT of the full Hermitian
    spectrum X[0..h) ++ conj(X[n-h..1]), real part. Scaled by 1/n like IRFFT."""
    last, h = x.rank - 1, x.shape[-1]
    full = x
    if n > h:
        mirror = strided_slice(ctx, x, [last], [1], [n - h + 1], [1], suffix="mirror")
        mirror = ctx.op("ReverseV2", [mirror, int_list(ctx, [last], "axes")],
                        out=(x.dtype, mirror.shape), suffix="reverse")
        mirror = ctx.op("Conj", [mirror], out=(x.dtype, mirror.shape), suffix="conj")
        full = ctx.op("ConcatV2", [[x, mirror], dim_const(ctx, last)], {"N": 2},
                      out=(x.dtype, x.shape[:-1] + (n,)), suffix="hermitian")
    y = ctx.op("IFFT", [full], out=(x.dtype, full.shape), suffix="ifft")
    real = _TO_REAL[x.dtype]
    return ctx.op("Real", [y], {"Tout": real}, out=(real, y.shape), suffix="real")


# ---- FFT converters ----------------------------------------------------------------------
@register(aten._fft_r2c.default, capability=_fft_check(_TO_COMPLEX), dynamic=False)
def fft_r2c(ctx, self, dim, normalization, onesided):
    """_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor"""
    static_dims(ctx, self)
    dims = [norm_axis(d, self.rank) for d in dim]
    last, n = dims[-1], self.shape[dims[-1]]
    order = list(range(self.rank))
    if onesided and self.dtype == torch.float32:
        x, order = _to_end(ctx, self, order, [last])
        x = ctx.op("RFFT", [x, _fft_length(ctx, n)],
                   out=(torch.complex64, x.shape[:-1] + (n // 2 + 1,)), suffix="rfft")
        x, order = _c2c(ctx, x, dims[:-1], True, order)
        y = _restore(ctx, x, order)
    else:  # full spectrum (or float64: no RFFT), halved afterwards when onesided
        x, order = _c2c(ctx, cast(ctx, self, _TO_COMPLEX[self.dtype]), dims, True, order)
        y = _restore(ctx, x, order)
        if onesided:
            y = strided_slice(ctx, y, [last], [0], [n // 2 + 1], [1], suffix="onesided")
    return _scale(ctx, y, normalization, _numel(self.shape, dims), inverse=False)


@register(aten._fft_c2c.default, capability=_fft_check(_TO_REAL), dynamic=False)
def fft_c2c(ctx, self, dim, normalization, forward):
    """_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor"""
    static_dims(ctx, self)
    dims = [norm_axis(d, self.rank) for d in dim]
    x, order = _c2c(ctx, self, dims, forward, list(range(self.rank)))
    return _scale(ctx, _restore(ctx, x, order), normalization, _numel(self.shape, dims),
                  inverse=not forward)


@register(aten._fft_c2r.default, capability=_c2r_check, dynamic=False)
def fft_c2r(ctx, self, dim, normalization, last_dim_size):
    """_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor"""
    static_dims(ctx, self)
    dims = [norm_axis(d, self.rank) for d in dim]
    last, n = dims[-1], last_dim_size
    x = self
    if x.shape[last] > n // 2 + 1:  # pocketfft reads only the first n // 2 + 1 bins
        x = strided_slice(ctx, x, [last], [0], [n // 2 + 1], [1], suffix="bins")
    x, order = _c2c(ctx, x, dims[:-1], False, list(range(self.rank)))
    x, order = _to_end(ctx, x, order, [last])
    if x.dtype == torch.complex64:
        x = ctx.op("IRFFT", [x, _fft_length(ctx, n)],
                   out=(torch.float32, x.shape[:-1] + (n,)), suffix="irfft")
    else:
        x = _irfft_hermitian(ctx, x, n)
    y = _restore(ctx, x, order)
    return _scale(ctx, y, normalization, _numel(y.shape, dims), inverse=True)


# ---- complex numbers ---------------------------------------------------------------------
@register(aten._conj.default, aten._conj_physical.default, aten.conj_physical.default,
          capability=_takes({**_TO_REAL, **_TO_COMPLEX}))
def conj(ctx, self):
    """_conj(Tensor(a) self) -> Tensor(a)"""
    # The graph is functional: the lazy conjugate view is a physical Conj here.
    if not self.dtype.is_complex:  # conj of a real tensor is itself
        return self
    return ctx.op("Conj", [self])


def complex_parts(ctx: LoweringContext, z: Value) -> tuple[Value, Value]:
    """``Real`` and ``Imag`` of complex ``z`` (complex64 -> float32, complex128 -> float64)."""
    real = _TO_REAL[z.dtype]
    return tuple(ctx.op(p, [z], {"Tout": real}, out=(real, z.shape), suffix=p.lower())
                 for p in ("Real", "Imag"))


def _complex(ctx: LoweringContext, real: Value, imag: Value) -> Value:
    return ctx.op("Complex", [real, imag], {"Tout": ctx.out_dtype})


@register(aten.complex.default, capability=_takes(_TO_COMPLEX, 0, 1))
def complex_(ctx, real, imag):
    """complex(Tensor real, Tensor imag) -> Tensor"""
    return _complex(ctx, real, imag)


@register(aten.polar.default, capability=_takes(_TO_COMPLEX, 0, 1))
def polar(ctx, abs, angle):  # noqa: A002 - the schema's name
    """polar(Tensor abs, Tensor angle) -> Tensor"""
    # No GE Polar: abs * cos(angle) + i * abs * sin(angle), as std::polar computes it.
    dtype = abs.dtype
    re = pointwise(ctx, "Mul", [abs, pointwise(ctx, "Cos", [angle], dtype, suffix="cos")],
                   dtype, suffix="re")
    im = pointwise(ctx, "Mul", [abs, pointwise(ctx, "Sin", [angle], dtype, suffix="sin")],
                   dtype, suffix="im")
    return _complex(ctx, re, im)


@register(aten.view_as_complex.default, capability=_takes(_TO_COMPLEX))
def view_as_complex(ctx, self):
    """view_as_complex(Tensor(a) self) -> Tensor(a)"""
    # A functional graph needs no aliasing: unpack the (re, im) pairs and build Complex.
    part = (self.dtype, self.shape[:-1])
    re, im = ctx.op("Unpack", [self], {"num": 2, "axis": self.rank - 1}, out=[part, part],
                    suffix="unpack")
    return _complex(ctx, re, im)


@register(aten.view_as_real.default, capability=_takes(_TO_REAL))
def view_as_real(ctx, self):
    """view_as_real(Tensor(a) self) -> Tensor(a)"""
    return ctx.op("Pack", [list(complex_parts(ctx, self))], {"axis": self.rank, "N": 2})
