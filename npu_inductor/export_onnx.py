"""The exported GE graph as ONNX (``model.onnx``): the same optimised graph, op for op, in
standard ONNX ops (opset 18), which ATC also compiles (``--framework=5``).

One converter per GE op type (``@converter("Add", ...)``) emits ONNX nodes with the GE
op's semantics (those of the host device's kernels, runtime/kernels/). Fused GE ops are
expanded into standard ops: ``RmsNorm`` / ``AddRmsNorm`` (ReduceMean, Sqrt, ...),
``ApplyRotaryPosEmb`` (Split, Neg, Concat, Mul, Add), ``SwiGlu`` (Split, Sigmoid, Mul),
``GeluV2`` (Erf or Tanh). Only ops the outputs depend on are converted (GE prunes dead
ops too). Graph inputs carry the ``Data`` ops' names, so ``atc.sh``'s ``--input_shape``
names hold for the ONNX model as well; bucketed dims are ``dim_param`` symbols (``s0``).
An op type without a converter is an ``ExportError`` naming the GE op and type.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import onnx
import torch
from onnx import TensorProto, helper

from npu_inductor.exporter import Affine, ExportError, Traced
from npu_inductor.ge import dtypes
from npu_inductor.ge.ir import Graph, OpNode

OPSET = 18
IR_VERSION = 10  # opset 18 needs IR >= 8; 10 is read by onnxruntime >= 1.17 and CANN's parser
_ONNX_DTYPES = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16,
                torch.bfloat16: TensorProto.BFLOAT16, torch.float64: TensorProto.DOUBLE,
                torch.int64: TensorProto.INT64, torch.int32: TensorProto.INT32,
                torch.int16: TensorProto.INT16, torch.int8: TensorProto.INT8,
                torch.uint8: TensorProto.UINT8, torch.bool: TensorProto.BOOL}
Converter = Callable[["OnnxBuilder", OpNode], list[str]]
CONVERTERS: dict[str, Converter] = {}


def onnx_dtype(dtype: torch.dtype) -> int:
    if dtype not in _ONNX_DTYPES:
        raise ExportError(f"no ONNX type for {dtype}")
    return _ONNX_DTYPES[dtype]


def converter(*ge_types: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for t in ge_types:
            CONVERTERS[t] = fn
        return fn
    return register


class OnnxBuilder:
    """The ONNX graph under construction; GE edges (``op:i``) map to ONNX value names."""

    def __init__(self, graph: Graph) -> None:
        self.ops = {op.name: op for op in graph.ops}
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.values: dict[str, str] = {}
        self._ids = itertools.count()

    def fresh(self, hint: str) -> str:
        return f"{hint}__{next(self._ids)}"

    def edge(self, op: OpNode, i: int) -> str | None:
        """The ONNX name of GE input ``i`` of ``op`` (None: unfed optional). A ``Const``
        becomes an initializer when first read as a tensor (not when read as axes)."""
        edge = op.inputs[i] if i < len(op.inputs) else ""
        if not edge or edge.endswith(":-1"):
            return None
        if edge not in self.values:
            src = self.ops[edge.rsplit(":", 1)[0]]
            self.values[edge] = self.const(src.attr("value"), src.name)
        return self.values[edge]

    def const_input(self, op: OpNode, i: int) -> torch.Tensor:
        """GE input ``i`` of ``op`` that ONNX needs as a constant (axes, perm, sizes)."""
        src = self.ops.get(op.inputs[i].rsplit(":", 1)[0]) if i < len(op.inputs) else None
        if src is None or src.type != "Const":
            raise ExportError(f"GE op {op.name} ({op.type}): input {i} must be a constant "
                              f"for ONNX, it comes from {op.inputs[i] or 'nowhere'}")
        return src.attr("value")

    def node(self, op_type: str, inputs: list[str | None], hint: str, outputs: int = 1,
             **attrs: Any) -> list[str]:
        names = [self.fresh(hint) for _ in range(outputs)]
        while inputs and inputs[-1] is None:
            inputs = inputs[:-1]
        self.nodes.append(helper.make_node(op_type, [x or "" for x in inputs], names,
                                           name=self.fresh(f"{hint}_{op_type}"), **attrs))
        return names

    def one(self, op_type: str, inputs: list[str | None], hint: str, **attrs: Any) -> str:
        return self.node(op_type, inputs, hint, **attrs)[0]

    def const(self, t: torch.Tensor, hint: str) -> str:
        name = self.fresh(hint)
        self.initializers.append(tensor_proto(name, t))
        return name

    def ints(self, values: list[int], hint: str) -> str:
        return self.const(torch.tensor(values, dtype=torch.int64), hint)

    def int64(self, x: str, hint: str) -> str:
        return self.one("Cast", [x], hint, to=TensorProto.INT64)


def tensor_proto(name: str, t: torch.Tensor) -> onnx.TensorProto:
    t = t.detach().contiguous()
    flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.reshape(-1))
    raw = flat.view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return helper.make_tensor(name, onnx_dtype(t.dtype), list(t.shape), raw, raw=True)


# ---- the graph -----------------------------------------------------------------------

def to_onnx(traced: Traced) -> onnx.ModelProto:
    """``traced``'s GE graph as an ONNX model (see the module docstring)."""
    from npu_inductor.export_bundle import export_graph

    graph = export_graph(traced)
    b = OnnxBuilder(graph)
    live = _live_ops(graph)
    inputs = _graph_inputs(traced, graph, b)
    for op in graph.ops:
        if op.name not in live or op.type in ("Data", "NetOutput", "Const"):
            continue
        fn = CONVERTERS.get(op.type)
        if fn is None:
            raise ExportError(f"GE op {op.name} of type {op.type} has no ONNX form yet "
                              f"(npu_inductor/export_onnx.py); export with formats=('air',)")
        _check_outputs_used(op, live, graph)
        outs = fn(b, op)
        for i, name in enumerate(outs):
            b.values[f"{op.name}:{i}"] = name
    outputs = _graph_outputs(traced, graph, b)
    model = helper.make_model(
        helper.make_graph(b.nodes, graph.name, inputs, outputs, b.initializers),
        opset_imports=[helper.make_opsetid("", OPSET)], producer_name="npu_inductor")
    model.ir_version = IR_VERSION
    return model


