"""A readable text form of a GE graph, one op per line (for golden tests and dumps).

    %mm = MatMulV2(%arg0_1, %arg1_1)[transpose_x2=true] -> f32[4, 3]
"""

from __future__ import annotations

import torch

from npu_inductor.ge.dtypes import short_name
from npu_inductor.ge.ir import Attr, Graph, OpNode, TensorDesc

_MAX_CONST_ELEMS = 8


def _ref(edge: str) -> str:
    if edge == "":
        return "_"
    src, idx = edge.rsplit(":", 1)
    if idx == "-1":
        return f"^%{src}"
    return f"%{src}" if idx == "0" else f"%{src}:{idx}"


def _value(attr: Attr) -> str:
    v = attr.value
    if attr.type == "Tensor":
        return _tensor(v)
    if attr.type == "Type":
        return short_name(v)
    if attr.type == "ListType":
        return "[" + ", ".join(short_name(x) for x in v) + "]"
    if attr.type == "Bool":
        return "true" if v else "false"
    if attr.type == "String":
        return repr(v)
    if attr.type == "Float":
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(str(_value(Attr("x", x)) if isinstance(x, tuple) else x)
                               for x in v) + "]"
    return str(v)


def _tensor(t: torch.Tensor) -> str:
    head = f"{short_name(t.dtype)}{list(t.shape)}"
    if t.numel() > _MAX_CONST_ELEMS:
        return head
    vals = ", ".join(f"{x:g}" if isinstance(x, float) else str(x)
                     for x in t.reshape(-1).tolist())
    return f"{head}{{{vals}}}"


def _desc(d: TensorDesc) -> str:
    return f"{short_name(d.dtype)}{list(d.shape)}"


def format_op(op: OpNode) -> str:
    attrs = ", ".join(f"{k}={_value(a)}" for k, a in op.attrs.items()
                      if not k.startswith("_"))  # private GE attrs (port-name maps)
    args = ", ".join(_ref(e) for e in op.inputs)
    if op.type == "NetOutput":
        return f"  return ({args})"
    outs = ", ".join(_desc(d) for d in op.output_descs)
    return f"  %{op.name} = {op.type}({args})" + (f"[{attrs}]" if attrs else "") + f" -> {outs}"


def format_graph(graph: Graph) -> str:
    lines = [f'graph "{graph.name}":']
    lines += [format_op(op) for op in graph.ops]
    return "\n".join(lines) + "\n"
