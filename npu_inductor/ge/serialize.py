"""GE graphs <-> GE's ``ModelDef`` protobuf: ``.air`` (binary) and ``.pbtxt`` (text).

Field numbers come from ``ge_ir.proto`` (shared/reference/ge_ir_schema.md). Tensor descs
use the proto dtype enum; ``Type`` attrs use the C++ ``ge::DataType`` numbering.
Serialization is deterministic, so ``.air -> parse -> .air`` is byte-identical.
"""

from __future__ import annotations

from typing import Any

import torch
from google.protobuf import text_format

from npu_inductor.ge import dtypes
from npu_inductor.ge import ge_ir_pb2 as pb
from npu_inductor.ge.ir import Attr, Graph, OpNode, TensorDesc

MODEL_VERSION = 1
_LV = pb.AttrDef.ListValue
_LIST_FIELDS = {  # attr type -> (ListValue field, val_type)
    "ListInt": ("i", _LV.VT_LIST_INT), "ListFloat": ("f", _LV.VT_LIST_FLOAT),
    "ListBool": ("b", _LV.VT_LIST_BOOL), "ListString": ("s", _LV.VT_LIST_STRING),
    "ListType": ("dt", _LV.VT_LIST_DATA_TYPE),
}
_LIST_TYPES = {vt: t for t, (_, vt) in _LIST_FIELDS.items()}


# ---- to proto ---------------------------------------------------------------------------

def _desc_to_pb(desc: TensorDesc, out: pb.TensorDescriptor) -> None:
    out.name = desc.name
    out.layout = desc.layout
    if desc.unfed:
        out.attr["_is_unfed_optional"].i = 1
        return
    out.dtype = dtypes.to_proto(desc.dtype)
    out.shape.dim.extend(desc.shape)


def _tensor_to_pb(t: torch.Tensor, out: pb.TensorDef) -> None:
    _desc_to_pb(TensorDesc("", t.dtype, tuple(t.shape)), out.desc)
    # a fresh flat copy: contiguous() may keep stride 0 on size-0/1 dims, which view rejects
    flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.reshape(-1))
    out.data = flat.view(torch.uint8).numpy().tobytes()


def _attr_to_pb(attr: Attr, out: pb.AttrDef) -> None:
    t, v = attr.type, attr.value
    if t in ("Int", "int"):
        out.i = v
    elif t == "Float":
        out.f = v
    elif t == "Bool":
        out.b = v
    elif t == "String":
        out.s = v.encode()
    elif t == "Type":
        out.dt = dtypes.to_cpp(v)
    elif t == "Tensor":
        _tensor_to_pb(v, out.t)
    elif t == "ListListInt":
        for row in v:
            out.list_list_int.list_list_i.add().list_i.extend(row)
    elif t in _LIST_FIELDS:
        name, val_type = _LIST_FIELDS[t]
        out.list.val_type = val_type
        items = {"s": lambda x: x.encode(), "dt": dtypes.to_cpp}.get(name, lambda x: x)
        getattr(out.list, name).extend(items(x) for x in v)
    else:
        raise TypeError(f"cannot serialize attr type {t}")


def _op_to_pb(op: OpNode, out: pb.OpDef) -> None:
    out.name, out.type = op.name, op.type
    out.input.extend(op.inputs)
    for key, attr in op.attrs.items():
        _attr_to_pb(attr, out.attr[key])
    for d in op.input_descs:
        _desc_to_pb(d, out.input_desc.add())
    for d in op.output_descs:
        _desc_to_pb(d, out.output_desc.add())


def to_model_def(graph: Graph) -> pb.ModelDef:
    model = pb.ModelDef(name=graph.name, version=MODEL_VERSION)
    g = model.graph.add()
    g.name = graph.name
    for key, attr in graph.attrs.items():
        _attr_to_pb(attr, g.attr[key])
    for op in graph.ops:
        _op_to_pb(op, g.op.add())
    return model


def to_air(graph: Graph) -> bytes:
    """Binary ``ModelDef`` as ATC reads with ``--framework=1``."""
    return to_model_def(graph).SerializeToString(deterministic=True)


def to_pbtxt(graph: Graph) -> str:
    return text_format.MessageToString(to_model_def(graph))


# ---- from proto -------------------------------------------------------------------------

def _desc_from_pb(d: pb.TensorDescriptor) -> TensorDesc:
    if "_is_unfed_optional" in d.attr:
        return TensorDesc(d.name, None, (), d.layout, unfed=True)
    return TensorDesc(d.name, dtypes.from_proto(d.dtype), tuple(d.shape.dim), d.layout)


def _tensor_from_pb(t: pb.TensorDef) -> torch.Tensor:
    dtype = dtypes.from_proto(t.desc.dtype)
    shape = tuple(t.desc.shape.dim)
    if not t.data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(t.data), dtype=torch.uint8).view(dtype).reshape(shape)


def _attr_from_pb(a: pb.AttrDef) -> Attr:
    kind = a.WhichOneof("value")
    if kind == "i":
        return Attr("Int", a.i)
    if kind == "f":
        return Attr("Float", a.f)
    if kind == "b":
        return Attr("Bool", a.b)
    if kind == "s":
        return Attr("String", a.s.decode())
    if kind == "dt":
        return Attr("Type", dtypes.from_cpp(a.dt))
    if kind == "t":
        return Attr("Tensor", _tensor_from_pb(a.t))
    if kind == "list_list_int":
        return Attr("ListListInt", tuple(tuple(r.list_i) for r in a.list_list_int.list_list_i))
    if kind == "list":
        t = _LIST_TYPES[a.list.val_type]
        name = _LIST_FIELDS[t][0]
        conv: Any = {"s": lambda x: x.decode(), "dt": dtypes.from_cpp}.get(name, lambda x: x)
        return Attr(t, tuple(conv(x) for x in getattr(a.list, name)))
    raise TypeError(f"unsupported AttrDef field {kind!r}")


def _op_from_pb(o: pb.OpDef) -> OpNode:
    attrs = {k: _attr_from_pb(o.attr[k]) for k in sorted(o.attr)}
    return OpNode(o.name, o.type, tuple(o.input), attrs,
                  tuple(_desc_from_pb(d) for d in o.input_desc),
                  tuple(_desc_from_pb(d) for d in o.output_desc))


def from_model_def(model: pb.ModelDef) -> Graph:
    g = model.graph[0]
    attrs = {k: _attr_from_pb(g.attr[k]) for k in sorted(g.attr)}
    return Graph(g.name, tuple(_op_from_pb(o) for o in g.op), attrs)


def from_air(data: bytes) -> Graph:
    model = pb.ModelDef()
    model.ParseFromString(data)
    return from_model_def(model)


def from_pbtxt(text: str) -> Graph:
    return from_model_def(text_format.Parse(text, pb.ModelDef()))