def _live_ops(graph: Graph) -> dict[str, set[int]]:
    """Ops the outputs depend on -> which of their outputs are read."""
    ops = {op.name: op for op in graph.ops}
    live: dict[str, set[int]] = {}
    stack = [graph.net_output().name]
    live[stack[0]] = set()
    while stack:
        for edge in ops[stack.pop()].inputs:
            if not edge or edge.endswith(":-1"):
                continue
            src, idx = edge.rsplit(":", 1)
            if src not in live:
                live[src] = set()
                stack.append(src)
            live[src].add(int(idx))
    return live


# GE ops whose extra outputs have no ONNX counterpart here: only output 0 may be read
_FIRST_OUTPUT_ONLY = ("MaxPoolWithArgmaxV1", "LayerNormV4")


def _check_outputs_used(op: OpNode, live: dict[str, set[int]], graph: Graph) -> None:
    if op.type in _FIRST_OUTPUT_ONLY and live[op.name] - {0}:
        raise ExportError(f"GE op {op.name} ({op.type}): outputs {sorted(live[op.name])} are "
                          f"read; its ONNX form computes output 0 only")


def _value_info(name: str, dtype: torch.dtype, dims: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, onnx_dtype(dtype), dims)


def _graph_inputs(traced: Traced, graph: Graph, b: OnnxBuilder) -> list[onnx.ValueInfoProto]:
    out = []
    for op, (kind, ref) in zip(graph.data_ops(), traced.feeds):
        dtype = op.output_descs[0].dtype
        dims = list(traced.inputs[ref].dims) if kind == "input" else []
        out.append(_value_info(op.name, dtype, dims))
        b.values[f"{op.name}:0"] = op.name
    return out


def _graph_outputs(traced: Traced, graph: Graph, b: OnnxBuilder) -> list[onnx.ValueInfoProto]:
    out = []
    net = graph.net_output()
    for i, spec in enumerate(traced.outputs):
        src = b.values[net.inputs[i]]
        b.nodes.append(helper.make_node("Identity", [src], [spec.name], name=f"{spec.name}_out"))
        dims = [d.symbol if isinstance(d, Affine) and (d.scale, d.offset) == (1, 0)
                else None if isinstance(d, Affine) else d for d in spec.dims]
        out.append(_value_info(spec.name, spec.dtype, dims))
    return out


# ---- elementwise and structural ops ---------------------------------------------------

