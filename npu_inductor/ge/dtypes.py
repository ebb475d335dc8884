"""torch dtypes and GE's two dtype numberings.

GE numbers dtypes twice (see shared/reference/ge_ir_notes.md §1.1-1.2): the protobuf enum
``ge.proto.DataType`` is used only in ``TensorDescriptor.dtype``; the C++ ``ge::DataType``
enum is used in attribute values (``Cast.dst_type``, ``AttrDef.dt``) and in ACL calls.
"""

from __future__ import annotations

import torch

# torch dtype -> (proto enum, C++ ge::DataType / aclDataType, GE name)
_TABLE: tuple[tuple[torch.dtype, int, int, str], ...] = (
    (torch.float32, 1, 0, "DT_FLOAT"),
    (torch.float16, 2, 1, "DT_FLOAT16"),
    (torch.int8, 3, 2, "DT_INT8"),
    (torch.uint8, 4, 4, "DT_UINT8"),
    (torch.int16, 5, 6, "DT_INT16"),
    (torch.uint16, 6, 7, "DT_UINT16"),
    (torch.int32, 7, 3, "DT_INT32"),
    (torch.int64, 8, 9, "DT_INT64"),
    (torch.uint32, 9, 8, "DT_UINT32"),
    (torch.uint64, 10, 10, "DT_UINT64"),
    (torch.bool, 11, 12, "DT_BOOL"),
    (torch.float64, 12, 11, "DT_DOUBLE"),
    (torch.complex64, 16, 16, "DT_COMPLEX64"),
    (torch.complex128, 17, 17, "DT_COMPLEX128"),
    (torch.bfloat16, 27, 27, "DT_BF16"),
    (torch.complex32, 32, 33, "DT_COMPLEX32"),
    (torch.float8_e5m2, 34, 35, "DT_FLOAT8_E5M2"),
    (torch.float8_e4m3fn, 35, 36, "DT_FLOAT8_E4M3FN"),
)

PROTO_UNDEFINED = 0
CPP_UNDEFINED = 28

_TO_PROTO = {t: p for t, p, _, _ in _TABLE}
_FROM_PROTO = {p: t for t, p, _, _ in _TABLE}
_TO_CPP = {t: c for t, _, c, _ in _TABLE}
_FROM_CPP = {c: t for t, _, c, _ in _TABLE}
_TO_NAME = {t: n for t, _, _, n in _TABLE}
_FROM_NAME = {n: t for t, _, _, n in _TABLE}
# spellings some REG_OP headers use besides the enum names
_FROM_NAME.update({"DT_FLOAT32": torch.float32, "DT_FP32": torch.float32,
                   "DT_HALF": torch.float16, "DT_FP16": torch.float16,
                   "DT_BFLOAT16": torch.bfloat16, "DT_FLOAT64": torch.float64,
                   "DT_COMPLEXT64": torch.complex64, "DT_FP8_E5M2": torch.float8_e5m2,
                   "DT_FP8_E4M3FN": torch.float8_e4m3fn})


class UnsupportedDtypeError(TypeError):
    """A torch dtype that GE has no number for."""


def to_proto(dtype: torch.dtype) -> int:
    """torch dtype -> ``ge.proto.DataType`` (TensorDescriptor.dtype)."""
    try:
        return _TO_PROTO[dtype]
    except KeyError:
        raise UnsupportedDtypeError(f"GE has no DataType for {dtype}") from None


def from_proto(value: int) -> torch.dtype | None:
    """``ge.proto.DataType`` -> torch dtype (None for DT_UNDEFINED)."""
    return None if value == PROTO_UNDEFINED else _FROM_PROTO[value]


def to_cpp(dtype: torch.dtype) -> int:
    """torch dtype -> C++ ``ge::DataType`` (attr values such as Cast.dst_type, aclDataType)."""
    try:
        return _TO_CPP[dtype]
    except KeyError:
        raise UnsupportedDtypeError(f"GE has no DataType for {dtype}") from None


def from_cpp(value: int) -> torch.dtype:
    """C++ ``ge::DataType`` -> torch dtype."""
    return _FROM_CPP[value]


def ge_name(dtype: torch.dtype) -> str:
    """torch dtype -> GE name such as ``DT_FLOAT16``."""
    return _TO_NAME[dtype]


def from_ge_name(name: str) -> torch.dtype | None:
    """GE name such as ``DT_BF16`` -> torch dtype (None when torch has no such dtype)."""
    return _FROM_NAME.get(name)


SHORT_NAMES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
    torch.uint8: "u8", torch.bool: "b8", torch.complex64: "c64", torch.complex128: "c128",
}


def short_name(dtype: torch.dtype | None) -> str:
    """Compact dtype name used in readable dumps (``f32``)."""
    return "?" if dtype is None else SHORT_NAMES.get(dtype, str(dtype).removeprefix("torch."))
