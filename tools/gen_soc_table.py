"""Copy the 910B kernel table the dtype gate needs from shared/reference into package data.

Usage: python tools/gen_soc_table.py
Reads shared/reference/ascend910b_op_support.json and writes
npu_inductor/ge/soc_ascend910b.json: per GE op type its kernel kind on the SoC, the dtype
combinations of its AI Core (or AI CPU / HCCL) kernel, the AI CPU dtypes per port where
stated, and the source. Nothing is added or guessed: ``table(reference)`` is a pure
reshaping, and tests/ge/test_soc.py checks the stored copy equals it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "npu_inductor" / "ge" / "soc_ascend910b.json"
# shared/reference sits beside the checkout (../shared), or beside a worktree's parent
REFERENCE = next((p / "shared" / "reference" for p in ROOT.parents
                  if (p / "shared" / "reference").is_dir()),
                 ROOT.parent / "shared" / "reference") / "ascend910b_op_support.json"

# ``kernel_910b`` prefixes -> kernel kind (see the reference .md, "How to read this")
_KINDS = (("aicore", "aicore"), ("aicpu only", "aicpu"), ("hccl", "hccl"),
          ("none (graph-structural", "structural"), ("none", "none"), ("unknown", "unknown"))


def kind_of(entry: dict[str, Any]) -> str:
    text = entry.get("kernel_910b", "unknown")
    return next(kind for prefix, kind in _KINDS if text.startswith(prefix))


def _combo(raw: dict[str, Any]) -> dict[str, str]:
    """One positional combination: input ports by name, outputs as ``->name``."""
    return {**raw["inputs"], **{f"->{k}": v for k, v in raw["outputs"].items()}}


def _entry(raw: dict[str, Any]) -> dict[str, Any]:
    combos = []
    for c in raw.get("combos", []):
        c = _combo(c)
        if c not in combos:  # OpDef lists repeat per config; keep one of each
            combos.append(c)
    out = {"kind": kind_of(raw), "status": raw["status"], "combos": combos,
           "scope": raw.get("combo_scope", "positional (OpDef: every port)"),
           "source": raw["source"]}
    aicpu = raw.get("aicpu", {}).get("port_dtypes")
    if aicpu:
        out["aicpu"] = aicpu
    return out


def table(reference: dict[str, Any]) -> dict[str, Any]:
    return {op: _entry(raw) for op, raw in sorted(reference.items())}


def main(argv: list[str]) -> int:
    if argv:
        print(__doc__, file=sys.stderr)
        return 1
    data = table(json.loads(REFERENCE.read_text()))
    TABLE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"{len(data)} op types in {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
