"""Collective converters: ``_c10d_functional`` ops -> Hcom* GE ops (HCCL collectives).

    all_reduce(x, op, g)              ==> HcomAllReduce(reduction, group, fusion=0)
                                          (avg: sum, then RealDiv by the group size)
    *_coalesced([x0, x1..], ...)      ==> one Hcom op per tensor (GE has no coalesced form)
    all_gather_into_tensor(x, n, g)   ==> HcomAllGather(rank_size=n, group)
    reduce_scatter_tensor(x, op, n, g)==> HcomReduceScatter(reduction, rank_size=n, group)
    broadcast(x, src, g)              ==> HcomBroadcast(root_rank=src, group)
    all_to_all_single(x, out, in, g)  ==> HcomAllToAllV(element counts, displacements)
                                          + Reshape
    wait_tensor(x)                    ==> Identity (a GE collective has finished when its
                                          output is read; bf16 passes straight through)

The torch group name (``'0'``) becomes a GE communicator name through the runtime's
group registry (``runtime/collectives.py``), which maps it back at execution. Dtypes the
Hcom prototypes lack travel in a wider one where that is exact (bf16 -> fp32, bool ->
uint8 for pure data movement); the rest (int64 reductions, fp64) are refused, so the
collective runs in eager.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from npu_inductor.ge import hccl_groups as comm
from npu_inductor.ge.op_specs import get_spec
from npu_inductor.lowering.helpers import cast, int_list
from npu_inductor.lowering.registry import register

c10d = torch.ops._c10d_functional

# torch reduce_op string -> GE ``reduction`` attr (avg is sum + divide: GE has no avg)
REDUCTIONS = {"sum": "sum", "avg": "sum", "product": "prod", "min": "min", "max": "max"}
# dtypes carried in a wider GE dtype (exact both ways)
REDUCE_CARRIER = {torch.bfloat16: torch.float32}
MOVE_CARRIER = {torch.bfloat16: torch.float32, torch.bool: torch.uint8}
REDUCE_DTYPES = {torch.float32, torch.float16, torch.int32, torch.int16, torch.int8}
MOVE_DTYPES = REDUCE_DTYPES | {torch.int64, torch.uint8}


def _dtypes(node: torch.fx.Node) -> list[torch.dtype]:
    val = node.meta.get("val")
    return [v.dtype for v in (val if isinstance(val, (list, tuple)) else [val])]


def _refuse_dtype(node: torch.fx.Node, allowed: set, carriers: dict) -> str | None:
    for dtype in _dtypes(node):
        if dtype not in allowed and dtype not in carriers:
            return f"{node.target} in {dtype}: the Hcom prototype has no such dtype"
    return None


def reduce_capability(node: torch.fx.Node) -> str | None:
    """all_reduce / reduce_scatter: a GE reduction and a dtype HCCL reduces exactly."""
    op = node.args[1]
    if op not in REDUCTIONS:
        return f"{node.target}: reduce_op {op!r} has no HCCL reduction"
    if op == "avg" and not all(d.is_floating_point for d in _dtypes(node)):
        return f"{node.target}: avg of integers (integer division) is not supported"
    return _refuse_dtype(node, REDUCE_DTYPES, REDUCE_CARRIER)


def move_capability(node: torch.fx.Node) -> str | None:
    """Data-movement collectives: any dtype that travels exactly."""
    return _refuse_dtype(node, MOVE_DTYPES, MOVE_CARRIER)


def all_to_all_capability(node: torch.fx.Node) -> str | None:
    sizes = list(node.args[1]) + list(node.args[2])
    if not all(isinstance(s, int) for s in [*sizes, *node.meta["val"].shape]):
        return f"{node.target}: split sizes and shapes must be static, got {sizes}"
    return move_capability(node)


def _carried(ctx, x, carriers: dict):
    """``x`` in the dtype its Hcom op carries it in."""
    return cast(ctx, x, carriers.get(x.dtype, x.dtype))


def _divide(ctx, y, n: int):
    """avg = sum / group size (GE has no avg reduction)."""
    return ctx.op("RealDiv", [y, ctx.const(n, y.dtype)], out=(y.dtype, y.shape), suffix="avg")


def _all_reduce(ctx, input, reduce_op: str, group_name: Any):
    x = _carried(ctx, input, REDUCE_CARRIER)
    attrs = {"reduction": REDUCTIONS[reduce_op], "group": comm.ge_group_name(group_name),
             "fusion": 0}
    y = ctx.op("HcomAllReduce", [x], attrs, out=(x.dtype, x.shape))
    if reduce_op == "avg":
        y = _divide(ctx, y, comm.group_size(group_name))
    return cast(ctx, y, input.dtype)


def _all_gather(ctx, input, shape, group_size: int, group_name: Any):
    x = _carried(ctx, input, MOVE_CARRIER)
    y = ctx.op("HcomAllGather", [x], {"rank_size": group_size,
                                       "group": comm.ge_group_name(group_name)},
               out=(x.dtype, shape))
    return cast(ctx, y, input.dtype)


def _reduce_scatter(ctx, input, shape, reduce_op: str, group_size: int, group_name: Any):
    x = _carried(ctx, input, REDUCE_CARRIER)
    attrs = {"reduction": REDUCTIONS[reduce_op], "group": comm.ge_group_name(group_name),
             "rank_size": group_size}
    y = ctx.op("HcomReduceScatter", [x], attrs, out=(x.dtype, shape))
    if reduce_op == "avg":
        y = _divide(ctx, y, group_size)
    return cast(ctx, y, input.dtype)


def _shapes(ctx) -> list:
    return [shape for _, shape in ctx.out_specs()]


@register(c10d.all_reduce.default, capability=reduce_capability)
def all_reduce(ctx, input, reduce_op, group_name):
    """all_reduce(Tensor input, str reduce_op, Any group_name) -> Tensor"""
    return _all_reduce(ctx, input, reduce_op, group_name)


@register(c10d.all_reduce_coalesced.default, capability=reduce_capability)
def all_reduce_coalesced(ctx, inputs, reduce_op, group_name):
    """all_reduce_coalesced(Tensor[] inputs, str reduce_op, Any group_name) -> Tensor[]"""
    return [_all_reduce(ctx, x, reduce_op, group_name) for x in inputs]


@register(c10d.all_gather_into_tensor.default, capability=move_capability)
def all_gather_into_tensor(ctx, input, group_size, group_name):
    """all_gather_into_tensor(Tensor input, int group_size, Any group_name) -> Tensor"""
    return _all_gather(ctx, input, _shapes(ctx)[0], group_size, group_name)


@register(c10d.all_gather_into_tensor_coalesced.default, capability=move_capability)
def all_gather_into_tensor_coalesced(ctx, inputs, group_size, group_name):
    """all_gather_into_tensor_coalesced(Tensor[] inputs, int group_size, Any group_name)
    -> Tensor[]"""
    return [_all_gather(ctx, x, shape, group_size, group_name)
            for x, shape in zip(inputs, _shapes(ctx))]


@register(c10d.reduce_scatter_tensor.default, capability=reduce_capability)
def reduce_scatter_tensor(ctx, input, reduce_op, group_size, group_name):
    """reduce_scatter_tensor(Tensor input, str reduce_op, int group_size, Any group_name)
    -> Tensor"""
    return _reduce_scatter(ctx, input, _shapes(ctx)[0], reduce_op, group_size, group_name)


@register(c10d.reduce_scatter_tensor_coalesced.default, capability=reduce_capability)
def reduce_scatter_tensor_coalesced(ctx, inputs, reduce_op, group_size, group_name):
    """reduce_scatter_tensor_coalesced(Tensor[] inputs, str reduce_op, int group_size, Any
    group_name) -> Tensor[]"""
    return [_reduce_scatter(ctx, x, shape, reduce_op, group_size, group_name)
            for x, shape in zip(inputs, _shapes(ctx))]


@register(c10d.broadcast.default, capability=move_capability)
def broadcast(ctx, input, src, group_name):
    """broadcast(Tensor input, int src, Any group_name) -> Tensor"""
    x = _carried(ctx, input, MOVE_CARRIER)
    y = ctx.op("HcomBroadcast", [[x]], {"root_rank": src, "group": comm.ge_group_name(group_name)},
               out=[(x.dtype, x.shape)])
    return cast(ctx, y, input.dtype)


def _displacements(counts: list[int]) -> list[int]:
    return [sum(counts[:i]) for i in range(len(counts))]


@register(c10d.all_to_all_single.default, capability=all_to_all_capability)
def all_to_all_single(ctx, input, output_split_sizes, input_split_sizes, group_name):
    """all_to_all_single(Tensor input, SymInt[] output_split_sizes, SymInt[]
    input_split_sizes, Any group_name) -> Tensor"""
    x = _carried(ctx, input, MOVE_CARRIER)
    _, shape = ctx.out_specs()[0]
    row = math.prod(input.shape[1:])  # HCCL counts elements; torch splits rows of dim 0
    send = [s * row for s in input_split_sizes]
    recv = [s * row for s in output_split_sizes]
    counts = [int_list(ctx, send, "send_counts"), int_list(ctx, _displacements(send), "sdispls"),
              int_list(ctx, recv, "recv_counts"), int_list(ctx, _displacements(recv), "rdispls")]
    flat = ctx.op("HcomAllToAllV", [x, *counts], {"group": comm.ge_group_name(group_name)},
                  out=(x.dtype, (sum(recv),)))
    y = ctx.op("Reshape", [flat, int_list(ctx, shape)], out=(x.dtype, shape), suffix="reshape")
    return cast(ctx, y, input.dtype)


@register(c10d.wait_tensor.default)
def wait_tensor(ctx, tensor):
    """wait_tensor(Tensor tensor) -> Tensor"""
    if tensor.dtype not in get_spec("Identity").inputs[0].dtypes:
        return tensor  # bf16: Identity's prototype lacks it, and GE needs no wait op anyway
    return ctx.op("Identity", [tensor])
