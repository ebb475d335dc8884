"""Long fuzz runs: random programs from integer seeds, compiled with ``backend="npu"``
(``fallback="error"``) and compared with eager, as ``tests/fuzz`` does in CI.

    python tools/fuzz.py --count 5000              # seeds 0..4999
    python tools/fuzz.py --start 100000 --count 2000 --stop-after 5
    python tools/fuzz.py --seed 203                # one program: print it and run it

A failing seed reproduces with ``--seed N``; once fixed, append it to
``tests/fuzz/seeds.txt`` so CI replays it (docs/fuzzing.md).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fuzz"))

import check  # noqa: E402  (tests/ is not a package)
from programs import generate, random_draw  # noqa: E402


def run_seed(seed: int) -> str | None:
    """None when the program matches eager, else a one-line failure summary."""
    prog = generate(random_draw(seed))
    try:
        check.run(prog)
    except check.InvalidProgram:
        return "invalid"
    except Exception as e:  # any failure of the compiled program is a finding
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        why = next((ln for ln in reversed(lines) if "failed" in ln or "Error:" in ln),
                   lines[0] if lines else "")
        return f"{type(e).__name__}: {why[:300]}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, help="run and print one program")
    ap.add_argument("--stop-after", type=int, default=0, help="stop after N failures")
    args = ap.parse_args(argv)
    torch._dynamo.guards.profile_guard_manager = lambda *a: 0.0  # as tests/fuzz does
    warnings.simplefilter("ignore")
    if args.seed is not None:
        print(generate(random_draw(args.seed)).source())
        why = run_seed(args.seed)
        print(why or "ok")
        return 1 if why and why != "invalid" else 0
    return _sweep(args.start, args.count, args.stop_after)


def _sweep(start: int, count: int, stop_after: int) -> int:
    results: Counter[str] = Counter()
    failed: list[tuple[int, str]] = []
    t0 = time.perf_counter()
    for seed in range(start, start + count):
        why = run_seed(seed)
        results["ok" if why is None else "invalid" if why == "invalid" else "failed"] += 1
        if why not in (None, "invalid"):
            failed.append((seed, why))
            print(f"seed {seed}: {why}", flush=True)
            if stop_after and len(failed) >= stop_after:
                break
    n = sum(results.values())
    print(f"{n} programs in {time.perf_counter() - t0:.1f} s: {results['ok']} match eager, "
          f"{results['failed']} failed, {results['invalid']} rejected by eager itself")
    if failed:
        print("failing seeds:", " ".join(str(s) for s, _ in failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
