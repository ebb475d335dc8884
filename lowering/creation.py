"""Creation and copy converters: full/zeros/ones/empty/*_like/new_* and fill (Fill),
scalar_tensor (Const), arange (Range), linspace (LinSpace), eye (Eye), tril/triu_indices
(Const), clone/_to_copy/copy (Identity, TensorMove, Cast, BroadcastTo).

Creation ops honour their ``dtype`` (the FX node's output dtype); ``device``, ``layout``
and ``pin_memory`` must be the CPU defaults, else the node is refused (eager fallback).
"""

from __future__ import annotations

from typing import Any

import torch

from npu_inductor.ge import dtypes
from npu_inductor.ge.ir import Value
from npu_inductor.ge.op_specs import get_spec
from npu_inductor.ge.soc import has_kernel
from npu_inductor.lowering.helpers import cast, int_list
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import broadcast_to
from npu_inductor.lowering.spectral import complex_parts

aten = torch.ops.aten

_PLAIN_FORMATS = (None, torch.preserve_format, torch.contiguous_format)


def _cpu_defaults(node: torch.fx.Node) -> str | None:
    """Refuses placement/layout arguments the host graph cannot honour."""
    kw = node.kwargs
    device = kw.get("device")
    if device is not None and torch.device(device).type != "cpu":
        return f"device={device} (only CPU-placed creation ops are lowered)"
    if kw.get("layout") not in (None, torch.strided):
        return f"layout={kw['layout']} is not strided"
    if kw.get("pin_memory"):
        return "pin_memory=True"
    if kw.get("memory_format") not in _PLAIN_FORMATS:
        return f"memory_format={kw['memory_format']}"
    return None


# ---- constant-valued tensors ---------------------------------------------------------------
def _fill(ctx, value: Any) -> Value:
    """``Fill`` the node's output shape with ``value`` (a Python scalar or a 0-d Value)."""
    dtype, shape = ctx.out_specs()[0]
    if dtype == torch.complex64 and _fill_refuses(ctx, dtype):
        return _complex_fill(ctx, value, shape)
    fill = cast(ctx, value, dtype) if isinstance(value, Value) else ctx.const(value, dtype,
                                                                               "value")
    return ctx.op("Fill", [int_list(ctx, shape, "dims"), fill])


def _fill_refuses(ctx, dtype: torch.dtype) -> bool:
    soc = ctx.builder.soc
    return soc is not None and not has_kernel(soc, "Fill", value=dtype)


def _complex_fill(ctx, value: Any, shape: Any) -> Value:
    """complex64 ``Fill`` where the SoC has none (910B): ``Complex`` of two float32 Fills."""
    f32, dims = torch.float32, int_list(ctx, shape, "dims")
    if isinstance(value, Value):
        re, im = complex_parts(ctx, cast(ctx, value, torch.complex64))
    else:
        z = complex(value)
        re, im = ctx.const(z.real, f32, "real"), ctx.const(z.imag, f32, "imag")
    parts = [ctx.op("Fill", [dims, v], out=(f32, tuple(shape)), suffix=f"fill_{n}")
             for v, n in ((re, "real"), (im, "imag"))]
    return ctx.op("Complex", parts, {"Tout": torch.complex64})


def _register_fill(value: Any, *targets: torch._ops.OpOverload) -> None:
    """Creation ops whose result is ``value`` everywhere (empty* are zero-filled)."""

    @register(*targets, capability=_cpu_defaults, dynamic=False)
    def convert(ctx, **_):
        return _fill(ctx, value)


_register_fill(0, aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default,
               aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default,
               aten.new_empty.default, aten.new_empty_strided.default,
               aten.empty_permuted.default, aten.zero.default)
_register_fill(1, aten.ones.default, aten.ones_like.default, aten.new_ones.default)


@register(aten.full.default, capability=_cpu_defaults, dynamic=False)
def full(ctx, size, fill_value, dtype=None, layout=None, device=None, pin_memory=None):
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _fill(ctx, fill_value)


@register(aten.full_like.default, capability=_cpu_defaults, dynamic=False)
def full_like(ctx, self, fill_value, dtype=None, layout=None, device=None, pin_memory=None,
              memory_format=None):
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(ctx, fill_value)


@register(aten.new_full.default, capability=_cpu_defaults, dynamic=False)
def new_full(ctx, self, size, fill_value, dtype=None, layout=None, device=None,
             pin_memory=None):
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ...) -> Tensor"""
    return _fill(ctx, fill_value)


@register(aten.fill.Scalar, dynamic=False)
def fill_scalar(ctx, self, value):
    """fill.Scalar(Tensor self, Scalar value) -> Tensor"""
    return _fill(ctx, value)


@register(aten.fill.Tensor, dynamic=False)
def fill_tensor(ctx, self, value):
    """fill.Tensor(Tensor self, Tensor value) -> Tensor"""
    return _fill(ctx, value)


@register(aten.scalar_tensor.default, capability=_cpu_defaults)
def scalar_tensor(ctx, s, dtype=None, layout=None, device=None, pin_memory=None):
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, ...) -> Tensor"""
    return ctx.const(s, ctx.out_dtype, "value")


def _indices_const(fn: Any) -> Any:
    def convert(ctx, row, col, offset=0, dtype=None, layout=None, device=None, pin_memory=None):
        return ctx.const(fn(row, col, offset), ctx.out_dtype, "value")

    return convert


register(aten.tril_indices.default, capability=_cpu_defaults)(_indices_const(torch.tril_indices))
register(aten.triu_indices.default, capability=_cpu_defaults)(_indices_const(torch.triu_indices))


