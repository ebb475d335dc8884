"""aten / npu::* / _c10d_functional FX nodes -> GE IR. Importing registers all converters."""

from npu_inductor.lowering import (  # noqa: F401  (importing registers the converters)
    activation,
    attention,
    collectives,
    conv,
    creation,
    elementwise,
    fused,
    index,
    inplace,
    linalg,
    loss,
    matmul,
    nn,
    norm,
    pool,
    reduction,
    shape,
    special,
    spectral,
    symbolic,
    unary,
    vision,
)
from npu_inductor.lowering.lower import LoweredGraph, LoweringError, lower_graph
from npu_inductor.lowering.registry import CONVERTERS, lookup, refusal, register

__all__ = ["CONVERTERS", "LoweredGraph", "LoweringError", "lower_graph", "lookup", "refusal",
           "register"]
