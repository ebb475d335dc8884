"""Special math functions (gamma family, erfcx, Bessel, Chebyshev, frexp) as GE compositions.

[Note: special functions without a GE op]
GE has no Lgamma, Digamma, Polygamma, Erfcx, Chebyshev or Frexp op, so each converter here
composes GE elementwise ops from the mathematics, computed in float64 (every op used takes
DT_DOUBLE) and rounded once to the output dtype, so float32/16/bf16 results agree with
eager's to within its own rounding:

* gamma family: the recurrence ``f(x) = f(x + 8) - (shift terms)`` moves the argument to
  ``x >= 8``, where the Stirling / asymptotic series in Bernoulli numbers converge to double
  precision in eight terms; negative arguments use the reflection formulas, with ``sin(pi r)``
  evaluated at ``r = x - round(x)`` (exact in double) so poles stay exact.
* polygamma ``n >= 2`` is ``(-1)^(n+1) n! zeta(n + 1, x)`` with GE ``Zeta``, in the input's
  float dtype as torch computes it.
* erfcx: ``exp(x^2) erfc(x)`` while ``erfc`` is representable, its asymptotic series beyond.
* modified Bessel ``I0``/``I1``: GE's scaled ``BesselI0e``/``BesselI1e`` times ``exp(|x|)``.
* Chebyshev ``T, U, V, W`` of integer degree ``n`` (a tensor): the trigonometric closed forms
  for ``|x| <= 1`` and hyperbolic ones for ``|x| > 1``, with torch's conventions for
  ``n < 0``, ``|x| == 1``, non-finite ``x`` and overflow (its recurrence turns an overflow
  two steps before degree ``n`` into NaN).
* frexp: the IEEE exponent and mantissa fields of the float64 bits (Bitcast, shifts, masks).
* Bessel J, Y, K and Airy Ai: power series, Hankel / Airy asymptotic expansions and, for K,
  the trapezoidal rule on its integral representation (see their section).
* Hermite H, He: eager bounds the degree at 128, so the recurrence unrolls (its section).

Where eager's own float32 rounding dominates its result (the phase of an oscillating
asymptotic form, torch's own branch choices), that rounding is reproduced rather than the
exact value, so results agree with eager rather than only with the mathematics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import cache
from typing import Any

import torch

from npu_inductor.ge.ir import Value
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.elementwise import bshape, pointwise, select, supports
from npu_inductor.lowering.helpers import as_value, cast
from npu_inductor.lowering.registry import register

aten = torch.ops.aten
F64 = torch.float64
_SHIFT = 8  # recurrence shift: the asymptotic series below are double-accurate from x >= 8


@cache
def bernoulli(m: int) -> Fraction:
    """Bernoulli number B_m (B_1 = -1/2) from sum_{k<=m} C(m+1, k) B_k = 0."""
    b = [Fraction(1)]
    for j in range(1, m + 1):
        b.append(-sum(math.comb(j + 1, k) * b[k] for k in range(j)) / (j + 1))
    return b[m]


class Math:
    """Float64 GE arithmetic for one converter; operands are Values or Python numbers."""

    def __init__(self, ctx: LoweringContext, dtype: torch.dtype = F64) -> None:
        self.ctx, self.dtype = ctx, dtype

    def op(self, ge_type: str, *xs: Any, attrs: dict[str, Any] | None = None) -> Value:
        return pointwise(self.ctx, ge_type, xs, self.dtype, attrs, suffix=ge_type.lower())

    def test(self, ge_type: str, *xs: Any) -> Value:
        return pointwise(self.ctx, ge_type, xs, self.dtype, y_dtype=torch.bool,
                         suffix=ge_type.lower())

    def value(self, x: Any) -> Value:
        return as_value(self.ctx, x, self.dtype)

    def add(self, a: Any, b: Any) -> Value:
        return self.op("Add", a, b)

    def sub(self, a: Any, b: Any) -> Value:
        return self.op("Sub", a, b)

    def mul(self, a: Any, b: Any) -> Value:
        return self.op("Mul", a, b)

    def div(self, a: Any, b: Any) -> Value:
        return self.op("RealDiv", a, b)

    def where(self, cond: Value, a: Any, b: Any) -> Value:
        return select(self.ctx, cond, a, b, self.dtype, suffix="sel")

    def both(self, a: Value, b: Value) -> Value:
        return self.ctx.op("LogicalAnd", [a, b], out=(torch.bool, bshape(a.shape, b.shape)),
                           suffix="and")

    def either(self, a: Value, b: Value) -> Value:
        return self.ctx.op("LogicalOr", [a, b], out=(torch.bool, bshape(a.shape, b.shape)),
                           suffix="or")

    def poly(self, x: Value, coeffs: Sequence[float]) -> Value:
        """sum_k coeffs[k] x^k by Horner's rule."""
        acc: Any = coeffs[-1]
        for c in reversed(coeffs[:-1]):
            acc = self.add(self.mul(x, acc), c)
        return self.value(acc)

    def sin_pi_reduced(self, x: Value) -> tuple[Value, Value]:
        """(r, sin(pi r)) with r = x - round(x) in [-1/2, 1/2] (exact in float64)."""
        r = self.sub(x, self.op("Round", x))
        return r, self.op("Sin", self.mul(r, math.pi))


def _out(ctx: LoweringContext, y: Value) -> Value:
    return cast(ctx, y, ctx.out_dtype)


def _series(m: Math, w: Value, coeffs: Sequence[float]) -> Value:
    """sum_k coeffs[k] t^k with t = 1 / w^2 (the asymptotic series below are in t)."""
    return m.poly(m.div(1.0, m.mul(w, w)), coeffs)


