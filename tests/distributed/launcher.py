"""Spawn a small multi-process job on loopback, the way ``torchrun`` would.

Each rank is ``python -m worker <case> <out_dir>`` (``worker.py`` beside this file) with
the standard torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free
MASTER_PORT, ...). Ranks write their results as JSON; the launcher kills every rank still
running at the deadline, so a hung collective can never hang the test session.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LOOPBACK = "127.0.0.1"


@dataclass
class RankResult:
    rank: int
    returncode: int | None  # None: killed at the deadline
    output: str
    result: dict[str, Any]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def rank_env(rank: int, world_size: int, port: int, extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
                "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": LOOPBACK,
                "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
                "NPU_INDUCTOR_DEVICE": "host", "PYTHONPATH": os.pathsep.join(
                    [str(HERE), str(HERE.parent), env.get("PYTHONPATH", "")])})
    env.update(extra)
    return env


def run_ranks(case: str, out_dir: Path, world_size: int = 2, timeout_s: float = 60.0,
              env: dict[str, str] | None = None) -> list[RankResult]:
    """Run ``case`` on ``world_size`` ranks; return each rank's exit code, log and JSON."""
    out_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs = []
    for rank in range(world_size):
        log = open(out_dir / f"rank{rank}.log", "w")  # noqa: SIM115  (closed after wait)
        procs.append((subprocess.Popen(
            [sys.executable, "-m", "worker", case, str(out_dir)], cwd=HERE, stdout=log,
            stderr=subprocess.STDOUT, env=rank_env(rank, world_size, port, env or {})), log))
    deadline = time.monotonic() + timeout_s
    codes: list[int | None] = []
    for proc, log in procs:
        try:
            codes.append(proc.wait(timeout=max(deadline - time.monotonic(), 0.1)))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            codes.append(None)
        log.close()
    return [_collect(rank, code, out_dir) for rank, code in enumerate(codes)]


def _collect(rank: int, code: int | None, out_dir: Path) -> RankResult:
    path = out_dir / f"rank{rank}.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    return RankResult(rank, code, (out_dir / f"rank{rank}.log").read_text(), result)


def describe(results: list[RankResult]) -> str:
    """Every rank's exit code and log tail, for assertion messages."""
    return "\n".join(f"--- rank {r.rank} exit {r.returncode}:\n{r.output[-3000:]}"
                     for r in results)
