"""Copy GE op prototypes from shared/reference/ge_op_protos.json into the op-spec table.

Usage: python tools/gen_op_specs.py OP_TYPE [OP_TYPE ...]
Adds (or refreshes) the named ops in npu_inductor/ge/op_specs.json; entries stay verbatim.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "npu_inductor" / "ge" / "op_specs.json"
REFERENCE = ROOT.parent / "shared" / "reference" / "ge_op_protos.json"
# Framework op types without a REG_OP (ge_ir_notes.md §1.6).
FRAMEWORK_OPS = {
    "NetOutput": {"attrs": [], "inputs": [{"kind": "dynamic", "name": "input", "types":
                                            "TensorType::ALL()"}], "outputs": []},
}


def main(names: list[str]) -> int:
    reference = json.loads(REFERENCE.read_text())
    table = json.loads(TABLE.read_text()) if TABLE.exists() else {}
    table.update(FRAMEWORK_OPS)
    unknown = [n for n in names if n not in reference and n not in FRAMEWORK_OPS]
    if unknown:
        print(f"not GE op types (absent from the reference): {unknown}", file=sys.stderr)
        return 1
    for name in names:
        table[name] = FRAMEWORK_OPS.get(name) or reference[name]
    TABLE.write_text(json.dumps(dict(sorted(table.items())), indent=1, sort_keys=True) + "\n")
    print(f"{len(table)} op types in {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