# ---- gamma family ------------------------------------------------------------------------
# ln Gamma(w) ~ (w - 1/2) ln w - w + ln(2 pi)/2 + sum_k B_2k / (2k (2k-1) w^(2k-1))
_LGAMMA_TAIL = [float(bernoulli(2 * k) / (2 * k * (2 * k - 1))) for k in range(1, 9)]
# psi(w) ~ ln w - 1/(2w) - sum_k B_2k / (2k w^2k);  psi'(w) ~ 1/w + 1/(2w^2) + sum B_2k / w^(2k+1)
_DIGAMMA_TAIL = [0.0] + [-float(bernoulli(2 * k) / (2 * k)) for k in range(1, 9)]
_TRIGAMMA_TAIL = [1.0] + [float(bernoulli(2 * k)) for k in range(1, 9)]


def _shifted(m: Math, z: Value) -> tuple[Value, Value]:
    """(small, w): small = z < 8, w = z + 8 there (else z)."""
    small = m.test("Less", z, float(_SHIFT))
    return small, m.where(small, m.add(z, float(_SHIFT)), z)


def lgamma_pos(m: Math, z: Value) -> Value:
    """ln|Gamma(z)| for z >= 0 (+inf at 0)."""
    small, w = _shifted(m, z)
    prod = z
    for k in range(1, _SHIFT):
        prod = m.mul(prod, m.add(z, float(k)))
    log_w = m.op("Log", w)
    # (w - 1/2)(ln w - 1) - 1/2 == (w - 1/2) ln w - w, without inf - inf at w = inf
    head = m.sub(m.mul(m.sub(w, 0.5), m.sub(log_w, 1.0)), 0.5 - 0.5 * math.log(2 * math.pi))
    inv = m.div(1.0, w)
    tail = m.mul(inv, _series(m, w, _LGAMMA_TAIL))
    lg = m.add(head, tail)
    return m.where(small, m.sub(lg, m.op("Log", m.op("Abs", prod))), lg)


def lgamma(m: Math, x: Value) -> Value:
    neg = m.test("Less", x, 0.0)
    z = m.where(neg, m.sub(1.0, x), x)
    pos = lgamma_pos(m, z)
    # ln|Gamma(x)| = ln(pi / |sin(pi x)|) - ln Gamma(1 - x): +inf at the poles (sin = 0)
    _, s = m.sin_pi_reduced(x)
    refl = m.sub(m.sub(math.log(math.pi), m.op("Log", m.op("Abs", s))), pos)
    refl = m.where(m.test("Equal", s, 0.0), math.inf, refl)  # a pole (not inf - inf)
    y = m.where(neg, refl, pos)
    # |x| < 2^-40: -ln|x| (the next term, -0.577 x, is below half an ulp); no sin(pi x) or
    # product of subnormals, which would lose the digits of x in float32
    ax = m.op("Abs", x)
    y = m.where(m.test("Less", ax, 2.0 ** -40), m.op("Neg", m.op("Log", ax)), y)
    return m.where(m.test("IsInf", x), math.inf, y)  # torch: lgamma(+-inf) = +inf


def digamma_pos(m: Math, z: Value) -> Value:
    """psi(z) for z >= 0 (or -0.0): -inf at +0, +inf at -0 as 1/z gives."""
    small, w = _shifted(m, z)
    recip = m.div(1.0, z)
    for k in range(1, _SHIFT):
        recip = m.add(recip, m.div(1.0, m.add(z, float(k))))
    inv = m.div(1.0, w)
    head = m.sub(m.op("Log", w), m.mul(inv, 0.5))
    psi = m.add(head, _series(m, w, _DIGAMMA_TAIL))
    return m.where(small, m.sub(psi, recip), psi)


def digamma(m: Math, x: Value) -> Value:
    neg = m.test("Less", x, 0.0)
    z = m.where(neg, m.sub(1.0, x), x)
    pos = digamma_pos(m, z)
    # psi(x) = psi(1 - x) - pi / tan(pi r), r = x - trunc(x) in (-1, 0] (exact) as torch
    # reduces it (in float64 also for float32 inputs); NaN at negative integers and -inf
    r = m.sub(x, m.op("Ceil", x))
    refl = m.sub(pos, m.div(math.pi, m.op("Tan", m.mul(r, math.pi))))
    bad = m.both(neg, m.test("Equal", r, 0.0))
    return m.where(neg, m.where(bad, math.nan, refl), pos)


def trigamma_pos(m: Math, z: Value) -> Value:
    small, w = _shifted(m, z)
    recip = m.div(1.0, m.mul(z, z))
    for k in range(1, _SHIFT):
        zk = m.add(z, float(k))
        recip = m.add(recip, m.div(1.0, m.mul(zk, zk)))
    inv = m.div(1.0, w)
    psi1 = m.mul(inv, m.add(m.mul(inv, 0.5), _series(m, w, _TRIGAMMA_TAIL)))
    return m.where(small, m.add(psi1, recip), psi1)


def trigamma(m: Math, x: Value, sin_dtype: torch.dtype) -> Value:
    """psi'(x); reflected below 1/2 as torch does, psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x),
    with sin(pi x) evaluated in ``sin_dtype`` (the input's float dtype, as torch rounds pi x:
    near negative integers that rounding dominates the result, e.g. psi'(-1) is finite)."""
    low = m.test("Less", x, 0.5)
    pos = trigamma_pos(m, m.where(low, m.sub(1.0, x), x))
    sm = Math(m.ctx, sin_dtype)
    s = m.value(sm.op("Sin", sm.mul(sm.value(x), math.pi)))
    refl = m.sub(m.div(math.pi ** 2, m.mul(s, s)), pos)
    return m.where(low, refl, pos)


