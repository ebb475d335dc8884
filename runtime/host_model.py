"""The host device's model loader and executor.

[Note: host execution plan]
``HostModel`` is built from the parsed ``.air`` bytes only. Ops are already in
topological order; each becomes a step ``(kernel, argument slots, attrs, output slots)``
over a flat list of value slots. Data steps read the bound inputs, Const payloads are
decoded once at load time, and a slot is dropped right after its last reader so that
intermediate memory is released as early as on a device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from npu_inductor.ge.ir import Graph, OpNode
from npu_inductor.ge.op_specs import get_spec
from npu_inductor.runtime.kernels import KERNELS


class HostExecutionError(RuntimeError):
    """A GE op failed on the host device; names the op."""


@dataclass(frozen=True)
class Step:
    op: OpNode
    fn: Callable[..., Any]
    args: tuple  # per prototype input: slot int, None (unfed) or tuple of slots (dynamic)
    attrs: dict[str, Any]
    outs: tuple[int, ...]
    frees: tuple[int, ...]


def _arg_layout(op: OpNode, slot_of: dict[str, int]) -> tuple:
    """Group an op's edge strings by prototype port (dynamic ports become tuples)."""
    spec = get_spec(op.type)
    data_edges = [e for e in op.inputs if not e.endswith(":-1")]
    descs = list(op.input_descs)
    args: list[Any] = []
    pos = 0
    for port in spec.inputs:
        if port.kind == "dynamic":
            group = []
            while pos < len(descs) and descs[pos].name.startswith(port.name) and \
                    descs[pos].name[len(port.name):].isdigit():
                group.append(slot_of[data_edges[pos]])
                pos += 1
            args.append(tuple(group))
        elif pos < len(descs) and descs[pos].name == port.name:
            args.append(None if data_edges[pos] == "" else slot_of[data_edges[pos]])
            pos += 1
        else:
            args.append(None)
    while args and args[-1] is None:
        args.pop()
    return tuple(args)


class HostModel:
    """A loaded GE graph, executable with host kernels."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.inputs = graph.data_ops()
        self.consts: dict[int, torch.Tensor] = {}
        self.steps: list[Step] = []
        self.data_slots: list[int] = []
        self.output_slots: tuple[int, ...] = ()
        self._plan()

    def _plan(self) -> None:
        slot_of: dict[str, int] = {}
        last_use: dict[int, int] = {}
        raw: list[tuple[OpNode, tuple]] = []
        data_slot: dict[int, int] = {}
        for op in self.graph.ops:
            args = () if op.type in ("Data", "Const") else _arg_layout(op, slot_of)
            if op.type == "NetOutput":
                self.output_slots = tuple(slot_of[e] for e in op.inputs if not e.endswith(":-1"))
                continue
            for k in range(max(len(op.output_descs), 1)):
                slot_of[f"{op.name}:{k}"] = len(slot_of)
            if op.type == "Data":
                data_slot[op.attr("index")] = slot_of[f"{op.name}:0"]
            elif op.type == "Const":
                self.consts[slot_of[f"{op.name}:0"]] = op.attr("value")
            else:
                if op.type not in KERNELS:
                    raise HostExecutionError(f"host device has no kernel for GE op type "
                                             f"{op.type!r} (op {op.name!r})")
                for s in _flat(args):
                    last_use[s] = len(raw)
                raw.append((op, args))
        self.num_slots = len(slot_of)
        self.data_slots = [data_slot[i] for i in range(len(data_slot))]
        keep = set(self.output_slots) | set(self.consts)
        frees_at: dict[int, list[int]] = {}
        for s, i in last_use.items():
            if s not in keep:
                frees_at.setdefault(i, []).append(s)
        for i, (op, args) in enumerate(raw):
            first = slot_of[f"{op.name}:0"]
            outs = tuple(range(first, first + max(len(op.output_descs), 1)))
            attrs = {k: _py(a.value) for k, a in op.attrs.items()}
            self.steps.append(Step(op, KERNELS[op.type], args, attrs, outs,
                                   tuple(frees_at.get(i, ()))))

    def execute(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        vals: list[Any] = [None] * self.num_slots
        for slot, t in self.consts.items():
            vals[slot] = t
        for slot, t in zip(self.data_slots, inputs):
            vals[slot] = t
        for step in self.steps:
            args = [_fetch(vals, a) for a in step.args]
            try:
                result = step.fn(*args, **step.attrs)
            except Exception as e:
                raise HostExecutionError(f"GE op {step.op.name!r} ({step.op.type}) failed on "
                                         f"the host device: {type(e).__name__}: {e}") from e
            if len(step.outs) == 1:
                vals[step.outs[0]] = result
            else:
                for s, r in zip(step.outs, result):
                    vals[s] = r
            for s in step.frees:
                vals[s] = None
        return [vals[s] for s in self.output_slots]


def _fetch(vals: list, a: Any) -> Any:
    if a is None:
        return None
    if isinstance(a, tuple):
        return [vals[s] for s in a]
    return vals[a]


def _flat(args: tuple) -> list[int]:
    out: list[int] = []
    for a in args:
        if isinstance(a, tuple):
            out.extend(a)
        elif a is not None:
            out.append(a)
    return out


def _py(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v
