"""Converter registry: one converter per aten overload, keyed by the ``OpOverload``.

    @register(aten.add.Tensor)
    def add_tensor(ctx, self, other, alpha=1):
        '''add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor'''

Arguments arrive bound to the schema's parameter names (Python keywords get a trailing
``_``), with FX nodes already replaced by GE ``Value``s. A ``capability`` check may refuse
a node (returning the reason); refused or unregistered nodes fall back to eager.
"""

from __future__ import annotations

import functools
import keyword
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._ops import OpOverload

Capability = Callable[[torch.fx.Node], "str | None"]


@dataclass(frozen=True)
class ConverterSpec:
    target: OpOverload
    fn: Callable[..., Any]
    capability: Capability | None = None
    dynamic: bool = True  # handles symbolic (-1) dims


CONVERTERS: dict[Any, ConverterSpec] = {}  # aten/npu OpOverloads, and operator.* on SymInts


def register(*targets: OpOverload, capability: Capability | None = None,
             dynamic: bool = True) -> Callable:
    def deco(fn: Callable) -> Callable:
        for target in targets:
            if target in CONVERTERS:
                raise ValueError(f"duplicate converter for {target}")
            CONVERTERS[target] = ConverterSpec(target, fn, capability, dynamic)
        return fn
    return deco


def lookup(target: Any) -> ConverterSpec | None:
    try:
        return CONVERTERS.get(target)
    except TypeError:  # unhashable target
        return None


def refusal(node: torch.fx.Node) -> str | None:
    """Why ``node`` cannot be lowered to GE (None when it can)."""
    spec = lookup(node.target)
    if spec is None:
        return f"no GE converter for {node.target}"
    if spec.capability is not None:
        return spec.capability(node)
    return None


def _py_name(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


_PY_OPERATOR_ARGS = tuple((n, n, False, False, None) for n in ("a", "b", "c"))


@functools.cache
def _schema_args(op: Any) -> tuple[tuple[str, str, bool, bool, Any], ...]:
    if not isinstance(op, OpOverload):  # operator.mul & co on SymInts: (a, b)
        return _PY_OPERATOR_ARGS
    return tuple((a.name, _py_name(a.name), a.kwarg_only, a.has_default_value(),
                  a.default_value if a.has_default_value() else None)
                 for a in op._schema.arguments)


def bind(op: OpOverload, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Bind an FX node's ``args``/``kwargs`` to the schema's parameter names."""
    bound: dict[str, Any] = {}
    for i, (name, py, kwarg_only, has_default, default) in enumerate(_schema_args(op)):
        if not isinstance(op, OpOverload) and i >= len(args):
            break
        if i < len(args) and not kwarg_only:
            bound[py] = args[i]
        elif name in kwargs:
            bound[py] = kwargs[name]
        elif has_default:
            bound[py] = default
        else:
            raise TypeError(f"{op}: missing argument {name!r}")
    return bound