def _float_dtype(dtype: torch.dtype) -> torch.dtype:
    """The float dtype torch evaluates a special function of ``dtype`` inputs in."""
    return torch.float64 if dtype == torch.float64 else torch.float32


_GAMMA_OPS = ("Add", "Sub", "Mul", "RealDiv", "Log", "Sin", "Tan", "Round", "Abs", "SelectV2")


def internal_dtype(ctx: LoweringContext) -> torch.dtype:
    """The dtype a composition computes in on the target: float32 for float32/16/bf16
    inputs (the 910B has no float64 Exp, Sin, Sqrt, Abs, Floor, Maximum...: see [Note: the
    dtype gate]), float64 for float64 inputs, which the gate then refuses at the first op
    without a float64 kernel (never narrowed). Off the SoC (``soc`` None) float64 as before."""
    if ctx.builder.soc is None or ctx.out_dtype == F64:
        return F64
    return torch.float32


def _unary64(fn: Callable[[Math, Value], Value], f64: bool = True) -> Callable:
    """A one-tensor converter (``self`` or ``x``) computing ``fn`` in float64, or with
    ``f64=False`` in ``internal_dtype``."""
    def convert(ctx, *args, **kwargs):
        (x,) = (*args, *kwargs.values())
        m = Math(ctx, F64 if f64 else internal_dtype(ctx))
        return _out(ctx, fn(m, m.value(x)))
    return convert


register(aten.lgamma.default, capability=supports(*_GAMMA_OPS))(_unary64(lgamma, False))
register(aten.digamma.default, capability=supports(*_GAMMA_OPS))(_unary64(digamma))


def _polygamma_capability(node: torch.fx.Node) -> str | None:
    n = node.args[0]
    if not isinstance(n, int) or n < 0:
        return f"polygamma order {n!r} is not a non-negative int"
    return supports(*_GAMMA_OPS, "Zeta")(node)


@register(aten.polygamma.default, capability=_polygamma_capability)
def polygamma(ctx, n, self):
    """polygamma(int n, Tensor self) -> Tensor"""
    m = Math(ctx)
    if n == 0:
        return _out(ctx, digamma(m, m.value(self)))
    fd = _float_dtype(ctx.out_dtype)
    if n == 1:
        return _out(ctx, trigamma(m, m.value(self), fd))
    # (-1)^(n+1) n! zeta(n + 1, x), in the float dtype torch evaluates it in
    zm = Math(ctx, fd)
    zeta = zm.op("Zeta", float(n + 1), zm.value(self))
    sign = 1.0 if n % 2 else -1.0
    return _out(ctx, zm.mul(zeta, sign * math.exp(math.lgamma(n + 1))))


# ---- error function ----------------------------------------------------------------------
_ERFCX_ASYMPTOTIC = 25.0  # erfc(25) ~ 1e-273 is still a normal double
# in float32 exp(x^2) overflows from x ~ 9.4; the series has converged to float32 from x = 5
_ERFCX_ASYMPTOTIC_F32 = 5.0
# erfcx(x) ~ 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k
_ERFCX_TAIL = [(-1) ** k * math.prod(range(1, 2 * k, 2)) / 2.0 ** k for k in range(10)]


def erfcx(m: Math, x: Value) -> Value:
    direct = m.mul(m.op("Exp", m.mul(x, x)), m.op("Erfc", x))
    series = m.div(_series(m, x, _ERFCX_TAIL), m.mul(x, math.sqrt(math.pi)))
    split = _ERFCX_ASYMPTOTIC if m.dtype == F64 else _ERFCX_ASYMPTOTIC_F32
    return m.where(m.test("Less", x, split), direct, series)


register(aten.special_erfcx.default,
         capability=supports("Exp", "Erfc", "Mul", "RealDiv", "SelectV2"))(_unary64(erfcx, False))


# ---- Bessel ------------------------------------------------------------------------------
def _scaled_bessel(ge_type: str) -> Callable[[Math, Value], Value]:
    def fn(m: Math, x: Value) -> Value:
        # I(x) = Ie(x) exp(|x|). torch forms exp(|x|) in the input's float dtype, so a float32
        # result is inf from |x| ~ 88.7 on (where exp overflows), though I(x) would still fit.
        em = Math(m.ctx, _float_dtype(m.ctx.out_dtype))
        growth = m.value(em.op("Exp", em.value(m.op("Abs", x))))
        return m.mul(m.op(ge_type, x), growth)
    return fn


register(aten.special_modified_bessel_i0.default,
         capability=supports("BesselI0e", "Exp"))(_unary64(_scaled_bessel("BesselI0e"), False))
register(aten.special_modified_bessel_i1.default,
         capability=supports("BesselI1e", "Exp"))(_unary64(_scaled_bessel("BesselI1e"), False))


def spherical_j0(m: Math, x: Value) -> Value:
    # sin(x) / x: 1 at 0 (the limit), 0 at +-inf (torch)
    y = m.div(m.op("Sin", x), x)
    y = m.where(m.test("Equal", x, 0.0), 1.0, y)
    return m.where(m.test("IsInf", x), 0.0, y)


register(aten.special_spherical_bessel_j0.default,
         capability=supports("Sin", "RealDiv", "SelectV2"))(_unary64(spherical_j0, False))


