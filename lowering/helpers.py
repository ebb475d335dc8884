"""GE-building helpers shared by converters: casts, constants, type promotion, axes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.ge import dtypes
from npu_inductor.ge.ir import DYNAMIC_DIM, Value
from npu_inductor.ge.op_specs import OpSpecError
from npu_inductor.lowering.context import LoweringContext, static_shape


def cast(ctx: LoweringContext, v: Value, dtype: torch.dtype) -> Value:
    """``Cast`` to ``dtype`` (no-op when already there)."""
    if v.dtype == dtype:
        return v
    via = _cast_route(ctx, v, dtype)
    if via is not None:
        ctx.note("dtype-gate", f"Cast {dtypes.short_name(v.dtype)}->{dtypes.short_name(dtype)}"
                 f" has no AI Core kernel on {ctx.builder.soc}: cast through "
                 f"{dtypes.short_name(via)}", "cast")
        v = _cast(ctx, v, via)
    return _cast(ctx, v, dtype)


def _cast(ctx: LoweringContext, v: Value, dtype: torch.dtype) -> Value:
    return ctx.op("Cast", [v], {"dst_type": dtypes.to_cpp(dtype)}, out=(dtype, v.shape),
                  suffix="cast")


# exact intermediates for a Cast pair the AI Core kernel lacks (tried in order)
_CAST_VIA = (torch.float32, torch.int32)


def _cast_kind(ctx: LoweringContext, v: Value, dtype: torch.dtype) -> str | None:
    try:
        return ctx.builder.kernel_kind("Cast", [v], [(dtype, v.shape)])
    except OpSpecError:
        return None


def _cast_route(ctx: LoweringContext, v: Value, dtype: torch.dtype) -> torch.dtype | None:
    """An intermediate dtype when the SoC's AI Core Cast kernel lacks ``v.dtype -> dtype``
    but has both legs through it (None: cast directly)."""
    if ctx.builder.soc is None or _cast_kind(ctx, v, dtype) in ("aicore", "unproven"):
        return None
    for via in _CAST_VIA:
        if via in (v.dtype, dtype) or not _widens(v.dtype, via):
            continue
        mid = Value(v.op, v.index, via, v.shape)
        if _cast_kind(ctx, v, via) == "aicore" and _cast_kind(ctx, mid, dtype) == "aicore":
            return via
    return None


def _widens(src: torch.dtype, via: torch.dtype) -> bool:
    """Whether every ``src`` value survives the trip through ``via`` exactly."""
    if src == torch.bool:
        return True
    if via.is_floating_point:
        return src in (torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16)
    return not src.is_floating_point and src.itemsize < via.itemsize


def as_value(ctx: LoweringContext, x: Any, dtype: torch.dtype) -> Value:
    """A tensor operand in ``dtype``: casts a ``Value``, makes a scalar ``Const`` otherwise."""
    return cast(ctx, x, dtype) if isinstance(x, Value) else ctx.const(x, dtype)


def _proxy(x: Any) -> Any:
    if isinstance(x, Value):
        return torch.empty((1,) * min(x.rank, 1), dtype=x.dtype)
    return x


def promote(*args: Any) -> torch.dtype:
    """The dtype torch's type promotion gives for these operands (Values or scalars)."""
    result = _proxy(args[0])
    dtype = result.dtype if isinstance(result, torch.Tensor) else None
    if len(args) == 1:
        return dtype or torch.get_default_dtype()
    dtype = torch.result_type(_proxy(args[0]), _proxy(args[1]))
    for a in args[2:]:
        dtype = torch.result_type(torch.empty((1,), dtype=dtype), _proxy(a))
    return dtype


def norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def norm_axes(axes: Sequence[int] | None, rank: int) -> list[int]:
    if axes is None or len(axes) == 0:
        return list(range(rank))
    return sorted(norm_axis(a, rank) for a in axes)


def int_list(ctx: LoweringContext, values: Sequence[int], suffix: str = "shape") -> Value:
    """An int64 1-D ``Const`` (shapes, axes, perms for GE's const-input ops). In a graph
    with dynamic dims, a shape holding ``-1`` dims is rebuilt at run time from the symbolic
    sizes (see ``lowering/symbolic.py``): pass axes and perms normalised (non-negative), as
    a literal ``-1`` there would read as a dynamic dim."""
    values = [int(v) for v in values]
    if DYNAMIC_DIM in values and has_dynamic_dims(ctx):
        from npu_inductor.lowering.symbolic import dynamic_shape

        return dynamic_shape(ctx, values, suffix)
    return ctx.const(torch.tensor(values, dtype=torch.int64), torch.int64, suffix)


def has_dynamic_dims(ctx: LoweringContext) -> bool:
    """Whether the FX node being lowered has symbolic sizes in its output."""
    vals = ctx.meta if isinstance(ctx.meta, (tuple, list)) else (ctx.meta,)
    return any(isinstance(v, torch.Tensor) and DYNAMIC_DIM in static_shape(v.shape)
               for v in vals)


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    return tuple(torch.broadcast_shapes(*[torch.Size(s) for s in shapes]))


def checked(ctx: LoweringContext, value: Value, ok: Value, data: Sequence[Value],
            suffix: str) -> Value:
    """``value`` guarded by GE ``Assert(ok, data)``: a control edge from the Assert into an
    ``Identity`` of ``value`` keeps the check alive and ordered before every reader, so a
    false ``ok`` stops the graph with an error (where eager raises) instead of returning."""
    ctx.op("Assert", [ok, list(data)], {"summarize": 3}, out=[], suffix=suffix)
    check = ctx.builder.last_op
    return ctx.builder.op("Identity", ctx.name(f"{suffix}_ok"), [value], {},
                          [(value.dtype, value.shape)], control=[check])[0]

