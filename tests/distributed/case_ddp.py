"""Rank side of test_ddp.py: DistributedDataParallel compiled with backend="npu" trains
like eager DDP (same losses, same parameters), with Dynamo's DDP optimizer splitting the
graph at (deliberately tiny) bucket boundaries."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from harness import record_graphs
from models import make
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 5
BUCKET_MB = 0.004  # ~4 KB buckets: several per model, so Dynamo splits the graph
LR = 1e-2


def batches(name: str, rank: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-rank data (different on every rank, as in real data parallelism)."""
    gen = torch.Generator().manual_seed(100 + rank)
    if name == "mlp":
        return [(torch.randn(4, 16, generator=gen), torch.randn(4, 8, generator=gen))
                for _ in range(STEPS)]
    ids = [torch.randint(0, 128, (2, 8), generator=gen) for _ in range(STEPS)]
    return [(i, torch.roll(i, -1, dims=1)) for i in ids]


def loss_fn(name: str, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if name == "mlp":
        return F.mse_loss(out, target)
    return F.cross_entropy(out.flatten(0, 1), target.flatten())


def train(name: str, model: torch.nn.Module, data: list, module: torch.nn.Module
          ) -> list[float]:
    opt = torch.optim.AdamW(module.parameters(), lr=LR)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = loss_fn(name, model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _same_on_all_ranks(module: torch.nn.Module) -> bool:
    flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def _compare(eager: DDP, ddp: DDP, eager_losses: list, compiled_losses: list) -> float:
    # fp32 throughout; AdamW's normalised step amplifies last-bit gradient differences
    torch.testing.assert_close(compiled_losses, eager_losses, rtol=1e-5, atol=1e-6)
    named = zip(eager.module.named_parameters(), ddp.module.named_parameters())
    for (pname, p), (_, q) in named:
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, n=pname: f"{n}: {m}")
    return max((q - p).abs().max().item() for p, q in
               zip(eager.module.parameters(), ddp.module.parameters()))


def run(rank: int, out_dir: Path, name: str) -> dict[str, Any]:
    """Dynamo's DDP optimizer: graphs split at bucket boundaries, DDP's reducer hooks
    all-reduce each bucket's gradients between the backward GE graphs."""
    # DDP and Dynamo's DDPOptimizer both cap the first bucket at this (default 1 MiB, more
    # than these models hold); lower it to the bucket size so that buckets really split
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(BUCKET_MB * 1024 * 1024)
    base, _ = make(name)
    data = batches(name, rank)
    eager = DDP(copy.deepcopy(base), bucket_cap_mb=BUCKET_MB)
    eager_losses = train(name, eager, data, eager)
    ddp = DDP(copy.deepcopy(base), bucket_cap_mb=BUCKET_MB)
    compiled = torch.compile(ddp, backend="npu")
    with record_graphs() as graphs:
        compiled_losses = train(name, compiled, data, ddp)
    kinds = [g.name.split("_")[0] for g in graphs]
    max_diff = _compare(eager, ddp, eager_losses, compiled_losses)
    return {"eager_losses": eager_losses, "compiled_losses": compiled_losses,
            "forward_graphs": kinds.count("forward"), "backward_graphs": kinds.count("backward"),
            "max_param_diff": max_diff, "synced": _same_on_all_ranks(ddp.module)}


def run_python_reducer(rank: int, out_dir: Path, name: str) -> dict[str, Any]:
    """Compiled autograd + DDP's Python reducer: the whole backward, gradient all-reduces
    included, is traced and compiled, so HcomAllReduce ops sit inside the GE graph."""
    torch._dynamo.config.optimize_ddp = "python_reducer"
    torch._dynamo.config.compiled_autograd = True
    base, _ = make(name)
    data = batches(name, rank)
    eager = DDP(copy.deepcopy(base))
    eager_losses = train(name, eager, data, eager)
    ddp = DDP(copy.deepcopy(base))

    @torch.compile(backend="npu")
    def forward_backward(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = loss_fn(name, ddp(x), y)
        loss.backward()
        return loss

    opt = torch.optim.AdamW(ddp.parameters(), lr=LR)
    compiled_losses = []
    with record_graphs() as graphs:
        for x, y in data:
            opt.zero_grad()
            compiled_losses.append(forward_backward(x, y).item())
            opt.step()
    max_diff = _compare(eager, ddp, eager_losses, compiled_losses)
    all_reduces = [sum(op.type == "HcomAllReduce" for op in g.lowered.graph.ops)
                   for g in graphs]
    return {"eager_losses": eager_losses, "compiled_losses": compiled_losses,
            "ge_all_reduces": all_reduces, "params": len(list(base.parameters())),
            "max_param_diff": max_diff, "synced": _same_on_all_ranks(ddp.module)}


def run_mlp(rank: int, out_dir: Path) -> dict[str, Any]:
    return run(rank, out_dir, "mlp")


def run_llama(rank: int, out_dir: Path) -> dict[str, Any]:
    return run(rank, out_dir, "llama")


def run_mlp_python_reducer(rank: int, out_dir: Path) -> dict[str, Any]:
    return run_python_reducer(rank, out_dir, "mlp")


def run_llama_python_reducer(rank: int, out_dir: Path) -> dict[str, Any]:
    return run_python_reducer(rank, out_dir, "llama")