# ---- Chebyshev polynomials ---------------------------------------------------------------
# Per kind: (degree offset a, trig fn, half-angle denominator) for |x| <= 1, x = cos(th):
#   T_n = cos(n th), U_n = sin((n+1) th) / sin(th),
#   V_n = cos((n+1/2) th) / cos(th/2), W_n = sin((n+1/2) th) / sin(th/2),
# and the hyperbolic forms with x = cosh(t) for x > 1 (x < -1: P_n(x) = (-1)^n P'_n(-x),
# P' = P for T, U and V <-> W). Values at x = 1 and x = -1 (up to (-1)^n) as (c0, c1): c0 +
# c1 n; torch's own conventions there.
_KINDS = {
    "t": (0.0, "cos", None, (1, 0), (1, 0)),
    "u": (1.0, "sin", 1.0, (1, 1), (1, 1)),
    "v": (0.5, "cos", 0.5, (1, 0), (1, 2)),
    "w": (0.5, "sin", 0.5, (1, 2), (1, 0)),
}
_MIRROR = {"t": "t", "u": "u", "v": "w", "w": "v"}


def _trig(m: Math, kind: str, k: Value, th: Value) -> Value:
    """P_k(cos th) for |x| <= 1 (x = +-1 excluded: handled by the caller)."""
    a, fn, den, _, _ = _KINDS[kind]
    angle = m.mul(m.add(k, a), th)
    num = m.op("Cos" if fn == "cos" else "Sin", angle)
    if den is None:
        return num
    half = m.mul(th, den)
    return m.div(num, m.op("Cos" if fn == "cos" else "Sin", half))


def _hyp(m: Math, kind: str, k: Value, t: Value) -> Value:
    """P_k(cosh t) for t > 0."""
    a, fn, den, _, _ = _KINDS[kind]
    num = m.op("Cosh" if fn == "cos" else "Sinh", m.mul(m.add(k, a), t))
    if den is None:
        return num
    return m.div(num, m.op("Cosh" if fn == "cos" else "Sinh", m.mul(t, den)))


def _hyp_signed(m: Math, kind: str, k: Value, t: Value, neg: Value) -> Value:
    """|P_k(x)| for |x| > 1, x = +-cosh t (the sign is applied by the caller)."""
    own = _hyp(m, kind, k, t)
    if _MIRROR[kind] == kind:
        return own
    return m.where(neg, _hyp(m, _MIRROR[kind], k, t), own)


# torch evaluates the trigonometric form itself only above these degrees (and |x| < 1), in
# the input's float dtype; below them it runs the recurrence, which the float64 closed
# forms match. Where torch uses the trigonometric form its float32 rounding of acos(x) and
# of the phase dominates (e.g. U_n near x = -1), so that branch is mirrored in its dtype.
_TRIG_ABOVE = {("t", False): 6, ("u", False): 8, ("v", False): 8, ("w", False): 8,
               ("t", True): 6, ("u", True): 6, ("v", True): 6, ("w", True): 4}


def _as_torch_trig(m: Math, x: Value, ni: Value, odd: Value, kind: str, shifted: bool,
                   fd: torch.dtype) -> tuple[Value, Value]:
    """(use, value): torch's trigonometric branch (n above the threshold, |x'| < 1 with x'
    rounded in ``fd``) and its value, computed in ``fd`` as torch does."""
    fm = Math(m.ctx, fd)
    xf = fm.value(x)
    if shifted:
        xf = fm.sub(fm.add(xf, xf), 1.0)
    use = m.both(m.test("Greater", ni, float(_TRIG_ABOVE[kind, shifted])),
                 fm.test("Less", fm.op("Abs", xf), 1.0))
    th = fm.op("Acos", fm.op("Maximum", fm.op("Minimum", xf, 1.0), -1.0))
    y = m.value(_trig(fm, kind, fm.value(ni), th))
    if kind in "vw":  # torch's guard against a vanishing half-angle denominator
        half = fm.mul(th, 0.5)
        hit = fm.test("Equal", fm.op("Sin" if kind == "v" else "Cos", half), 1.0)
        two_n1 = m.add(m.add(ni, ni), 1.0)
        sign = m.where(odd, -1.0, 1.0)  # (-1)^n, whatever the sign of x
        if kind == "v":
            y = m.where(hit, m.mul(sign, two_n1), y)
        elif shifted:
            y = m.where(hit, sign, y)
        else:
            y = m.where(hit, m.where(m.test("Greater", x, 0.0), two_n1, sign), y)
    return use, y


