"""Where a training step's time goes: forward, backward and optimizer, per backend.

    python -m npu_inductor.benchmarks.train_split [--model llama_prefill] [--dtype bfloat16]
        [--steps 100] [--backends eager,npu,aot_eager]

The step is ``npu-bench --mode training``'s (``runner.step_fn``: zero_grad, forward, the
seeded loss, backward, an SGD step that graph mode and ``aot_eager`` compile too), built
once per backend on a copy of the same model. After a warmup the backends run one step
each, in rotating order, ``steps`` times (the same noise hits all of them), and each phase
is timed in CPU seconds (``time.process_time``: with one thread a competing load barely
moves it). Printed per backend: median and 25th percentile ms of forward (with the loss),
backward, optimizer and the whole step, and the step's ratio to eager (eager / backend,
> 1 is faster than eager). ``benchmarks/step_split.py`` splits a decode *call* by software
layer instead; this splits a training *step* by phase.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from npu_inductor.benchmarks.measure import steady_heap, tensors
from npu_inductor.benchmarks.runner import Case, Settings, make_backends, prepare, prime
from npu_inductor.benchmarks.zoo import ZOO

PHASES = ("forward", "backward", "optimizer", "step")


def _stepper(case: Case, backend: Any) -> Callable[[], tuple[float, float, float, float]]:
    """One training step of a fresh copy of the model under ``backend``, returning the
    CPU seconds of (forward + loss, backward, optimizer, whole step)."""
    import copy

    model = copy.deepcopy(case.model)
    fn = backend.wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    opt_step = backend.wrap(opt.step) if backend.name != "eager" else opt.step
    clock = time.process_time

    def step() -> tuple[float, float, float, float]:
        c0 = clock()
        opt.zero_grad(set_to_none=True)
        out = tensors(fn(*case.inputs))
        loss = sum((o.to(s.dtype) * s).sum() for o, s in zip(out, case.seeds))
        c1 = clock()
        loss.backward()
        c2 = clock()
        opt_step()
        c3 = clock()
        return c1 - c0, c2 - c1, c3 - c2, c3 - c0
    return step


def split(model: str = "llama_prefill", dtype: torch.dtype = torch.float32, steps: int = 100,
          warmup: int = 5, backends: tuple[str, ...] = ("eager", "npu", "aot_eager")
          ) -> dict[str, dict[str, tuple[float, float]]]:
    """backend -> phase -> (median ms, p25 ms) over ``steps`` interleaved steps."""
    chosen = [b for b in make_backends([n for n in backends if n not in ("eager", "npu",
                                                                          "npu_nofuse")])
              if b.name in backends]
    prime(chosen)
    case = prepare(ZOO[model], "training", Settings(dtype=dtype))
    torch._dynamo.reset()
    steppers = {b.name: _stepper(case, b) for b in chosen}
    samples: dict[str, list[tuple[float, ...]]] = {name: [] for name in steppers}
    for _ in range(warmup):
        for s in steppers.values():
            s()
    names = list(steppers)
    for k in range(steps):
        shift = k % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(steppers[name]())
    out = {}
    for name, rows in samples.items():
        out[name] = {}
        for i, phase in enumerate(PHASES):
            values = sorted(1e3 * r[i] for r in rows)
            out[name][phase] = (statistics.median(values), values[len(values) // 4])
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama_prefill", choices=sorted(ZOO))
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--backends", default="eager,npu,aot_eager")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steady-heap", action="store_true",
                   help="keep freed heap memory in the process (see npu-bench --steady-heap)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.steady_heap:
        steady_heap()
    result = split(a.model, getattr(torch, a.dtype), a.steps, a.warmup,
                   tuple(a.backends.split(",")))
    eager = result.get("eager", {}).get("step")
    print(f"{a.model} {a.dtype} training, {a.steps} interleaved steps, CPU ms median (p25)")
    print(f"{'backend':<11}" + "".join(f"{ph:>18}" for ph in PHASES) + f"{'vs eager':>16}")
    for name, phases in result.items():
        cells = "".join(f"{m:>9.3f} ({q:6.3f})" for m, q in (phases[ph] for ph in PHASES))
        vs = "" if eager is None else \
            f"{eager[0] / phases['step'][0]:>7.2f}x ({eager[1] / phases['step'][1]:.2f}x)"
        print(f"{name:<11}{cells}  {vs}")


if __name__ == "__main__":
    main()
