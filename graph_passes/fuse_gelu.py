"""GELU written in plain ops  ==>  ``npu::gelu`` (GE ``GeluV2`` erf form, ``Gelu`` tanh form).

    mul(mul(x, 0.5), add(erf(div(x, sqrt(2))), 1))                           ==>  gelu(x, "none")
    mul(mul(x, 0.5), add(tanh(mul(add(x, mul(pow(x, 3), 0.044715)), sqrt(2/pi))), 1))
                                                                               ==>  gelu(x, "tanh")

(also ``mul(mul(x, add(...)), 0.5)``). Only fires when the aten graph holds a decomposed
GELU; a surviving ``aten.gelu`` is lowered directly by its converter. Inference graphs
only (GeluGrad would need the backward rewritten too).
"""

from __future__ import annotations

import math

import torch
from torch.fx import GraphModule, Node

from npu_inductor import ops  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import (
    Match,
    aten,
    call,
    fuse_matches,
    is_op,
    only_used_by,
)

npu = torch.ops.npu
_REL = 1e-6


def _close(a: object, b: float) -> bool:
    return isinstance(a, (int, float)) and abs(a - b) <= _REL * abs(b)


def _scaled(node: object, c: float) -> Node | None:
    """x * c or x / (1/c) -> x."""
    if is_op(node, aten.mul.Tensor, aten.mul.Scalar) and _close(node.args[1], c):
        return node.args[0]
    if is_op(node, aten.div.Tensor, aten.div.Scalar) and _close(node.args[1], 1 / c):
        return node.args[0]
    return None


def _erf_arg(inner: Node) -> tuple[Node, list[Node]] | None:
    x = _scaled(inner, 1 / math.sqrt(2))
    return (x, [inner]) if x is not None else None


def _tanh_arg(inner: Node) -> tuple[Node, list[Node]] | None:
    s = _scaled(inner, math.sqrt(2 / math.pi))
    if not is_op(s, aten.add.Tensor):
        return None
    x, cube = s.args[:2]
    p = _scaled(cube, 0.044715)
    if not (is_op(p, aten.pow.Tensor_Scalar) and p.args[0] is x and p.args[1] == 3):
        return None
    return x, [inner, s, cube, p]


def _match(add1: Node) -> tuple[Node, str, Node, list[Node]] | None:
    """add(erf|tanh(...), 1) -> (x, approximate, final mul, inner nodes)."""
    if not is_op(add1, aten.add.Tensor) or add1.args[1] != 1 or len(add1.users) != 1:
        return None
    fn = add1.args[0]
    if is_op(fn, aten.erf.default):
        found, approx = _erf_arg(fn.args[0]), "none"
    elif is_op(fn, aten.tanh.default):
        found, approx = _tanh_arg(fn.args[0]), "tanh"
    else:
        return None
    if found is None:
        return None
    x, inner = found
    out = next(iter(add1.users))
    if not is_op(out, aten.mul.Tensor):
        return None
    half = out.args[0] if out.args[1] is add1 else out.args[1]
    if _scaled(half, 0.5) is x:  # mul(mul(x, 0.5), add1)
        return x, approx, out, [*inner, fn, add1, half]
    if half is x and len(out.users) == 1:  # mul(mul(x, add1), 0.5)
        final = next(iter(out.users))
        if _scaled(final, 0.5) is out:
            return x, approx, final, [*inner, fn, add1, out]
    return None


def _gelu_match(gm: GraphModule, add1: Node) -> Match | None:
    m = _match(add1)
    if m is None:
        return None
    x, approx, out, inner = m
    if not only_used_by(inner, set(inner) | {out}):
        return None
    return Match(out, (out,), "fuse_gelu", {"x": x, "approximate": approx})


def _gelu(gm: GraphModule, m: Match) -> Node:
    return call(gm, npu.gelu.default, (m.parts["x"], m.parts["approximate"]), like=m.at)


def fuse_gelu(gm: GraphModule, config: NpuConfig) -> GraphModule:
    return fuse_matches(gm, "fuse_gelu", aten.add.Tensor, _gelu_match, _gelu,
                        inference_only="the backward is already decomposed; GeluGrad unused")
