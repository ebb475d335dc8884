"""Elementwise converters (elementwise.py, unary.py, activation.py): compiled vs eager across
dtypes, torch type promotion, scalar operands and broadcasting; a golden dump."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from harness import check_ge_ops, check_refused

from npu_inductor.ge import format_graph

aten = torch.ops.aten

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
I32, I64, I8, U8, B = torch.int32, torch.int64, torch.int8, torch.uint8, torch.bool
FLOATS = (F32, F16, BF16)
NUMS = FLOATS + (I32, I64)


def make(shape, dtype=F32, low=None, high=None):
    """Random input; ``low``/``high`` bound the values (domains of log, acos...)."""
    if dtype == B:
        return torch.randint(0, 2, shape).bool()
    if not dtype.is_floating_point:
        low = (0 if dtype == U8 else -5) if low is None else int(low)
        return torch.randint(low, 6 if high is None else int(high), shape, dtype=dtype)
    if low is None:
        return torch.randn(shape).to(dtype)
    return (torch.rand(shape) * (high - low) + low).to(dtype)


def tol(dtype):
    # fp16/bf16: one rounding to an 11/8-bit mantissa; composites may round differently.
    return {"rtol": 1e-2, "atol": 1e-2} if dtype in (F16, BF16) else {}


def run(fn, *inputs, ge=(), dtype=F32):
    """Compiled (fallback='error') vs eager; the graph must hold the ``ge`` op types."""
    return check_ge_ops(fn, *inputs, ge=ge, **tol(dtype))


# ---- unary ops: (id, fn, GE op, dtypes, (low, high) input range) -------------------------
POS, UNIT = (0.1, 4.0), (-0.9, 0.9)
UNARY = [
    ("neg", torch.neg, "Neg", NUMS + (I8,), None),
    ("abs", torch.abs, "Abs", NUMS + (I8,), None),
    ("exp", torch.exp, "Exp", FLOATS + (I64, B), None),
    ("exp2", torch.exp2, "Exp", FLOATS + (I32,), None),
    ("expm1", torch.expm1, "Expm1", FLOATS, None),
    ("log", torch.log, "Log", FLOATS + (I64,), POS),
    ("log2", torch.log2, "Log", FLOATS, POS),
    ("log10", torch.log10, "Log", FLOATS, POS),
    ("log1p", torch.log1p, "Log1p", FLOATS, POS),
    ("sqrt", torch.sqrt, "Sqrt", FLOATS + (I32,), POS),
    ("rsqrt", torch.rsqrt, "Rsqrt", FLOATS, POS),
    ("reciprocal", torch.reciprocal, "Reciprocal", FLOATS, POS),
    ("erf", torch.erf, "Erf", FLOATS + (I64,), None),
    ("erfc", torch.erfc, "Erfc", FLOATS, None),
    ("erfinv", torch.erfinv, "Erfinv", FLOATS, UNIT),
    ("sin", torch.sin, "Sin", FLOATS, None),
    ("cos", torch.cos, "Cos", FLOATS, None),
    ("tan", torch.tan, "Tan", FLOATS, UNIT),
    ("asin", torch.asin, "Asin", FLOATS, UNIT),
    ("acos", torch.acos, "Acos", FLOATS, UNIT),
    ("atan", torch.atan, "Atan", FLOATS, None),
    ("sinh", torch.sinh, "Sinh", FLOATS, None),
    ("cosh", torch.cosh, "Cosh", FLOATS, None),
    ("asinh", torch.asinh, "Asinh", FLOATS, None),
    ("acosh", torch.acosh, "Acosh", FLOATS, (1.1, 4.0)),
    ("atanh", torch.atanh, "Atanh", FLOATS, UNIT),
    ("sign", torch.sign, "Sign", NUMS, None),
    ("sgn", torch.sgn, "Sign", (F32,), None),
    ("floor", torch.floor, "Floor", FLOATS, None),
    ("ceil", torch.ceil, "Ceil", FLOATS, None),
    ("trunc", torch.trunc, "Trunc", FLOATS, None),
    ("round", torch.round, "Round", FLOATS, None),
    ("floor_int", torch.floor, "Identity", (I32, I64), None),
    ("round_decimals", lambda x: torch.round(x, decimals=2), "Round", (F32,), None),
    ("round_neg_decimals", lambda x: torch.round(x * 100, decimals=-1), "Round", (F32,), None),
    ("frac", torch.frac, "Trunc", FLOATS, None),
    ("sigmoid", torch.sigmoid, "Sigmoid", FLOATS + (I64,), None),
    ("tanh", torch.tanh, "Tanh", FLOATS, None),
    ("relu", torch.relu, "Relu", NUMS, None),
    ("gelu", F.gelu, "GeluV2", FLOATS, None),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), "GeluV2", FLOATS, None),
    ("silu", F.silu, "Swish", FLOATS, None),
    ("mish", F.mish, "Mish", FLOATS, None),
    ("hardswish", F.hardswish, "HardSwish", FLOATS, (-5.0, 5.0)),
    ("hardsigmoid", F.hardsigmoid, "HardSigmoid", (F32, F16), (-5.0, 5.0)),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.7), "ClipByValue", FLOATS, None),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), "LeakyRelu", FLOATS, None),
    ("elu", lambda x: F.elu(x, 0.7), "Elu", FLOATS, None),
    ("celu", lambda x: F.celu(x, 1.3), "CeluV2", (F32,), None),
    ("softplus", lambda x: F.softplus(x, 2.0, 1.0), "SoftplusV2", FLOATS, None),
    ("threshold", lambda x: F.threshold(x, 0.1, 2.0), "ThresholdV2", (F32, F16, I32), None),
    ("logit", torch.logit, "Log", (F32,), (0.05, 0.95)),
    ("logit_eps", lambda x: torch.logit(x, 0.2), "ClipByValue", (F32,), (0.05, 0.95)),
    ("clamp", lambda x: x.clamp(-0.5, 0.5), "ClipByValue", NUMS, None),
    ("clamp_min", lambda x: x.clamp(min=0.25), "Maximum", FLOATS, None),
    ("clamp_max", lambda x: x.clamp(max=0.25), "Minimum", FLOATS, None),
    ("clamp_min_op", lambda x: aten.clamp_min(x, 1), "Maximum", (F32, I64), None),
    ("clamp_max_op", lambda x: aten.clamp_max(x, 1), "Minimum", (F32, I64), None),
    ("logical_not", torch.logical_not, "LogicalNot", (F32, I64, B), None),
    # the 910B's Invert takes int16/uint16 only: ~x is x ^ -1 (exact) for the others
    ("bitwise_not", torch.bitwise_not, "BitwiseXor", (I32, I64, U8, I8), None),
    ("bitwise_not_bool", torch.bitwise_not, "LogicalNot", (B,), None),
    ("signbit", torch.signbit, "Bitcast", (F32, F16, BF16), None),
    ("signbit_int", torch.signbit, "Less", (I32,), None),
    ("i0", torch.i0, "BesselI0e", (F32, F16), None),
    ("i0e", torch.special.i0e, "BesselI0e", (F32,), None),
    ("i1", torch.special.i1, "BesselI1e", (F32,), None),
    ("i1e", torch.special.i1e, "BesselI1e", (F32,), None),
    ("ndtri", torch.special.ndtri, "Ndtri", (F32,), (0.05, 0.95)),
    ("angle", torch.angle, "SelectV2", (F32, I64), None),
    ("pow_scalar", lambda x: x ** 2, "Pow", NUMS, None),
    ("pow_half", lambda x: x ** 0.5, "Pow", FLOATS + (I64,), (0.0, 4.0)),
    ("rpow", lambda x: 2 ** x, "Pow", FLOATS, (0.0, 4.0)),  # int64: test_int64_rpow_refused
]


# (test, dtype) -> the GE op of the device form where the 910B has no kernel for the natural
# op at that dtype (exact forms: sign as (x > 0) - (x < 0), x ** 2 as Mul, addcmul as Mul/Add)
DEVICE_FORMS = {("sign", I64): "Greater", ("pow_scalar", I64): "Mul", ("addcmul", I64): "Mul"}


@pytest.mark.parametrize("name,fn,ge,dtypes,rng", UNARY, ids=[c[0] for c in UNARY])
def test_unary(name, fn, ge, dtypes, rng):
    for dtype in dtypes:
        low, high = rng or (None, None)
        run(fn, make((3, 4), dtype, low, high), ge=DEVICE_FORMS.get((name, dtype), ge),
            dtype=dtype)


@pytest.mark.fallback("int64 scalar ** tensor is refused by the 910B dtype gate")
def test_int64_rpow_refused():
    # no int64 Pow kernel on the 910B; its exact form (square-and-multiply over all 63
    # exponent bits) is not built, and a float Pow would round large powers
    check_refused(lambda x: 3 ** x, torch.tensor([0, 1, 5, 40]), ops="aten.pow.Scalar",
                  dtype="INT64")


def test_float_tests_handle_inf_and_nan():
    x = torch.tensor([1.0, float("inf"), -float("inf"), float("nan"), 0.0, -2.0])
    for fn, ge in ((torch.isnan, "IsNan"), (torch.isinf, "IsInf"),
                   (torch.isposinf, "IsPosInf"), (torch.isneginf, "IsNegInf")):
        run(fn, x, ge=ge)
        run(fn, x.half(), ge=ge, dtype=F16)
        run(fn, torch.arange(4), ge="Equal")  # integers: constant answer, shaped like x


def test_nan_to_num():
    x = torch.tensor([1.0, float("inf"), -float("inf"), float("nan")])
    run(torch.nan_to_num, x, ge="NanToNum")
    run(lambda t: torch.nan_to_num(t, 1.0, 2.0, -3.0), x.half(), ge="NanToNum", dtype=F16)
    run(torch.nan_to_num, torch.arange(3), ge="Identity")


# ---- binary ops ----------------------------------------------------------------------
BINARY = [
    ("add", torch.add, "Add", NUMS + (I8, U8, B)),
    ("add_alpha", lambda a, b: torch.add(a, b, alpha=3), "AxpyV2", FLOATS),
    ("add_alpha_frac", lambda a, b: torch.add(a, b, alpha=-0.37), "AxpyV2", FLOATS),
    ("add_alpha_int", lambda a, b: torch.add(a, b, alpha=3), "Add", (I32, I64)),
    ("sub", torch.sub, "Sub", NUMS + (I8,)),
    ("sub_alpha", lambda a, b: torch.sub(a, b, alpha=0.5), "Sub", FLOATS),
    ("rsub", lambda a, b: torch.rsub(a, b, alpha=2), "Sub", (F32, I32)),
    ("mul", torch.mul, "Mul", NUMS + (I8, B)),
    ("div", torch.div, "RealDiv", NUMS),
    ("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), "FloorDiv", NUMS),
    ("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), "TruncateDiv",
     (F32, F16, I32, I64)),
    ("floor_divide", torch.floor_divide, "FloorDiv", (F32, I64)),
    ("remainder", torch.remainder, "FloorMod", (F32, F16, I32, I64)),
    ("fmod", torch.fmod, "TruncateMod", (F32, F16, BF16, I32, I64)),
    ("pow", lambda a, b: torch.pow(a.abs() + 0.5, b), "Pow", FLOATS),
    ("maximum", torch.maximum, "Maximum", NUMS + (B, I8)),
    ("minimum", torch.minimum, "Minimum", NUMS + (B,)),
    ("fmax", torch.fmax, "Maximum", (F32, F16, I64)),
    ("fmin", torch.fmin, "Minimum", (F32, BF16, I32)),
    ("atan2", torch.atan2, "Atan2", FLOATS + (I64,)),
    ("hypot", torch.hypot, "Sqrt", FLOATS),
    ("logaddexp", torch.logaddexp, "Log1p", FLOATS),
    ("xlogy", lambda a, b: torch.xlogy(a, b.abs() + 0.1), "Xlogy", (F32, F16)),
    ("clamp_tensor", lambda a, b: torch.clamp(a, b - 1, b + 1), "ClipByValue", (F32, I64)),
    ("clamp_min_tensor", lambda a, b: torch.clamp(a, min=b), "Maximum", (F32, I64)),
    ("eq", torch.eq, "Equal", NUMS + (B,)),
    ("ne", torch.ne, "NotEqual", NUMS + (B,)),
    ("lt", torch.lt, "Less", NUMS + (B,)),
    ("le", torch.le, "LessEqual", NUMS),
    ("gt", torch.gt, "Greater", NUMS),
    ("ge", torch.ge, "GreaterEqual", NUMS),
    ("logical_and", torch.logical_and, "LogicalAnd", (F32, I64, B)),
    ("logical_or", torch.logical_or, "LogicalOr", (F32, B)),
    ("logical_xor", torch.logical_xor, "LogicalNot", (F32, I32, B)),
    ("bitwise_and", torch.bitwise_and, "BitwiseAnd", (I32, I64, U8)),
    ("bitwise_or", torch.bitwise_or, "BitwiseOr", (I32, I64, I8)),
    ("bitwise_xor", torch.bitwise_xor, "BitwiseXor", (I32, I64)),
    ("bitwise_and_bool", torch.bitwise_and, "LogicalAnd", (B,)),
    ("bitwise_or_bool", torch.bitwise_or, "LogicalOr", (B,)),
    ("bitwise_xor_bool", torch.bitwise_xor, "LogicalNot", (B,)),
    ("lshift", lambda a, b: a << b.abs(), "LeftShift", (I32, I64)),
    ("rshift", lambda a, b: a >> b.abs(), "RightShift", (I32, I64)),
    ("where", lambda a, b: torch.where(a > b, a, b), "SelectV2", NUMS + (B,)),
    ("logaddexp2", torch.logaddexp2, "Log1p", (F32, F16)),
    ("nextafter", torch.nextafter, "NextAfter", (F32,)),
    ("igamma", lambda a, b: torch.igamma(a.abs() + 0.5, b.abs()), "Igamma", (F32,)),
    ("igammac", lambda a, b: torch.igammac(a.abs() + 0.5, b.abs()), "Igammac", (F32,)),
    ("zeta", lambda a, b: torch.special.zeta(a.abs() + 2, b.abs() + 1), "Zeta", (F32,)),
    ("xlog1py", lambda a, b: torch.special.xlog1py(a, b.abs()), "Xlog1py", (F32, F16)),
    ("gcd", torch.gcd, "Gcd", (I32, I64)),
    ("ldexp", lambda a, b: torch.ldexp(a, b.round()), "Exp", (F32, F16)),
    ("lcm", torch.lcm, "Gcd", (I32, I64)),
    ("heaviside", lambda a, b: torch.heaviside(a * (a > 0.5), b), "SelectV2", (F32, I64)),
    ("copysign", torch.copysign, "Bitcast", (F32, BF16, I64)),
    ("lerp", lambda a, b: torch.lerp(a, b, 0.3), "Lerp", FLOATS),
    ("lerp_tensor", lambda a, b: torch.lerp(a, b, b.sigmoid()), "Lerp", (F32,)),
    ("addcmul", lambda a, b: torch.addcmul(a, b, a, value=0.5), "Addcmul", (F32, F16, I64)),
]


def _nonzero(t):
    return torch.where(t == 0, torch.ones_like(t), t)


@pytest.mark.parametrize("name,fn,ge,dtypes", BINARY, ids=[c[0] for c in BINARY])
def test_binary_broadcast(name, fn, ge, dtypes):
    for dtype in dtypes:
        a, b = make((2, 3, 4), dtype), _nonzero(make((3, 1), dtype))  # broadcast both ways
        run(fn, a, b, ge=DEVICE_FORMS.get((name, dtype), ge), dtype=dtype)


SCALAR = [
    ("add", lambda x: x + 2, "Add"), ("add_float", lambda x: x + 2.5, "Add"),
    ("radd", lambda x: 1.5 + x, "Add"), ("sub", lambda x: x - 3, "Sub"),
    ("rsub", lambda x: 1 - x, "Sub"), ("mul", lambda x: x * 0.5, "Mul"),
    ("div", lambda x: x / 4, "RealDiv"), ("rdiv", lambda x: 2 / _nonzero(x), "Reciprocal"),
    ("floordiv", lambda x: x // 2, "FloorDiv"), ("mod", lambda x: x % 3, "FloorMod"),
    ("fmod", lambda x: torch.fmod(x, 2), "TruncateMod"), ("eq", lambda x: x == 1, "Equal"),
    ("ne", lambda x: x != 1, "NotEqual"), ("lt", lambda x: x < 0.5, "Less"),
    ("le", lambda x: x <= 0, "LessEqual"), ("gt", lambda x: x > 0, "Greater"),
    ("ge", lambda x: x >= 1, "GreaterEqual"), ("max", lambda x: torch.maximum(x, x * 2), "Maximum"),
]


@pytest.mark.parametrize("name,fn,ge", SCALAR, ids=[c[0] for c in SCALAR])
def test_scalar_operand(name, fn, ge):
    for dtype in (F32, BF16, I64, I32):
        run(fn, make((2, 5), dtype), ge=ge, dtype=dtype)


# Overloads Dynamo never emits from Python operators but decompositions and direct calls do.
OVERLOADS = [
    ("add_scalar", lambda x, i: aten.add.Scalar(x, 2), "Add"),
    ("sub_scalar", lambda x, i: aten.sub.Scalar(i, 2), "Sub"),
    ("mul_scalar", lambda x, i: aten.mul.Scalar(x, 0.5), "Mul"),
    ("div_scalar", lambda x, i: aten.div.Scalar(i, 2), "RealDiv"),
    ("div_scalar_mode", lambda x, i: aten.div.Scalar_mode(i, 2, rounding_mode="floor"),
     "FloorDiv"),
    ("floor_divide_scalar", lambda x, i: aten.floor_divide.Scalar(x, 0.3), "FloorDiv"),
    ("remainder_scalar_tensor", lambda x, i: aten.remainder.Scalar_Tensor(7, i + 1), "FloorMod"),
    ("and_scalar", lambda x, i: aten.bitwise_and.Scalar(i, 3), "BitwiseAnd"),
    ("and_scalar_tensor", lambda x, i: aten.bitwise_and.Scalar_Tensor(3, i), "BitwiseAnd"),
    ("or_scalar", lambda x, i: aten.bitwise_or.Scalar(i, 3), "BitwiseOr"),
    ("or_scalar_tensor", lambda x, i: aten.bitwise_or.Scalar_Tensor(3, i), "BitwiseOr"),
    ("xor_scalar", lambda x, i: aten.bitwise_xor.Scalar(i, 3), "BitwiseXor"),
    ("xor_scalar_tensor", lambda x, i: aten.bitwise_xor.Scalar_Tensor(3, i), "BitwiseXor"),
    ("lshift_scalar", lambda x, i: aten.__lshift__.Scalar(i, 2), "LeftShift"),
    ("rshift_scalar", lambda x, i: aten.__rshift__.Scalar(i, 1), "RightShift"),
    ("left_shift", lambda x, i: aten.bitwise_left_shift.Tensor(i, i), "LeftShift"),
    ("left_shift_ts", lambda x, i: aten.bitwise_left_shift.Tensor_Scalar(i, 3), "LeftShift"),
    ("left_shift_st", lambda x, i: aten.bitwise_left_shift.Scalar_Tensor(1, i), "LeftShift"),
    ("right_shift", lambda x, i: aten.bitwise_right_shift.Tensor(i * 8, i), "RightShift"),
    ("right_shift_ts", lambda x, i: aten.bitwise_right_shift.Tensor_Scalar(i, 1), "RightShift"),
    ("right_shift_st", lambda x, i: aten.bitwise_right_shift.Scalar_Tensor(64, i),
     "RightShift"),
    ("clamp_max_tensor", lambda x, i: aten.clamp_max.Tensor(x, x.flip(0)), "Minimum"),
    ("clamp_min_tensor", lambda x, i: aten.clamp_min.Tensor(i, i.flip(1)), "Maximum"),
    ("xlogy_scalar_other", lambda x, i: aten.xlogy.Scalar_Other(x, 2.0), "Xlogy"),
    ("xlogy_scalar_self", lambda x, i: aten.xlogy.Scalar_Self(2.0, x.abs() + 0.1), "Xlogy"),
]


@pytest.mark.parametrize("name,fn,ge", OVERLOADS, ids=[c[0] for c in OVERLOADS])
def test_direct_overloads(name, fn, ge):
    run(fn, make((3, 4)), make((3, 4), I64, 0, 4), ge=ge)


PROMOTION = [  # (a dtype, b dtype) -> torch's result type, computed by GE in that dtype
    (I32, F32), (I64, F16), (F16, F32), (BF16, F16), (B, I32), (U8, I8), (I8, I64), (B, F32),
]


@pytest.mark.parametrize("da,db", PROMOTION, ids=[f"{a}-{b}" for a, b in PROMOTION])
def test_mixed_dtype_promotion(da, db):
    a, b = make((3, 4), da), _nonzero(make((4,), db))
    dt = torch.result_type(a, b)
    run(lambda x, y: (x + y, x * y, x - y if B not in (da, db) else x + y, x / y, x < y,
                      torch.where(x > 0, x, y)), a, b, ge=("Add", "Mul", "RealDiv"), dtype=dt)


def test_zero_dim_tensor_operand_does_not_promote():
    # A 0-d float64 tensor does not lift a float32 tensor's dtype; an int tensor's it does.
    s = torch.tensor(1.5, dtype=torch.float64)
    run(lambda x, y: x * y, make((3,), F32), s, ge="Mul")
    run(lambda x, y: x + y, make((3,), I64), s, ge="Add")


def test_int_overflow_wraps_like_eager():
    # int8 is widened (GE's Neg/Mul lack it) and cast back: wrap-around must survive.
    x = torch.tensor([-128, 127, 100, -3], dtype=I8)
    run(lambda t: (-t, t * 3, t + 100), x, ge=("Neg", "Mul", "Add"))


def test_signbit_and_copysign_see_negative_zero():
    x = torch.tensor([0.0, -0.0, 1.0, -2.0, float("inf"), -float("inf")])
    run(lambda t: (torch.signbit(t), torch.copysign(torch.ones_like(t) * 3, t),
                   torch.copysign(t, -1.0)), x, ge="Bitcast")


def test_fmax_fmin_ignore_nan():
    a = torch.tensor([1.0, float("nan"), 3.0, -2.0])
    b = torch.tensor([2.0, 0.5, float("nan"), -1.0])  # NaN vs NaN: assert_close rejects
    run(lambda x, y: (torch.fmax(x, y), torch.fmin(x, y)), a, b,
        ge=("IsNan", "SelectV2"))


def test_logaddexp_infinities():
    a = torch.tensor([-float("inf"), float("inf"), 0.0, 30.0])
    b = torch.tensor([-float("inf"), float("inf"), -float("inf"), -30.0])
    run(torch.logaddexp, a, b, ge="Log1p")


# ---- backward ops called directly -----------------------------------------------------
BACKWARD = [
    ("sigmoid_backward", lambda g, x: aten.sigmoid_backward(g, x.sigmoid()), "Mul"),
    ("tanh_backward", lambda g, x: aten.tanh_backward(g, x.tanh()), "TanhGrad"),
    ("threshold_backward", lambda g, x: aten.threshold_backward(g, x, 0.1), "SelectV2"),
    ("gelu_backward", lambda g, x: aten.gelu_backward(g, x), "GeluGradV2"),
    ("gelu_backward_tanh", lambda g, x: aten.gelu_backward(g, x, approximate="tanh"),
     "GeluGradV2"),
    ("silu_backward", lambda g, x: aten.silu_backward(g, x), "SwishGrad"),
    ("hardtanh_backward", lambda g, x: aten.hardtanh_backward(g, x, -0.5, 0.5), "HardtanhGrad"),
    ("leaky_relu_backward", lambda g, x: aten.leaky_relu_backward(g, x, 0.1, False),
     "LeakyReluGrad"),
    ("hardsigmoid_backward", lambda g, x: aten.hardsigmoid_backward(g, x * 4),
     "HardSigmoidGrad"),
    ("hardswish_backward", lambda g, x: aten.hardswish_backward(g, x * 4), "HardSwishGrad"),
    ("softplus_backward", lambda g, x: aten.softplus_backward(g, x, 1.5, 2.0), "SoftplusV2Grad"),
    ("hardshrink_backward", lambda g, x: aten.hardshrink_backward(g, x, 0.3), "HardShrinkGrad"),
    ("softshrink_backward", lambda g, x: aten.softshrink_backward(g, x, 0.3), "SoftShrinkGrad"),
    ("elu_backward", lambda g, x: aten.elu_backward(g, 0.7, 1.2, 0.9, False, x), "EluGradV2"),
    ("elu_backward_result", lambda g, x: aten.elu_backward(g, 0.7, 1.2, 0.9, True, F.elu(x)),
     "EluGradV2"),
    ("mish_backward", lambda g, x: aten.mish_backward(g, x), "MishGrad"),
    ("log_sigmoid_backward",
     lambda g, x: aten.log_sigmoid_backward(g, x, aten.log_sigmoid_forward(x)[1]),
     "LogSigmoidGrad"),
]


@pytest.mark.parametrize("name,fn,ge", BACKWARD, ids=[c[0] for c in BACKWARD])
def test_backward_ops(name, fn, ge):
    for dtype in (F32, F16):
        run(fn, make((3, 4), dtype), make((3, 4), dtype), ge=ge, dtype=dtype)


def test_activation_gradients_through_autograd():
    x = torch.randn(4, 5, requires_grad=True)

    def fn(t):
        y = F.gelu(t) + F.silu(t) + torch.sigmoid(t) * torch.tanh(t) + F.leaky_relu(t)
        return torch.autograd.grad(y.sum(), t, create_graph=False)[0]

    torch._dynamo.reset()
    expected = fn(x)
    actual = torch.compile(fn, backend="npu")(x)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


# ---- golden --------------------------------------------------------------------------
GOLDEN = """\
graph "inference_N":
  %arg0_1 = Data()[index=0] -> f32[3, 4]
  %arg1_1 = Data()[index=1] -> i64[4]
  %relu = Relu(%arg0_1) -> f32[3, 4]
  %mul_const = Const()[value=f32[]{2}] -> f32[]
  %mul = Mul(%relu, %mul_const) -> f32[3, 4]
  %add_cast = Cast(%arg1_1)[dst_type=0] -> f32[4]
  %add = Add(%mul, %add_cast) -> f32[3, 4]
  return (%add)
"""


def test_golden_relu_mul_add():
    graphs = run(lambda x, y: torch.relu(x) * 2 + y, make((3, 4)), make((4,), I64))
    text = format_graph(graphs[0].lowered.graph)
    assert text.replace(graphs[0].lowered.graph.name, "inference_N") == GOLDEN
