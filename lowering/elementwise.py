"""Elementwise converters: arithmetic, comparison, logic, bitwise, where, clamp.

[Note: dtypes of elementwise GE ops]
GE promotes nothing: both operands of ``Add`` must have one dtype, and a dtype missing from
a prototype is rejected. ``pointwise`` therefore (1) casts every operand to the dtype torch
computes in (``promote``: torch's own type promotion, scalars included), (2) widens it when
the prototype lacks that dtype (``bf16 -> f32``, ``int8 -> int32``, ``bool -> uint8``...),
and (3) casts the result to the FX node's dtype. Widening then narrowing is exact for
these ops: a float op rounds once in the narrow type as eager's CPU kernels do, and integer
wrap-around survives the final cast. An op with no usable dtype raises, and the node falls
back to eager.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._ops import OpOverload

from npu_inductor.ge.ir import DYNAMIC_DIM, Value
from npu_inductor.ge.op_specs import OpSpecError, get_spec
from npu_inductor.ge.soc import has_kernel
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.helpers import as_value, cast, promote
from npu_inductor.lowering.registry import register

aten = torch.ops.aten

_WIDER: dict[torch.dtype, tuple[torch.dtype, ...]] = {
    torch.bool: (torch.uint8, torch.int32, torch.int64),
    torch.uint8: (torch.int16, torch.int32, torch.int64),
    torch.int8: (torch.int16, torch.int32, torch.int64),
    torch.int16: (torch.int32, torch.int64),
    torch.int32: (torch.int64,),
    torch.float16: (torch.float32, torch.float64),
    torch.bfloat16: (torch.float32, torch.float64),
    torch.float32: (torch.float64,),
}
_FLOATS = frozenset({torch.float16, torch.float32, torch.bfloat16})
_REALS = _FLOATS | {torch.float64, torch.int8, torch.uint8, torch.int16, torch.int32,
                    torch.int64}
# The reference gives these prototypes symbolic types ("T1"); assume the common subset
# (a narrower guess only costs extra Casts, never an op GE would reject).
_SYMBOLIC_TYPES: dict[str, frozenset[torch.dtype]] = {
    "Mul": _REALS | {torch.complex64, torch.complex128},  # GE Mul also takes complex
    "Pow": _REALS, "GeluV2": _FLOATS, "GeluGradV2": _FLOATS,
    "Gcd": frozenset({torch.int32, torch.int64}),
}


_NON_DATA_PORTS = {"axes", "axis", "dimension", "condition"}  # index inputs, SelectV2's mask


def _port_types(ge_type: str) -> list[frozenset[torch.dtype]]:
    """Allowed dtypes of each data input (axes and masks left out)."""
    return [port.dtypes if port.dtypes is not None
            else _SYMBOLIC_TYPES.get(ge_type, _REALS)
            for port in get_spec(ge_type).inputs if port.name not in _NON_DATA_PORTS]


def compute_dtype(ge_type: str, dtype: torch.dtype) -> torch.dtype | None:
    """``dtype`` if every data input of ``ge_type`` takes it, else the nearest wider dtype
    that they all take (None when there is none)."""
    ports = _port_types(ge_type)
    for candidate in (dtype, *_WIDER.get(dtype, ())):
        if all(candidate in types for types in ports):
            return candidate
    return None


def need_dtype(ge_type: str, dtype: torch.dtype) -> torch.dtype:
    found = compute_dtype(ge_type, dtype)
    if found is None:
        raise OpSpecError(f"GE {ge_type} has no dtype to compute {dtype} in")
    return found


def bshape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """Broadcast shapes that may hold dynamic (-1) dims."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        known = dims - {1, DYNAMIC_DIM}
        out.append(known.pop() if known else (DYNAMIC_DIM if DYNAMIC_DIM in dims else 1))
    return tuple(out)


