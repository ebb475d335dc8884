"""Elementwise GE ops: arithmetic, comparison, logic, bitwise, selection and unary math.

Inputs arrive already in one dtype (the converters cast operands), so each kernel is one
torch call. A 0-d second operand is passed to torch as a Python scalar where that picks
the same fast path eager uses (``pow(x, 2)`` squares, ``addcmul`` with a scalar value).
"""

from __future__ import annotations

import math

import torch

from npu_inductor.ge.dtypes import from_cpp
from npu_inductor.runtime.kernels import RUNTIME, kernel

_TORCH_FNS = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "RealDiv": torch.div,
    "Maximum": torch.maximum, "Minimum": torch.minimum, "Atan2": torch.atan2,
    "FloorMod": torch.remainder, "TruncateMod": torch.fmod, "Xlogy": torch.xlogy,
    "SquaredDifference": lambda a, b: torch.square(a - b),
    "Equal": torch.eq, "NotEqual": torch.ne, "Less": torch.lt, "LessEqual": torch.le,
    "Greater": torch.gt, "GreaterEqual": torch.ge,
    "LogicalAnd": torch.logical_and, "LogicalOr": torch.logical_or,
    "LogicalNot": torch.logical_not, "BitwiseAnd": torch.bitwise_and,
    "BitwiseOr": torch.bitwise_or, "BitwiseXor": torch.bitwise_xor, "Invert": torch.bitwise_not,
    "LeftShift": torch.bitwise_left_shift, "RightShift": torch.bitwise_right_shift,
    "SelectV2": torch.where, "Lerp": torch.lerp,
    "Neg": torch.neg, "Abs": torch.abs, "Sqrt": torch.sqrt, "Rsqrt": torch.rsqrt,
    "Reciprocal": torch.reciprocal, "Sign": torch.sgn,
    "Erf": torch.erf, "Erfc": torch.erfc, "Erfinv": torch.erfinv,
    "Log1p": torch.log1p, "Expm1": torch.expm1,
    "Sin": torch.sin, "Cos": torch.cos, "Tan": torch.tan, "Asin": torch.asin,
    "Acos": torch.acos, "Atan": torch.atan, "Sinh": torch.sinh, "Cosh": torch.cosh,
    "Asinh": torch.asinh, "Acosh": torch.acosh, "Atanh": torch.atanh,
    "Floor": torch.floor, "Ceil": torch.ceil, "Round": torch.round, "Trunc": torch.trunc,
    "IsNan": torch.isnan, "IsInf": torch.isinf, "IsPosInf": torch.isposinf,
    "IsNegInf": torch.isneginf,
    "Gcd": torch.gcd,
}


def _in_float32(fn):
    """torch's CPU special functions lack fp16/bf16 kernels: compute in f32, round back."""
    def run(*xs):
        dtype = xs[0].dtype
        if dtype not in (torch.float16, torch.bfloat16):
            return fn(*xs)
        return fn(*(x.float() for x in xs)).to(dtype)
    return run


for _name, _fn in {"NextAfter": torch.nextafter, "Igamma": torch.igamma,
                   "Igammac": torch.igammac, "Zeta": torch.special.zeta,
                   "Xlog1py": torch.special.xlog1py, "BesselI0e": torch.special.i0e,
                   "BesselI1e": torch.special.i1e, "Ndtri": torch.special.ndtri}.items():
    kernel(_name)(_in_float32(_fn))

# torch functions with an out= variant: the memory plan hands them their destination
_OUT_OK = {"Add", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Neg", "Abs", "Sqrt", "Rsqrt",
           "Reciprocal", "Erf", "Sin", "Cos"}
for _name, _fn in _TORCH_FNS.items():
    kernel(_name, out=_name in _OUT_OK)(_fn)


@kernel("AxpyV2", out=True)
def axpy_v2(x1, x2, alpha, out=None):
    """x1 + alpha * x2, computed in fp32 for 16-bit floats and rounded once (``torch.add``
    with ``alpha``: eager's ``add(x, y, alpha=a)``)."""
    a = alpha.item() if isinstance(alpha, torch.Tensor) else alpha
    return torch.add(x1, x2, alpha=a, out=out)


@kernel("FloorDiv")
def floor_div(x1, x2):
    return torch.div(x1, x2, rounding_mode="floor")


@kernel("TruncateDiv")
def truncate_div(x1, x2):
    return torch.div(x1, x2, rounding_mode="trunc")


def _specialize_pow(consts, attrs):
    """A constant scalar exponent (x ** 2 of a norm): decoded once, per call eager's
    scalar-exponent ``torch.pow`` (the generic kernel's path for a 0-d exponent)."""
    e = consts[1] if len(consts) > 1 else RUNTIME
    if consts[0] is not RUNTIME or isinstance(e, list) or e is RUNTIME or e is None:
        return None

    def pow_scalar(x1, x2):
        return torch.pow(x1, e) if x1.dim() > 0 else pow_(x1, x2)
    return pow_scalar


@kernel("Pow", specialize=_specialize_pow)
def pow_(x1, x2):
    if x2.dim() == 0 and x1.dim() > 0:
        return torch.pow(x1, x2.item())  # eager's scalar-exponent path (square, sqrt...)
    if x1.dim() == 0 and x2.dim() > 0:
        return torch.pow(x1.item(), x2)
    return torch.pow(x1, x2)


@kernel("Exp")
def exp(x, base=-1.0, scale=1.0, shift=0.0):
    """y = base ** (scale * x + shift); base -1 means e."""
    z = x if scale == 1.0 and shift == 0.0 else x * scale + shift
    if base == -1.0:
        return torch.exp(z)
    return torch.exp2(z) if base == 2.0 else torch.pow(base, z)


@kernel("Log", out=True)
def log(x, base=-1.0, scale=1.0, shift=0.0, out=None):
    """y = log_base(scale * x + shift); base -1 means e (``out``: written there)."""
    z = x if scale == 1.0 and shift == 0.0 else x * scale + shift
    if base == -1.0:
        return torch.log(z, out=out)
    if base in (2.0, 10.0):
        return torch.log2(z, out=out) if base == 2.0 else torch.log10(z, out=out)
    return torch.div(torch.log(z), math.log(base), out=out)


@kernel("ClipByValue")
def clip_by_value(x, clip_value_min, clip_value_max):
    return torch.clamp(x, clip_value_min, clip_value_max)


@kernel("NanToNum")
def nan_to_num(x, nan, posinf, neginf):
    return torch.nan_to_num(x, nan, posinf, neginf)


@kernel("Addcmul")
def addcmul(input_data, x1, x2, value):
    if value.numel() == 1:
        return torch.addcmul(input_data, x1, x2, value=value.item())
    return input_data + value * x1 * x2


@kernel("Cast", out=True)
def cast(x, dst_type, out=None):
    return x.to(from_cpp(dst_type)) if out is None else out.copy_(x)


@kernel("Identity")
def identity(x):
    """A GE tensor is dense: a strided host view (a Transpose result) is made contiguous
    here, once, rather than by each Reshape that reads the Identity (aten.clone lowers to
    it: the backward's ``clone`` of a transposed gradient feeds two Reshapes)."""
    return x if x.is_contiguous() else x.contiguous()
