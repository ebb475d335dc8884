"""aten / npu::* / _c10d_functional FX nodes -> GE IR. Importing registers all converters."""

from npu_inductor.lowering import (  # noqa: F401  (registration)  # noqa: F401  (registration)  # noqa: F401  (registration)  # noqa: F401  (registration)  # noqa: F401  (registration)
           activation,
           attention,
           collectives,  # noqa: F401  (registration)
           conv,
           creation,
           elementwise,
           fused,  # noqa: F401  (registration)
           index,
           linalg,  # noqa: F401  (registration)
           loss,
           matmul,
           nn,
           norm,
           pool,
           reduction,
           shape,
           special,  # noqa: F401  (registration)
           spectral,  # noqa: F401  (registration)
           symbolic,  # noqa: F401  (registration)
           unary,
           vision,
)
from npu_inductor.lowering.lower import LoweredGraph, LoweringError, lower_graph
from npu_inductor.lowering.registry import CONVERTERS, lookup, refusal, register

__all__ = ["CONVERTERS", "LoweredGraph", "LoweringError", "lower_graph", "lookup", "refusal",
           "register"]
