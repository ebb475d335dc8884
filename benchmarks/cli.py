"""``npu-bench``: eager vs graph mode on the model zoo, in one process.

    npu-bench --quick
    npu-bench --models bert,llama --mode inference,training --compare aot_eager,inductor \
        --out bench-out
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from npu_inductor.benchmarks import report
from npu_inductor.benchmarks.hf import hf_models
from npu_inductor.benchmarks.measure import Warm, steady_heap
from npu_inductor.benchmarks.results import Row
from npu_inductor.benchmarks.runner import Settings, machine_info, make_backends, prime, run_case
from npu_inductor.benchmarks.zoo import ZOO, ZooModel, expand_names

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
MODES = ("inference", "training", "dynamic", "serve")
COMPARE = ("aot_eager", "inductor", "npu_freeze")
QUICK = {"repeat": 5, "warmup": 1, "mode": "inference"}
NOTES = {
    "memory": "peak = bytes retained after compile + first call, plus the peak of live "
              "bytes during one steady step; torch CPU allocator events via torch.profiler "
              "(profile_memory=True); weights and inputs excluded",
    "compilation_latency": "cold: first call after torch._dynamo.reset() (Dynamo + "
                           "AOTAutograd + backend + one run), one-time imports primed",
    "warm_kind": "fresh_process_warm_cache: first call in a new process whose npu_inductor "
                 "compile cache holds the cold compile's entries (one-time imports primed); "
                 "cache_same_process: first call after torch._dynamo.reset() with the cache "
                 "warm; recompile: a recompile after torch._dynamo.reset() in the same "
                 "process; fx_graph_cache: Inductor's FX graph cache hit",
    "compilation_latency_fresh": "cold compile in a new process with empty caches (npu "
                                 "and aot_eager, with --compare aot_eager): no backend "
                                 "inherits what an earlier compile of the model left in "
                                 "the process; the same conditions as the warm compile",
    "compile_cache": "npu-bench runs with a fresh, empty npu_inductor cache folder (unless "
                     "--cache-dir), so cold is cold; cache_hits/cache_misses count FX graphs "
                     "of the cold compile",
    "speedup": "median eager / median backend, backends interleaved call by call",
    "accuracy": "float64 eager reference; pass when max error relative to the reference's "
                "largest magnitude <= 3 x eager's own error + dtype tolerance",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="npu-bench", description=__doc__.splitlines()[0])
    p.add_argument("--models", help=f"comma list of {sorted(ZOO)}, 'llama' or 'base' (all *_base "
                   "entries: realistic sizes) (default: all but *_base)")
    p.add_argument("--hf", default="", help="comma list of transformers models: "
                   "gpt2,bert,llama,qwen2 (needs the 'hf' extra)")
    p.add_argument("--batch-size", type=int, help="default: each model's own")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--mode", help=f"comma list of {list(MODES)} or 'all' "
                   "(default: inference,training)")
    p.add_argument("--repeat", type=int, help="timed calls per backend (default 20)")
    p.add_argument("--warmup", type=int, help="untimed calls per backend (default 3)")
    p.add_argument("--quick", action="store_true",
                   help="small fast subset: " + ",".join(n for n, m in ZOO.items() if m.quick))
    p.add_argument("--compare", default="", help=f"extra baselines: {','.join(COMPARE)}")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads")
    p.add_argument("--steady-heap", action="store_true",
                   help="keep freed heap memory in the process (glibc mallopt), so no "
                   "backend's step pays page faults for the order the backends freed theirs in")
    p.add_argument("--requests", type=int, default=24, help="dynamic stream length")
    p.add_argument("--max-len", type=int, default=96, help="dynamic stream max sequence")
    p.add_argument("--max-new", type=int, default=16, help="serve stream max new tokens")
    p.add_argument("--variants", help="dynamic/serve: comma list of exact,dynamic,pow2,auto "
                   "(default: all; eager always runs)")
    p.add_argument("--warm-s", type=float, default=5.0, help="dynamic/serve: warm passes run "
                   "until each variant spent this many CPU seconds in them")
    p.add_argument("--passes", type=int, default=3, help="dynamic/serve: at least this many "
                   "warm passes (figures are their median)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", type=Path, help="compile into this folder (npu_inductor's "
                   "and torch's caches under it, kept; a rerun then hits them) instead of "
                   "fresh empty folders made for the run and removed after it (the default: "
                   "every run compiles cold, so cold and compile columns reproduce)")
    p.add_argument("--precompile", action="store_true", help="graph mode's fresh-process "
                   "cold and warm compiles use npu_inductor.precompile (no Dynamo trace warm)")
    p.add_argument("--out", type=Path, help="write CSV, JSON, Markdown and PNG charts here")
    p.add_argument("--profile-compile", action="store_true",
                   help="cProfile graph mode's cold compile of each model and mode")
    p.add_argument("--verbose", action="store_true", help="show compiler warnings and logs")
    p.add_argument("--layer-ops", action="store_true",
                   help="also report GE ops per decoder layer of each zoo decoder")
    return p.parse_args(argv)


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def select_models(args: argparse.Namespace) -> tuple[list[ZooModel], list[str]]:
    names = _split(args.models) or [n for n, m in ZOO.items()
                                     if m.quick or (m.default and not args.quick)]
    entries = [ZOO[n] for n in expand_names(names)]
    extra, message = hf_models(_split(args.hf))
    return entries + extra, [message] if message else []


def select_modes(args: argparse.Namespace) -> list[str]:
    modes = _split(args.mode) or ([QUICK["mode"]] if args.quick else ["inference", "training"])
    modes = list(MODES) if modes == ["all"] else modes
    bad = sorted(set(modes) - set(MODES))
    if bad:
        raise SystemExit(f"npu-bench: unknown --mode {bad}; choose from {list(MODES)}")
    return modes


def settings_from(args: argparse.Namespace) -> Settings:
    quick = QUICK if args.quick else {}
    return Settings(dtype=DTYPES[args.dtype], batch_size=args.batch_size,
                    repeat=args.repeat or quick.get("repeat", 20),
                    warmup=args.warmup if args.warmup is not None else quick.get("warmup", 3),
                    seed=args.seed, precompile=args.precompile)


def cases(models: list[ZooModel], modes: list[str]) -> list[tuple[ZooModel, str]]:
    """(model, mode) pairs to run; inference-only models skip training."""
    return [(m, mode) for mode in modes if mode not in ("dynamic", "serve") for m in models
            if mode != "training" or m.trainable]


def _log_line(start: float) -> Any:
    return lambda s: print(f"[{time.perf_counter() - start:7.1f}s] {s}", file=sys.stderr,
                           flush=True)


@contextlib.contextmanager
def progress_display(total: int) -> Iterator[Any]:
    """A rich live progress bar on a terminal, timestamped lines otherwise; yields
    ``(advance, describe)`` callables."""
    try:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:
        Progress = None
    if Progress is None or not sys.stderr.isatty():
        yield (lambda: None), _log_line(time.perf_counter())
        return
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task("starting", total=total)
        yield (lambda: bar.advance(task)), (lambda s: bar.update(task, description=s))


def run_all(args: argparse.Namespace, settings: Settings, models: list[ZooModel],
            modes: list[str]) -> list[Row]:
    from npu_inductor.benchmarks.dynamic import run_dynamic

    backends = make_backends(_split(args.compare))
    todo = cases(models, modes)
    rows: list[Row] = []
    with progress_display(len(todo) + ("dynamic" in modes)) as (advance, describe):
        describe("priming backends (one-time imports)")
        prime(backends, train="training" in modes)
        for entry, mode in todo:
            rows += run_case(entry, mode, backends, settings, describe)
            advance()
        if "dynamic" in modes:
            rows += run_dynamic(args.requests, args.max_len, settings, describe,
                                _split(args.variants), Warm(args.warm_s, args.passes))
            advance()
    return rows


def run_serve_mode(args: argparse.Namespace) -> bool:
    """``--mode serve`` (benchmarks/serve.py): the zoo decoder, or ``--hf llama``."""
    from npu_inductor.benchmarks.serve import format_table, run_serve

    hf = "llama" in _split(args.hf)
    rows = run_serve(hf, args.requests, args.max_len, args.max_new, args.seed,
                     _log_line(time.perf_counter()), _split(args.variants),
                     Warm(args.warm_s, args.passes))
    print(format_table(rows), flush=True)
    return not any(r.error for r in rows)


def compile_summary(rows: list[Row]) -> list[str]:
    """Graph mode's cold compile time over aot_eager's (target <= 1.25) and warm over cold
    (target <= 0.5), per model and mode."""
    lines = []
    for row in rows:
        if row.backend != "npu" or row.compile_ratio_vs_aot_eager is None:
            continue
        verdict = "meets" if row.compile_ratio_vs_aot_eager <= 1.25 else "misses"
        line = (f"compile latency {row.model}/{row.mode}: npu cold {row.compilation_latency:.2f}"
                f" s vs aot_eager {row.compilation_latency / row.compile_ratio_vs_aot_eager:.2f}"
                f" s = {row.compile_ratio_vs_aot_eager:.2f}x ({verdict} <= 1.25x)")
        if row.compilation_latency_warm is not None:
            warm = row.compilation_latency_warm / row.compilation_latency
            line += (f"; warm {row.compilation_latency_warm:.2f} s = {warm:.2f}x cold "
                     f"({'meets' if warm <= 0.5 else 'misses'} <= 0.5x, {row.warm_kind})")
        lines.append(line)
        lines += _fresh_line(row)
    return lines


def _fresh_line(row: Row) -> list[str]:
    """The same two ratios with cold, warm and aot_eager all first calls in a new process."""
    ratio_, cold = row.compile_ratio_fresh_vs_aot_eager, row.compilation_latency_fresh
    if ratio_ is None or cold is None:
        return []
    line = (f"  fresh processes: npu cold {cold:.2f} s vs aot_eager {cold / ratio_:.2f} s = "
            f"{ratio_:.2f}x ({'meets' if ratio_ <= 1.25 else 'misses'} <= 1.25x)")
    if row.compilation_latency_warm is not None:
        warm = row.compilation_latency_warm / cold
        line += f"; warm = {warm:.2f}x cold ({'meets' if warm <= 0.5 else 'misses'} <= 0.5x)"
    return [line]


def configure(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    if args.steady_heap and not steady_heap():
        print("npu-bench: --steady-heap needs glibc; the heap keeps its defaults", flush=True)
    if not args.verbose:
        warnings.filterwarnings("ignore")
        logging.getLogger("npu_inductor").setLevel(logging.ERROR)
        logging.getLogger("torch").setLevel(logging.ERROR)


@contextlib.contextmanager
def fresh_caches(keep: Path | None = None) -> Iterator[None]:
    """Empty cache folders for the run, so "cold" really is cold: torch's (Inductor's FX
    graph cache, the AOTAutograd cache npu_inductor takes part in) and npu_inductor's own.
    The warm processes inherit them; the environment is restored afterwards. ``keep``
    (``--cache-dir``): both under that folder instead, kept after the run."""
    names = ("TORCHINDUCTOR_CACHE_DIR", "NPU_INDUCTOR_CACHE_DIR")
    saved = {k: os.environ.get(k) for k in names}
    if keep is None:
        folders = [tempfile.mkdtemp(prefix="npu_bench_cache_") for _ in names]
    else:
        folders = [str(keep.resolve() / "torch"), str(keep.resolve() / "npu_inductor")]
    print(f"compile cache: {folders[1]}" + (" (kept, --cache-dir)" if keep else
                                           " (fresh for this run, removed after it)"),
          flush=True)
    os.environ.update(zip(names, folders))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for folder in folders if keep is None else ():
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bad = sorted(set(_split(args.compare)) - set(COMPARE))
    if bad:
        raise SystemExit(f"npu-bench: unknown --compare {bad}; choose from {list(COMPARE)}")
    configure(args)
    models, messages = select_models(args)
    modes, settings = select_modes(args), settings_from(args)
    machine = machine_info()
    print("npu-bench on " + report.machine_line(machine), flush=True)
    for message in messages:
        print(message, flush=True)
    start = time.perf_counter()
    with fresh_caches(args.cache_dir):
        rows = run_all(args, settings, models, modes)
        others = [r for r in rows if r.mode != "dynamic"]  # the streams print their own tables
        if others or not {"dynamic", "serve"} & set(modes):
            report.print_table(others, machine)
        if "dynamic" in modes:
            from npu_inductor.benchmarks.dynamic import format_table

            print(format_table([r for r in rows if r.mode == "dynamic"]), flush=True)
        serve_ok = run_serve_mode(args) if "serve" in modes else True
        summary = compile_summary(rows)
        if args.layer_ops:
            from npu_inductor.benchmarks.layer_ops import layer_ops_report

            summary += layer_ops_report()
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print("\n".join(summary + [f"total wall time {time.perf_counter() - start:.1f} s, "
                                   f"process CPU time {time.process_time():.1f} s, load "
                                   f"average at the end {load}"]))
        if args.profile_compile:
            from npu_inductor.benchmarks.profile_compile import profile_models

            print(profile_models(models, modes, settings, args.out))
    if args.out:
        meta = {"machine": machine, "command": "npu-bench " + " ".join(sys.argv[1:]),
                "settings": {**vars(args), "out": str(args.out)}, "notes": NOTES,
                "compile_summary": summary, "messages": messages}
        for path in report.write_outputs(rows, meta, args.out):
            print(f"wrote {path}")
    return 0 if serve_ok and all(r.accuracy == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
