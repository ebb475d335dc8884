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

# float dtypes moved to float32 when the SoC has no kernel for them (910B has almost no
# float64 kernels: a float64 op, often an internal precision choice, runs in float32)
_LOW = (torch.float16, torch.bfloat16, torch.float64)


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
        wide = self._device_dtype(op_type, inputs, outs, suffix)
        if wide is not None:
            values = self._op_in(wide, op_type, inputs, attrs, outs, suffix, layout)
        else:
            values = self.builder.op(op_type, self.name(suffix), inputs, attrs, outs,
                                     layout=layout)
        return values[0] if len(values) == 1 else values

    def note(self, rule: str, detail: str, suffix: str = "") -> None:
        """Record a device rule that changed how this node is lowered."""
        self.decisions.append(Decision(rule, self.name(suffix), detail))

    # ---- the dtype gate's device form ---------------------------------------------------
    def _device_dtype(self, op_type: str, inputs: Sequence[Any], outs: list[OutSpec],
                      suffix: str) -> torch.dtype | None:
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
        low = {v.dtype for v in _values(inputs) if v.dtype in _LOW} | {
            dt for dt, _ in outs if dt in _LOW}
        wide = self._kind_in(torch.float32, op_type, inputs, outs) if low else None
        # refused: any kernel in float32 will do; on AI CPU: only an AI Core one is better
        if wide is None or (refused is None and wide != "aicore"):
            if refused is not None:
                raise refused
            return None
        why = "no kernel" if refused is not None else "only an AI CPU kernel"
        names = "/".join(sorted(dtypes.short_name(d) for d in low))
        self.note("dtype-gate", f"{op_type} has {why} for {names} on {self.builder.soc}: "
                  f"computed in float32 with Casts around", suffix)
        return torch.float32

    def _kind_in(self, wide: torch.dtype, op_type: str, inputs: Sequence[Any],
                 outs: list[OutSpec]) -> str | None:
        """The kernel kind of the op with its fp16/bf16 operands moved to ``wide``."""
        proxies = [_retyped(x, wide) for x in inputs]
        try:
            return self.builder.kernel_kind(op_type, proxies, _wide_outs(outs, wide))
        except OpSpecError:  # includes DeviceDtypeError
            return None

    def _op_in(self, wide: torch.dtype, op_type: str, inputs: Sequence[Any],
               attrs: dict[str, Any] | None, outs: list[OutSpec], suffix: str,
               layout: Any = None) -> tuple:
        from npu_inductor.lowering.helpers import cast

        def up(x: Any) -> Any:
            if isinstance(x, Value):
                return cast(self, x, wide) if x.dtype in _LOW else x
            if isinstance(x, (list, tuple)):
                return [up(v) for v in x]
            return x

        values = self.builder.op(op_type, self.name(suffix), [up(x) for x in inputs], attrs,
                                 _wide_outs(outs, wide), layout=layout)
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


def _retyped(x: Any, wide: torch.dtype) -> Any:
    if isinstance(x, Value):
        return Value(x.op, x.index, wide, x.shape) if x.dtype in _LOW else x
    if isinstance(x, (list, tuple)):
        return [_retyped(v, wide) for v in x]
    return x


def _wide_outs(outs: list[OutSpec], wide: torch.dtype) -> list[OutSpec]:
    return [(wide if dt in _LOW else dt, shape) for dt, shape in outs]