def chebyshev(m: Math, x: Value, n: Value, kind: str, shifted: bool, fd: torch.dtype) -> Value:
    """torch's (shifted_)chebyshev_polynomial_{kind}(x, n) with x, n in float64: n truncated
    to an integer (NaN, inf and |n| >= 2^63 give 0, as torch's int64 cast yields INT64_MIN
    there), 0 for n < 0."""
    ni = m.where(m.test("Less", n, 0.0), m.op("Ceil", n), m.op("Floor", n))
    valid = m.both(m.test("GreaterEqual", ni, 0.0),
                   m.test("Less", m.op("Abs", n), 2.0 ** 63))
    xs = m.sub(m.add(x, x), 1.0) if shifted else x  # exact in float64
    neg = m.test("Less", xs, 0.0)
    odd = m.test("Equal", m.op("FloorMod", ni, 2.0), 1.0)
    sign = m.where(m.both(neg, odd), -1.0, 1.0)  # (-1)^n where x < 0
    ax = m.op("Abs", xs)
    th = m.op("Acos", m.op("Maximum", m.op("Minimum", xs, 1.0), -1.0))
    inside = _trig(m, kind, ni, th)
    t = m.op("Acosh", m.op("Maximum", ax, 1.0))
    outside = m.mul(sign, _hyp_signed(m, kind, ni, t, neg))
    y = m.where(m.test("LessEqual", ax, 1.0), inside, outside)
    # torch's recurrence P_{k+1} = 2x P_k - P_{k-1} gives inf - inf = NaN two steps after
    # it overflows: NaN once |P_{n-2}| passes the dtype's max (and for x = +-inf, n >= 3)
    before = _hyp_signed(m, kind, m.sub(ni, 2.0), t, neg)
    fmax = torch.finfo(fd).max
    overflow = m.both(m.test("Greater", before, fmax), m.test("GreaterEqual", ni, 2.0))
    y = m.where(overflow, math.nan, y)
    at_inf = m.where(m.test("GreaterEqual", ni, 3.0), math.nan, m.mul(sign, math.inf))
    y = m.where(m.test("IsInf", xs), at_inf, y)
    use, trig = _as_torch_trig(m, x, ni, odd, kind, shifted, fd)
    y = m.where(use, trig, y)
    _, _, _, (p0, p1), (q0, q1) = _KINDS[kind]
    y = m.where(m.test("Equal", xs, 1.0), m.add(m.mul(ni, float(p1)), float(p0)), y)
    y = m.where(m.test("Equal", xs, -1.0), m.mul(sign, m.add(m.mul(ni, float(q1)), float(q0))),
                y)
    y = m.where(m.test("Equal", ni, 0.0), 1.0, y)
    return m.where(valid, y, 0.0)


_CHEBYSHEV_OPS = ("Acos", "Acosh", "Cos", "Sin", "Cosh", "Sinh", "FloorMod", "Ceil", "Floor",
                  "Minimum", "Maximum", "RealDiv", "SelectV2")


def _register_chebyshev(kind: str, shifted: bool) -> None:
    prefix = "special_shifted_chebyshev_polynomial_" if shifted else \
        "special_chebyshev_polynomial_"
    packet = getattr(aten, prefix + kind)

    @register(packet.default, packet.x_scalar, packet.n_scalar,
              capability=supports(*_CHEBYSHEV_OPS))
    def convert(ctx, x, n):
        # U and V: the closed form in float32 misses eager's recurrence (near x = -1, and
        # overflow for large |x|), so they keep float64 internals, which the 910B gate
        # refuses (the op runs in eager) rather than give a less accurate answer
        m = Math(ctx, F64 if kind in "uv" else internal_dtype(ctx))
        y = chebyshev(m, m.value(x), m.value(n), kind, shifted, _float_dtype(ctx.out_dtype))
        return _out(ctx, y)


for _kind in "tuvw":
    _register_chebyshev(_kind, False)
    _register_chebyshev(_kind, True)


# ---- frexp -------------------------------------------------------------------------------
_EXP_MASK = 0x7FF << 52
_KEEP_SIGN_AND_FRACTION = ~_EXP_MASK  # as a signed int64: 0x800FFFFFFFFFFFFF
_HALF_EXPONENT = 1022 << 52  # the exponent field of 0.5


def _frexp_capability(node: torch.fx.Node) -> str | None:
    x = node.args[0].meta.get("val")
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        return "frexp needs a floating tensor"
    return None  # computes in float64 / int64 whatever the input dtype: all ops take those


@register(aten.frexp.Tensor, capability=_frexp_capability)
def frexp(ctx, self):
    """frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)"""
    # No GE Frexp: read the float64 exponent field (every float16/bfloat16/float32 value,
    # subnormals included, is a normal float64) and replace it with 0.5's.
    m = Math(ctx)
    x = m.value(self)
    bias = 1022
    if self.dtype == F64:  # float64 subnormals (and 0): scale into the normal range first
        raw = ctx.op("Bitcast", [x], {"type": torch.int64}, out=(torch.int64, x.shape),
                     suffix="raw")
        im0 = Math(ctx, torch.int64)
        tiny = im0.test("Equal", im0.op("BitwiseAnd", raw, _EXP_MASK), 0)
        x_n = m.where(tiny, m.mul(x, 2.0 ** 54), x)
        bias = m.where(tiny, 1022.0 + 54, 1022.0)
    else:
        x_n = x
    bits = ctx.op("Bitcast", [x_n], {"type": torch.int64}, out=(torch.int64, x.shape),
                  suffix="bits")
    im = Math(ctx, torch.int64)
    field = im.op("BitwiseAnd", im.op("RightShift", bits, 52), 0x7FF)
    exponent = m.sub(cast(ctx, field, F64), bias)
    mbits = im.op("BitwiseOr", im.op("BitwiseAnd", bits, _KEEP_SIGN_AND_FRACTION),
                  _HALF_EXPONENT)
    mantissa = ctx.op("Bitcast", [mbits], {"type": F64}, out=(F64, x.shape), suffix="mant")
    # 0, +-inf and NaN (exponent field all ones): (x, 0) as torch (std::frexp) returns
    special = m.either(m.test("Equal", x, 0.0), im.test("Equal", field, 0x7FF))
    mantissa = m.where(special, x, mantissa)
    exponent = m.where(special, 0.0, exponent)
    return cast(ctx, mantissa, self.dtype), cast(ctx, exponent, torch.int32)


