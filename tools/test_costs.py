"""Per-file seconds from a pytest ``--durations=0`` report (setup + call + teardown), as the
``COST_S`` table of tests/file_costs.py.

    python -m pytest -p no:cacheprovider --durations=0 tests > durations.txt
    python tools/test_costs.py durations.txt [--min 3]

Run it on one core with no ``-n`` (each file's own time) on a quiet machine."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

LINE = re.compile(r"^\s*([0-9.]+)s\s+(setup|call|teardown)\s+(\S+?)::")


def file_costs(text: str) -> dict[str, float]:
    costs: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            costs[m.group(3)] += float(m.group(1))
    return dict(costs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("durations")
    parser.add_argument("--min", type=float, default=3.0, help="smallest cost listed (s)")
    args = parser.parse_args(argv)
    with open(args.durations) as f:
        costs = file_costs(f.read())
    print("COST_S = {")
    for path, seconds in sorted(costs.items(), key=lambda kv: -kv[1]):
        if seconds >= args.min:
            print(f'    "{path}": {seconds:.0f},')
    print("}")
    print(f"# total {sum(costs.values()):.0f} s in {len(costs)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