def pointwise(ctx: LoweringContext, ge_type: str, operands: Sequence[Any], dtype: torch.dtype,
              attrs: dict[str, Any] | None = None, *, out: torch.dtype | None = None,
              y_dtype: torch.dtype | None = None, suffix: str = "") -> Value:
    """``ge_type`` over ``operands`` (Values or scalars) computed in ``dtype`` (widened if
    the prototype needs it). ``y_dtype`` is the op's own output dtype when it differs
    (comparisons: bool); ``out`` casts the result."""
    cd = need_dtype(ge_type, dtype)
    xs = [as_value(ctx, o, cd) for o in operands]
    shape = bshape(*(x.shape for x in xs))
    y = ctx.op(ge_type, xs, attrs, out=(y_dtype or cd, shape), suffix=suffix)
    return y if out is None else cast(ctx, y, out)


def tensor_dtypes(node: torch.fx.Node) -> list[torch.dtype]:
    """dtypes of the node's tensor inputs (from FX meta)."""
    vals = [a.meta.get("val") for a in node.all_input_nodes]
    return [v.dtype for v in vals if isinstance(v, torch.Tensor)]


def supports(*ge_types: str, floats_only: bool = False) -> Callable[[torch.fx.Node], str | None]:
    """Capability: refuse a node whose compute dtype (its output's; its inputs' for bool
    results) some ``ge_type`` lacks even after widening (float64 on float-only ops...).
    ``floats_only``: the converter emits ``ge_types`` only for floating dtypes."""

    def check(node: torch.fx.Node) -> str | None:
        out = node.meta.get("val")
        out = out[0] if isinstance(out, (tuple, list)) else out
        if isinstance(out, torch.Tensor) and out.dtype != torch.bool:
            dtypes = {out.dtype}  # the dtype converters compute in (operands are cast to it)
        else:  # predicates compute in their operands' dtype
            dtypes = set(tensor_dtypes(node))
        # A complex operand cast to a real compute dtype would lose its imaginary part.
        cplx = [d for d in tensor_dtypes(node) if d.is_complex]
        keeps = isinstance(out, torch.Tensor) and (out.dtype.is_complex or out.dtype == torch.bool)
        if cplx and (floats_only or not keeps):
            return f"complex operand {cplx[0]}: the converter computes in a real dtype"
        for ge_type in ge_types:
            bad = [d for d in dtypes if d != torch.bool and compute_dtype(ge_type, d) is None
                   and (d.is_floating_point or not floats_only)]
            if bad:
                return f"GE {ge_type} does not support {bad[0]}"
        return None
    return check


# ---- factories ---------------------------------------------------------------------------
def register_binary(targets: Sequence[OpOverload], ge_type: str) -> None:
    """``target(self, other)`` -> ``ge_type(x1, x2)`` in torch's promoted dtype."""

    @register(*targets, capability=supports(ge_type))
    def convert(ctx, self, other):
        return pointwise(ctx, ge_type, [self, other], promote(self, other), out=ctx.out_dtype)


def register_binary_float(targets: Sequence[OpOverload], ge_type: str) -> None:
    """Binary ops whose result is floating even for integer inputs (true division, atan2)."""

    @register(*targets, capability=supports(ge_type))
    def convert(ctx, self, other):
        return pointwise(ctx, ge_type, [self, other], ctx.out_dtype, out=ctx.out_dtype)


def register_compare(targets: Sequence[OpOverload], ge_type: str) -> None:
    """Comparisons: operands in the promoted dtype, bool result."""

    @register(*targets, capability=supports(ge_type))
    def convert(ctx, self, other):
        return pointwise(ctx, ge_type, [self, other], promote(self, other), y_dtype=torch.bool,
                         out=ctx.out_dtype)


# ---- arithmetic --------------------------------------------------------------------------
def _scaled(ctx: LoweringContext, x: Any, alpha: Any, dtype: torch.dtype) -> Any:
    if alpha == 1:
        return x
    return pointwise(ctx, "Mul", [x, alpha], dtype, suffix="alpha")


