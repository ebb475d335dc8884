"""Fine-tune a LLaMA-style model in graph mode: the recipe a 910B user runs.

    python examples/finetune_llama.py --steps 20                  # graph mode, bf16 autocast
    python examples/finetune_llama.py --steps 20 --eager          # the same in eager
    python examples/finetune_llama.py --steps 10 --save ckpt.pt   # checkpoint at the end
    python examples/finetune_llama.py --steps 20 --resume ckpt.pt # continues at step 10
    torchrun --nproc-per-node 2 examples/finetune_llama.py --steps 5   # data parallel
    python examples/finetune_llama.py --hf                         # transformers' Llama

A byte-level language model (vocabulary 256) trains on the small text bundled in
``examples/data/``: a LLaMA-style decoder built from a config (``--hf``: transformers'
``LlamaForCausalLM`` from a small ``LlamaConfig``; nothing is downloaded), AdamW with a
linear warmup then linear decay, bf16 autocast (``--dtype fp32`` to turn it off),
gradient accumulation over ``--accum`` micro-batches and clipping to ``--clip``. In graph
mode (the default) the model and its loss are ``torch.compile(backend="npu")``-ed, and so
are the optimizer step and the gradient clipping (``--no-compile-opt`` keeps them eager).

Batches depend only on (seed, step, micro-batch, rank), and the checkpoint holds model,
optimizer and scheduler state and the step, so a resumed run gives the losses an
uninterrupted one would. Under ``torchrun`` each rank joins the job (gloo on the host
device, HCCL on an Ascend device), wraps the model in ``DistributedDataParallel`` and
reads its own batches; the printed loss is the mean over ranks.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

DATA = Path(__file__).resolve().parent / "data" / "tiny_corpus.txt"
VOCAB = 256  # bytes
BAR = 20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--graph", dest="graph", action="store_true", default=True,
                      help="torch.compile(backend='npu') (default)")
    mode.add_argument("--eager", dest="graph", action="store_false", help="plain eager")
    p.add_argument("--steps", type=int, default=20, help="train until this optimizer step")
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16",
                   help="bf16: autocast to bfloat16 (fp32 master weights); fp32: none")
    p.add_argument("--batch", type=int, default=4, help="sequences per micro-batch per rank")
    p.add_argument("--seq", type=int, default=64, help="tokens per sequence")
    p.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm (0: off)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=5, help="linear warmup steps")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=176)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", type=Path, default=DATA, help="a text file (read as bytes)")
    p.add_argument("--save", type=Path, help="write a checkpoint here at the end")
    p.add_argument("--resume", type=Path, help="start from this checkpoint")
    p.add_argument("--hf", action="store_true", help="transformers' LlamaForCausalLM")
    p.add_argument("--no-compile-opt", dest="compile_opt", action="store_false",
                   help="graph mode: keep optimizer step and clipping eager")
    p.add_argument("--options", default="", help="npu options, e.g. fusions=0,verify=1")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's own)")
    p.add_argument("--quiet", action="store_true", help="no per-step lines")
    return p.parse_args(argv)


# ---- data -------------------------------------------------------------------------------
def load_corpus(path: Path) -> torch.Tensor:
    data = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8).long()
    if len(data) < 2:
        raise SystemExit(f"finetune_llama: {path} holds {len(data)} bytes; need at least 2")
    return data


def get_batch(data: torch.Tensor, args: argparse.Namespace, step: int, micro: int,
              rank: int = 0, world: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows; the choice depends only on (seed, step, micro-batch, rank)."""
    seq = min(args.seq, len(data) - 1)
    index = (step * args.accum + micro) * world + rank
    gen = torch.Generator().manual_seed(args.seed * 1_000_003 + index)
    starts = torch.randint(0, len(data) - seq, (args.batch,), generator=gen)
    x = torch.stack([data[s:s + seq] for s in starts.tolist()])
    y = torch.stack([data[s + 1:s + seq + 1] for s in starts.tolist()])
    return x, y


# ---- model ------------------------------------------------------------------------------
class CausalLMLoss(nn.Module):
    """Next-token cross entropy of a causal LM, under bf16 autocast when asked."""

    def __init__(self, lm: nn.Module, bf16: bool, hf: bool) -> None:
        super().__init__()
        self.lm, self.bf16, self.hf = lm, bf16, hf

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            logits = self.lm(input_ids=x, use_cache=False).logits if self.hf else self.lm(x)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


def build_lm(args: argparse.Namespace) -> nn.Module:
    torch.manual_seed(args.seed)
    if args.hf:
        try:
            import transformers
        except ImportError:
            raise SystemExit("finetune_llama: --hf needs transformers "
                             "(pip install 'npu_inductor[hf]')") from None
        config = transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=args.hidden, num_hidden_layers=args.layers,
            num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
            intermediate_size=args.ffn, max_position_embeddings=args.seq, use_cache=False)
        return transformers.LlamaForCausalLM(config)
    from npu_inductor.benchmarks.zoo import Llama

    return Llama(vocab=VOCAB, hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads,
                 layers=args.layers, ffn=args.ffn, max_pos=args.seq)


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Linear warmup to the peak over ``warmup`` steps, then linear decay to 10%."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.1, 1.0 - 0.9 * (step - warmup) / max(1, total - warmup))


