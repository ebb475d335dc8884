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
    aten,
    bump,
    call,
    const_node,
    const_value,
    finish,
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


def fuse_conv_bn(gm: GraphModule, config: NpuConfig) -> GraphModule:
    target = aten._native_batch_norm_legit_no_training.default
    for bn in list(gm.graph.find_nodes(op="call_function", target=target)):
        m = _match(gm, bn)
        if m is None:
            continue
        conv, params, eps = m
        bias = const_value(gm, conv.args[2]) if conv.args[2] is not None else None
        w, b = _fold(const_value(gm, conv.args[1]), bias, params, eps)
        with gm.graph.inserting_before(bn):
            wn, bnode = const_node(gm, w, "conv_w"), const_node(gm, b, "conv_b")
            fused = call(gm, aten.convolution.default, (conv.args[0], wn, bnode, *conv.args[3:]),
                         like=conv)
        for user in list(bn.users):
            user.replace_all_uses_with(fused)
        bump("fuse_conv_bn")
    return finish(gm)
