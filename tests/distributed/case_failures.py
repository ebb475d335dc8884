"""Rank side of test_failures.py: rank 1 dies or stalls; rank 0's compiled collective
must fail with a clear error (naming the GE op and group) within the timeout."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

STALL_LIMIT_S = 60.0


def _compiled_all_reduce() -> Any:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1

    return torch.compile(fn, backend="npu", fullgraph=True)


def _rank0(compiled: Any) -> dict[str, Any]:
    start = time.monotonic()
    try:
        compiled(torch.ones(4))
    except Exception as e:  # noqa: BLE001  (any failure is reported to the test)
        return {"raised": type(e).__name__, "message": str(e),
                "elapsed_s": time.monotonic() - start, "skip_teardown": True}
    return {"raised": None, "elapsed_s": time.monotonic() - start, "skip_teardown": True}


def dead_peer(rank: int, out_dir: Path) -> dict[str, Any]:
    if rank == 1:
        os._exit(7)  # a rank that crashes before the collective
    compiled = _compiled_all_reduce()
    return _rank0(compiled)


def stalled_peer(rank: int, out_dir: Path) -> dict[str, Any]:
    if rank == 1:  # alive but never joins the collective, until rank 0 has reported
        deadline = time.monotonic() + STALL_LIMIT_S
        while not (out_dir / "rank0.json").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        return {"stalled": True, "skip_teardown": True}
    return _rank0(_compiled_all_reduce())
