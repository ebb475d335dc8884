"""Rank side of test_finetune_ddp.py: examples/finetune_llama.py under 2-rank DDP, eager and
graph mode (model, clipping and AdamW step compiled), in one job."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "finetune_llama.py"
TINY = ["--hidden", "32", "--layers", "1", "--heads", "4", "--kv-heads", "2", "--ffn", "64",
        "--batch", "2", "--seq", "32", "--quiet", "--dtype", "fp32", "--steps", "3"]


def _recipe() -> Any:
    spec = importlib.util.spec_from_file_location("finetune_llama", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["finetune_llama"] = module
    spec.loader.exec_module(module)
    return module


def run(rank: int, out_dir: Path) -> dict[str, Any]:
    recipe = _recipe()
    out: dict[str, Any] = {}
    for mode in ("--eager", "--graph"):
        torch._dynamo.reset()
        records = recipe.train(recipe.parse_args([*TINY, mode]))
        out[mode[2:]] = {"losses": [r["loss"] for r in records],
                         "grad_norms": [r["grad_norm"] for r in records]}
    return out
