"""Warm compile time: graph mode's first call in a fresh process whose compile cache holds
what a cold compile of the same model stored (``npu-bench``'s ``compilation_latency_warm``).

    python -m npu_inductor.benchmarks.warm '{"model": "bert", "mode": "training", ...}'

prints one JSON line: ``warm_s``, ``warm_cpu_s`` (the process's CPU time over the same
span: on a shared machine, load stretches wall time far more than CPU time) and the cache
counters. One-time imports are primed with a
tiny model first, as for the cold measurement.

With ``"empty_cache": true`` the process gets empty npu_inductor and torch cache folders and
the time is a cold compile in a fresh process (``compilation_latency_fresh``); ``"backend"``
(default ``npu``) also measures ``aot_eager`` that way, so cold, warm and the aot_eager
floor are all first calls in a new process: none of them inherits what an earlier compile
of the same model left in the process (Dynamo's source and bytecode caches, first-use
imports), which otherwise favours whichever backend compiles the model later.

With ``"precompile": true`` graph mode compiles the model with ``npu_inductor.precompile``
(cache_precompile.py): a warm process loads Dynamo's output too instead of tracing the
model (the optimizer step still goes through ``torch.compile``).

    python -m npu_inductor.benchmarks.warm --compare bert,llama_prefill inference,training 3 \
        [--precompile]

prints a JSON row per model and mode: median cold (npu, aot_eager) and warm of 3 (or REPS)
fresh processes each, interleaved (``compare``), in wall time and in CPU time (``cpu_*``),
with each figure's spread and the ratios within each round (``summary``). Each process also
reports where its CPU time went (``cpu_phases``: Dynamo's trace outside the backend call,
the backend call, the guards; ``phases``); the row's ``cpu_phase_median`` holds their
medians and ``warm_floor_vs_cold`` is the warm start less its whole backend call over the
cold compile, per round: the ratio a backend that cost nothing on a warm start would reach.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import torch

WARM_KIND = "fresh_process_warm_cache"


def spec(model: str, mode: str, settings: Any, options: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "mode": mode, "dtype": str(settings.dtype).removeprefix("torch."),
            "batch_size": settings.batch_size, "seed": settings.seed, "lr": settings.lr,
            "threads": torch.get_num_threads(), "options": options,
            "precompile": getattr(settings, "precompile", False)}


def measure_in_fresh_process(job: dict[str, Any], timeout: float = 900,
                              cache_dir: str | None = None) -> tuple[float, dict]:
    seconds, _, counters, _ = measure_in_fresh_process_cpu(job, timeout, cache_dir)
    return seconds, counters


def measure_in_fresh_process_cpu(
        job: dict[str, Any], timeout: float = 900,
        cache_dir: str | None = None) -> tuple[float, float, dict, dict[str, float]]:
    """Run ``main`` in a new interpreter (same environment: same cache folder; empty ones of
    its own with ``job["empty_cache"]``; ``cache_dir``: both caches under that folder)."""
    env, folders = dict(os.environ), []
    if cache_dir is not None:
        env["NPU_INDUCTOR_CACHE_DIR"] = os.path.join(cache_dir, "npu_inductor")
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_dir, "torch")
    elif job.get("empty_cache"):
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
    return result["warm_s"], result["warm_cpu_s"], result["counters"], result["cpu_phases"]


def compare(models: list[str], modes: list[str], reps: int = 3, precompile: bool = False,
            options: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Per model and mode: ``reps`` fresh-process samples of the aot_eager cold compile, the
    npu cold compile (empty caches) and the npu warm compile (the caches the first npu cold
    sample filled), interleaved with alternating order; one JSON-able row each with the
    samples, their medians, the ratios of the medians and the load average."""
    from npu_inductor.benchmarks.runner import Settings
    from npu_inductor.benchmarks.zoo import ZOO

    for model in models:
        for mode in modes:
            if mode == "training" and not ZOO[model].trainable:
                continue
            base = spec(model, mode, Settings(precompile=precompile), options or {})
            times: dict[str, list[float]] = {"aot_eager": [], "cold": [], "warm": []}
            cpu: dict[str, list[float]] = {k: [] for k in times}
            phases: dict[str, list[dict[str, float]]] = {k: [] for k in times}
            loads, warm_counters = [], {}
            with tempfile.TemporaryDirectory(prefix="npu_bench_warm_") as filled:
                for i in range(reps):
                    runs = [("aot_eager", {**base, "backend": "aot_eager", "empty_cache": True},
                             None),
                            ("cold", {**base, "empty_cache": True}, filled if i == 0 else None),
                            ("warm", base, filled)]
                    for name, job, folder in (runs if i % 2 == 0 else
                                              [runs[1], runs[0], runs[2]]):
                        loads.append(os.getloadavg()[0])
                        seconds, cpu_s, counters, spent = measure_in_fresh_process_cpu(
                            job, cache_dir=folder)
                        times[name].append(seconds)
                        cpu[name].append(cpu_s)
                        phases[name].append(spent)
                        if name == "warm":
                            warm_counters = counters
            yield {"model": model, "mode": mode, "precompile": precompile,
                   **summary(times, cpu), **phase_summary(cpu, phases),
                   "warm_counters": warm_counters,
                   "load": [round(min(loads), 1), round(max(loads), 1)]}