# add with alpha != 1 is AxpyV2 (x1 + alpha * x2, one rounding) in these dtypes, as torchair
# lowers it (its aten/add.py); an SGD step's ``p.add_(g, alpha=-lr)`` is one
AXPY_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _add_sub(ge_type: str, reverse: bool = False) -> Callable:
    def convert(ctx, self, other, alpha=1):
        dtype = promote(self, other)
        if ge_type == "Add" and alpha != 1 and dtype in AXPY_DTYPES \
                and isinstance(alpha, (int, float)) and not isinstance(alpha, bool):
            return pointwise(ctx, "AxpyV2", [self, other, alpha], dtype, out=ctx.out_dtype)
        if reverse:  # rsub: other - alpha * self
            self, other = other, self
        return pointwise(ctx, ge_type, [self, _scaled(ctx, other, alpha, dtype)], dtype,
                         out=ctx.out_dtype)
    return convert


register(aten.add.Tensor, aten.add.Scalar, capability=supports("Add"))(_add_sub("Add"))
register(aten.sub.Tensor, aten.sub.Scalar, capability=supports("Sub"))(_add_sub("Sub"))
register(aten.rsub.Tensor, aten.rsub.Scalar, capability=supports("Sub"))(_add_sub("Sub", True))

register_binary([aten.mul.Tensor, aten.mul.Scalar], "Mul")
register_binary_float([aten.div.Tensor, aten.div.Scalar], "RealDiv")
register_binary_float([aten.atan2.default], "Atan2")
register_binary([aten.maximum.default], "Maximum")
register_binary([aten.minimum.default], "Minimum")
register_binary([aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor],
                "FloorMod")
register_binary([aten.fmod.Tensor, aten.fmod.Scalar], "TruncateMod")
register_binary([aten.floor_divide.default, aten.floor_divide.Scalar], "FloorDiv")
register_binary([aten.bitwise_left_shift.Tensor, aten.bitwise_left_shift.Tensor_Scalar,
                 aten.bitwise_left_shift.Scalar_Tensor, aten.__lshift__.Tensor,
                 aten.__lshift__.Scalar], "LeftShift")
register_binary([aten.bitwise_right_shift.Tensor, aten.bitwise_right_shift.Tensor_Scalar,
                 aten.bitwise_right_shift.Scalar_Tensor, aten.__rshift__.Tensor,
                 aten.__rshift__.Scalar], "RightShift")


@register(aten.div.Tensor_mode, aten.div.Scalar_mode,
          capability=supports("FloorDiv", "TruncateDiv"))
def div_mode(ctx, self, other, rounding_mode=None):
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor"""
    if rounding_mode is None:
        return pointwise(ctx, "RealDiv", [self, other], ctx.out_dtype, out=ctx.out_dtype)
    ge_type = "FloorDiv" if rounding_mode == "floor" else "TruncateDiv"
    return pointwise(ctx, ge_type, [self, other], promote(self, other), out=ctx.out_dtype)


@register(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar,
          capability=supports("Pow"))
def pow_(ctx, self, exponent):
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor"""
    dt = ctx.out_dtype
    if isinstance(self, Value) and isinstance(exponent, int) and 0 <= exponent <= 64 \
            and not dt.is_floating_point and not _has(ctx, "Pow", x1=dt):
        return _int_power(ctx, self, exponent)
    return pointwise(ctx, "Pow", [self, exponent], dt, out=dt)


def _has(ctx: LoweringContext, ge_type: str, **ports: torch.dtype) -> bool:
    return ctx.builder.soc is None or has_kernel(ctx.builder.soc, ge_type, **ports)


def _int_power(ctx: LoweringContext, x: Value, n: int) -> Value:
    """x ** n for an integer tensor and a literal n >= 0 by square-and-multiply (the 910B's
    Pow has no int64 kernel); Mul wraps modulo 2^bits as eager's integer pow does."""
    ctx.note("dtype-gate", f"Pow has no {x.dtype} kernel on {ctx.builder.soc}: x ** {n} as Muls")
    dt = ctx.out_dtype
    result: Any = None
    square = cast(ctx, x, dt)
    while n:
        if n & 1:
            result = square if result is None else pointwise(ctx, "Mul", [result, square], dt)
        n >>= 1
        if n:
            square = pointwise(ctx, "Mul", [square, square], dt, suffix="square")
    if result is None:  # x ** 0 == 1, shaped like x
        return pointwise(ctx, "Add", [pointwise(ctx, "Mul", [square, 0], dt), 1], dt)
    return result


