"""RMSNorm written in plain ops  ==>  ``npu::rms_norm`` (GE ``RmsNorm``); a residual add
feeding it  ==>  ``npu::add_rms_norm`` (GE ``AddRmsNorm``).

    xf = _to_copy(x, f32)?                      (LLaMA's ``x.float()``; absent in fp32)
    rstd = rsqrt(mean(pow(xf, 2), [-1], keepdim) + eps)
    y = mul(gamma, _to_copy(mul(xf, rstd), x.dtype)?)      ==>  rms_norm(x, gamma, eps)[0]

    s = add(a, b); rms_norm(s, gamma, eps)       ==>  add_rms_norm(a, b, gamma, eps)
                                                     (the sum is its third output)

Fires in inference graphs. In training graphs AOTAutograd has already written the
backward in plain ops against the forward's saved intermediates, so the fused op's
RmsNormGrad would not be used; the fusion stays off there (logged).
"""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from npu_inductor import ops  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import (
    aten,
    bump,
    call,
    dtype,
    finish,
    is_op,
    is_training,
    only_used_by,
    scalar_arg,
    shape,
    skip,
)

npu = torch.ops.npu


def _other(node: Node, one: Node) -> Node | None:
    a, b = node.args[:2]
    if a is one and isinstance(b, Node):
        return b
    if b is one and isinstance(a, Node):
        return a
    return None


def _single_user(node: Node) -> Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _is_square(node: Node, x: Node) -> bool:
    if is_op(node, aten.pow.Tensor_Scalar):
        return node.args[0] is x and node.args[1] == 2
    return is_op(node, aten.mul.Tensor) and node.args[0] is x and node.args[1] is x


def _last_dim_mean(node: Node) -> bool:
    if not is_op(node, aten.mean.dim):
        return False
    dims = list(node.args[1])
    rank = len(shape(node.args[0]))
    keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    return keep and len(dims) == 1 and dims[0] % rank == rank - 1


def _cast(node: Node, to: torch.dtype) -> bool:
    return (is_op(node, aten._to_copy.default) and set(node.kwargs) <= {"dtype"}
            and node.kwargs.get("dtype") == to)


def match_rms_norm(rsqrt: Node) -> dict | None:
    """The RMSNorm pattern around one ``rsqrt`` node, or None."""
    add = rsqrt.args[0]
    if not is_op(add, aten.add.Tensor) or scalar_arg(add, 1) is None:
        return None
    mean = add.args[0]
    if not is_op(mean, aten.mean.dim) or not _last_dim_mean(mean):
        return None
    sq = mean.args[0]
    xf = sq.args[0] if isinstance(sq, Node) and sq.args else None
    if not isinstance(xf, Node) or not _is_square(sq, xf):
        return None
    norm = _single_user(rsqrt)
    if not is_op(norm, aten.mul.Tensor) or _other(norm, rsqrt) is not xf:
        return None
    x = xf.args[0] if _cast(xf, torch.float32) else xf
    cast = _single_user(norm)
    if cast is not None and _cast(cast, dtype(x)) and dtype(x) != dtype(norm):
        scaled_in = cast
    else:
        scaled_in, cast = norm, None
    out = _single_user(scaled_in)
    gamma = _other(out, scaled_in) if is_op(out, aten.mul.Tensor) else None
    if gamma is None or shape(gamma) != shape(x)[-1:] or dtype(gamma) != dtype(x):
        return None
    if dtype(out) != dtype(x) or shape(out) != shape(x):
        return None
    inner = [sq, mean, add, rsqrt, norm] + ([cast] if cast is not None else [])
    allowed = set(inner) | {out}
    if not only_used_by(inner, allowed):
        return None
    return {"x": x, "gamma": gamma, "eps": float(add.args[1]), "out": out}


def fuse_rms_norm(gm: GraphModule, config: NpuConfig) -> GraphModule:
    if is_training(gm):
        skip("fuse_rms_norm", gm, "the backward is already decomposed; RmsNormGrad unused")
        return gm
    for rsqrt in list(gm.graph.find_nodes(op="call_function", target=aten.rsqrt.default)):
        m = match_rms_norm(rsqrt)
        if m is None:
            continue
        with gm.graph.inserting_before(m["out"]):
            fused = call(gm, npu.rms_norm.default, (m["x"], m["gamma"], m["eps"]), like=m["out"])
            y = call(gm, operator.getitem, (fused, 0), like=m["out"])
        m["out"].replace_all_uses_with(y)
        bump("fuse_rms_norm")
    return finish(gm)


def fuse_add_rms_norm(gm: GraphModule, config: NpuConfig) -> GraphModule:
    if is_training(gm):
        return gm
    for norm in list(gm.graph.find_nodes(op="call_function", target=npu.rms_norm.default)):
        x = norm.args[0]
        if not is_op(x, aten.add.Tensor) or not all(isinstance(a, Node) for a in x.args[:2]):
            continue
        a, b = x.args[:2]
        alpha = x.kwargs.get("alpha", 1)
        if alpha != 1 or shape(a) != shape(x) or shape(b) != shape(x) or dtype(a) != dtype(b):
            continue
        with gm.graph.inserting_before(norm):
            fused = call(gm, npu.add_rms_norm.default, (a, b, *norm.args[1:]), like=norm)
            outs = [call(gm, operator.getitem, (fused, i)) for i in range(3)]
        for user in list(norm.users):  # getitem(norm, i) -> getitem(fused, i)
            user.replace_all_uses_with(outs[user.args[1]])
        _reroute_later_uses(gm, x, outs[2])
        bump("fuse_add_rms_norm")
    return finish(gm)


def _reroute_later_uses(gm: GraphModule, old: Node, new: Node) -> None:
    """Uses of ``old`` placed after ``new`` read ``new`` instead (earlier ones keep ``old``)."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for user in list(old.users):
        if order[user] > order[new]:
            user.replace_input_with(old, new)