_SAME = {"Add": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div", "Relu": "Relu",
         "Tanh": "Tanh", "Sigmoid": "Sigmoid", "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt",
         "Neg": "Neg", "Abs": "Abs", "Erf": "Erf", "Sin": "Sin", "Cos": "Cos",
         "Floor": "Floor", "Ceil": "Ceil", "Reciprocal": "Reciprocal", "Pow": "Pow",
         "Maximum": "Max", "Minimum": "Min", "Greater": "Greater", "Less": "Less",
         "Equal": "Equal", "GreaterEqual": "GreaterOrEqual", "LessEqual": "LessOrEqual",
         "LogicalAnd": "And", "LogicalOr": "Or", "LogicalNot": "Not", "SelectV2": "Where",
         "Identity": "Identity", "TensorMove": "Identity"}


def _same(b: OnnxBuilder, op: OpNode) -> list[str]:
    n = len([e for e in op.inputs if e and not e.endswith(":-1")])
    return b.node(_SAME[op.type], [b.edge(op, i) for i in range(n)], op.name)


for _t in _SAME:
    converter(_t)(_same)


@converter("Rsqrt")
def _rsqrt(b: OnnxBuilder, op: OpNode) -> list[str]:
    return b.node("Reciprocal", [b.one("Sqrt", [b.edge(op, 0)], op.name)], op.name)


@converter("Cast")
def _cast(b: OnnxBuilder, op: OpNode) -> list[str]:
    to = onnx_dtype(dtypes.from_cpp(op.attr("dst_type")))
    return b.node("Cast", [b.edge(op, 0)], op.name, to=to)


@converter("Reshape")
def _reshape(b: OnnxBuilder, op: OpNode) -> list[str]:
    # torch semantics: a 0 in the shape is a zero-size dim, never "copy the input's dim"
    return b.node("Reshape", [b.edge(op, 0), b.int64(b.edge(op, 1), op.name)], op.name,
                  allowzero=1)


@converter("Shape")
def _shape(b: OnnxBuilder, op: OpNode) -> list[str]:
    y = b.one("Shape", [b.edge(op, 0)], op.name)
    dtype = dtypes.from_cpp(op.attr("dtype", dtypes.to_cpp(torch.int32)))
    return [y] if dtype == torch.int64 else b.node("Cast", [y], op.name, to=onnx_dtype(dtype))


@converter("Unsqueeze")
def _unsqueeze(b: OnnxBuilder, op: OpNode) -> list[str]:
    return b.node("Unsqueeze", [b.edge(op, 0), b.ints(list(op.attr("axes")), op.name)],
                  op.name)


@converter("Pack")
def _pack(b: OnnxBuilder, op: OpNode) -> list[str]:
    axis = op.attr("axis", 0)
    parts = [b.one("Unsqueeze", [b.edge(op, i), b.ints([axis], op.name)], op.name)
             for i in range(op.attr("N"))]
    return b.node("Concat", parts, op.name, axis=axis)


@converter("ConcatV2")
def _concat(b: OnnxBuilder, op: OpNode) -> list[str]:
    n = op.attr("N")
    axis = int(b.const_input(op, n))
    return b.node("Concat", [b.edge(op, i) for i in range(n)], op.name, axis=axis)


@converter("Transpose")
def _transpose(b: OnnxBuilder, op: OpNode) -> list[str]:
    perm = [int(p) for p in b.const_input(op, 1).tolist()]
    return b.node("Transpose", [b.edge(op, 0)], op.name, perm=perm)


@converter("GatherV2")
def _gather(b: OnnxBuilder, op: OpNode) -> list[str]:
    if op.attr("batch_dims", 0):
        raise ExportError(f"GE op {op.name} (GatherV2): batch_dims has no ONNX Gather form")
    axis = int(b.const_input(op, 2).reshape(-1)[0])
    return b.node("Gather", [b.edge(op, 0), b.edge(op, 1)], op.name, axis=axis)