# ---- Bessel functions of the first and second kind, modified of the second kind ----------
# No GE op (GE has only BesselI0e/I1e): ascending power series (A&S 9.1.10-11, 9.6.10-13)
# for small |x|, Hankel's asymptotic expansions (A&S 9.2.5-10, 9.7.2) for large |x|, and for
# K in between the trapezoidal rule on K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt,
# which converges geometrically in the step for this analytic, doubly decaying integrand.
# Every coefficient is computed here from its closed form (factorials, harmonic numbers).
_JY_SERIES_BELOW = 14.0  # series round-off ~1e-12 absolute; asymptotic tail ~1e-12 beyond
_JY_TERMS = 34
_K_SERIES_BELOW, _K_ASYMPTOTIC_ABOVE = 2.0, 20.0
_EULER = 0.57721566490153286061
_TRAPEZOID_STEP, _TRAPEZOID_POINTS = 0.125, 34


def _harmonic(k: int) -> Fraction:
    return sum((Fraction(1, j) for j in range(1, k + 1)), Fraction(0))


def _hankel(nu: int, k: int) -> Fraction:
    """a_k(nu) = prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! 8^k)."""
    p = Fraction(1)
    for j in range(1, k + 1):
        p *= 4 * nu * nu - (2 * j - 1) ** 2
    return p / (math.factorial(k) * 8 ** k)


def _fact2(k: int, nu: int) -> int:
    return math.factorial(k) * math.factorial(k + nu)


# sum_k c_k t^k with t = x^2/4: J_nu (x/2)^-nu, I_nu (x/2)^-nu, and the Y / K log-free parts
_J = {nu: [(-1) ** k / _fact2(k, nu) for k in range(_JY_TERMS)] for nu in (0, 1)}
_I = {nu: [1 / _fact2(k, nu) for k in range(_JY_TERMS)] for nu in (0, 1)}
_Y0 = [float((-1) ** (k + 1) * _harmonic(k)) / _fact2(k, 0) for k in range(_JY_TERMS)]
_K0 = [float(_harmonic(k)) / _fact2(k, 0) for k in range(_JY_TERMS)]
# psi(k+1) + psi(k+2) = H_k + H_{k+1} - 2 gamma
_PSI2 = [float(_harmonic(k) + _harmonic(k + 1)) - 2 * _EULER for k in range(_JY_TERMS)]
_Y1 = [(-1) ** k * _PSI2[k] / _fact2(k, 1) for k in range(_JY_TERMS)]
_K1 = [_PSI2[k] / _fact2(k, 1) for k in range(_JY_TERMS)]
# Hankel: P = sum (-1)^k a_2k / x^2k, Q = sum (-1)^k a_2k+1 / x^2k+1; K: sum a_k / x^k
_P = {nu: [float((-1) ** k * _hankel(nu, 2 * k)) for k in range(14)] for nu in (0, 1)}
_Q = {nu: [float((-1) ** k * _hankel(nu, 2 * k + 1)) for k in range(14)] for nu in (0, 1)}
_KA = {nu: [float(_hankel(nu, k)) for k in range(28)] for nu in (0, 1)}


def _jy_large(m: Math, x: Value, nu: int, second: bool) -> Value:
    """J_nu or Y_nu for large x > 0; the phase x - (2 nu + 1) pi/4 is rounded in the input's
    float dtype as torch computes it (its float32 rounding dominates for large x)."""
    fm = Math(m.ctx, _float_dtype(m.ctx.out_dtype))
    phase = m.value(fm.sub(fm.value(x), (2 * nu + 1) * math.pi / 4))
    inv = m.div(1.0, x)
    u = m.mul(inv, inv)
    p, q = m.poly(u, _P[nu]), m.mul(inv, m.poly(u, _Q[nu]))
    c, s = m.op("Cos", phase), m.op("Sin", phase)
    if second:
        osc = m.add(m.mul(p, s), m.mul(q, c))
    else:
        osc = m.sub(m.mul(p, c), m.mul(q, s))
    return m.mul(osc, m.op("Sqrt", m.mul(inv, 2 / math.pi)))


def _j_small(m: Math, x: Value, t: Value, nu: int) -> Value:
    y = m.poly(t, _J[nu])
    return y if nu == 0 else m.mul(y, m.mul(x, 0.5))


def bessel_j(m: Math, x: Value, nu: int) -> Value:
    ax = m.op("Abs", x)
    t = m.mul(m.mul(ax, ax), 0.25)
    y = m.where(m.test("Less", ax, _JY_SERIES_BELOW), _j_small(m, ax, t, nu),
                _jy_large(m, ax, nu, False))
    return y if nu == 0 else m.where(m.test("Less", x, 0.0), m.op("Neg", y), y)


def bessel_y(m: Math, x: Value, nu: int) -> Value:
    """Y_nu(x): NaN for x < 0 and -inf, -inf at 0 (the log / pole terms give both)."""
    t = m.mul(m.mul(x, x), 0.25)
    log_half = m.op("Log", m.mul(x, 0.5))
    if nu == 0:
        small = m.mul(m.add(m.mul(m.add(log_half, _EULER), _j_small(m, x, t, 0)),
                            m.poly(t, _Y0)), 2 / math.pi)
    else:
        pole = m.div(-2 / math.pi, x)
        log_term = m.mul(m.mul(log_half, _j_small(m, x, t, 1)), 2 / math.pi)
        series = m.mul(m.mul(x, -0.5 / math.pi), m.poly(t, _Y1))
        small = m.add(m.add(pole, log_term), series)
        small = m.where(m.test("Equal", x, 0.0), -math.inf, small)
    return m.where(m.test("Less", x, _JY_SERIES_BELOW), small, _jy_large(m, x, nu, True))


