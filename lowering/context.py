"""The lowering context: the GE graph under construction plus the FX node being lowered.

Converters build GE ops through ``ctx.op`` so every op is spec-checked and named after
its FX node (``<fx name>`` or ``<fx name>_<suffix>``): dumps map back to source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.config import NpuConfig
from npu_inductor.ge import dtypes
from npu_inductor.ge.device_rules import layouts_for
from npu_inductor.ge.ir import DYNAMIC_DIM, GraphBuilder, OutSpec, Value
from npu_inductor.ge.op_specs import OpSpecError
from npu_inductor.ge.soc import Decision, DeviceDtypeError

_LOW = (torch.float16, torch.bfloat16)
_SMALL_INT = (torch.int8, torch.int16, torch.uint8)
# (compute dtype, the dtypes it stands in for), tried in order when the SoC has no kernel
# for an op's dtypes: every one holds the values it stands in for exactly. float64 is never
# narrowed (a silent precision loss): an op without a float64 kernel is refused.
_WIDEN = ((torch.float32, _LOW), (torch.int32, _SMALL_INT),
          (torch.int64, (*_SMALL_INT, torch.int32)), (torch.float32, _SMALL_INT),
          (torch.int32, (torch.bool,)), (torch.int64, (torch.bool,)))
# bool moves to an int only for ops whose outputs just move or select input values, so the
# Cast back to bool is exact (910B: ReverseV2, GatherElements, ... have no bool kernel)
_VALUE_PRESERVING = frozenset({
    "ReverseV2", "GatherElements", "GatherV2", "ArgMaxV2", "ArgMin", "ReduceMax",
    "ReduceMin", "ConcatD", "ConcatV2", "Pack", "Transpose", "Tile", "BroadcastTo", "Roll",
    "StridedSliceV2", "StridedSlice", "Slice", "SliceV2", "ScatterElements", "SplitV",
    "Unpack", "TopKV2", "Sort", "Maximum", "Minimum"})


def static_shape(shape: Sequence[Any]) -> tuple[int, ...]:
    """A torch shape -> GE dims, symbolic dims as ``-1``."""
    return tuple(int(d) if isinstance(d, int) or _is_const_sym(d) else DYNAMIC_DIM
                 for d in shape)


def _is_const_sym(d: Any) -> bool:
    return isinstance(d, torch.SymInt) and d.node.is_constant()


def meta_spec(val: Any) -> OutSpec:
    return (val.dtype, static_shape(val.shape))


class LoweringContext:
    def __init__(self, builder: GraphBuilder, config: NpuConfig) -> None:
        self.builder = builder
        self.config = config
        self.node: torch.fx.Node | None = None
        self.env: dict[torch.fx.Node, Any] = {}  # FX node -> lowered value (set by lower.py)
        self._consts: dict[tuple, Value] = {}
        self.decisions: list[Decision] = []  # device rules that changed a lowering

    # ---- the current FX node ----------------------------------------------------------
    @property
    def meta(self) -> Any:
        """``meta['val']`` of the node being lowered (FakeTensor, or a tuple of them)."""
        return self.node.meta.get("val")

    def out_specs(self) -> list[OutSpec]:
        val = self.meta
        if isinstance(val, (tuple, list)):
            return [meta_spec(v) for v in val if isinstance(v, torch.Tensor)]
        return [meta_spec(val)]

    @property
    def out_dtype(self) -> torch.dtype:
        val = self.meta
        return (val[0] if isinstance(val, (tuple, list)) else val).dtype

    def name(self, suffix: str = "") -> str:
        base = self.node.name if self.node is not None else "op"
        return f"{base}_{suffix}" if suffix else base

    # ---- building ops -------------------------------------------------------------------
    def op(self, op_type: str, inputs: Sequence[Any], attrs: dict[str, Any] | None = None,
           out: OutSpec | Sequence[OutSpec] | None = None, suffix: str = "") -> Any:
        """Add a GE op. ``out`` defaults to the FX node's own output(s); a single output
        returns a ``Value``, several return a tuple. Conv, batch-norm and pooling ops get
        the NCHW/NCDHW descs the device needs (``device_rules.LAYOUT_RULES``), as torchair's
        converters mark them with ``specific_op_input_layout``."""
        if out is None:
            outs = self.out_specs()
        elif len(out) == 2 and isinstance(out[0], torch.dtype):
            outs = [out]
        else:
            outs = list(out)
        first = inputs[0] if inputs and isinstance(inputs[0], Value) else None
        layout = layouts_for(op_type, first.rank if first is not None else 4)
        plan = self._device_dtype(op_type, inputs, outs, suffix)
        if plan is not None:
            values = self._op_in(plan, op_type, inputs, attrs, outs, suffix, layout)
        else:
            values = self.builder.op(op_type, self.name(suffix), inputs, attrs, outs,
                                     layout=layout)
        return values[0] if len(values) == 1 else values

    def note(self, rule: str, detail: str, suffix: str = "") -> None:
        """Record a device rule that changed how this node is lowered."""
        self.decisions.append(Decision(rule, self.name(suffix), detail))

    # ---- the dtype gate's device form ---------------------------------------------------
    def _device_dtype(self, op_type: str, inputs: Sequence[Any], outs: list[OutSpec],
                      suffix: str) -> tuple[torch.dtype, tuple] | None:
        """None when the op has a kernel as given on the target SoC (or runs on AI CPU
        with no AI Core alternative); float32 when its fp16/bf16 operands must be computed
        in float32 instead (no kernel at that dtype, or an AI CPU one only). Raises the
        gate's error when neither form has a kernel."""
        if self.builder.soc is None or op_type == "Cast":  # Cast: lowering/helpers.cast
            return None
        try:
            kind = self.builder.kernel_kind(op_type, inputs, outs, self.name(suffix))
            if kind != "aicpu":
                return None
            refused = None
        except DeviceDtypeError as e:
            refused = e
        except OpSpecError:
            return None  # a prototype violation: builder.op reports it
        for target, narrow in _WIDEN:
            if torch.bool in narrow and op_type not in _VALUE_PRESERVING:
                continue
            low = {v.dtype for v in _values(inputs) if v.dtype in narrow} | {
                dt for dt, _ in outs if dt in narrow}
            wide = self._kind_in((target, narrow), op_type, inputs, outs) if low else None
            # refused: any kernel in target will do; on AI CPU: only an AI Core one is better
            if wide is None or (refused is None and wide != "aicore"):
                continue
            why = "no kernel" if refused is not None else "only an AI CPU kernel"
            names = "/".join(sorted(dtypes.short_name(d) for d in low))
            self.note("dtype-gate", f"{op_type} has {why} for {names} on {self.builder.soc}: "
                      f"computed in {dtypes.short_name(target)} with Casts around", suffix)
            return target, narrow
        if refused is not None:
            raise refused
        return None

    def _kind_in(self, plan: tuple, op_type: str, inputs: Sequence[Any],
                 outs: list[OutSpec]) -> str | None:
        """The kernel kind of the op with its ``plan[1]`` operands moved to ``plan[0]``."""
        proxies = [_retyped(x, plan) for x in inputs]
        try:
            return self.builder.kernel_kind(op_type, proxies, _wide_outs(outs, plan))
        except OpSpecError:  # includes DeviceDtypeError
            return None

    def _op_in(self, plan: tuple, op_type: str, inputs: Sequence[Any],
               attrs: dict[str, Any] | None, outs: list[OutSpec], suffix: str,
               layout: Any = None) -> tuple:
        from npu_inductor.lowering.helpers import cast

        wide, narrow = plan

        def up(x: Any) -> Any:
            if isinstance(x, Value):
                return cast(self, x, wide) if x.dtype in narrow else x
            if isinstance(x, (list, tuple)):
                return [up(v) for v in x]
            return x

        values = self.builder.op(op_type, self.name(suffix), [up(x) for x in inputs], attrs,
                                 _wide_outs(outs, plan), layout=layout)
        return tuple(cast(self, v, dt) for v, (dt, _) in zip(values, outs))

    def const(self, value: Any, dtype: torch.dtype, suffix: str = "const") -> Value:
        """A ``Const`` op; small identical constants are shared across the graph."""
        t = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=dtype)
        t = t.to(dtype)
        key = None
        if t.numel() <= 64:
            key = (t.dtype, tuple(t.shape), tuple(t.reshape(-1).tolist()))
            hit = self._consts.get(key)
            if hit is not None:
                return hit
        v = self.builder.const(t, self.name(suffix))
        if key is not None:
            self._consts[key] = v
        return v


def _values(inputs: Sequence[Any]) -> list[Value]:
    out: list[Value] = []
    for x in inputs:
        if isinstance(x, Value):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            out += _values(x)
    return out


def _retyped(x: Any, plan: tuple) -> Any:
    wide, narrow = plan
    if isinstance(x, Value):
        return Value(x.op, x.index, wide, x.shape) if x.dtype in narrow else x
    if isinstance(x, (list, tuple)):
        return [_retyped(v, plan) for v in x]
    return x


def _wide_outs(outs: list[OutSpec], plan: tuple) -> list[OutSpec]:
    wide, narrow = plan
    return [(wide if dt in narrow else dt, shape) for dt, shape in outs]