@converter("StridedSliceV2")
def _strided_slice(b: OnnxBuilder, op: OpNode) -> list[str]:
    masks = {k: op.attr(k, 0) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                        "new_axis_mask", "shrink_axis_mask")}
    if any(masks[k] for k in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        raise ExportError(f"GE op {op.name} (StridedSliceV2): ellipsis/new-axis/shrink masks "
                          f"have no ONNX Slice form")
    begin, end = b.int64(b.edge(op, 1), op.name), b.int64(b.edge(op, 2), op.name)
    if masks["begin_mask"] or masks["end_mask"]:
        begin, end = _masked(b, op, masks["begin_mask"], masks["end_mask"])
    axes = b.edge(op, 3)
    steps = b.edge(op, 4)
    return b.node("Slice", [b.edge(op, 0), begin, end,
                            b.int64(axes, op.name) if axes else None,
                            b.int64(steps, op.name) if steps else None], op.name)


def _masked(b: OnnxBuilder, op: OpNode, begin_mask: int, end_mask: int) -> tuple[str, str]:
    begin = [int(v) for v in b.const_input(op, 1).reshape(-1).tolist()]
    end = [int(v) for v in b.const_input(op, 2).reshape(-1).tolist()]
    begin = [0 if begin_mask >> i & 1 else v for i, v in enumerate(begin)]
    end = [2 ** 63 - 1 if end_mask >> i & 1 else v for i, v in enumerate(end)]
    return b.ints(begin, op.name), b.ints(end, op.name)


@converter("Range")
def _range(b: OnnxBuilder, op: OpNode) -> list[str]:
    return b.node("Range", [b.edge(op, i) for i in range(3)], op.name)


@converter("Fill")
def _fill(b: OnnxBuilder, op: OpNode) -> list[str]:
    return b.node("Expand", [b.edge(op, 1), b.int64(b.edge(op, 0), op.name)], op.name)


@converter("SplitV")
def _split_v(b: OnnxBuilder, op: OpNode) -> list[str]:
    sizes = [int(s) for s in b.const_input(op, 1).reshape(-1).tolist()]
    axis = int(b.const_input(op, 2).reshape(-1)[0])
    if -1 in sizes:
        total = op.input_descs[0].shape[axis]
        if total < 0:
            raise ExportError(f"GE op {op.name} (SplitV): a -1 size on a dynamic dim")
        sizes[sizes.index(-1)] = total - (sum(sizes) + 1)
    return b.node("Split", [b.edge(op, 0), b.ints(sizes, op.name)], op.name,
                  outputs=len(sizes), axis=axis)


# ---- reductions, softmax, matmul ------------------------------------------------------

def _reduce(onnx_type: str) -> Converter:
    def convert(b: OnnxBuilder, op: OpNode) -> list[str]:
        axes = b.edge(op, 1)
        return b.node(onnx_type, [b.edge(op, 0), b.int64(axes, op.name) if axes else None],
                      op.name, keepdims=int(bool(op.attr("keep_dims", False))))
    return convert


for _ge, _onnx in (("ReduceSum", "ReduceSum"), ("ReduceMean", "ReduceMean"),
                   ("ReduceMax", "ReduceMax"), ("ReduceMin", "ReduceMin"),
                   ("ReduceProd", "ReduceProd"), ("ReduceLogSumExp", "ReduceLogSumExp")):
    converter(_ge)(_reduce(_onnx))


@converter("SoftmaxV2")
def _softmax(b: OnnxBuilder, op: OpNode) -> list[str]:
    axes = list(op.attr("axes", [-1]))
    if len(axes) != 1:
        raise ExportError(f"GE op {op.name} (SoftmaxV2): softmax over axes {axes}; ONNX "
                          f"Softmax takes one axis")
    return b.node("Softmax", [b.edge(op, 0)], op.name, axis=axes[0])


def _swap_last(b: OnnxBuilder, x: str, rank: int, hint: str) -> str:
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return b.one("Transpose", [x], hint, perm=perm)


def _matmul(b: OnnxBuilder, op: OpNode, ta: bool, tb: bool) -> list[str]:
    x1, x2 = b.edge(op, 0), b.edge(op, 1)
    if ta:
        x1 = _swap_last(b, x1, len(op.input_descs[0].shape), op.name)
    if tb:
        x2 = _swap_last(b, x2, len(op.input_descs[1].shape), op.name)
    if b.edge(op, 3) is not None:
        raise ExportError(f"GE op {op.name} ({op.type}): offset_w (quantized matmul) has no "
                          f"ONNX MatMul form")
    y = b.one("MatMul", [x1, x2], op.name)
    bias = b.edge(op, 2)
    return [b.one("Add", [y, bias], op.name)] if bias else [y]


@converter("MatMulV2", "MatMul")
def _matmul_v2(b: OnnxBuilder, op: OpNode) -> list[str]:
    return _matmul(b, op, op.attr("transpose_x1", False), op.attr("transpose_x2", False))


@converter("BatchMatMulV2", "BatchMatMul")
def _batch_matmul(b: OnnxBuilder, op: OpNode) -> list[str]:
    return _matmul(b, op, op.attr("adj_x1", False), op.attr("adj_x2", False))


# ---- nn: conv, pooling, normalization, activations -------------------------------------

def _nchw(op: OpNode) -> None:
    fmt = op.attr("data_format", "NCHW")
    if fmt != "NCHW":
        raise ExportError(f"GE op {op.name} ({op.type}): data_format {fmt}; ONNX is NCHW")


def _pads(ge_pads: list[int]) -> list[int]:
    top, bottom, left, right = ge_pads
    return [top, left, bottom, right]


@converter("Conv2D")
def _conv2d(b: OnnxBuilder, op: OpNode) -> list[str]:
    _nchw(op)
    if b.edge(op, 3) is not None:
        raise ExportError(f"GE op {op.name} (Conv2D): offset_w has no ONNX Conv form")
    return b.node("Conv", [b.edge(op, 0), b.edge(op, 1), b.edge(op, 2)], op.name,
                  strides=list(op.attr("strides"))[2:], pads=_pads(list(op.attr("pads"))),
                  dilations=list(op.attr("dilations", (1, 1, 1, 1)))[2:],
                  group=op.attr("groups", 1))


@converter("AvgPoolV2")
def _avg_pool(b: OnnxBuilder, op: OpNode) -> list[str]:
    _nchw(op)
    if op.attr("divisor_override", 0) or op.attr("global_pooling", False) or \
            op.attr("padding_mode", "CALCULATED") != "CALCULATED":
        raise ExportError(f"GE op {op.name} (AvgPoolV2): divisor_override, global pooling or "
                          f"padding_mode other than CALCULATED have no ONNX form here")
    return b.node("AveragePool", [b.edge(op, 0)], op.name,
                  kernel_shape=list(op.attr("ksize"))[2:], strides=list(op.attr("strides"))[2:],
                  pads=_pads(list(op.attr("pads"))), ceil_mode=int(op.attr("ceil_mode", False)),
                  count_include_pad=int(not op.attr("exclusive", True)))


@converter("MaxPoolWithArgmaxV1")
def _max_pool_v1(b: OnnxBuilder, op: OpNode) -> list[str]:
    # V1's attrs are [1, h, w, 1]; output 1 (the uint16 window mask) is not read here
    k, s, p, d = (list(op.attr(a, (1, 1, 1, 1)))[1:3]
                  for a in ("ksize", "strides", "pads", "dilation"))
    return b.node("MaxPool", [b.edge(op, 0)], op.name, kernel_shape=k, strides=s,
                  pads=[p[0], p[1], p[0], p[1]], dilations=d,
                  ceil_mode=int(op.attr("ceil_mode", False)))


@converter("LayerNormV4")
def _layer_norm(b: OnnxBuilder, op: OpNode) -> list[str]:
    shape = [int(v) for v in b.const_input(op, 1).reshape(-1).tolist()]
    dtype = op.input_descs[0].dtype
    gamma = b.edge(op, 2) or b.const(torch.ones(shape, dtype=dtype), op.name)
    return b.node("LayerNormalization", [b.edge(op, 0), gamma, b.edge(op, 3)], op.name,
                  axis=-len(shape), epsilon=float(op.attr("epsilon", 1e-5)))


def _scalar(b: OnnxBuilder, value: float, dtype: torch.dtype, hint: str) -> str:
    return b.const(torch.tensor(value, dtype=dtype), hint)


@converter("GeluV2", "Gelu")
def _gelu(b: OnnxBuilder, op: OpNode) -> list[str]:
    x, dtype = b.edge(op, 0), op.input_descs[0].dtype
    half = b.one("Mul", [x, _scalar(b, 0.5, dtype, op.name)], op.name)
    if op.type == "GeluV2" and op.attr("approximate", "none") == "none":
        inner = b.one("Erf", [b.one("Mul", [x, _scalar(b, math.sqrt(0.5), dtype, op.name)],
                                    op.name)], op.name)
    else:  # tanh approximation (GE Gelu, GeluV2 approximate="tanh")
        cube = b.one("Mul", [b.one("Mul", [x, x], op.name), x], op.name)
        poly = b.one("Add", [x, b.one("Mul", [cube, _scalar(b, 0.044715, dtype, op.name)],
                                      op.name)], op.name)
        inner = b.one("Tanh", [b.one("Mul", [poly, _scalar(b, math.sqrt(2 / math.pi), dtype,
                                                               op.name)], op.name)], op.name)
    return b.node("Mul", [half, b.one("Add", [inner, _scalar(b, 1.0, dtype, op.name)],
                                          op.name)], op.name)


def _rms(b: OnnxBuilder, op: OpNode, x: str, dtype: torch.dtype) -> list[str]:
    """y, rstd of GE RmsNorm over the last dim (computed in float32, as the kernel)."""
    f32 = dtype != torch.float32
    xf = b.one("Cast", [x], op.name, to=TensorProto.FLOAT) if f32 else x
    mean = b.one("ReduceMean", [b.one("Mul", [xf, xf], op.name), b.ints([-1], op.name)],
                 op.name, keepdims=1)
    eps = _scalar(b, float(op.attr("epsilon", 1e-6)), torch.float32, op.name)
    rstd = b.one("Reciprocal", [b.one("Sqrt", [b.one("Add", [mean, eps], op.name)], op.name)],
                 op.name)
    gamma = b.edge(op, 1 if op.type == "RmsNorm" else 2)
    if op.input_descs[-1].dtype != torch.float32:
        gamma = b.one("Cast", [gamma], op.name, to=TensorProto.FLOAT)
    y = b.one("Mul", [b.one("Mul", [xf, rstd], op.name), gamma], op.name)
    if f32:
        y = b.one("Cast", [y], op.name, to=onnx_dtype(dtype))
    return [y, rstd]


@converter("RmsNorm")
def _rms_norm(b: OnnxBuilder, op: OpNode) -> list[str]:
    return _rms(b, op, b.edge(op, 0), op.input_descs[0].dtype)


@converter("AddRmsNorm")
def _add_rms_norm(b: OnnxBuilder, op: OpNode) -> list[str]:
    x = b.one("Add", [b.edge(op, 0), b.edge(op, 1)], op.name)
    return [*_rms(b, op, x, op.input_descs[0].dtype), x]


def _halves(b: OnnxBuilder, x: str, width: int, axis: int, hint: str) -> list[str]:
    """torch.chunk(x, 2, axis) of a static ``width``."""
    if width < 0:
        raise ExportError(f"GE op {hint}: splitting a dynamic dim in halves")
    first = -(-width // 2)
    return b.node("Split", [x, b.ints([first, width - first], hint)], hint, outputs=2,
                  axis=axis)


def _rotary(b: OnnxBuilder, op: OpNode, x: str, width: int, cos: str, sin: str) -> str:
    x1, x2 = _halves(b, x, width, -1, op.name)
    rotated = b.one("Concat", [b.one("Neg", [x2], op.name), x1], op.name, axis=-1)
    return b.one("Add", [b.one("Mul", [x, cos], op.name), b.one("Mul", [rotated, sin], op.name)],
                 op.name)


@converter("ApplyRotaryPosEmb")
def _apply_rotary(b: OnnxBuilder, op: OpNode) -> list[str]:
    if op.attr("rotary_mode", "half") != "half":
        raise ExportError(f"GE op {op.name} (ApplyRotaryPosEmb): rotary_mode "
                          f"{op.attr('rotary_mode')!r}; only 'half' has an ONNX form here")
    cos, sin = b.edge(op, 2), b.edge(op, 3)
    return [_rotary(b, op, b.edge(op, i), op.input_descs[i].shape[-1], cos, sin)
            for i in (0, 1)]


@converter("RotaryMul")
def _rotary_mul(b: OnnxBuilder, op: OpNode) -> list[str]:
    return [_rotary(b, op, b.edge(op, 0), op.input_descs[0].shape[-1], b.edge(op, 1),
                    b.edge(op, 2))]


@converter("SwiGlu")
def _swiglu(b: OnnxBuilder, op: OpNode) -> list[str]:
    dim = op.attr("dim", -1)
    a, g = _halves(b, b.edge(op, 0), op.input_descs[0].shape[dim], dim, op.name)
    silu = b.one("Mul", [a, b.one("Sigmoid", [a], op.name)], op.name)
    return b.node("Mul", [silu, g], op.name)