def summary(times: dict[str, list[float]], cpu: dict[str, list[float]]) -> dict[str, Any]:
    """The samples (wall and CPU s), their medians and the ratios of the medians; and, in CPU
    time, each sample's spread (min, max) and the ratios within each round (the samples of
    one round ran back to back, so load drift between rounds cancels) with their median and
    range: with 3 samples a median cannot tell 1.15x from 1.25x on a 0.2 s compile."""
    med = {k: statistics.median(v) for k, v in times.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    rounds = {"cold_vs_aot_eager": [c / a for c, a in zip(cpu["cold"], cpu["aot_eager"])],
              "warm_vs_cold": [w / c for w, c in zip(cpu["warm"], cpu["cold"])]}
    return {"samples": times, "median": med,
            "cold_vs_aot_eager": med["cold"] / med["aot_eager"],
            "warm_vs_cold": med["warm"] / med["cold"], "cpu_samples": cpu,
            "cpu_median": cpu_med,
            "cpu_spread": {k: [min(v), max(v)] for k, v in cpu.items()},
            "cpu_cold_vs_aot_eager": cpu_med["cold"] / cpu_med["aot_eager"],
            "cpu_warm_vs_cold": cpu_med["warm"] / cpu_med["cold"],
            "cpu_round_ratios": rounds,
            "cpu_round_ratio_median": {k: statistics.median(v) for k, v in rounds.items()},
            "cpu_round_ratio_range": {k: [min(v), max(v)] for k, v in rounds.items()}}


def phase_summary(cpu: dict[str, list[float]],
                  phases: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Each kind's median CPU s per phase (``cpu_phase_median``) and, per round, the warm
    start without its backend call over that round's cold compile (``warm_floor_vs_cold``:
    samples, median, range): no backend can take a warm start below that ratio."""
    med = {k: {p: statistics.median(s[p] for s in v) for p in v[0]}
           for k, v in phases.items() if v}
    floor = [(w - p["backend"]) / c
             for w, p, c in zip(cpu["warm"], phases["warm"], cpu["cold"])]
    return {"cpu_phase_median": med,
            "warm_floor_vs_cold": {"rounds": floor, "median": statistics.median(floor),
                                   "range": [min(floor), max(floor)]}}


PHASES = {  # (module, owner, attribute): the CPU time inside each call, summed
    "backend": ("torch._dynamo.output_graph", "OutputGraph", "call_user_compiler"),
    "trace": ("torch._dynamo.symbolic_convert", "InstructionTranslator", "run"),
    "guards": ("torch._dynamo.guards", "CheckFunctionManager", "__init__"),
}


def time_phases() -> dict[str, float]:
    """Sum the process CPU time inside each of ``PHASES`` into the returned dict (from now
    on, in this process). ``trace`` holds ``backend`` (Dynamo calls the backend at the
    end of its trace); ``cpu_phases`` reports the trace without it."""
    import functools
    import importlib

    spent = dict.fromkeys(PHASES, 0.0)
    for phase, (module, owner, attr) in PHASES.items():
        cls = getattr(importlib.import_module(module), owner)
        fn = getattr(cls, attr)

        def timed(*args: Any, _fn: Any = fn, _phase: str = phase, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return _fn(*args, **kwargs)
            finally:
                spent[_phase] += time.process_time() - start

        setattr(cls, attr, functools.wraps(fn)(timed))
    return spent


def main(argv: list[str] | None = None) -> int:
    import logging
    import warnings

    from npu_inductor import precompile
    from npu_inductor.benchmarks.runner import Backend, Settings, prepare, prime, step_fn
    from npu_inductor.benchmarks.zoo import ZOO
    from npu_inductor.cache import COUNTERS

    argv = argv or sys.argv[1:]
    if argv[0] == "--compare":  # --compare MODELS MODES [REPS] [--precompile]
        flags = [a for a in argv[1:] if a.startswith("--")]
        models, modes, *rest = [a for a in argv[1:] if not a.startswith("--")]
        torch.set_num_threads(1)
        for row in compare(models.split(","), modes.split(","), int(rest[0]) if rest else 3,
                           precompile="--precompile" in flags):
            print(json.dumps(row), flush=True)
        return 0
    job = json.loads(argv[0])
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

    precompiled = backend == "npu" and job.get("precompile", False)

    def wrap_model(m: Any, inputs: tuple[Any, ...]) -> Any:
        if not precompiled:
            return wrap(m)
        with torch.set_grad_enabled(case.train):  # the grad mode step_fn calls it in
            return precompile(m, inputs, options=job["options"])

    prime([Backend(backend, wrap, npu=backend == "npu")], case.train)  # Dynamo's too
    if precompiled:  # precompile's imports (the prime above traced with Dynamo: not skipped)
        prime([Backend(backend, lambda m: wrap_model(m, (torch.randn(4, 4),)), npu=True)],
              case.train)
    COUNTERS.clear()
    spent = time_phases()
    model = case.model
    opt = torch.optim.SGD(model.parameters(), lr=settings.lr) if case.train else None
    start, start_cpu = time.perf_counter(), time.process_time()
    # as the cold measurement (runner.Runner.compile): the optimizer step compiled too
    step_fn(case, model, wrap_model(model, case.inputs), opt,
            wrap(opt.step) if opt is not None else None)(False)
    warm_s, warm_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
    phases = {"trace_without_backend": spent["trace"] - spent["backend"],
              "backend": spent["backend"], "guards": spent["guards"]}
    print(json.dumps({"warm_s": warm_s, "warm_cpu_s": warm_cpu_s, "counters": dict(COUNTERS),
                      "cpu_phases": phases}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
