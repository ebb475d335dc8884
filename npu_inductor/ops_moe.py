"""``npu::grouped_matmul``: GE ``GroupedMatmul`` with single tensors (x, weight and y one
tensor each, ``split_item=3``), as MoE layers use it (``graph_passes/moe.py``).

    group_type 0 (split M): x [M, K], weight [E, K, N] ([E, N, K] with transpose_weight),
        rows group_list[e-1]:group_list[e] of x times weight[e]  ->  y [M, N]
    group_type 2 (split K): x stored [K, M] (transpose_x, logically x^T), weight [K, N],
        rows group_list[e-1]:group_list[e] of both contracted  ->  y [E, M, N]

``group_list`` is the int64 cumulative row count per group (``group_list_type=0``); its last
value is the grouped axis' length, as the 910B kernel requires (aclnnGroupedMatmulV4).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _bounds(group_list: Tensor) -> list[tuple[int, int]]:
    ends = group_list.tolist()
    return list(zip([0, *ends[:-1]], ends))


@torch.library.custom_op("npu::grouped_matmul", mutates_args=())
def grouped_matmul(x: Tensor, weight: Tensor, group_list: Tensor, group_type: int,
                   transpose_x: bool, transpose_weight: bool) -> Tensor:
    """GE ``GroupedMatmul`` (single x / weight / y, cumulative int64 ``group_list``)."""
    if group_type == 0:
        w = weight.transpose(-1, -2) if transpose_weight else weight
        y = x.new_zeros(x.shape[0], w.shape[-1])
        for e, (lo, hi) in enumerate(_bounds(group_list)):
            if hi > lo:
                torch.mm(x[lo:hi], w[e], out=y[lo:hi])
        return y
    xs = x if transpose_x else x.transpose(0, 1)  # stored [K, M]
    y = x.new_zeros(group_list.shape[0], xs.shape[1], weight.shape[1])
    for e, (lo, hi) in enumerate(_bounds(group_list)):
        if hi > lo:
            torch.mm(xs[lo:hi].t(), weight[lo:hi], out=y[e])
    return y


@grouped_matmul.register_fake
def _(x: Tensor, weight: Tensor, group_list: Tensor, group_type: int, transpose_x: bool,
      transpose_weight: bool) -> Tensor:
    if group_type == 0:
        n = weight.shape[1] if transpose_weight else weight.shape[2]
        return x.new_empty(x.shape[0], n)
    m = x.shape[1] if transpose_x else x.shape[0]
    return x.new_empty(group_list.shape[0], m, weight.shape[1])
