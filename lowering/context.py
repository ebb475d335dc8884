"""The lowering context: the GE graph under construction plus the FX node being lowered.

Converters build GE ops through ``ctx.op`` so every op is spec-checked and named after
its FX node (``<fx name>`` or ``<fx name>_<suffix>``): dumps map back to source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.config import NpuConfig
from npu_inductor.ge.device_rules import layouts_for
from npu_inductor.ge.ir import DYNAMIC_DIM, GraphBuilder, OutSpec, Value


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
        values = self.builder.op(op_type, self.name(suffix), inputs, attrs, outs, layout=layout)
        return values[0] if len(values) == 1 else values

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
