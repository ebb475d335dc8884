"""Unary math converters: one GE op per aten op where GE has it, short compositions where not.

Each op computes in the FX node's output dtype (integer inputs to float functions are cast
first, as torch does), widened when the GE prototype lacks that dtype (see
``elementwise.pointwise``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch._ops import OpOverload

from npu_inductor.ge.ir import Value
from npu_inductor.ge.soc import has_kernel
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.elementwise import need_dtype, pointwise, select, supports
from npu_inductor.lowering.helpers import as_value, cast
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.spectral import complex_parts

aten = torch.ops.aten


def register_unary(targets: OpOverload | Sequence[OpOverload], ge_type: str,
                   attrs: dict[str, Any] | None = None) -> None:
    """``target(self)`` -> ``ge_type(x)`` computed in the output dtype."""
    targets = [targets] if isinstance(targets, OpOverload) else list(targets)

    @register(*targets, capability=supports(ge_type))
    def convert(ctx, self):
        return pointwise(ctx, ge_type, [self], ctx.out_dtype, attrs, out=ctx.out_dtype)


_UNARY = {
    aten.neg.default: "Neg", aten.abs.default: "Abs", aten.exp.default: "Exp",
    aten.expm1.default: "Expm1", aten.log.default: "Log", aten.log1p.default: "Log1p",
    aten.sqrt.default: "Sqrt", aten.rsqrt.default: "Rsqrt", aten.reciprocal.default: "Reciprocal",
    aten.erf.default: "Erf", aten.erfc.default: "Erfc", aten.erfinv.default: "Erfinv",
    aten.sin.default: "Sin", aten.cos.default: "Cos", aten.tan.default: "Tan",
    aten.asin.default: "Asin", aten.acos.default: "Acos", aten.atan.default: "Atan",
    aten.sinh.default: "Sinh", aten.cosh.default: "Cosh", aten.asinh.default: "Asinh",
    aten.acosh.default: "Acosh", aten.atanh.default: "Atanh",
}
for _target, _ge in _UNARY.items():
    register_unary(_target, _ge)


@register(aten.sign.default, capability=supports("Sign"))
def sign(ctx, self):
    """sign(Tensor self) -> Tensor"""
    dt = ctx.out_dtype
    soc = ctx.builder.soc
    if dt.is_floating_point or dt == torch.bool or soc is None or has_kernel(soc, "Sign", x=dt):
        return pointwise(ctx, "Sign", [self], dt, out=dt)
    # no int64 Sign kernel on the 910B: (x > 0) - (x < 0), exact
    pos, neg = (cast(ctx, pointwise(ctx, t, [self, 0], dt, y_dtype=torch.bool, suffix=t.lower()),
                     dt) for t in ("Greater", "Less"))
    return pointwise(ctx, "Sub", [pos, neg], dt, out=dt)


@register(aten.sgn.default, capability=supports("Sign"))
def sgn(ctx, self):
    """sgn(Tensor self) -> Tensor"""
    dt = ctx.out_dtype
    soc = ctx.builder.soc
    if dt.is_complex and soc is not None and not has_kernel(soc, "Sign", x=dt):
        return _complex_sgn(ctx, self)
    return pointwise(ctx, "Sign", [self], dt, out=dt)


def _complex_sgn(ctx, z: Value) -> Value:
    """z / |z| (0 at 0) from float32 parts where the SoC has no complex Sign (910B): eager's
    own form (|z| = sqrt(re^2 + im^2), each part divided by it, 0 where |z| == 0)."""
    f32 = torch.float32
    re, im = complex_parts(ctx, z)
    sq = [pointwise(ctx, "Mul", [v, v], f32, suffix=f"sq_{n}") for v, n in ((re, "re"), (im, "im"))]
    mag = pointwise(ctx, "Sqrt", [pointwise(ctx, "Add", sq, f32, suffix="norm2")], f32,
                    suffix="abs")
    zero = pointwise(ctx, "Equal", [mag, 0.0], f32, y_dtype=torch.bool, suffix="is_zero")
    parts = [select(ctx, zero, 0.0, pointwise(ctx, "RealDiv", [v, mag], f32, suffix=f"div_{n}"),
                    f32, suffix=f"sgn_{n}") for v, n in ((re, "re"), (im, "im"))]
    return ctx.op("Complex", parts, {"Tout": z.dtype})


register_unary(aten.special_i0e.default, "BesselI0e")
register_unary(aten.special_i1e.default, "BesselI1e")
register_unary(aten.special_ndtri.default, "Ndtri")
register_unary(aten.exp2.default, "Exp", {"base": 2.0})  # GE Exp: base ** x
register_unary(aten.log2.default, "Log", {"base": 2.0})  # GE Log: log_base(x)
register_unary(aten.log10.default, "Log", {"base": 10.0})


def _rounding(ge_type: str):
    def convert(ctx, self):
        if not ctx.out_dtype.is_floating_point:  # integers are already whole: a copy
            return ctx.op("Identity", [self])
        return pointwise(ctx, ge_type, [self], ctx.out_dtype, out=ctx.out_dtype)
    return convert


for _target, _ge in ((aten.floor.default, "Floor"), (aten.ceil.default, "Ceil"),
                     (aten.trunc.default, "Trunc"), (aten.round.default, "Round")):
    register(_target, capability=supports(_ge, floats_only=True))(_rounding(_ge))


@register(aten.round.decimals, capability=supports("Round", "RealDiv"))
def round_decimals(ctx, self, decimals=0):
    """round.decimals(Tensor self, *, int decimals) -> Tensor"""
    # No GE op: torch's own formula, nearbyint(x * 10^d) / 10^d (x / 10^-d * 10^-d if d < 0).
    dtype = ctx.out_dtype
    cd = need_dtype("Round", dtype)
    scale = 10.0 ** abs(decimals)
    first, last = ("Mul", "RealDiv") if decimals >= 0 else ("RealDiv", "Mul")
    scaled = pointwise(ctx, first, [self, scale], cd, suffix="scale")
    rounded = pointwise(ctx, "Round", [scaled], cd, suffix="round")
    return pointwise(ctx, last, [rounded, scale], cd, out=dtype)


@register(aten.frac.default, capability=supports("Trunc", "Sub"))
def frac(ctx, self):
    """frac(Tensor self) -> Tensor"""
    # No GE Frac: x - trunc(x), torch's definition.
    cd = need_dtype("Trunc", self.dtype)
    x = as_value(ctx, self, cd)
    return pointwise(ctx, "Sub", [x, pointwise(ctx, "Trunc", [x], cd, suffix="trunc")], cd,
                     out=ctx.out_dtype)


def _float_test(ge_type: str):
    def convert(ctx, self):
        if not self.dtype.is_floating_point:  # integers are never NaN or infinite
            return _none(ctx, self)
        return pointwise(ctx, ge_type, [self], self.dtype, y_dtype=torch.bool)
    return convert


def _none(ctx: LoweringContext, x: Value) -> Value:
    """An all-False bool tensor shaped like integer ``x`` (not x == x)."""
    same = pointwise(ctx, "Equal", [x, x], x.dtype, y_dtype=torch.bool, suffix="same")
    return ctx.op("LogicalNot", [same], out=(torch.bool, same.shape))


for _target, _ge in ((aten.isnan.default, "IsNan"), (aten.isinf.default, "IsInf"),
                     (aten.isposinf.default, "IsPosInf"), (aten.isneginf.default, "IsNegInf")):
    register(_target, capability=supports(_ge, floats_only=True))(_float_test(_ge))


@register(aten.nan_to_num.default, capability=supports("NanToNum", floats_only=True))
def nan_to_num(ctx, self, nan=None, posinf=None, neginf=None):
    """nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor"""
    if not self.dtype.is_floating_point:
        return ctx.op("Identity", [self])
    info = torch.finfo(self.dtype)
    attrs = {"nan": float(nan or 0.0),
             "posinf": float(info.max if posinf is None else posinf),
             "neginf": float(info.min if neginf is None else neginf)}
    return pointwise(ctx, "NanToNum", [self], self.dtype, attrs, out=ctx.out_dtype)


@register(aten.logit.default, capability=supports("Log", "RealDiv"))
def logit(ctx, self, eps=None):
    """logit(Tensor self, float? eps=None) -> Tensor"""
    # No GE Logit: log(z / (1 - z)), z = clamp(x, eps, 1 - eps) when eps is given.
    cd = need_dtype("Log", ctx.out_dtype)
    z = as_value(ctx, self, cd)
    if eps is not None:
        z = pointwise(ctx, "ClipByValue", [z, eps, 1.0 - eps], cd, suffix="clamp")
    one_minus = pointwise(ctx, "Sub", [1.0, z], cd, suffix="one_minus")
    ratio = pointwise(ctx, "RealDiv", [z, one_minus], cd, suffix="ratio")
    return pointwise(ctx, "Log", [ratio], cd, out=ctx.out_dtype)


def _bessel(ge_type: str):
    def convert(ctx, self):
        # GE has only the scaled Bessel functions: I(x) = Ie(x) * exp(|x|).
        cd = need_dtype(ge_type, ctx.out_dtype)
        x = as_value(ctx, self, cd)
        scaled = pointwise(ctx, ge_type, [x], cd, suffix="scaled")
        growth = pointwise(ctx, "Exp", [pointwise(ctx, "Abs", [x], cd, suffix="abs")], cd,
                           suffix="exp")
        return pointwise(ctx, "Mul", [scaled, growth], cd, out=ctx.out_dtype)
    return convert


register(aten.i0.default, capability=supports("BesselI0e"))(_bessel("BesselI0e"))
register(aten.special_i1.default, capability=supports("BesselI1e"))(_bessel("BesselI1e"))


@register(aten.angle.default, capability=supports("Less", "SelectV2"))
def angle(ctx, self):
    """angle(Tensor self) -> Tensor"""
    # Real inputs only (complex never reaches GE): pi where x < 0, else 0; NaN stays NaN.
    dtype = ctx.out_dtype
    x = as_value(ctx, self, dtype)
    neg = pointwise(ctx, "Less", [x, 0], dtype, y_dtype=torch.bool, suffix="neg")
    y = select(ctx, neg, math.pi, 0.0, dtype, suffix="sel")
    nan = pointwise(ctx, "IsNan", [x], dtype, y_dtype=torch.bool, suffix="nan")
    return select(ctx, nan, x, y, dtype)
