"""Structural device rules (npu_inductor/ge/device_rules.py): one violating graph per rule,
each refused with an error naming the op, the port and the rule; and the port-name maps the
host device loads a graph by."""

from dataclasses import replace

import pytest
import torch

from npu_inductor.ge import GraphBuilder, from_air, to_air
from npu_inductor.ge.device_rules import (
    INPUT_NAME_KEY,
    DeviceRuleError,
    check_graph,
    find_violations,
    port_name_attrs,
)
from npu_inductor.ge.ir import Graph, TensorDesc
from npu_inductor.runtime.host_model import HostModel

F32 = torch.float32
NCHW = (("x", "filter", "bias"), ("y",), "NCHW")


def _conv_graph(layout=NCHW, build: bool = True):
    b = GraphBuilder("conv")
    x = b.data(F32, (1, 2, 5, 5), "x")
    w = b.data(F32, (3, 2, 3, 3), "w")
    y, = b.op("Conv2D", "conv", [x, w], {"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0],
                                         "data_format": "NCHW"},
              [(F32, (1, 3, 3, 3))], layout=layout)
    b.output([y])
    return b.build() if build else Graph(b.name, tuple(b._ops))


def _swap_op(graph: Graph, name: str, **changes) -> Graph:
    return Graph(graph.name, tuple(replace(op, **changes) if op.name == name else op
                                   for op in graph.ops))


def _op(graph: Graph, name: str):
    return next(op for op in graph.ops if op.name == name)


def _refused(graph: Graph, rule: str, op: str, port: str | None):
    with pytest.raises(DeviceRuleError) as info:
        check_graph(graph)
    err = info.value
    assert (err.rule, err.op, err.port) == (rule, op, port), str(err)
    assert rule in str(err) and repr(op) in str(err)
    if port:
        assert repr(port) in str(err)
    return err


def test_a_well_formed_graph_passes_and_carries_port_name_maps():
    g = _conv_graph()
    assert find_violations(g) == []
    conv = _op(g, "conv")
    assert conv.attr(INPUT_NAME_KEY) == ("x", "filter")
    assert conv.attr("_input_name_value") == (0, 1)
    assert conv.attr("_output_name_key") == ("y",)
    assert [d.layout for d in conv.input_descs] == ["NCHW", "NCHW"]
    # the maps are real AttrDefs in the serialized ModelDef, as torchair writes them
    assert from_air(to_air(g)) == g


def test_port_name_map_missing():
    g = _conv_graph()
    conv = _op(g, "conv")
    stripped = {k: v for k, v in conv.attrs.items() if not k.startswith("_")}
    _refused(_swap_op(g, "conv", attrs=stripped), "port-name-map", "conv", "x")


def test_port_name_map_wrong_index():
    g = _conv_graph()
    conv = _op(g, "conv")
    attrs = dict(conv.attrs)
    attrs[INPUT_NAME_KEY] = replace(attrs[INPUT_NAME_KEY], value=("filter", "x"))
    _refused(_swap_op(g, "conv", attrs=attrs), "port-name-map", "conv", "x")


def test_host_device_refuses_a_graph_without_port_name_maps():
    g = _conv_graph()
    stripped = Graph(g.name, tuple(replace(op, attrs={k: v for k, v in op.attrs.items()
                                                      if not k.startswith("_")})
                                   for op in g.ops))
    loaded = from_air(to_air(stripped))  # what the device deserializes
    with pytest.raises(DeviceRuleError, match="port-name-map"):
        HostModel(loaded)
    HostModel(from_air(to_air(g)))  # the same graph with its maps loads



def test_host_acl_checks_every_load_but_those_marked_checked():
    """``HostAcl.rules_checked`` (compile_fx.load_graph: graphs our lowering built or a
    matching cache entry holds) is the only way a load skips the rules; it ends with its
    block, so any other model (a planted .air) is still refused."""
    from npu_inductor.runtime.host_acl import HostAcl

    g = _conv_graph()
    stripped = Graph(g.name, tuple(replace(op, attrs={k: v for k, v in op.attrs.items()
                                                      if not k.startswith("_")})
                                   for op in g.ops))
    air, acl = to_air(stripped), HostAcl()
    with pytest.raises(DeviceRuleError, match="port-name-map"):
        acl.mdl.load_from_mem(air, len(air))
    with acl.rules_checked():
        model_id, ret = acl.mdl.load_from_mem(to_air(g), len(to_air(g)))
    assert ret == 0 and acl.models[model_id].rules_checked
    with pytest.raises(DeviceRuleError, match="port-name-map"):
        acl.mdl.load_from_mem(air, len(air))

def test_ir_inputs_skipped_optional():
    """Conv2D fed x, filter and offset_w with bias left out entirely (not "")."""
    g = _conv_graph()
    conv = _op(g, "conv")
    descs = (*conv.input_descs, TensorDesc("offset_w", torch.int8, (3,)))
    b = _op(g, "x")
    attrs = {**conv.attrs, **port_name_attrs(descs, conv.output_descs)}
    bad = _swap_op(g, "conv", inputs=(*conv.inputs, f"{b.name}:0"), input_descs=descs,
                   attrs=attrs)
    _refused(bad, "ir-inputs", "conv", "bias")


