"""Rank side of test_tensor_parallel.py: a Megatron-style tensor-parallel MLP written with
functional collectives, compiled with backend="npu", vs the same module in eager and vs
the unsharded MLP.

Sequence-parallel layout: each rank holds rows ``rank`` of the batch; ``all_gather``
assembles the full batch, fc1 is column-parallel (a slice of hidden units per rank), fc2
row-parallel, and ``reduce_scatter`` sums the partial outputs and hands each rank its rows
back. The autograd variants make backward the mirror image (reduce_scatter / all_gather),
so forward and backward GE graphs both hold Hcom ops.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn

D_IN, HIDDEN, D_OUT, ROWS = 16, 32, 8, 4


class FullMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(D_IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, D_OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class TPMLP(nn.Module):
    """``full`` split over the ranks of ``group`` (column-parallel fc1, row-parallel fc2)."""

    def __init__(self, full: FullMLP, group: Any) -> None:
        super().__init__()
        self.group = group
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        cols = slice(rank * HIDDEN // world, (rank + 1) * HIDDEN // world)
        self.w1 = nn.Parameter(full.fc1.weight.detach()[cols].clone())
        self.b1 = nn.Parameter(full.fc1.bias.detach()[cols].clone())
        self.w2 = nn.Parameter(full.fc2.weight.detach()[:, cols].clone())
        self.b2 = nn.Parameter(full.fc2.bias.detach().clone())

    def forward(self, x_rows: torch.Tensor) -> torch.Tensor:
        x = funcol.all_gather_single_autograd(x_rows, 0, self.group)
        partial = F.linear(F.gelu(F.linear(x, self.w1, self.b1)), self.w2)
        return funcol.reduce_scatter_single_autograd(partial, "sum", 0, self.group) + self.b2


def _ge_ops(dump: Path) -> dict[str, list[str]]:
    return {p.parent.name: sorted(set(re.findall(r"= (\w+)\(", p.read_text())))
            for p in sorted(dump.glob("*/ge_graph.txt"))}


def run(rank: int, out_dir: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    full = FullMLP()
    x_all = torch.randn(ROWS * dist.get_world_size(), D_IN)
    x = x_all[rank * ROWS:(rank + 1) * ROWS].clone().requires_grad_(True)
    eager = TPMLP(full, dist.group.WORLD)
    model = TPMLP(full, dist.group.WORLD)
    dump = out_dir / f"dump_tp_rank{rank}"
    compiled = torch.compile(model, backend="npu", options={"dump_dir": str(dump)})
    x_c = x.detach().clone().requires_grad_(True)
    expected, actual = eager(x), compiled(x_c)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    # the sharded model computes the unsharded one (summation order differs: looser)
    torch.testing.assert_close(actual, full(x_all)[rank * ROWS:(rank + 1) * ROWS],
                               rtol=1e-4, atol=1e-5)
    grad = torch.randn_like(expected)
    expected.backward(grad)
    actual.backward(grad)
    torch.testing.assert_close(x_c.grad, x.grad, rtol=1e-5, atol=1e-5)
    for (name, p), (_, q) in zip(eager.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-5,
                                   msg=lambda m, n=name: f"grad {n}: {m}")
    return {"graphs": _ge_ops(dump)}
