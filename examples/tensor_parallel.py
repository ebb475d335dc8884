"""A tensor-parallel MLP written with functional collectives, compiled into GE graphs
that contain the HCCL collectives.

    torchrun --nproc-per-node 2 examples/tensor_parallel.py [--dump-dir /tmp/tp_dump]

fc1 is split by output features (column-parallel) and fc2 by input features
(row-parallel), so each rank computes a partial output and one all-reduce sums them:
Megatron's layout. The compiled forward graph holds ``HcomAllReduce``; rank 0 prints
the GE ops of every graph it compiled and checks the result against the unsharded MLP.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn

from npu_inductor.runtime.collectives import init_distributed


class ShardedMLP(nn.Module):
    def __init__(self, fc1: nn.Linear, fc2: nn.Linear, rank: int, world: int) -> None:
        super().__init__()
        cols = slice(rank * fc1.out_features // world, (rank + 1) * fc1.out_features // world)
        self.w1 = nn.Parameter(fc1.weight.detach()[cols].clone())
        self.b1 = nn.Parameter(fc1.bias.detach()[cols].clone())
        self.w2 = nn.Parameter(fc2.weight.detach()[:, cols].clone())
        self.b2 = nn.Parameter(fc2.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        partial = F.linear(F.relu(F.linear(x, self.w1, self.b1)), self.w2)
        return funcol.all_reduce(partial, "sum", dist.group.WORLD) + self.b2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dump-dir", default=None)
    args = parser.parse_args()
    init_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    fc1, fc2 = nn.Linear(16, 64), nn.Linear(64, 8)
    x = torch.randn(4, 16)
    dump = Path(args.dump_dir or tempfile.mkdtemp(prefix="tp_dump_")) / f"rank{rank}"
    model = torch.compile(ShardedMLP(fc1, fc2, rank, world), backend="npu",
                          options={"dump_dir": str(dump)})
    with torch.no_grad():
        out = model(x)
        ok = torch.allclose(out, fc2(F.relu(fc1(x))), rtol=1e-4, atol=1e-5)
    if rank == 0:
        for path in sorted(dump.glob("*/ge_graph.txt")):
            ops = sorted(set(re.findall(r"= (\w+)\(", path.read_text())))
            print(f"GE graph {path.parent.name}: {', '.join(ops)}")
            for line in path.read_text().splitlines():
                if "Hcom" in line:
                    print(line.strip())
    print(f"rank {rank}: tensor-parallel output matches the unsharded MLP: {ok}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