def bessel_k_scaled(m: Math, x: Value, nu: int) -> Value:
    """exp(x) K_nu(x): +inf at 0, NaN for x < 0, 0 at +inf."""
    t = m.mul(m.mul(x, x), 0.25)
    log_half = m.op("Log", m.mul(x, 0.5))
    if nu == 0:
        i0 = m.poly(t, _I[0])
        small = m.sub(m.poly(t, _K0), m.mul(m.add(log_half, _EULER), i0))
    else:
        i1 = m.mul(m.poly(t, _I[1]), m.mul(x, 0.5))
        small = m.add(m.add(m.div(1.0, x), m.mul(log_half, i1)),
                      m.mul(m.mul(x, -0.25), m.poly(t, _K1)))
        small = m.where(m.test("Equal", x, 0.0), math.inf, small)
    small = m.mul(small, m.op("Exp", x))
    # trapezoid: h (f(0)/2 + sum_j f(jh)), f(t) = exp(-x (cosh t - 1)) cosh(nu t)
    h = _TRAPEZOID_STEP
    mid: Any = 0.5
    for j in range(1, _TRAPEZOID_POINTS):
        w = math.cosh(nu * j * h)
        mid = m.add(mid, m.mul(m.op("Exp", m.mul(x, 1.0 - math.cosh(j * h))), w))
    mid = m.mul(mid, h)
    inv = m.div(1.0, x)
    large = m.mul(m.poly(inv, _KA[nu]), m.op("Sqrt", m.mul(inv, math.pi / 2)))
    y = m.where(m.test("Greater", x, _K_ASYMPTOTIC_ABOVE), large, mid)
    return m.where(m.test("LessEqual", x, _K_SERIES_BELOW), small, y)


def _bessel_k(nu: int, scaled: bool) -> Callable[[Math, Value], Value]:
    def fn(m: Math, x: Value) -> Value:
        y = bessel_k_scaled(m, x, nu)
        return y if scaled else m.mul(y, m.op("Exp", m.op("Neg", x)))
    return fn


_BESSEL_OPS = ("Sin", "Cos", "Log", "Exp", "Sqrt", "RealDiv", "SelectV2")


def _not_float64(node: torch.fx.Node) -> str | None:
    # eager's float64 J/Y (Ai) are off by up to ~4e-7 (~3e-6) just above x = 5 (below
    # x = -2.09), where it switches to asymptotic forms; these are accurate there, so they
    # would not match it within float64's 1e-7
    out = node.meta.get("val")
    if isinstance(out, torch.Tensor) and out.dtype == torch.float64:
        return "float64 J/Y/Ai: eager's own float64 error exceeds its tolerance"
    return supports(*_BESSEL_OPS)(node)


for _target, _fn in (
        (aten.special_bessel_j0.default, lambda m, x: bessel_j(m, x, 0)),
        (aten.special_bessel_j1.default, lambda m, x: bessel_j(m, x, 1)),
        (aten.special_bessel_y0.default, lambda m, x: bessel_y(m, x, 0)),
        (aten.special_bessel_y1.default, lambda m, x: bessel_y(m, x, 1))):
    register(_target, capability=_not_float64)(_unary64(_fn))
for _target, _fn in (
        (aten.special_modified_bessel_k0.default, _bessel_k(0, False)),
        (aten.special_modified_bessel_k1.default, _bessel_k(1, False)),
        (aten.special_scaled_modified_bessel_k0.default, _bessel_k(0, True)),
        (aten.special_scaled_modified_bessel_k1.default, _bessel_k(1, True))):
    register(_target, capability=supports(*_BESSEL_OPS))(_unary64(_fn, False))


# ---- Airy Ai -----------------------------------------------------------------------------
# Maclaurin series Ai = c1 f - c2 g (A&S 10.4.2) for |x| <= 6 (round-off ~1e-11 absolute)
# and the asymptotic expansions in zeta = 2/3 |x|^(3/2) (A&S 10.4.59-60) beyond (tail
# ~3e-10 relative at |x| = 6). For x < 0 the phase zeta + pi/4 is rounded in the input's
# float dtype as torch computes it.
_AIRY_SPLIT, _AIRY_ZERO_ABOVE = 6.0, 103.892  # torch returns 0 above 103.892
_AIRY_C1 = 1 / (3 ** (2 / 3) * math.gamma(2 / 3))  # Ai(0)
_AIRY_C2 = 1 / (3 ** (1 / 3) * math.gamma(1 / 3))  # -Ai'(0)
_AIRY_F = [1 / math.prod((3 * j - 1) * 3 * j for j in range(1, k + 1)) for k in range(30)]
_AIRY_G = [1 / math.prod(3 * j * (3 * j + 1) for j in range(1, k + 1)) for k in range(30)]
# u_k = (2k+1)(2k+3)...(6k-1) / (216^k k!)
_AIRY_U = [float(Fraction(math.prod(range(2 * k + 1, 6 * k, 2)), 216 ** k * math.factorial(k)))
           for k in range(22)]