# ---- ranges ----------------------------------------------------------------------------------
def _range(ctx, start: Any, end: Any, step: Any) -> Value:
    """``Range`` computed in int64 or float64 (torch accumulates floats in double), then
    cast once to the output dtype."""
    dtype, shape = ctx.out_specs()[0]
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    soc = ctx.builder.soc
    if wide == torch.float64 and soc and not has_kernel(soc, "Range", start=wide):
        ctx.note("dtype-gate", f"Range has no float64 kernel on {soc}: computed in float32")
        wide = torch.float32
    consts = [cast(ctx, v, wide) if isinstance(v, Value) else ctx.const(v, wide, name)
              for v, name in ((start, "start"), (end, "limit"), (step, "delta"))]
    y = ctx.op("Range", consts, out=(wide, shape), suffix="range" if wide != dtype else "")
    return cast(ctx, y, dtype)


def _integral_args(node: torch.fx.Node) -> str | None:
    reason = _cpu_defaults(node)
    dtype = node.meta["val"].dtype
    # symbolic sizes (FX nodes computing SymInts) are integers too
    if reason is None and not dtype.is_floating_point and \
            not all(isinstance(a, (int, torch.fx.Node)) for a in node.args):
        return "integer arange with non-integral bounds"
    return reason


@register(aten.arange.default, capability=_integral_args)
def arange(ctx, end, dtype=None, layout=None, device=None, pin_memory=None):
    """arange(Scalar end, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _range(ctx, 0, end, 1)


@register(aten.arange.start, capability=_integral_args)
def arange_start(ctx, start, end, dtype=None, layout=None, device=None, pin_memory=None):
    """arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _range(ctx, start, end, 1)


@register(aten.arange.start_step, capability=_integral_args)
def arange_start_step(ctx, start, end, step=1, dtype=None, layout=None, device=None,
                      pin_memory=None):
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None,
    ...) -> Tensor"""
    return _range(ctx, start, end, step)


def _float_linspace(node: torch.fx.Node) -> str | None:
    if not node.meta["val"].dtype.is_floating_point:
        return "linspace into an integer dtype rounds differently from LinSpace"
    return _cpu_defaults(node)


def _linspace(ctx, start: Any, end: Any, steps: int) -> Value:
    dtype = ctx.out_dtype
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    bounds = [cast(ctx, v, wide) if isinstance(v, Value) else ctx.const(v, wide, name)
              for v, name in ((start, "start"), (end, "stop"))]
    num = ctx.const(torch.tensor(steps), torch.int64, "num")
    y = ctx.op("LinSpace", bounds + [num], out=(wide, (steps,)),
               suffix="linspace" if wide != dtype else "")
    return cast(ctx, y, dtype)


def _register_linspace(target: torch._ops.OpOverload) -> None:
    @register(target, capability=_float_linspace)
    def convert(ctx, start, end, steps, dtype=None, layout=None, device=None, pin_memory=None):
        return _linspace(ctx, start, end, steps)


for _t in (aten.linspace.default, aten.linspace.Tensor_Tensor, aten.linspace.Tensor_Scalar,
           aten.linspace.Scalar_Tensor):
    _register_linspace(_t)


def _eye(ctx, n: int, m: int) -> Value:
    dtype = ctx.out_dtype
    allowed = get_spec("Eye").outputs[0].dtypes
    made = dtype if allowed is None or dtype in allowed else torch.int8  # bool: 0/1 in int8
    y = ctx.op("Eye", [], {"num_rows": n, "num_columns": m, "dtype": dtypes.to_cpp(made)},
               out=(made, (n, m)), suffix="eye" if made != dtype else "")
    return cast(ctx, y, dtype)


@register(aten.eye.default, capability=_cpu_defaults)
def eye(ctx, n, dtype=None, layout=None, device=None, pin_memory=None):
    """eye(SymInt n, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _eye(ctx, n, n)


@register(aten.eye.m, capability=_cpu_defaults)
def eye_m(ctx, n, m, dtype=None, layout=None, device=None, pin_memory=None):
    """eye.m(SymInt n, SymInt m, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _eye(ctx, n, m)


# ---- copies ----------------------------------------------------------------------------------
def copy_op(ctx, x: Value) -> Value:
    """A same-dtype copy: ``Identity``, or a same-type ``Cast`` for dtypes Identity lacks."""
    allowed = get_spec("Identity").input("x").dtypes
    if allowed is None or x.dtype in allowed:
        return ctx.op("Identity", [x], out=(x.dtype, x.shape))
    return ctx.op("Cast", [x], {"dst_type": dtypes.to_cpp(x.dtype)}, out=(x.dtype, x.shape))


@register(aten.clone.default)
def clone(ctx, self, memory_format=None):
    """clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor"""
    return copy_op(ctx, self)


@register(aten._to_copy.default, capability=_cpu_defaults)
def to_copy(ctx, self, dtype=None, layout=None, device=None, pin_memory=None,
            non_blocking=False, memory_format=None):
    """_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None)
    -> Tensor"""
    out = ctx.out_dtype
    if out == self.dtype:
        return copy_op(ctx, self)
    return cast(ctx, self, out)  # routed through an exact dtype where the SoC needs it


@register(aten.copy.default)
def copy(ctx, self, src, non_blocking=False):
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor"""
    y = broadcast_to(ctx, cast(ctx, src, self.dtype), self.shape)
    return copy_op(ctx, y) if y is src else y