def test_ir_inputs_unfed_optional_needs_its_marker():
    g = _conv_graph()
    conv = _op(g, "conv")
    descs = (*conv.input_descs, TensorDesc("bias", None, (), "FORMAT_RESERVED"))  # unmarked
    attrs = {**conv.attrs, **port_name_attrs(descs, conv.output_descs)}
    bad = _swap_op(g, "conv", inputs=(*conv.inputs, ""), input_descs=descs, attrs=attrs)
    _refused(bad, "ir-inputs", "conv", "bias")
    marked = _swap_op(g, "conv", inputs=(*conv.inputs, ""), attrs=attrs,
                      input_descs=(*conv.input_descs, replace(descs[-1], unfed=True)))
    assert find_violations(marked) == []


def test_layout_nd_conv_is_refused_at_build():
    with pytest.raises(DeviceRuleError) as info:
        _conv_graph(layout=None)
    assert (info.value.rule, info.value.op, info.value.port) == ("layout", "conv", "x")
    assert "NCHW" in str(info.value)


def test_layout_needs_a_4d_feature_map():
    b = GraphBuilder("bn")
    x = b.data(F32, (4, 3), "x")
    p = [b.data(F32, (3,), n) for n in ("scale", "offset", "mean", "var")]
    y, = b.op("BNInfer", "bn", [x, *p], {"epsilon": 1e-5}, [(F32, (4, 3))],
              layout=(("x", "scale", "offset", "mean", "variance"), ("y",), "NCHW"))
    b.output([y])
    with pytest.raises(DeviceRuleError) as info:
        b.build()
    assert (info.value.rule, info.value.op, info.value.port) == ("layout", "bn", "x")


def _rotary_graph(copy: bool, extra_reader: bool):
    b = GraphBuilder("rope")
    shape = (1, 4, 2, 8)
    q, k = (b.data(F32, shape, n) for n in ("q", "k"))
    cos, sin = (b.data(F32, (1, 4, 1, 8), n) for n in ("cos", "sin"))
    q2, = b.op("Relu", "q_act", [q], {}, [(F32, shape)])
    k2, = b.op("Relu", "k_act", [k], {}, [(F32, shape)])
    if copy:
        q2, = b.op("TensorMove", "q_copy", [q2], {}, [(F32, shape)])
        k2, = b.op("TensorMove", "k_copy", [k2], {}, [(F32, shape)])
    qo, ko = b.op("ApplyRotaryPosEmb", "rope", [q2, k2, cos, sin], {"layout": 1},
                  [(F32, shape), (F32, shape)])
    outs = [qo, ko]
    if extra_reader:
        outs.append(b.op("Neg", "reads_q", [q2], {}, [(F32, shape)])[0])
    b.output(outs)
    return b


def test_ref_input_read_elsewhere_is_refused():
    with pytest.raises(DeviceRuleError) as info:
        _rotary_graph(copy=False, extra_reader=True).build()
    err = info.value
    assert (err.rule, err.op, err.port) == ("ref-input-copy", "rope", "query")
    assert "reads_q" in str(err) and "TensorMove" in str(err)


def test_ref_input_that_is_a_graph_input_is_refused():
    b = GraphBuilder("rope")
    q, k = (b.data(F32, (1, 4, 2, 8), n) for n in ("q", "k"))
    cos, sin = (b.data(F32, (1, 4, 1, 8), n) for n in ("cos", "sin"))
    outs = b.op("ApplyRotaryPosEmb", "rope", [q, k, cos, sin], {},
                [(F32, (1, 4, 2, 8))] * 2)
    b.output(list(outs))
    with pytest.raises(DeviceRuleError) as info:
        b.build()
    assert (info.value.rule, info.value.op, info.value.port) == \
        ("ref-input-copy", "rope", "query")
    assert "Data 'q'" in str(info.value)


def test_ref_input_with_tensor_move_or_sole_reader_passes():
    _rotary_graph(copy=True, extra_reader=False).build()
    _rotary_graph(copy=False, extra_reader=False).build()  # nothing else reads q_act/k_act


def test_data_indices_must_be_dense():
    g = _conv_graph()
    w = _op(g, "w")
    bad = _swap_op(g, "w", attrs={**w.attrs, "index": replace(w.attrs["index"], value=2)})
    _refused(bad, "data-index", "w", "index")


def test_static_graph_has_no_unknown_dims():
    g = _conv_graph()
    conv = _op(g, "conv")
    out = (replace(conv.output_descs[0], shape=(1, 3, -1, 3)),)
    _refused(_swap_op(g, "conv", output_descs=out), "static-shape", "conv", "y")


def test_dynamic_graph_may_have_unknown_dims():
    b = GraphBuilder("dyn")
    x = b.data(F32, (-1, 4), "x")
    y, = b.op("Relu", "r", [x], {}, [(F32, (-1, 4))])
    b.output([y])
    assert find_violations(b.build()) == []