# ---- training ---------------------------------------------------------------------------
@dataclass
class Trainer:
    args: argparse.Namespace
    module: CausalLMLoss
    loss_fn: Any
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    step_fn: Any
    clip_fn: Any
    rank: int = 0
    world: int = 1
    step: int = 0
    data: torch.Tensor = field(default_factory=lambda: torch.empty(0))
    owns_group: bool = False  # destroy the process group at the end

    def train_step(self) -> dict[str, float]:
        """``accum`` forward/backward micro-steps, clipping, one optimizer step."""
        start = time.perf_counter()
        total = torch.zeros(())
        for micro in range(self.args.accum):
            x, y = get_batch(self.data, self.args, self.step, micro, self.rank, self.world)
            loss = self.loss_fn(x, y)
            (loss / self.args.accum).backward()
            total += loss.detach()
        norm = self.clip_fn() if self.args.clip > 0 else torch.zeros(())
        self.step_fn()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)
        mean = total / self.args.accum
        if self.world > 1:
            import torch.distributed as dist

            dist.all_reduce(mean)
            mean /= self.world
        self.step += 1
        return {"loss": float(mean), "grad_norm": float(norm),
                "lr": self.sched.get_last_lr()[0], "ms": 1e3 * (time.perf_counter() - start)}

    def save(self, path: Path) -> None:
        torch.save({"model": self.module.state_dict(), "opt": self.opt.state_dict(),
                    "sched": self.sched.state_dict(), "step": self.step}, path)

    def load(self, path: Path) -> None:
        state = torch.load(path, weights_only=True)
        self.module.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.sched.load_state_dict(state["sched"])
        self.step = int(state["step"])


def _npu_options(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, _, value = item.partition("=")
        out[key] = {"0": False, "1": True, "false": False, "true": True}.get(value.lower(), value)
    return out


def _distributed() -> tuple[int, int, bool]:
    """(rank, world size, whether this run created the process group)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():  # the caller's job: leave it be
        return dist.get_rank(), dist.get_world_size(), False
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1, False
    from npu_inductor.runtime.collectives import init_distributed

    init_distributed()
    return dist.get_rank(), dist.get_world_size(), True


def make_trainer(args: argparse.Namespace) -> Trainer:
    rank, world, owns_group = _distributed()
    module = CausalLMLoss(build_lm(args), args.dtype == "bf16", args.hf)
    params = [p for p in module.parameters() if p.requires_grad]
    # a tensor lr: the compiled step reads it as a graph input instead of recompiling
    lr = torch.tensor(args.lr) if args.graph and args.compile_opt else args.lr
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=args.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor(s, args.warmup, args.steps))
    wrapped: nn.Module = module
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        wrapped = DDP(module)
    clip = lambda: torch.nn.utils.clip_grad_norm_(params, args.clip)  # noqa: E731
    loss_fn, step_fn, clip_fn = wrapped, opt.step, clip
    if args.graph:
        options = {"fallback": "error", **_npu_options(args.options)}
        loss_fn = torch.compile(wrapped, backend="npu", options=options)
        if args.compile_opt:
            step_fn = torch.compile(opt.step, backend="npu", options=options)
            clip_fn = torch.compile(clip, backend="npu", options=options)
    trainer = Trainer(args, module, loss_fn, opt, sched, step_fn, clip_fn, rank, world,
                      data=load_corpus(args.data), owns_group=owns_group)
    if args.resume:
        trainer.load(args.resume)
    return trainer


def progress_line(step: int, total: int, rec: dict[str, float]) -> str:
    done = round(BAR * step / max(total, 1))
    return (f"step {step:4d}/{total} |{'#' * done}{' ' * (BAR - done)}| loss {rec['loss']:.5f}"
            f" | lr {rec['lr']:.2e} | grad-norm {rec['grad_norm']:.3f}"
            f" | {rec['ms']:7.1f} ms")


def train(args: argparse.Namespace) -> list[dict[str, float]]:
    """Run the recipe; returns one record (loss, grad_norm, lr, ms) per step trained."""
    if args.threads:
        torch.set_num_threads(args.threads)
    trainer = make_trainer(args)
    mode = f"graph mode (npu), {args.dtype}" if args.graph else f"eager, {args.dtype}"
    if trainer.rank == 0 and not args.quiet:
        size = sum(p.numel() for p in trainer.module.parameters())
        print(f"finetune_llama: {mode}, {size / 1e6:.2f}M parameters, {trainer.world} rank(s),"
              f" batch {args.batch}x{args.seq} x {args.accum} micro-batches,"
              f" from step {trainer.step}", flush=True)
    records = []
    while trainer.step < args.steps:
        rec = trainer.train_step()
        records.append(rec)
        if trainer.rank == 0 and not args.quiet:
            print(progress_line(trainer.step, args.steps, rec), flush=True)
    if args.save and trainer.rank == 0:
        trainer.save(args.save)
        if not args.quiet:
            print(f"saved checkpoint at step {trainer.step} to {args.save}", flush=True)
    if trainer.owns_group:
        import torch.distributed as dist

        dist.destroy_process_group()
    return records


def main(argv: list[str] | None = None) -> int:
    records = train(parse_args(argv))
    if records and not all(torch.isfinite(torch.tensor(r["loss"])) for r in records):
        print("finetune_llama: non-finite loss", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
