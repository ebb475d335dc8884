"""Several linear projections of one input in one GE ``GroupedMatmul`` (no grouping axis:
x, weight and y are lists), as ``graph_passes/fuse_projections.py`` makes them:

    npu::grouped_linear(x, [W1..Wn], [b1..bn] or [], t) -> [x @ W1^T (+ b1), ...]
        GroupedMatmul(x=[x]*n, weight=[W1..Wn], bias=[b1..bn]; split_item=0, group_type=-1,
                      transpose_weight=t)             (CANN's "multi-multi-multi" form)
    npu::grouped_linear_stacked(x, [W1..Wn])  -> cat([x @ W1^T, ..., x @ Wn^T], 0)
        GroupedMatmul(x=[x]*n, weight=[W1..Wn]; split_item=2, group_type=0,
                      transpose_weight=True)          ("multi-multi-single": the groups'
                                                       results stacked on the row axis)

``W_i`` is a ``[N_i, K]`` ``nn.Linear`` weight (``transpose_weight``) or, folded to a
``[K, N_i]`` constant by ``freeze_parameters``, grouped_linear's untransposed one. The stacked form
needs a 2-D x and equal ``N_i``. Both are the non-quantized fp16/bf16 forms aclnnGroupedMatmulV4
documents for Atlas A2 (910B): float32 is single-tensor only there.
"""

from __future__ import annotations

import torch
from torch import Tensor


@torch.library.custom_op("npu::grouped_linear", mutates_args=())
def grouped_linear(x: Tensor, weights: list[Tensor], biases: list[Tensor],
                   transpose_weight: bool) -> list[Tensor]:
    """GE ``GroupedMatmul`` (multi x / weight / y): ``x @ w.T (+ b)`` for each weight (``x @
    w`` without ``transpose_weight``); the biases (none, or one per weight) may be float32
    for a bf16 x, added before rounding."""
    ws = [w.t() if transpose_weight else w for w in weights]
    if not biases:
        return [torch.matmul(x, w) for w in ws]
    return [(torch.matmul(x.float(), w.float()) + b.float()).to(x.dtype)
            for w, b in zip(ws, biases)]


@grouped_linear.register_fake
def _(x: Tensor, weights: list[Tensor], biases: list[Tensor],
      transpose_weight: bool) -> list[Tensor]:
    return [x.new_empty(*x.shape[:-1], w.shape[0 if transpose_weight else 1]) for w in weights]


@torch.library.custom_op("npu::grouped_linear_stacked", mutates_args=())
def grouped_linear_stacked(x: Tensor, weights: list[Tensor]) -> Tensor:
    """GE ``GroupedMatmul`` (multi x / weight, single y): the ``x @ w.T`` stacked on rows."""
    return torch.cat([torch.mm(x, w.t()) for w in weights], 0)


@grouped_linear_stacked.register_fake
def _(x: Tensor, weights: list[Tensor]) -> Tensor:
    return x.new_empty(x.shape[0] * len(weights), weights[0].shape[0])
