"""Warm compile time: graph mode's first call in a fresh process whose compile cache holds
what a cold compile of the same model stored (``npu-bench``'s ``compilation_latency_warm``).

    python -m npu_inductor.benchmarks.warm '{"model": "bert", "mode": "training", ...}'

prints one JSON line: ``warm_s`` and the cache counters. One-time imports are primed with a
tiny model first, as for the cold measurement.

With ``"empty_cache": true`` the process gets empty npu_inductor and torch cache folders and
the time is a cold compile in a fresh process (``compilation_latency_fresh``); ``"backend"``
(default ``npu``) also measures ``aot_eager`` that way, so cold, warm and the aot_eager
floor are all first calls in a new process: none of them inherits what an earlier compile
of the same model left in the process (Dynamo's source and bytecode caches, first-use
imports), which otherwise favours whichever backend compiles the model later.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import torch

WARM_KIND = "fresh_process_warm_cache"


def spec(model: str, mode: str, settings: Any, options: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "mode": mode, "dtype": str(settings.dtype).removeprefix("torch."),
            "batch_size": settings.batch_size, "seed": settings.seed, "lr": settings.lr,
            "threads": torch.get_num_threads(), "options": options}


def measure_in_fresh_process(job: dict[str, Any], timeout: float = 900) -> tuple[float, dict]:
    """Run ``main`` in a new interpreter (same environment: same cache folder; empty ones of
    its own with ``job["empty_cache"]``)."""
    env, folders = dict(os.environ), []
    if job.get("empty_cache"):
        for name in ("NPU_INDUCTOR_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
            folders.append(tempfile.mkdtemp(prefix="npu_bench_fresh_"))
            env[name] = folders[-1]
    try:
        done = subprocess.run([sys.executable, "-m", "npu_inductor.benchmarks.warm",
                               json.dumps(job)], capture_output=True, text=True,
                              timeout=timeout, env=env)
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"warm process failed: {done.stderr.strip()[-600:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["warm_s"], result["counters"]


def main(argv: list[str] | None = None) -> int:
    import logging
    import warnings

    from npu_inductor.benchmarks.runner import Backend, Settings, prepare, prime, step_fn
    from npu_inductor.benchmarks.zoo import ZOO
    from npu_inductor.cache import COUNTERS

    job = json.loads((argv or sys.argv[1:])[0])
    warnings.filterwarnings("ignore")
    logging.getLogger("npu_inductor").setLevel(logging.ERROR)
    torch.set_num_threads(job["threads"])
    settings = Settings(dtype=getattr(torch, job["dtype"]), batch_size=job["batch_size"],
                        seed=job["seed"], lr=job["lr"])
    case = prepare(ZOO[job["model"]], job["mode"], settings)

    backend = job.get("backend", "npu")

    def wrap(m: Any) -> Any:
        if backend != "npu":
            return torch.compile(m, backend=backend)
        return torch.compile(m, backend="npu", options=job["options"])

    prime([Backend(backend, wrap, npu=backend == "npu")])
    COUNTERS.clear()
    model = case.model
    opt = torch.optim.SGD(model.parameters(), lr=settings.lr) if case.train else None
    start = time.perf_counter()
    # as the cold measurement (runner.Runner.compile): the optimizer step compiled too
    step_fn(case, model, wrap(model), opt, wrap(opt.step) if opt is not None else None)(False)
    warm_s = time.perf_counter() - start
    print(json.dumps({"warm_s": warm_s, "counters": dict(COUNTERS)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
