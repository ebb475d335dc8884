"""Where a cold compile's CPU time goes, per stage, in one fresh process (no profiler).

    python -m npu_inductor.benchmarks.compile_stages MODEL [BACKEND] [MODE] [--warm]

compiles one zoo model cold (empty npu_inductor and torch caches, one-time imports primed
with a tiny model as ``warm.py`` does) and prints one JSON line: the first call's CPU time
(``total``) and the CPU time spent inside each stage below (seconds, calls). cProfile
inflates the many small calls of Dynamo and fake tensors several-fold, so it misattributes
a cold compile; wrapping a few functions with ``time.process_time`` does not. Stages nest
(``call_user_compiler`` holds AOTAutograd, which holds ``npu_compile``), so they do not
add up. On a shared machine one process's total swings by +-30%; the npu-only stages
(``npu_compile``, ``aot_cache_key``, ``aot_graph_str``) are what graph mode adds over
``aot_eager`` and vary far less. With ``--warm`` a first process compiles the model cold
into a kept cache folder and this one measures the warm start (``warm.py``'s warm kind:
fresh process, caches filled), where ``npu_load_on_hit`` (loading a GE graph on an
AOTAutograd hit) and ``aot_try_load`` replace the compile stages.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

TIMES: dict[str, float] = collections.defaultdict(float)
CALLS: collections.Counter[str] = collections.Counter()


def _timed(owner: Any, attr: str, label: str) -> None:
    fn = getattr(owner, attr)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[label] += time.process_time() - start
            CALLS[label] += 1

    setattr(owner, attr, wrapper)


def _stages() -> list[tuple[Any, str, str]]:
    import torch
    from torch._dynamo import convert_frame, output_graph
    from torch._functorch import aot_autograd
    from torch._functorch._aot_autograd import autograd_cache, graph_compile

    from npu_inductor import cache, codegen, compile_fx

    cfx = compile_fx
    return [
        (convert_frame, "_compile", "dynamo_compile"),
        (output_graph.OutputGraph, "call_user_compiler", "call_user_compiler"),
        (aot_autograd, "create_aot_state", "aot_metadata_trace"),
        (graph_compile, "aot_stage2_inference", "aot_stage2_inference"),
        (autograd_cache, "autograd_cache_key", "aot_cache_key"),
        (graph_compile, "_log_inference_graph", "aot_graph_str"),
        (autograd_cache.AOTAutogradCache, "save", "aot_cache_save"),
        (cfx, "_compile", "npu_compile"),
        (cfx, "run_passes", "npu_passes"),
        (cfx, "_cache_lookup", "npu_cache_lookup"),
        (cfx, "try_lower", "npu_lowering"),
        (cfx, "load_graph", "npu_load_graph"),
        (cfx, "to_air", "npu_to_air"),
        (codegen, "executor_source", "npu_executor_source"),
        (cfx, "_cache_store", "npu_cache_store"),
        (cache, "store", "npu_cache_write"),
        (cfx.CompiledGraph, "__call__", "npu_first_run"),
        (torch._dynamo.symbolic_convert.InstructionTranslator, "run", "dynamo_trace"),
        (torch._dynamo.guards.CheckFunctionManager, "__init__", "dynamo_guards"),
        (autograd_cache.AOTAutogradCache, "try_load", "aot_try_load"),
        (cfx, "runner_from_cache", "npu_load_on_hit"),
    ]


def main(argv: list[str] | None = None) -> int:
    argv = argv or sys.argv[1:]
    warm = "--warm" in argv
    argv = [a for a in argv if a != "--warm"]
    model, backend = argv[0], argv[1] if len(argv) > 1 else "npu"
    mode = argv[2] if len(argv) > 2 else "inference"
    folder = os.environ.get("NPU_STAGES_DIR") or tempfile.mkdtemp(prefix="npu_stages_")
    if warm:  # a cold compile in another process fills the caches this one starts with
        subprocess.run([sys.executable, "-m", "npu_inductor.benchmarks.compile_stages", model,
                        backend, mode], env={**os.environ, "NPU_STAGES_DIR": folder},
                       check=True, capture_output=True)
    os.environ["NPU_INDUCTOR_CACHE_DIR"] = os.path.join(folder, "npu_inductor")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "torch")
    import logging
    import warnings

    import torch

    from npu_inductor.benchmarks.runner import Backend, Settings, prepare, prime, step_fn
    from npu_inductor.benchmarks.zoo import ZOO

    warnings.filterwarnings("ignore")
    logging.getLogger("npu_inductor").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    case = prepare(ZOO[model], mode, Settings())

    def wrap(m: Any) -> Any:
        return torch.compile(m, backend=backend, **({"options": {}} if backend == "npu" else {}))

    prime([Backend(backend, wrap, npu=backend == "npu")], case.train)  # as warm.py
    for owner, attr, label in _stages():
        _timed(owner, attr, label)
    opt = torch.optim.SGD(case.model.parameters(), lr=0.0) if case.train else None
    start = time.process_time()
    step_fn(case, case.model, wrap(case.model), opt, wrap(opt.step) if opt else None)(False)
    total = time.process_time() - start
    stages = {k: [round(v, 4), CALLS[k]] for k, v in sorted(TIMES.items(), key=lambda kv: -kv[1])}
    print(json.dumps({"model": model, "backend": backend, "mode": mode,
                      "start": "warm" if warm else "cold", "total": round(total, 4),
                      "stages": stages, "load": round(os.getloadavg()[0], 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
