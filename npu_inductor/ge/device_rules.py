"""Structural device rules: what a real Ascend 910B's GE refuses in a graph, checked here.

[Note: device rules]
The op-spec table (``op_specs.py``) checks each op against its prototype as it is added.
These rules check what only the whole op, or the whole graph, shows; they run when a graph
is built (``GraphBuilder.build``) and again when the host device loads one, so no graph a
device would refuse ever runs. Each rule follows a public source (``device_fidelity.md``,
``ge_ir_notes.md``, torchair's ``_normalize_ge_graph`` and converters):

* ``port-name-map``: every op carries ``_input_name_key`` (its input desc names),
  ``_input_name_value`` (0..n-1) and ``_output_name_key`` / ``_output_name_value``. GE
  builds each op's name->index maps from them when it deserializes a graph.
* ``ir-inputs``: every IR input up to the last fed one is present, in prototype order and
  named after its port; an unfed optional input is ``""`` with an ``_is_unfed_optional``
  desc. Output descs are named after the prototype's outputs.
* ``layout``: the conv, conv-backprop, batch-norm and pooling families carry ``NCHW``
  (5-D: ``NCDHW``) descs on the ports torchair marks with ``specific_op_input_layout`` /
  ``specific_op_output_layout``; CANN's shape inference rejects ``ND`` there.
* ``ref-input-copy``: a ref op (an output named like an input: it writes that input in
  place) must own the buffer it writes: a ``TensorMove`` (or any fresh result) that
  nothing else reads, never a graph input, a constant, or a view of either.
* ``data-index``: ``Data`` indices are exactly 0..n-1.
* ``static-shape``: a graph whose inputs are all static has no ``-1`` dim anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from npu_inductor.ge.ir import Attr, Graph, OpNode, TensorDesc
from npu_inductor.ge.op_specs import OpSpec, get_spec

INPUT_NAME_KEY = "_input_name_key"
INPUT_NAME_VALUE = "_input_name_value"
OUTPUT_NAME_KEY = "_output_name_key"
OUTPUT_NAME_VALUE = "_output_name_value"
UNFED_LAYOUT = "FORMAT_RESERVED"
_DATA = ("Data", "RefData")  # graph inputs; RefData is one the graph writes (Assign)


class DeviceRuleError(ValueError):
    """A graph a real Ascend device would refuse; names the op, the port and the rule."""

    def __init__(self, op: OpNode | None, port: str | None, rule: str, message: str) -> None:
        where = f"op {op.name!r} ({op.type})" if op is not None else "graph"
        at = f" port {port!r}" if port else ""
        super().__init__(f"device rule {rule!r} violated at {where}{at}: {message}")
        self.op = op.name if op is not None else None
        self.op_type = op.type if op is not None else None
        self.port = port
        self.rule = rule


def port_name_attrs(input_descs: Sequence[TensorDesc],
                    output_descs: Sequence[TensorDesc]) -> dict[str, Attr]:
    """The port-name maps torchair's ``_normalize_ge_graph`` writes on every op."""
    return {INPUT_NAME_KEY: Attr("ListString", tuple(d.name for d in input_descs)),
            INPUT_NAME_VALUE: Attr("ListInt", tuple(range(len(input_descs)))),
            OUTPUT_NAME_KEY: Attr("ListString", tuple(d.name for d in output_descs)),
            OUTPUT_NAME_VALUE: Attr("ListInt", tuple(range(len(output_descs))))}


def input_index_by_name(op: OpNode) -> dict[str, int]:
    """An op's input name -> input index map, read from its port-name maps as GE does."""
    keys, values = op.attr(INPUT_NAME_KEY), op.attr(INPUT_NAME_VALUE)
    if keys is None or values is None:
        raise DeviceRuleError(op, None, "port-name-map",
                              f"no {INPUT_NAME_KEY}/{INPUT_NAME_VALUE} attrs: GE cannot match "
                              "its inputs by name")
    return dict(zip(keys, values))


