"""aten / npu::* / _c10d_functional FX nodes -> GE IR. Importing registers all converters."""

from npu_inductor.lowering import elementwise, matmul, shape  # noqa: F401  (registration)
from npu_inductor.lowering import fused  # noqa: F401  (registration)
from npu_inductor.lowering import attention, conv, nn, norm, pool  # noqa: F401  (registration)
from npu_inductor.lowering import collectives  # noqa: F401  (registration)
from npu_inductor.lowering import creation, index  # noqa: F401  (registration)
from npu_inductor.lowering import loss, vision  # noqa: F401  (registration)
from npu_inductor.lowering import activation, reduction, unary  # noqa: F401  (registration)
from npu_inductor.lowering import symbolic  # noqa: F401  (registration)
from npu_inductor.lowering import linalg  # noqa: F401  (registration)
from npu_inductor.lowering import special  # noqa: F401  (registration)
from npu_inductor.lowering import spectral  # noqa: F401  (registration)
from npu_inductor.lowering import inplace  # noqa: F401  (registration)
from npu_inductor.lowering.lower import LoweredGraph, LoweringError, lower_graph
from npu_inductor.lowering.registry import CONVERTERS, lookup, refusal, register

__all__ = ["CONVERTERS", "LoweredGraph", "LoweringError", "lower_graph", "lookup", "refusal",
           "register"]
