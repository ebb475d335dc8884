"""Running a GE op in float32 when its prototype lacks the operands' low-precision dtype.

Several GE ops (losses, AdaptiveMaxPool2d, GridSampler2D, ...) have no bfloat16 (or no
float16) prototype. Rather than refusing the node, the floating operands are cast to
float32, the op runs there, and floating results are cast back to the FX node's dtypes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.ge import op_specs
from npu_inductor.ge.ir import OutSpec, Value
from npu_inductor.lowering.context import LoweringContext
from npu_inductor.lowering.helpers import cast


def _accepts(ge_type: str, dtype: torch.dtype) -> bool:
    port = op_specs.get_spec(ge_type).inputs[0]
    return port.dtypes is None or dtype in port.dtypes


def op_in_float32(ctx: LoweringContext, ge_type: str, inputs: Sequence[Any],
                  attrs: dict[str, Any] | None = None,
                  out: Sequence[OutSpec] | None = None) -> Any:
    """``ctx.op(ge_type, inputs, attrs, out)`` (``out`` defaults to the FX node's outputs),
    moved to float32 when the first input's dtype is not in the prototype."""
    specs = list(out) if out is not None else ctx.out_specs()
    first = next(v for v in inputs if isinstance(v, Value))
    if _accepts(ge_type, first.dtype):
        return ctx.op(ge_type, inputs, attrs, out=specs)
    up = [cast(ctx, v, torch.float32) if isinstance(v, Value) and v.dtype.is_floating_point
          else v for v in inputs]
    outs = [(torch.float32 if dt.is_floating_point else dt, shape) for dt, shape in specs]
    result = ctx.op(ge_type, up, attrs, out=outs)
    values = result if isinstance(result, tuple) else (result,)
    back = tuple(cast(ctx, v, dt) for v, (dt, _) in zip(values, specs))
    return back if isinstance(result, tuple) else back[0]
