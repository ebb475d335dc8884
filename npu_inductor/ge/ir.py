"""GE IR records and the graph builder.

[Note: GE IR in npu_inductor]
A GE graph is a list of ops in topological order. Each op names its inputs with GE's edge
strings (``"src:idx"`` for data, ``"src:-1"`` for control, ``""`` for an unfed optional
input) and carries one ``TensorDesc`` per input and output, named after the prototype's
ports (``x1``, ``x0..xN-1`` for dynamic inputs, ``y``). Attributes keep the prototype's
attr type next to the value so that serialization picks the right ``AttrDef`` field.
Records are frozen; the builder checks every op against the op-spec table as it is added,
writes the port-name maps GE matches inputs by (``_input_name_key`` ...), and checks the
finished graph against the device rules (``device_rules.py``), so an op or a graph a real
GE would reject never exists.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from npu_inductor.ge import op_specs
from npu_inductor.ge import soc as kernels
from npu_inductor.ge.op_specs import OpSpecError

DYNAMIC_DIM = -1


@dataclass(frozen=True)
class TensorDesc:
    name: str
    dtype: torch.dtype | None
    shape: tuple[int, ...]
    layout: str = "ND"
    unfed: bool = False  # unfed optional input (GE: ``_is_unfed_optional``)


@dataclass(frozen=True)
class Attr:
    """An attribute value with its prototype type (``Int``, ``ListInt``, ``Type``...)."""

    type: str
    value: Any

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attr) or other.type != self.type:
            return False
        if self.type == "Tensor":
            a, b = self.value, other.value
            return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))
        return _plain(self.value) == _plain(other.value)


def _plain(v: Any) -> Any:
    return [_plain(x) for x in v] if isinstance(v, (list, tuple)) else v


@dataclass(frozen=True)
class OpNode:
    name: str
    type: str
    inputs: tuple[str, ...]
    attrs: dict[str, Attr] = field(default_factory=dict)
    input_descs: tuple[TensorDesc, ...] = ()
    output_descs: tuple[TensorDesc, ...] = ()

    def attr(self, name: str, default: Any = None) -> Any:
        a = self.attrs.get(name)
        return default if a is None else a.value


@dataclass(frozen=True)
class Graph:
    name: str
    ops: tuple[OpNode, ...]
    attrs: dict[str, Attr] = field(default_factory=dict)

    def data_ops(self) -> list[OpNode]:
        return sorted((op for op in self.ops if op.type in DATA_TYPES),
                      key=lambda o: o.attr("index"))

    def net_output(self) -> OpNode:
        return next(op for op in self.ops if op.type == "NetOutput")

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for op in self.ops:
            counts[op.type] = counts.get(op.type, 0) + 1
        return counts


@dataclass(frozen=True)
class Value:
    """A GE tensor under construction: output ``index`` of op ``op``."""

    op: str
    index: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def edge(self) -> str:
        return f"{self.op}:{self.index}"

    @property
    def rank(self) -> int:
        return len(self.shape)


OutSpec = tuple[torch.dtype, Sequence[int]]
_NAME_OK = re.compile(r"[^A-Za-z0-9_./-]")


def sanitize_name(name: str) -> str:
    """GE op names: keep them printable and free of edge separators (``:``)."""
    return _NAME_OK.sub("_", name) or "op"


# Graph inputs: ``Data``, and ``RefData`` for an input the graph writes in place (``Assign``).
DATA_TYPES = ("Data", "RefData")


class GraphBuilder:
    """Builds a ``Graph`` op by op, checking each op against its prototype."""

    def __init__(self, name: str, soc: str | None = None) -> None:
        self.name = sanitize_name(name)
        self.soc = soc  # target SoC version: ops are dtype-gated against its kernels
        self._ops: list[OpNode] = []
        self._names: dict[str, int] = {}
        self._num_data = 0
        self._has_output = False
        self.side_effects: list[str] = []  # ops NetOutput keeps alive by control edges

    def unique(self, base: str) -> str:
        """A graph-unique op name derived from ``base`` (``base``, ``base_1``, ...)."""
        base = sanitize_name(base)
        name, n = base, self._names.get(base, 0)
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names[base] = n
        self._names.setdefault(name, 0)
        return name

    def data(self, dtype: torch.dtype, shape: Sequence[int], name: str,
             ref: bool = False) -> Value:
        """A graph input (``RefData`` with ``ref``: the graph may write it in place)."""
        desc_shape = tuple(int(d) for d in shape)
        index = self._num_data
        self._num_data += 1
        op = _node(self.unique(name), "RefData" if ref else "Data", (),
                   {"index": Attr("Int", index)}, (TensorDesc("x", dtype, desc_shape),),
                   (TensorDesc("y", dtype, desc_shape),))
        self._ops.append(op)
        return Value(op.name, 0, dtype, desc_shape)

    def const(self, tensor: torch.Tensor, name: str) -> Value:
        t = tensor.detach().to("cpu").contiguous().clone()
        op = _node(self.unique(name), "Const", (), {"value": Attr("Tensor", t)}, (),
                   (TensorDesc("y", t.dtype, tuple(t.shape)),))
        self._ops.append(op)
        return Value(op.name, 0, t.dtype, tuple(t.shape))

    def op(self, op_type: str, name: str, inputs: Sequence[Value | Sequence[Value] | None],
           attrs: dict[str, Any] | None = None, outputs: Sequence[OutSpec] = (),
           control: Sequence[str] = (),
           layout: tuple[Sequence[str], Sequence[str], str] | None = None) -> tuple[Value, ...]:
        """Add one op. ``inputs`` follow the prototype's input order; a dynamic input takes a
        list; ``None`` (or a missing trailing input) leaves an optional input unfed.
        ``control`` names ops that must run first (control edges, e.g. an ``Assert``).
        ``layout`` = (input ports, output ports, format): those descs carry ``format``
        (torchair's ``specific_op_input_layout`` / ``specific_op_output_layout``)."""
        spec = op_specs.get_spec(op_type)
        attrs = dict(attrs or {})
        op_specs.check_attrs(spec, attrs)
        edges, descs = self._wire_inputs(spec, list(inputs))
        edges += [f"{c}:-1" for c in control]
        typed = {k: Attr(spec.attrs[k].type, _freeze(v)) for k, v in sorted(attrs.items())}
        out_descs = self._out_descs(spec, outputs)
        if layout is not None:
            descs, out_descs = _with_layout(descs, layout[0], layout[2]), \
                _with_layout(out_descs, layout[1], layout[2])
        self._gate(op_type, name, descs, out_descs)
        node = _node(self.unique(name), op_type, tuple(edges), typed, tuple(descs), out_descs)
        self._ops.append(node)
        return tuple(Value(node.name, i, d.dtype, d.shape) for i, d in enumerate(out_descs))

    def _wire_inputs(self, spec: op_specs.OpSpec, inputs: list) -> tuple[list[str], list]:
        if len(inputs) > len(spec.inputs):
            raise OpSpecError(f"{spec.type}: {len(inputs)} inputs given, prototype has "
                              f"{len(spec.inputs)}: {[p.name for p in spec.inputs]}")
        edges: list[str] = []
        descs: list[TensorDesc] = []
        for i, port in enumerate(spec.inputs):
            given = inputs[i] if i < len(inputs) else None
            if port.kind == "dynamic":
                values = list(given or [])
                for k, v in enumerate(values):
                    op_specs.check_input_dtype(spec, port, v.dtype)
                    edges.append(v.edge)
                    descs.append(TensorDesc(f"{port.name}{k}", v.dtype, v.shape))
            elif given is None:
                if port.kind == "required":
                    raise OpSpecError(f"{spec.type}: required input {port.name!r} is missing")
                edges.append("")
                descs.append(TensorDesc(port.name, None, (), "FORMAT_RESERVED", unfed=True))
            else:
                op_specs.check_input_dtype(spec, port, given.dtype)
                edges.append(given.edge)
                descs.append(TensorDesc(port.name, given.dtype, given.shape))
        return _trim_unfed(edges, descs)

    def _gate(self, op_type: str, name: str, descs: Sequence[TensorDesc],
              out_descs: Sequence[TensorDesc]) -> str | None:
        """The op's kernel kind on ``self.soc`` (None: ungated); raises
        ``DeviceDtypeError`` when the SoC has no kernel for it."""
        if self.soc is None:
            return None
        ports = kernels.Ports.of({d.name: d.dtype for d in descs if not d.unfed},
                                 {d.name: d.dtype for d in out_descs})
        return kernels.classify(op_type, ports, self.soc, name)

    def kernel_kind(self, op_type: str, inputs: Sequence[Value | Sequence[Value] | None],
                    outputs: Sequence[OutSpec], name: str = "?") -> str | None:
        """What ``op`` would classify the op as, without adding it."""
        spec = op_specs.get_spec(op_type)
        _, descs = self._wire_inputs(spec, list(inputs))
        return self._gate(op_type, name, descs, self._out_descs(spec, outputs))

    @staticmethod
    def _out_descs(spec: op_specs.OpSpec, outputs: Sequence[OutSpec]) -> tuple[TensorDesc, ...]:
        ports = spec.outputs
        if ports and ports[-1].kind == "dynamic":
            names = [p.name for p in ports[:-1]]
            names += [f"{ports[-1].name}{k}" for k in range(len(outputs) - len(names))]
        else:
            if len(outputs) != len(ports):
                raise OpSpecError(f"{spec.type}: {len(outputs)} outputs described, prototype "
                                  f"has {len(ports)}: {[p.name for p in ports]}")
            names = [p.name for p in ports]
        return tuple(TensorDesc(n, dt, tuple(int(d) for d in shape))
                     for n, (dt, shape) in zip(names, outputs))

    def readers(self, edge: str, through: frozenset[str] = frozenset()) -> list[str]:
        """Names of the ops so far that read ``edge``, also through ops of the types in
        ``through`` (views sharing its memory)."""
        found, todo = [], [edge]
        while todo:
            e = todo.pop()
            for op in self._ops:
                if e in op.inputs and op.name not in found:
                    found.append(op.name)
                    if op.type in through:
                        todo.append(f"{op.name}:0")
        return found

    def op_type(self, name: str) -> str | None:
        """The type of the op named ``name`` (None when there is none)."""
        return next((op.type for op in self._ops if op.name == name), None)

    @property
    def last_op(self) -> str:
        """The name of the op added last (the source of a control edge)."""
        return self._ops[-1].name

    def output(self, values: Sequence[Value]) -> None:
        if self._has_output:
            raise OpSpecError("graph already has a NetOutput")
        self._has_output = True
        descs = tuple(TensorDesc(f"input{k}", v.dtype, v.shape) for k, v in enumerate(values))
        edges = tuple(v.edge for v in values) + tuple(f"{c}:-1" for c in self.side_effects)
        self._ops.append(_node(self.unique("NetOutput"), "NetOutput", edges, {}, descs, ()))

    def build(self, attrs: dict[str, Attr] | None = None) -> Graph:
        """The finished graph, checked against the device rules (``DeviceRuleError``)."""
        from npu_inductor.ge.device_rules import check_graph
        graph = Graph(self.name, tuple(self._ops), dict(attrs or {}))
        check_graph(graph)
        return graph


def _node(name: str, op_type: str, inputs: tuple[str, ...], attrs: dict[str, Attr],
          input_descs: tuple[TensorDesc, ...], output_descs: tuple[TensorDesc, ...]) -> OpNode:
    """An op record carrying the port-name maps GE matches its inputs by."""
    from npu_inductor.ge.device_rules import port_name_attrs
    return OpNode(name, op_type, inputs, {**attrs, **port_name_attrs(input_descs, output_descs)},
                  input_descs, output_descs)


def _with_layout(descs: Sequence[TensorDesc], ports: Sequence[str], layout: str) -> tuple:
    return tuple(replace(d, layout=layout) if d.name in ports and not d.unfed else d
                 for d in descs)


def _trim_unfed(edges: list[str], descs: list[TensorDesc]) -> tuple[list[str], list]:
    """GE lets trailing unfed optional inputs be omitted; keep the op compact."""
    while edges and edges[-1] == "":
        edges.pop()
        descs.pop()
    return edges, descs


def _freeze(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v
