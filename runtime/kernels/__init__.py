"""Host kernels: GE op semantics implemented with torch CPU kernels, keyed by GE op type.

A kernel is called as ``fn(*inputs, **attrs)``: inputs in prototype order (an unfed
optional input is ``None``, a dynamic input is a list), attrs as decoded Python values
(``Type`` attrs as torch dtypes). It returns a tensor or a tuple of tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

KERNELS: dict[str, Callable] = {}
# Op types whose (single-output) kernel also accepts ``out=``: a contiguous tensor of the
# GE output's dtype and shape to write into (the memory plan's workspace slot or the
# user's output buffer) and return.
OUT_KERNELS: set[str] = set()
# Opt-in: multi-output kernels that accept ``out=`` as a tuple with one entry per output, a
# tensor to write that result into or None (the kernel allocates it); they return the tuple
# of results, the given tensors among them. The memory plan then places their planned
# results in the workspace directly instead of copying them there.
MULTI_OUT_KERNELS: set[str] = set()
# Opt-in: op type -> input positions the kernel also accepts as the Python value
# (``tensor.tolist()``) of a Const input, which the generated host executor decodes once at
# load time instead of per call. Such a kernel reads those inputs through ``as_list``.
CONST_INPUTS: dict[str, tuple[int, ...]] = {}
# Opt-in: op type -> ``specialize(consts, attrs)`` run once when a model is loaded, where
# ``consts`` holds, per input position, the decoded value (``tolist()``) of a small Const
# input, ``None`` for an unfed optional input, or ``RUNTIME`` for a value known only when
# the graph runs. It returns a kernel for that one op (same call signature as the generic
# kernel; it may ignore the Const inputs and attrs it has baked in) or ``None`` to keep the
# generic one. This is where per-call Python work (decoding slices, choosing a BLAS entry
# point) moves to load time, as a device's kernel compiler would fix tiling per op.
SPECIALIZERS: dict[str, Callable] = {}


class _Runtime:
    def __repr__(self) -> str:
        return "RUNTIME"


RUNTIME = _Runtime()  # a specializer's marker for an input that is not a (small) Const


def kernel(*op_types: str, out: bool = False, outs: bool = False,
           const_inputs: tuple[int, ...] = (), specialize: Callable | None = None) -> Callable:
    def deco(fn: Callable) -> Callable:
        for t in op_types:
            if t in KERNELS:
                raise ValueError(f"duplicate host kernel for {t}")
            KERNELS[t] = fn
            if out:
                OUT_KERNELS.add(t)
            if outs:
                MULTI_OUT_KERNELS.add(t)
            if const_inputs:
                CONST_INPUTS[t] = const_inputs
            if specialize is not None:
                SPECIALIZERS[t] = specialize
        return fn
    return deco


def as_list(x: Any) -> Any:
    """A const-input value: pre-decoded (list) or a tensor decoded now."""
    return x if isinstance(x, list) else x.tolist()


# importing registers the kernels (after ``kernel`` is defined above)
from npu_inductor.runtime.kernels import (  # noqa: E402,F401
    activation,
    array,
    collectives,
    creation,
    elementwise,
    fused,
    index,
    linalg,
    math,
    nn,
    reduction,
    spectral,
    symbolic,
)
