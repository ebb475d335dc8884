"""The project's op-spec table: every GE op type npu_inductor emits, with its prototype.

``op_specs.json`` beside this file holds the ``REG_OP`` prototypes of the ops we emit,
copied verbatim from ``shared/reference/ge_op_protos.json`` by ``tools/gen_op_specs.py``
(tests check the copy is exact). ``NetOutput`` is a framework op type without a
``REG_OP``; its entry is written by hand. ``check_op`` enforces a spec when an op is
built: unknown op type, unknown attr, wrong attr type, missing required input or attr,
or an input dtype the prototype does not accept are errors at build time.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from npu_inductor.ge.dtypes import from_ge_name

SPEC_FILE = Path(__file__).with_name("op_specs.json")

_IDX = {"DT_INT32", "DT_INT64"}
_FLOATING = {"DT_DOUBLE", "DT_FLOAT", "DT_FLOAT16"}
_UNARY = {"DT_COMPLEX128", "DT_COMPLEX64", "DT_DOUBLE", "DT_FLOAT", "DT_FLOAT16", "DT_BF16",
          "DT_COMPLEX32"}
_REAL = {"DT_DOUBLE", "DT_FLOAT", "DT_FLOAT16", "DT_INT16", "DT_INT32", "DT_INT64", "DT_INT8",
         "DT_UINT16", "DT_UINT32", "DT_UINT64", "DT_UINT8", "DT_BF16"}
_NUMBER = _REAL | {"DT_COMPLEX128", "DT_COMPLEX64", "DT_QINT32", "DT_QINT8", "DT_QUINT8",
                   "DT_COMPLEX32"}
_BASIC = _REAL | {"DT_COMPLEX128", "DT_COMPLEX64", "DT_QINT16", "DT_QINT32", "DT_QINT8",
                  "DT_QUINT16", "DT_QUINT8", "DT_COMPLEX32"}
_INTEGER = {"DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64", "DT_UINT8", "DT_UINT16", "DT_UINT32",
            "DT_UINT64"}
# Named TensorType sets (ge_ir_notes.md §2); None = every type.
_NAMED_SETS: dict[str, set[str] | None] = {
    "ALL": None, "IndexNumberType": _IDX, "FloatingDataType": _FLOATING, "UnaryDataType": _UNARY,
    "RealNumberType": _REAL, "REALNUMBERTYPE": _REAL, "NumberType": _NUMBER, "BasicType": _BASIC,
    "IntegerDataType": _INTEGER,
}

# Attr type -> python types a value may have.
ATTR_PYTYPES: dict[str, tuple[type, ...]] = {
    "Int": (int,), "int": (int,), "Float": (float, int), "Bool": (bool,), "String": (str,),
    "Type": (torch.dtype,), "Tensor": (torch.Tensor,), "ListInt": (list, tuple),
    "ListFloat": (list, tuple), "ListBool": (list, tuple), "ListString": (list, tuple),
    "ListType": (list, tuple), "ListListInt": (list, tuple),
}
_LIST_ELEM = {"ListInt": (int,), "ListFloat": (float, int), "ListBool": (bool,),
              "ListString": (str,), "ListType": (torch.dtype,)}


class OpSpecError(ValueError):
    """An op that its GE prototype would reject."""


@dataclass(frozen=True)
class PortSpec:
    """One input or output of a prototype; ``dtypes`` None means unchecked (any / symbolic)."""

    name: str
    kind: str  # required | optional | dynamic
    dtypes: frozenset[torch.dtype] | None


@dataclass(frozen=True)
class AttrSpec:
    name: str
    type: str
    required: bool
    default: str | None


@dataclass(frozen=True)
class OpSpec:
    type: str
    inputs: tuple[PortSpec, ...]
    outputs: tuple[PortSpec, ...]
    attrs: dict[str, AttrSpec]

    def input(self, name: str) -> PortSpec | None:
        return next((p for p in self.inputs if p.name == name), None)


def parse_types(text: str) -> frozenset[torch.dtype] | None:
    """``TensorType({DT_FLOAT, BasicType()})`` -> allowed torch dtypes, None when unconstrained."""
    if "TensorType" not in text and "DT_" not in text:
        return None  # symbolic ("T1") or malformed in the source header: not checkable
    names: set[str] = set(re.findall(r"DT_[A-Z0-9_]+", text))
    # named sets appear as ``BasicType()`` and, in a few headers, bare:
    # ``TensorType(UnaryDataType)``
    named_sets = set(re.findall(r"([A-Za-z]+)\(\)", text))
    named_sets |= {w for w in re.findall(r"\b([A-Za-z]+)\b", text) if w in _NAMED_SETS}
    for named in named_sets:
        allowed = _NAMED_SETS.get(named)
        if allowed is None:
            return None
        names |= allowed
    dtypes = {from_ge_name(n) for n in names}
    return frozenset(d for d in dtypes if d is not None)


def _port(raw: dict[str, str]) -> PortSpec:
    return PortSpec(raw["name"], raw.get("kind", "required"), parse_types(raw.get("types", "")))


def _spec(op_type: str, raw: dict[str, Any]) -> OpSpec:
    attrs = {a["name"]: AttrSpec(a["name"], a["type"], bool(a.get("required")), a.get("default"))
             for a in raw.get("attrs", [])}
    return OpSpec(op_type, tuple(_port(p) for p in raw.get("inputs", [])),
                  tuple(_port(p) for p in raw.get("outputs", [])), attrs)


@functools.cache
def raw_specs() -> dict[str, dict[str, Any]]:
    """The JSON table as stored (prototype dicts keyed by op type)."""
    return json.loads(SPEC_FILE.read_text())


@functools.cache
def get_spec(op_type: str) -> OpSpec:
    raw = raw_specs().get(op_type)
    if raw is None:
        raise OpSpecError(
            f"GE op type {op_type!r} is not in npu_inductor's op-spec table "
            f"({SPEC_FILE.name}); add it with tools/gen_op_specs.py {op_type}")
    return _spec(op_type, raw)


def check_attr(spec: OpSpec, name: str, value: Any) -> None:
    attr = spec.attrs.get(name)
    if attr is None:
        raise OpSpecError(f"{spec.type}: unknown attr {name!r}; prototype attrs: "
                          f"{sorted(spec.attrs)}")
    if not isinstance(value, ATTR_PYTYPES[attr.type]) or (
            attr.type in ("Int", "int", "Float") and isinstance(value, bool)):
        raise OpSpecError(f"{spec.type}: attr {name!r} must be {attr.type}, got "
                          f"{type(value).__name__} {value!r}")
    elem = _LIST_ELEM.get(attr.type)
    if elem and not all(isinstance(v, elem) and not (bool not in elem and isinstance(v, bool))
                        for v in value):
        raise OpSpecError(f"{spec.type}: attr {name!r} must be {attr.type}, got {value!r}")


def check_attrs(spec: OpSpec, attrs: dict[str, Any]) -> None:
    for name, value in attrs.items():
        check_attr(spec, name, value)
    missing = [a.name for a in spec.attrs.values() if a.required and a.name not in attrs]
    if missing:
        raise OpSpecError(f"{spec.type}: missing required attr(s) {missing}")


def check_input_dtype(spec: OpSpec, port: PortSpec, dtype: torch.dtype | None) -> None:
    if port.dtypes is not None and dtype is not None and dtype not in port.dtypes:
        allowed = sorted(str(d).removeprefix("torch.") for d in port.dtypes)
        raise OpSpecError(f"{spec.type}: input {port.name!r} does not accept {dtype}; "
                          f"prototype allows {allowed}")
