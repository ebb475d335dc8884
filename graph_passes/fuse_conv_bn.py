"""Inference Conv2d + BatchNorm2d  ==>  one convolution with folded weights (GE ``Conv2D``).

    bn = _native_batch_norm_legit_no_training(convolution(x, W, b, ...), g, beta, mean, var,
                                              momentum, eps)[0]
      ==>  convolution(x, W * s, (b - mean) * s + beta, ...)     s = g / sqrt(var + eps)

The fold happens once at compile time on the real tensors, so it needs the weights and
BatchNorm statistics as constants: ``freeze_parameters=True``, inference graphs.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import (
    Match,
    aten,
    call,
    const_node,
    const_value,
    fuse_matches,
    is_op,
    log,
)


def _fold(conv_w: torch.Tensor, conv_b: torch.Tensor | None, bn: list,
          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    gamma, beta, mean, var = bn
    scale = gamma / torch.sqrt(var + eps)
    w = conv_w * scale.reshape(-1, *([1] * (conv_w.dim() - 1)))
    b = conv_b if conv_b is not None else torch.zeros_like(mean)
    return w.contiguous(), ((b - mean) * scale + beta).contiguous()


def _match(gm: GraphModule, bn: Node) -> tuple[Node, list, float] | None:
    conv = bn.args[0]
    if not is_op(conv, aten.convolution.default) or len(conv.users) != 1 or conv.args[6]:
        return None
    if any(u.target is not operator.getitem or u.args[1] != 0 for u in bn.users):
        return None
    params = [const_value(gm, p) for p in bn.args[1:5]]
    weights = [const_value(gm, conv.args[1])]
    if any(p is None for p in params + weights):
        log.info("fuse_conv_bn: %s: folding needs freeze_parameters=True", bn.name)
        return None
    if conv.args[2] is not None and const_value(gm, conv.args[2]) is None:
        return None
    return conv, params, float(bn.args[6])


def _conv_bn_match(gm: GraphModule, bn: Node) -> Match | None:
    m = _match(gm, bn)
    if m is None:
        return None
    conv, params, eps = m
    return Match(bn, tuple(bn.users), "fuse_conv_bn", {"conv": conv, "bn": params, "eps": eps})


def _folded_conv(gm: GraphModule, m: Match) -> Node:
    conv = m.parts["conv"]
    bias = const_value(gm, conv.args[2]) if conv.args[2] is not None else None
    w, b = _fold(const_value(gm, conv.args[1]), bias, m.parts["bn"], m.parts["eps"])
    wn, bnode = const_node(gm, w, "conv_w"), const_node(gm, b, "conv_b")
    return call(gm, aten.convolution.default, (conv.args[0], wn, bnode, *conv.args[3:]),
                like=conv)


def fuse_conv_bn(gm: GraphModule, config: NpuConfig) -> GraphModule:
    target = aten._native_batch_norm_legit_no_training.default
    return fuse_matches(gm, "fuse_conv_bn", target, _conv_bn_match, _folded_conv)