# ---- layouts -----------------------------------------------------------------------------
@dataclass(frozen=True)
class LayoutRule:
    """Ports whose descs carry the feature-map layout (torchair's specific_op_*_layout)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    layout: str | None = None  # None: NCHW for 4-D, NCDHW for 5-D (batch-norm family)
    feature_maps: tuple[str, ...] = ()  # ports that must be 4-D (NCHW) / 5-D (NCDHW)


_NCHW, _NCDHW = "NCHW", "NCDHW"
LAYOUT_RULES: dict[str, LayoutRule] = {
    # ge_converter/aten/convolution.py, convolution_backward.py
    "Conv2D": LayoutRule(("x", "filter", "bias"), ("y",), _NCHW, ("x", "filter", "y")),
    "Conv2DBackpropInput": LayoutRule(("filter", "out_backprop"), ("y",), _NCHW,
                                      ("filter", "out_backprop", "y")),
    "Conv2DBackpropFilter": LayoutRule(("x", "out_backprop"), ("y",), _NCHW,
                                       ("x", "out_backprop", "y")),
    "Conv2DTranspose": LayoutRule(("x", "filter"), ("y",), _NCHW, ("x", "filter", "y")),
    "Conv3D": LayoutRule(("x", "filter"), ("y",), _NCDHW, ("x", "filter", "y")),
    "Conv3DBackpropInput": LayoutRule(("filter", "out_backprop"), ("y",), _NCDHW,
                                      ("filter", "out_backprop", "y")),
    "Conv3DBackpropFilter": LayoutRule(("x", "out_backprop"), ("y",), _NCDHW,
                                       ("x", "out_backprop", "y")),
    # _native_batch_norm_legit*.py, native_batch_norm_backward.py
    "BNInfer": LayoutRule(("x", "scale", "offset", "mean", "variance"), ("y",), _NCHW,
                          ("x", "y")),
    "BatchNormV3": LayoutRule(("x",), ("y",), None, ("x", "y")),
    "BatchNormGradV3": LayoutRule(("dy", "x"), ("dx",), None, ("dy", "x", "dx")),
    # avg_pool2d.py, max_pool2d_with_indices*.py, max_pool3d_with_indices.py
    "AvgPoolV2": LayoutRule(("x",), ("y",), _NCHW, ("x", "y")),
    "AvgPoolV2Grad": LayoutRule(("input_grad",), ("out_grad",), _NCHW,
                                ("input_grad", "out_grad")),
    "MaxPoolWithArgmaxV1": LayoutRule(("x",), ("y", "argmax"), _NCHW, ("x", "y", "argmax")),
    "MaxPoolGradWithArgmaxV1": LayoutRule(("x", "grad", "argmax"), ("y",), _NCHW,
                                          ("x", "grad", "argmax", "y")),
    "MaxPool3DWithArgmaxV2": LayoutRule(("x",), ("y", "argmax"), _NCDHW, ("x", "y", "argmax")),
    "AvgPool3D": LayoutRule(("x",), ("y",), _NCDHW, ("x", "y")),
    "AvgPool3DGrad": LayoutRule(("grads",), ("output",), _NCDHW, ("grads", "output")),
}
_RANK_OF = {_NCHW: 4, _NCDHW: 5}


def expected_layout(rule: LayoutRule, rank: int) -> str:
    if rule.layout is not None:
        return rule.layout
    return _NCDHW if rank == 5 else _NCHW


def layouts_for(op_type: str, rank: int) -> tuple[tuple[str, ...], tuple[str, ...], str] | None:
    """(input ports, output ports, layout) an op of ``op_type`` on a rank-``rank`` feature
    map must carry, or None when the op has no layout rule."""
    rule = LAYOUT_RULES.get(op_type)
    return None if rule is None else (rule.inputs, rule.outputs, expected_layout(rule, rank))


# ---- the checks --------------------------------------------------------------------------
def check_graph(graph: Graph) -> None:
    """Raise ``DeviceRuleError`` on the first device rule ``graph`` breaks."""
    violations = find_violations(graph, first_only=True)
    if violations:
        raise violations[0]


def find_violations(graph: Graph, first_only: bool = False) -> list[DeviceRuleError]:
    """Every device rule ``graph`` breaks (the first one only when ``first_only``)."""
    found: list[DeviceRuleError] = []
    checks = [_check_data_indices, _check_static_shapes, _check_ops, _check_ref_inputs]
    for check in checks:
        for err in check(graph):
            found.append(err)
            if first_only:
                return found
    return found


def _check_ops(graph: Graph):
    for op in graph.ops:
        yield from _check_port_maps(op)
        if op.type in (*_DATA, "Const"):
            continue
        spec = get_spec(op.type)
        yield from _check_ir_inputs(op, spec)
        yield from _check_output_names(op, spec)
        yield from _check_layouts(op)


def _check_port_maps(op: OpNode):
    for key, value, descs in ((INPUT_NAME_KEY, INPUT_NAME_VALUE, op.input_descs),
                              (OUTPUT_NAME_KEY, OUTPUT_NAME_VALUE, op.output_descs)):
        names, indices = op.attr(key), op.attr(value)
        want = [d.name for d in descs]
        if names is None or indices is None:
            yield DeviceRuleError(op, want[0] if want else None, "port-name-map",
                                  f"missing {key}/{value} attrs: GE matches ports by name "
                                  f"(expected {want} at 0..{len(want) - 1})")
            continue
        mapped = dict(zip(names, indices))
        for k, name in enumerate(want):
            if mapped.get(name) != k or len(names) != len(want) or len(indices) != len(want):
                yield DeviceRuleError(op, name, "port-name-map",
                                      f"{key}={list(names)} {value}={list(indices)} map it to "
                                      f"{mapped.get(name)}, its desc is #{k} of {want}")
                break


def _expected_input_names(spec: OpSpec, descs: Sequence[TensorDesc]) -> list[str]:
    """The desc names the prototype dictates for ``descs`` (dynamic ports take as many
    ``name<k>`` entries as the op has), in prototype order."""
    names: list[str] = []
    pos = 0
    for port in spec.inputs:
        if port.kind == "dynamic":
            k = 0
            while pos < len(descs) and descs[pos].name == f"{port.name}{k}":
                names.append(descs[pos].name)
                pos, k = pos + 1, k + 1
        else:
            names.append(port.name)
            pos += 1
    return names


def _check_ir_inputs(op: OpNode, spec: OpSpec):
    descs = op.input_descs
    edges = [e for e in op.inputs if not e.endswith(":-1")]
    if op.type not in _DATA and len(edges) != len(descs):
        yield DeviceRuleError(op, None, "ir-inputs", f"{len(edges)} data inputs but "
                              f"{len(descs)} input descs")
        return
    want = _expected_input_names(spec, descs)
    for k, desc in enumerate(descs):
        if k >= len(want):
            yield DeviceRuleError(op, desc.name, "ir-inputs", f"input #{k} {desc.name!r} is "
                                  f"beyond the prototype's inputs {want}")
            return
        if desc.name != want[k]:
            yield DeviceRuleError(op, want[k], "ir-inputs",
                                  f"input #{k} is {desc.name!r} where the prototype has "
                                  f"{want[k]!r}: every IR input up to the last fed one must be "
                                  "present, in order (unfed optional = \"\")")
            return
        port = spec.input(desc.name)
        fed = op.type in _DATA or edges[k] != ""
        if not fed and (not desc.unfed or (port is not None and port.kind == "required")):
            yield DeviceRuleError(op, desc.name, "ir-inputs",
                                  "an empty edge needs an optional port and an "
                                  "_is_unfed_optional desc")
        elif fed and desc.unfed:
            yield DeviceRuleError(op, desc.name, "ir-inputs",
                                  "a fed input carries an _is_unfed_optional desc")
    required = [p.name for p in spec.inputs if p.kind == "required"]
    present = {d.name for d in descs}
    for name in required:
        if name not in present:
            yield DeviceRuleError(op, name, "ir-inputs", "required input is missing")


def _check_output_names(op: OpNode, spec: OpSpec):
    ports = spec.outputs
    for k, desc in enumerate(op.output_descs):
        if k < len(ports) and ports[k].kind != "dynamic":
            ok = desc.name == ports[k].name
        elif ports and ports[-1].kind == "dynamic":
            ok = desc.name.startswith(ports[-1].name) and \
                desc.name[len(ports[-1].name):].isdigit()
        else:
            ok = False
        if not ok:
            yield DeviceRuleError(op, desc.name, "ir-inputs",
                                  f"output #{k} {desc.name!r} is not the prototype's output "
                                  f"{[p.name for p in ports]}")
            return


def _check_layouts(op: OpNode):
    rule = LAYOUT_RULES.get(op.type)
    if rule is None:
        return
    fmap = next((d for d in op.input_descs if d.name == rule.inputs[0]), None)
    rank = len(fmap.shape) if fmap is not None else 4
    layout = expected_layout(rule, rank)
    for descs, ports in ((op.input_descs, rule.inputs), (op.output_descs, rule.outputs)):
        for d in descs:
            if d.name not in ports or d.unfed:
                continue
            if d.layout != layout:
                yield DeviceRuleError(op, d.name, "layout", f"layout {d.layout!r}; the device "
                                      f"needs {layout!r} here (shape inference rejects ND)")
            elif d.name in rule.feature_maps and len(d.shape) != _RANK_OF[layout]:
                yield DeviceRuleError(op, d.name, "layout", f"a {len(d.shape)}-D tensor "
                                      f"cannot be {layout!r} (needs {_RANK_OF[layout]}-D)")


def _check_data_indices(graph: Graph):
    data = [op for op in graph.ops if op.type in _DATA]
    indices = sorted(op.attr("index") for op in data)
    if indices != list(range(len(data))):
        bad = next((op for op in data if indices.count(op.attr("index")) > 1
                    or not 0 <= op.attr("index") < len(data)), data[0] if data else None)
        yield DeviceRuleError(bad, "index", "data-index",
                              f"Data indices {indices} are not dense 0..{len(data) - 1}")


def _check_static_shapes(graph: Graph):
    data = [op for op in graph.ops if op.type in _DATA]
    if any(d < 0 for op in data for desc in op.output_descs for d in desc.shape):
        return  # a dynamic graph: -1 dims are how it says so
    for op in graph.ops:
        for desc in (*op.input_descs, *op.output_descs):
            if any(d < 0 for d in desc.shape):
                yield DeviceRuleError(op, desc.name, "static-shape",
                                      f"shape {list(desc.shape)} has a -1 dim in a graph whose "
                                      "inputs are all static")
                return


# ---- ref ops -----------------------------------------------------------------------------
# Ops whose result shares its input's memory on the device (no bytes of their own).
_NO_COPY = frozenset({"Reshape", "Identity", "Squeeze", "SqueezeV2", "SqueezeV3", "Unsqueeze",
                      "UnsqueezeV2", "UnsqueezeV3", "ExpandDims", "Flatten", "FlattenV2"})
_GRAPH_MEMORY = frozenset({"Data", "Const", "Constant", "RefData", "Variable"})


def ref_ports(op_type: str) -> list[tuple[int, str]]:
    """(input index, name) of the inputs a ref op writes (an output named like an input)."""
    spec = get_spec(op_type)
    outs = {p.name for p in spec.outputs}
    return [(k, p.name) for k, p in enumerate(spec.inputs) if p.name in outs]


def _readers(graph: Graph) -> dict[str, list[tuple[str, int]]]:
    readers: dict[str, list[tuple[str, int]]] = {}
    for op in graph.ops:
        for k, e in enumerate(x for x in op.inputs if not x.endswith(":-1")):
            if e:
                readers.setdefault(e, []).append((op.name, k))
    return readers


def _check_ref_inputs(graph: Graph):
    by_name = {op.name: op for op in graph.ops}
    readers = None
    for op in graph.ops:
        if op.type in (*_DATA, "Const", "NetOutput"):
            continue
        ports = ref_ports(op.type)
        if not ports:
            continue
        readers = readers if readers is not None else _readers(graph)
        edges = [e for e in op.inputs if not e.endswith(":-1")]
        names = [d.name for d in op.input_descs]
        for _, name in ports:
            if name not in names or not edges[names.index(name)]:
                continue
            k = names.index(name)
            if by_name[edges[k].rsplit(":", 1)[0]].type == "RefData":
                continue  # a RefData input is the graph's to write (an input mutation)
            problem = _shared_buffer(edges[k], (op.name, k), by_name, readers)
            if problem:
                yield DeviceRuleError(op, name, "ref-input-copy",
                                      f"{op.type} writes this input in place, but {problem}; "
                                      "put a TensorMove in front (as torchair does)")


def _shared_buffer(edge: str, reader: tuple[str, int], by_name: dict[str, OpNode],
                   readers: dict[str, list[tuple[str, int]]]) -> str | None:
    """Why the buffer behind ``edge`` is not the ref op's own to write, or None."""
    while True:
        others = [r for r in readers.get(edge, []) if r != reader]
        if others:
            name, port = others[0]
            return f"{edge!r} is also read by op {name!r} (input #{port})"
        src = by_name[edge.rsplit(":", 1)[0]]
        if src.type in _GRAPH_MEMORY:
            return f"it is {src.type} {src.name!r}'s memory"
        if src.type not in _NO_COPY:
            return None
        reader = (src.name, 0)
        edge = [e for e in src.inputs if not e.endswith(":-1")][0]
