"""Host kernels: GE op semantics implemented with torch CPU kernels, keyed by GE op type.

A kernel is called as ``fn(*inputs, **attrs)``: inputs in prototype order (an unfed
optional input is ``None``, a dynamic input is a list), attrs as decoded Python values
(``Type`` attrs as torch dtypes). It returns a tensor or a tuple of tensors.
"""

from __future__ import annotations

from typing import Callable

KERNELS: dict[str, Callable] = {}
# Op types whose (single-output) kernel also accepts ``out=``: a contiguous tensor of the
# GE output's dtype and shape to write into (the memory plan's workspace slot or the
# user's output buffer) and return.
OUT_KERNELS: set[str] = set()


def kernel(*op_types: str, out: bool = False) -> Callable:
    def deco(fn: Callable) -> Callable:
        for t in op_types:
            if t in KERNELS:
                raise ValueError(f"duplicate host kernel for {t}")
            KERNELS[t] = fn
            if out:
                OUT_KERNELS.add(t)
        return fn
    return deco


from npu_inductor.runtime.kernels import array, elementwise, math  # noqa: E402,F401
from npu_inductor.runtime.kernels import creation, index  # noqa: E402,F401
from npu_inductor.runtime.kernels import fused  # noqa: E402,F401
from npu_inductor.runtime.kernels import nn  # noqa: E402,F401
from npu_inductor.runtime.kernels import collectives  # noqa: E402,F401
from npu_inductor.runtime.kernels import activation, reduction  # noqa: E402,F401
