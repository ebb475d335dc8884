"""View and layout converters: view/reshape, permute/transpose."""

from __future__ import annotations

import torch

from npu_inductor.lowering.helpers import int_list, norm_axis
from npu_inductor.lowering.registry import register

aten = torch.ops.aten


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(ctx, self, size):
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    _, shape = ctx.out_specs()[0]
    return ctx.op("Reshape", [self, int_list(ctx, shape)])


@register(aten.permute.default)
def permute(ctx, self, dims):
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    return ctx.op("Transpose", [self, int_list(ctx, [norm_axis(d, self.rank) for d in dims],
                                               "perm")])


@register(aten.t.default)
def t(ctx, self):
    """t(Tensor(a) self) -> Tensor(a)"""
    if self.rank < 2:
        return ctx.op("Identity", [self])
    return ctx.op("Transpose", [self, int_list(ctx, [1, 0], "perm")])