@register(aten.clamp_min.default, aten.clamp_min.Tensor, capability=supports("Maximum"))
def clamp_min(ctx, self, min):
    """clamp_min(Tensor self, Scalar min) -> Tensor"""
    return pointwise(ctx, "Maximum", [self, min], ctx.out_dtype, out=ctx.out_dtype)


@register(aten.clamp_max.default, aten.clamp_max.Tensor, capability=supports("Minimum"))
def clamp_max(ctx, self, max):
    """clamp_max(Tensor self, Scalar max) -> Tensor"""
    return pointwise(ctx, "Minimum", [self, max], ctx.out_dtype, out=ctx.out_dtype)


@register(aten.clamp.default, aten.clamp.Tensor,
          capability=supports("ClipByValue", "Maximum", "Minimum"))
def clamp(ctx, self, min=None, max=None):
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"""
    dtype = ctx.out_dtype
    if min is not None and max is not None:
        return pointwise(ctx, "ClipByValue", [self, min, max], dtype, out=dtype)
    if min is not None:
        return pointwise(ctx, "Maximum", [self, min], dtype, out=dtype)
    if max is not None:
        return pointwise(ctx, "Minimum", [self, max], dtype, out=dtype)
    return cast(ctx, self, dtype)


def _nan_select(ctx: LoweringContext, a: Value, b: Value, y: Value) -> Value:
    """Where ``a`` is NaN take ``b``, where ``b`` is NaN take ``a``, else ``y``."""
    b_nan = pointwise(ctx, "IsNan", [b], b.dtype, y_dtype=torch.bool, suffix="b_nan")
    a_nan = pointwise(ctx, "IsNan", [a], a.dtype, y_dtype=torch.bool, suffix="a_nan")
    y = select(ctx, b_nan, a, y, suffix="b_sel")
    return select(ctx, a_nan, b, y, suffix="a_sel")


def _fmax_fmin(ge_type: str) -> Callable:
    def convert(ctx, self, other):
        dtype = promote(self, other)
        if not dtype.is_floating_point:
            return pointwise(ctx, ge_type, [self, other], dtype, out=ctx.out_dtype)
        cd = need_dtype(ge_type, dtype)
        a, b = as_value(ctx, self, cd), as_value(ctx, other, cd)
        y = pointwise(ctx, ge_type, [a, b], cd, suffix="y")
        return cast(ctx, _nan_select(ctx, a, b, y), ctx.out_dtype)
    return convert


# fmax/fmin: no GE op; Maximum/Minimum propagate NaN, so NaN operands are selected around.
register(aten.fmax.default, capability=supports("Maximum", "IsNan", floats_only=True))(
    _fmax_fmin("Maximum"))
register(aten.fmin.default, capability=supports("Minimum", "IsNan", floats_only=True))(
    _fmax_fmin("Minimum"))


@register(aten.hypot.default, capability=supports("Sqrt", "Mul"))
def hypot(ctx, self, other):
    """hypot(Tensor self, Tensor other) -> Tensor"""
    # No GE Hypot: sqrt(a*a + b*b), float32 inputs are far from overflow in practice.
    dtype = ctx.out_dtype
    cd = need_dtype("Sqrt", dtype)
    sq = [pointwise(ctx, "Mul", [x, x], cd, suffix="sq") for x in
          (as_value(ctx, self, cd), as_value(ctx, other, cd))]
    total = pointwise(ctx, "Add", sq, cd, suffix="sum")
    return pointwise(ctx, "Sqrt", [total], cd, out=dtype)


def _logaddexp(base2: bool) -> Callable:
    # No GE LogAddExp: torch's formula max(a, b) + log1p(exp(-|a - b|)) (exp2, then / ln 2
    # for logaddexp2), with a == b == +-inf kept as a.
    def convert(ctx, self, other):
        cd = need_dtype("Log1p", ctx.out_dtype)
        a, b = as_value(ctx, self, cd), as_value(ctx, other, cd)
        m = pointwise(ctx, "Maximum", [a, b], cd, suffix="max")
        d = pointwise(ctx, "Abs", [pointwise(ctx, "Sub", [a, b], cd, suffix="diff")], cd,
                      suffix="abs")
        neg = pointwise(ctx, "Neg", [d], cd, suffix="neg")
        e = pointwise(ctx, "Exp", [neg], cd, {"base": 2.0} if base2 else None, suffix="exp")
        tail = pointwise(ctx, "Log1p", [e], cd, suffix="log1p")
        if base2:
            tail = pointwise(ctx, "Mul", [tail, 1 / math.log(2)], cd, suffix="log2")
        y = pointwise(ctx, "Add", [m, tail], cd, suffix="y")
        same_inf = pointwise(ctx, "LogicalAnd", [
            pointwise(ctx, "Equal", [a, b], cd, y_dtype=torch.bool, suffix="eq"),
            pointwise(ctx, "IsInf", [a], cd, y_dtype=torch.bool, suffix="inf")], torch.bool,
            suffix="same_inf")
        return cast(ctx, select(ctx, same_inf, a, y, suffix="sel"), ctx.out_dtype)
    return convert


_LSE_CAP = supports("Maximum", "Exp", "Log1p")
register(aten.logaddexp.default, capability=_LSE_CAP)(_logaddexp(False))
register(aten.logaddexp2.default, capability=_LSE_CAP)(_logaddexp(True))

for _t, _ge in ((aten.nextafter.default, "NextAfter"), (aten.igamma.default, "Igamma"),
                (aten.igammac.default, "Igammac"), (aten.special_zeta.default, "Zeta"),
                (aten.special_xlog1py.default, "Xlog1py")):
    register_binary_float([_t], _ge)
register_binary([aten.gcd.default], "Gcd")


@register(aten.ldexp.Tensor, capability=supports("Exp", "Mul"))
def ldexp(ctx, self, other):
    """ldexp.Tensor(Tensor self, Tensor other) -> Tensor"""
    # No GE Ldexp: torch's own self * 2 ** other (GE Exp with base 2).
    dtype = ctx.out_dtype
    scale = pointwise(ctx, "Exp", [other], dtype, {"base": 2.0}, suffix="exp2")
    return pointwise(ctx, "Mul", [self, scale], dtype, out=dtype)


@register(aten.lcm.default, capability=supports("Gcd", "TruncateDiv"))
def lcm(ctx, self, other):
    """lcm(Tensor self, Tensor other) -> Tensor"""
    # No GE Lcm: torch's |a / gcd(a, b) * b|, 0 when gcd is 0 (division made safe first).
    dtype = promote(self, other)
    cd = need_dtype("Gcd", dtype)
    a, b = as_value(ctx, self, cd), as_value(ctx, other, cd)
    g = pointwise(ctx, "Gcd", [a, b], cd, suffix="gcd")
    zero = pointwise(ctx, "Equal", [g, 0], cd, y_dtype=torch.bool, suffix="zero")
    safe = select(ctx, zero, 1, g, cd, suffix="safe")
    q = pointwise(ctx, "TruncateDiv", [a, safe], cd, suffix="div")
    y = pointwise(ctx, "Abs", [pointwise(ctx, "Mul", [q, b], cd, suffix="mul")], cd, suffix="abs")
    return cast(ctx, select(ctx, zero, 0, y, cd, suffix="sel"), ctx.out_dtype)


@register(aten.heaviside.default, capability=supports("Greater", "SelectV2"))
def heaviside(ctx, self, values):
    """heaviside(Tensor self, Tensor values) -> Tensor"""
    # No GE op: values where x == 0, else (x > 0) — torch's definition.
    dtype = ctx.out_dtype
    x = as_value(ctx, self, dtype)
    step = cast(ctx, pointwise(ctx, "Greater", [x, 0], dtype, y_dtype=torch.bool, suffix="pos"),
                dtype)
    zero = pointwise(ctx, "Equal", [x, 0], dtype, y_dtype=torch.bool, suffix="zero")
    return select(ctx, zero, values, step, dtype)


def signbit(ctx: LoweringContext, x: Value) -> Value:
    """The IEEE sign bit of floating ``x`` (true for -0.0), as bool."""
    # Bitcast to the same-width integer and test < 0: exact for -0.0 and signed NaNs,
    # where comparisons are not. bf16 widens to f32 first (Bitcast lacks it; Cast keeps sign).
    fdt = x.dtype if x.dtype in (torch.float16, torch.float32, torch.float64) else torch.float32
    idt = {torch.float16: torch.int16, torch.float32: torch.int32, torch.float64: torch.int64}[fdt]
    bits = ctx.op("Bitcast", [cast(ctx, x, fdt)], {"type": idt}, out=(idt, x.shape),
                  suffix="bits")
    return pointwise(ctx, "Less", [bits, 0], idt, y_dtype=torch.bool, suffix="signbit")


@register(aten.signbit.default, capability=supports("Bitcast", floats_only=True))
def signbit_(ctx, self):
    """signbit(Tensor self) -> Tensor"""
    if not self.dtype.is_floating_point:
        return pointwise(ctx, "Less", [self, 0], self.dtype, y_dtype=torch.bool)
    return signbit(ctx, self)


@register(aten.copysign.Tensor, aten.copysign.Scalar, capability=supports("Abs", "Bitcast"))
def copysign(ctx, self, other):
    """copysign.Tensor(Tensor self, Tensor other) -> Tensor"""
    # No GE CopySign: |a| or -|a| by b's sign bit.
    dtype = ctx.out_dtype
    b = as_value(ctx, other, promote(other) if isinstance(other, Value) else dtype)
    if not b.dtype.is_floating_point:
        b = cast(ctx, b, dtype)
    mag = pointwise(ctx, "Abs", [self], dtype, suffix="abs")
    neg = pointwise(ctx, "Neg", [mag], dtype, suffix="neg")
    return select(ctx, signbit(ctx, b), neg, mag, dtype)


@register(aten.xlogy.Tensor, aten.xlogy.Scalar_Other, aten.xlogy.Scalar_Self,
          capability=supports("Xlogy"))
def xlogy(ctx, self, other):
    """xlogy.Tensor(Tensor self, Tensor other) -> Tensor"""
    return pointwise(ctx, "Xlogy", [self, other], ctx.out_dtype, out=ctx.out_dtype)


@register(aten.lerp.Scalar, aten.lerp.Tensor, capability=supports("Lerp"))
def lerp(ctx, self, end, weight):
    """lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor"""
    return pointwise(ctx, "Lerp", [self, end, weight], ctx.out_dtype, out=ctx.out_dtype)


@register(aten.addcmul.default, capability=supports("Addcmul"))
def addcmul(ctx, self, tensor1, tensor2, value=1):
    """addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor"""
    dtype = promote(self, tensor1, tensor2)
    if not dtype.is_floating_point and not _has(ctx, "Addcmul", input_data=dtype):
        # no int64 Addcmul on the 910B: self + value * t1 * t2 as Mul/Add (exact, wrapping)
        prod = pointwise(ctx, "Mul", [pointwise(ctx, "Mul", [tensor1, tensor2], dtype), value],
                         dtype, suffix="scaled")
        return pointwise(ctx, "Add", [self, prod], dtype, out=ctx.out_dtype)
    return pointwise(ctx, "Addcmul", [self, tensor1, tensor2, value], dtype, out=ctx.out_dtype)


# ---- comparison, logic, bitwise ----------------------------------------------------------
for _ops, _ge in (((aten.eq.Tensor, aten.eq.Scalar), "Equal"),
                  ((aten.ne.Tensor, aten.ne.Scalar), "NotEqual"),
                  ((aten.lt.Tensor, aten.lt.Scalar), "Less"),
                  ((aten.le.Tensor, aten.le.Scalar), "LessEqual"),
                  ((aten.gt.Tensor, aten.gt.Scalar), "Greater"),
                  ((aten.ge.Tensor, aten.ge.Scalar), "GreaterEqual")):
    register_compare(_ops, _ge)


def to_bool(ctx: LoweringContext, x: Any) -> Value:
    """Truthiness as GE bool (``Cast`` to bool is ``x != 0``)."""
    return as_value(ctx, x, torch.bool)


def _logical(ge_type: str) -> Callable:
    def convert(ctx, self, other):
        y = ctx.op(ge_type, [to_bool(ctx, self), to_bool(ctx, other)],
                   out=(torch.bool, ctx.out_specs()[0][1]))
        return cast(ctx, y, ctx.out_dtype)
    return convert


def _xor(ctx: LoweringContext, a: Any, b: Any) -> Value:
    # No LogicalXor in GE: a xor b == not (a == b) on bools (NotEqual has no bool).
    eq = ctx.op("Equal", [to_bool(ctx, a), to_bool(ctx, b)],
                out=(torch.bool, ctx.out_specs()[0][1]), suffix="eq")
    return ctx.op("LogicalNot", [eq], out=(torch.bool, eq.shape))


register(aten.logical_and.default)(_logical("LogicalAnd"))
register(aten.logical_or.default)(_logical("LogicalOr"))


@register(aten.logical_xor.default)
def logical_xor(ctx, self, other):
    """logical_xor(Tensor self, Tensor other) -> Tensor"""
    return cast(ctx, _xor(ctx, self, other), ctx.out_dtype)


@register(aten.logical_not.default)
def logical_not(ctx, self):
    """logical_not(Tensor self) -> Tensor"""
    return cast(ctx, ctx.op("LogicalNot", [to_bool(ctx, self)], out=(torch.bool, self.shape)),
                ctx.out_dtype)


def _bitwise(ge_type: str, bool_type: str) -> Callable:
    def convert(ctx, self, other):
        if ctx.out_dtype == torch.bool:
            return _logical(bool_type)(ctx, self, other)
        return pointwise(ctx, ge_type, [self, other], promote(self, other), out=ctx.out_dtype)
    return convert


register(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.bitwise_and.Scalar_Tensor,
         capability=supports("BitwiseAnd"))(_bitwise("BitwiseAnd", "LogicalAnd"))
register(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, aten.bitwise_or.Scalar_Tensor,
         capability=supports("BitwiseOr"))(_bitwise("BitwiseOr", "LogicalOr"))


@register(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.bitwise_xor.Scalar_Tensor,
          capability=supports("BitwiseXor"))
def bitwise_xor(ctx, self, other):
    """bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor"""
    if ctx.out_dtype == torch.bool:
        return _xor(ctx, self, other)
    return pointwise(ctx, "BitwiseXor", [self, other], promote(self, other), out=ctx.out_dtype)


@register(aten.bitwise_not.default, capability=supports("Invert"))
def bitwise_not(ctx, self):
    """bitwise_not(Tensor self) -> Tensor"""
    if self.dtype == torch.bool:
        return ctx.op("LogicalNot", [self])
    soc = ctx.builder.soc
    if soc is None or has_kernel(soc, "Invert", x=self.dtype):
        return pointwise(ctx, "Invert", [self], self.dtype, out=ctx.out_dtype)
    # 910B's Invert is int16 only: ~x == x ^ all-ones, narrow ints in int32 (the result
    # stays in their range, so the Cast back is exact)
    cd = self.dtype if self.dtype in (torch.int32, torch.int64) else torch.int32
    ones = 0xFF if self.dtype == torch.uint8 else -1
    return pointwise(ctx, "BitwiseXor", [self, ones], cd, out=ctx.out_dtype, suffix="xor")


# ---- selection ---------------------------------------------------------------------------
def select(ctx: LoweringContext, cond: Value, a: Any, b: Any, dtype: torch.dtype | None = None,
           suffix: str = "") -> Value:
    """``SelectV2(cond, a, b)`` (broadcasting) in ``dtype`` (default: promoted a, b)."""
    dtype = dtype or promote(a, b)
    cd = need_dtype("SelectV2", dtype)
    xs = [as_value(ctx, v, cd) for v in (a, b)]
    shape = bshape(cond.shape, xs[0].shape, xs[1].shape)
    y = ctx.op("SelectV2", [to_bool(ctx, cond), *xs], out=(cd, shape), suffix=suffix)
    return cast(ctx, y, dtype)


@register(aten.where.self, capability=supports("SelectV2"))
def where_self(ctx, condition, self, other):
    """where.self(Tensor condition, Tensor self, Tensor other) -> Tensor"""
    return select(ctx, condition, self, other, ctx.out_dtype)
