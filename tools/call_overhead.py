"""Where one compiled inference call's time goes on the host device.

    python tools/call_overhead.py [--models mlp,bert,llama_decode] [--calls 300]

Per zoo model (eval mode, no_grad, one torch thread) it prints medians, in microseconds:

* ``eager``: the plain module;
* ``npu``: the whole ``torch.compile(backend="npu")`` call, split into ``in graph`` (inside
  our ``CompiledGraph``: executor, host runtime, kernels) and ``dynamo+aot`` (the rest:
  Dynamo's cache lookup and guards, AOTAutograd's runtime wrapper, output handling);
* ``floor warm`` / ``floor cold``: the same Dynamo+AOT path around a backend that returns
  precomputed outputs, called back to back (caches warm) and after touching 32 MB
  (caches cold, as after a real graph run). The cold floor is what any torch.compile
  backend pays per call before its first kernel; ``dynamo+aot`` above should be near it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.zoo import ZOO  # noqa: E402
from npu_inductor import compile_fx  # noqa: E402

_pc = time.perf_counter


def _median_us(xs: list[float]) -> float:
    return statistics.median(xs) * 1e6


def _const_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def fw(g: torch.fx.GraphModule, ex: list) -> object:
        with torch.no_grad():
            outs = g(*ex)
        return make_boxed_func(lambda *args: outs)

    return aot_autograd(fw_compiler=fw)(gm, example_inputs)


def measure(name: str, calls: int) -> dict[str, float]:
    entry = ZOO[name]
    model, inputs = entry.build(entry.default_batch, 0)
    model.eval()
    stamps = [0.0, 0.0]
    orig = compile_fx.CompiledGraph.__call__

    def timed(self: compile_fx.CompiledGraph, args: list) -> list:
        stamps[0] = _pc()
        out = orig(self, args)
        stamps[1] = _pc()
        return out

    scratch = torch.empty(8 << 20)
    res: dict[str, float] = {}
    with torch.no_grad():
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="npu")
        compile_fx.CompiledGraph.__call__ = timed
        try:
            for _ in range(5):
                compiled(*inputs)
                model(*inputs)
            eager, total, inside = [], [], []
            for _ in range(calls):
                t = _pc()
                model(*inputs)
                eager.append(_pc() - t)
                t = _pc()
                compiled(*inputs)
                total.append(_pc() - t)
                inside.append(stamps[1] - stamps[0])
        finally:
            compile_fx.CompiledGraph.__call__ = orig
        res["eager"], res["npu"] = _median_us(eager), _median_us(total)
        res["in graph"] = _median_us(inside)
        res["dynamo+aot"] = _median_us([a - b for a, b in zip(total, inside)])
        torch._dynamo.reset()
        floor = torch.compile(model, backend=_const_backend)
        for _ in range(5):
            floor(*inputs)
        warm, cold = [], []
        for _ in range(calls):
            t = _pc()
            floor(*inputs)
            warm.append(_pc() - t)
            scratch.add_(1.0)  # evict the guards' and wrappers' data from L1/L2
            t = _pc()
            floor(*inputs)
            cold.append(_pc() - t)
        res["floor warm"], res["floor cold"] = _median_us(warm), _median_us(cold)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp,bert,llama_decode,llama_prefill,vit")
    p.add_argument("--calls", type=int, default=300)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    cols = ["eager", "npu", "in graph", "dynamo+aot", "floor warm", "floor cold"]
    print(f"{'model':16s}" + "".join(f"{c:>12s}" for c in cols) + "   (median us per call)")
    for name in args.models.split(","):
        r = measure(name, args.calls)
        print(f"{name:16s}" + "".join(f"{r[c]:12.1f}" for c in cols), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
