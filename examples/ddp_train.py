"""Data-parallel training with torch.compile(backend="npu") on every rank.

    torchrun --nproc-per-node 2 examples/ddp_train.py [--steps 5]

Each rank joins the job from the torchrun environment (gloo on the host device, HCCL on
an Ascend device), wraps a small model in DistributedDataParallel and compiles it with
the npu backend. Dynamo's DDP optimizer splits the graph at DDP's bucket boundaries so
that gradient all-reduces overlap the backward GE graphs. Rank 0 prints the loss per
step; at the end every rank checks that its parameters equal rank 0's.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from npu_inductor.runtime.collectives import init_distributed


class Net(nn.Module):
    def __init__(self, d_in: int = 32, hidden: int = 64, d_out: int = 4) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.LayerNorm(hidden),
                                  nn.Linear(hidden, hidden), nn.GELU())
        self.head = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    init_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = torch.compile(DDP(Net()), backend="npu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank holds its own shard of data
    x, y = torch.randn(8, 32, generator=gen), torch.randint(0, 4, (8,), generator=gen)
    for step in range(args.steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(f"step {step}: loss {mean.item() / world:.4f} (mean over {world} ranks)")
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    print(f"rank {rank}: parameters equal rank 0's: {torch.equal(flat, ref)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
