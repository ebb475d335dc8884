"""RMSNorm written in plain ops  ==>  ``npu::rms_norm`` (GE ``RmsNorm``); a residual add
feeding it  ==>  ``npu::add_rms_norm`` (GE ``AddRmsNorm``).

    xf = _to_copy(x, f32)?                      (LLaMA's ``x.float()``; absent in fp32)
    rstd = rsqrt(mean(pow(xf, 2), [-1], keepdim) + eps)
    y = mul(gamma, _to_copy(mul(xf, rstd), x.dtype)?)      ==>  rms_norm(x, gamma, eps)[0]

    s = add(a, b); rms_norm(s, gamma, eps)       ==>  add_rms_norm(a, b, gamma, eps)
                                                     (the sum is its third output)

``RmsNorm`` fires in inference and training forward graphs (GE has its backward,
``RmsNormGrad``): AOTAutograd has already written the backward in plain ops against the
forward's saved rstd and x * rstd, so in a training forward those come from RmsNorm's rstd
output. ``AddRmsNorm`` has no GE backward and stays off in training graphs (logged).
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
    graph_kind,
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


def _user(node: Node, pred) -> Node | None:
    found = [u for u in node.users if pred(u)]
    return found[0] if len(found) == 1 else None


def _weight_mul(scaled_in: Node) -> tuple[Node, Node] | None:
    """The ``mul(gamma, scaled_in)`` user -> (that mul, gamma)."""
    out = _user(scaled_in, lambda u: is_op(u, aten.mul.Tensor) and _other(u, scaled_in))
    return (out, _other(out, scaled_in)) if out is not None else None


def match_rms_norm(rsqrt: Node, training: bool = False) -> dict | None:
    """The RMSNorm pattern around one ``rsqrt`` node, or None. With ``training`` the rstd
    and the normalized x may also be read elsewhere (saved for the backward)."""
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
    norm = _user(rsqrt, lambda u: is_op(u, aten.mul.Tensor) and _other(u, rsqrt) is xf)
    if norm is None:
        return None
    x = xf.args[0] if _cast(xf, torch.float32) else xf
    cast = _user(norm, lambda u: _cast(u, dtype(x)))
    if cast is None or dtype(x) == dtype(norm):
        cast = None
    found = _weight_mul(cast if cast is not None else norm)
    if found is None:
        return None
    out, gamma = found
    if cast is None and dtype(x) != dtype(xf) == dtype(gamma) == dtype(out):
        x = xf  # the weight applied in fp32 too (Gemma's ``* (1 + w.float())``): all in fp32
    if shape(gamma) != shape(x)[-1:] or dtype(gamma) != dtype(x):
        return None
    if dtype(out) != dtype(x) or shape(out) != shape(x):
        return None
    private = [sq, mean, add] + ([cast] if cast is not None else [])
    shared = [rsqrt, norm]  # readable by the backward in training graphs
    inner = set(private + shared) | {out}
    if not only_used_by(private + ([] if training else shared), inner):
        return None
    if training and dtype(rsqrt) != torch.float32:
        return None  # RmsNorm's rstd is fp32; a saved fp16 rsqrt cannot be replaced by it
    return {"x": x, "xf": xf, "gamma": gamma, "eps": float(add.args[1]), "out": out,
            "rsqrt": rsqrt, "norm": norm}


def _replace_saved(gm: GraphModule, m: dict, rstd: Node) -> None:
    """What the backward reads (rstd, x * rstd) now comes from RmsNorm's rstd."""
    m["rsqrt"].replace_all_uses_with(rstd)
    if m["norm"].users.keys() - {m["out"]}:
        normalized = call(gm, aten.mul.Tensor, (m["xf"], rstd), like=m["norm"])
        m["norm"].replace_all_uses_with(normalized)


def fuse_rms_norm(gm: GraphModule, config: NpuConfig) -> GraphModule:
    """Inference and training forward graphs (RmsNorm has a GE backward, RmsNormGrad; the
    backward graph AOTAutograd already wrote keeps reading the saved rstd / x * rstd)."""
    training = is_training(gm)
    if graph_kind(gm) == "backward":
        return gm
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for rsqrt in list(gm.graph.find_nodes(op="call_function", target=aten.rsqrt.default)):
        m = match_rms_norm(rsqrt, training)
        if m is None:
            continue
        at = rsqrt  # before every reader of rsqrt (the backward's, in training)
        if order[m["gamma"]] > order[rsqrt]:  # gamma computed after the norm (Gemma's 1 + w)
            if training:
                continue
            at = m["gamma"]  # inference: only the pattern itself reads rsqrt
        with gm.graph.inserting_after(at):
            fused = call(gm, npu.rms_norm.default, (m["x"], m["gamma"], m["eps"]), like=m["out"])
        with gm.graph.inserting_before(fused.next):  # keeps creation order
            y, rstd = (call(gm, operator.getitem, (fused, i), like=m["out"]) for i in (0, 1))
            if training:
                _replace_saved(gm, m, rstd)
        m["out"].replace_all_uses_with(y)
        bump("fuse_rms_norm")
    return finish(gm)


def fuse_add_rms_norm(gm: GraphModule, config: NpuConfig) -> GraphModule:
    if is_training(gm):
        skip("fuse_add_rms_norm", gm, "GE has no AddRmsNorm backward")
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