def airy_ai(m: Math, x: Value) -> Value:
    cube = m.mul(m.mul(x, x), x)
    series = m.sub(m.mul(m.poly(cube, _AIRY_F), _AIRY_C1),
                   m.mul(m.mul(x, m.poly(cube, _AIRY_G)), _AIRY_C2))
    ax = m.op("Abs", x)
    root = m.op("Sqrt", ax)
    zeta = m.mul(m.mul(ax, root), 2 / 3)
    inv = m.div(1.0, zeta)
    amp = m.mul(m.op("Sqrt", root), math.sqrt(math.pi))  # sqrt(pi) |x|^(1/4)
    decay = m.div(m.mul(m.op("Exp", m.op("Neg", zeta)), m.poly(m.op("Neg", inv), _AIRY_U)),
                  m.mul(amp, 2.0))
    # x < 0: phase -2/3 x sqrt(-x) + pi/4, rounded step by step as torch evaluates it
    fm = Math(m.ctx, _float_dtype(m.ctx.out_dtype))
    xf = fm.value(x)
    # sqrt and / 3 in float64, then rounded: correctly rounded float32 results, as eager's
    # scalar std::sqrt and division give (the host's vectorized float32 sqrt may be 1 ulp off)
    prod = fm.mul(fm.mul(xf, -2.0), fm.value(m.op("Sqrt", m.op("Neg", x))))
    third = fm.value(m.div(m.value(prod), 3.0))
    phase = m.value(fm.add(third, math.pi / 4))
    inv2 = m.mul(inv, inv)
    p = m.poly(inv2, [(-1) ** k * _AIRY_U[2 * k] for k in range(11)])
    q = m.mul(inv, m.poly(inv2, [(-1) ** k * _AIRY_U[2 * k + 1] for k in range(11)]))
    osc = m.div(m.sub(m.mul(m.op("Sin", phase), p), m.mul(m.op("Cos", phase), q)), amp)
    y = m.where(m.test("Greater", x, _AIRY_SPLIT), decay,
                m.where(m.test("Less", x, -_AIRY_SPLIT), osc, series))
    y = m.where(m.test("Greater", x, _AIRY_ZERO_ABOVE), 0.0, y)
    return m.where(m.test("IsInf", x), math.nan, y)


register(aten.special_airy_ai.default, capability=_not_float64)(_unary64(airy_ai))


# ---- Hermite polynomials -----------------------------------------------------------------
# torch returns NaN above degree 128 in float32, so a tensor degree is bounded and the
# three-term recurrence unrolls soundly: every degree is computed and the one asked for is
# selected. The recurrence runs in float32 rounded as eager's steps are, so cancellation and
# overflow (inf, then inf - inf = NaN) come out as in eager. (Laguerre and Legendre have no such
# bound: a tensor degree cannot be unrolled, so they are left to eager.)
_HERMITE_LIMIT = 128  # torch's getHermitianLimit<float>()


def _hermite_step(m: Math, fm: Math, a: Value, q: Value, p: Value, k: float) -> Value:
    """fl32(a q - fl32(k p)) with a q exact: eager's step r = a * q - k * p is compiled to
    one fused multiply-add (a float32 product is exact in float64, so this is that FMA)."""
    kp = m.value(fm.mul(p, k))
    return fm.value(m.sub(m.mul(m.value(a), m.value(q)), kp))


def _filled(m: Math, x: Value, value: float) -> Value:
    """``value`` in x's shape, whatever x holds (NaN and inf included)."""
    return m.where(m.test("IsNan", x), value, value)


def _trunc(m: Math, n: Value) -> Value:
    """trunc(n) as Ceil and Neg (float64 kernels on the 910B's AI CPU; Floor has none)."""
    up = m.op("Ceil", n)
    down = m.op("Neg", m.op("Ceil", m.op("Neg", n)))
    return m.where(m.test("Less", n, 0.0), up, down)


def hermite(m: Math, x: Value, n: Any, physicists: bool) -> Value:
    fm = Math(m.ctx, torch.float32)
    xf = fm.value(x)
    a = fm.add(xf, xf) if physicists else xf
    p, q = fm.value(1.0), a

    def coeff(j: int) -> float:
        return float(2 * (j - 1) if physicists else j - 1)

    if not isinstance(n, Value):  # a Python degree: unroll exactly that far
        n = int(n)
        if n < 0 or n == 0 or n > _HERMITE_LIMIT:
            return _filled(m, x, 0.0 if n < 0 else 1.0 if n == 0 else math.nan)
        for j in range(2, n + 1):
            p, q = q, _hermite_step(m, fm, a, q, p, coeff(j))
        return m.value(q)
    # torch: NaN / +-inf degrees count as -1 (H) or INT64_MIN (He): 0 either way
    ni = _trunc(m, n)
    valid = m.both(m.test("GreaterEqual", ni, 0.0), m.test("Less", n, 2.0 ** 63))
    y = m.where(m.test("Equal", ni, 1.0), m.value(q), 1.0)
    for j in range(2, _HERMITE_LIMIT + 1):
        p, q = q, _hermite_step(m, fm, a, q, p, coeff(j))
        y = m.where(m.test("Equal", ni, float(j)), m.value(q), y)
    y = m.where(m.test("Greater", ni, float(_HERMITE_LIMIT)), math.nan, y)
    return m.where(valid, y, 0.0)


def _float32_only(node: torch.fx.Node) -> str | None:
    out = node.meta.get("val")
    if isinstance(out, torch.Tensor) and out.dtype != torch.float32:
        return f"Hermite lowered for float32 only (eager's degree bound differs for {out.dtype})"
    return supports("Mul", "Sub", "SelectV2")(node)


def _register_hermite(name: str, physicists: bool) -> None:
    packet = getattr(aten, name)

    @register(packet.default, packet.x_scalar, packet.n_scalar, capability=_float32_only)
    def convert(ctx, x, n):
        m = Math(ctx)
        nv = m.value(n) if isinstance(n, Value) else n
        return _out(ctx, hermite(m, m.value(x), nv, physicists))


_register_hermite("special_hermite_polynomial_h", True)
_register_hermite("special_hermite_polynomial_he", False)
