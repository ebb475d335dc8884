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
# shared/reference sits beside the checkout (../shared), or beside a worktree's parent
REFERENCE = next((p / "shared" / "reference" for p in ROOT.parents
                  if (p / "shared" / "reference").is_dir()),
                 ROOT.parent / "shared" / "reference") / "ge_op_protos.json"
# Framework op types without a REG_OP (ge_ir_notes.md §1.6).
FRAMEWORK_OPS = {
    "NetOutput": {"attrs": [], "inputs": [{"kind": "dynamic", "name": "input", "types":
                                            "TensorType::ALL()"}], "outputs": []},
}

# Prototypes newer than the reference's copy, verbatim from the REG_OP in Huawei's open
# operator repository (the reference holds an older header without bf16/bool).
# PromptFlashAttention: hicann/ops-transformer
# attention/prompt_flash_attention/op_graph/prompt_flash_attention_proto.h (REG_OP lines).
_PFA_ATTRS = [
    {"name": "num_heads", "required": True, "type": "Int"},
    {"default": "1.0", "name": "scale_value", "required": False, "type": "Float"},
    {"default": "214748647", "name": "pre_tokens", "required": False, "type": "Int"},
    {"default": "0", "name": "next_tokens", "required": False, "type": "Int"},
    {"default": "\"BSH\"", "name": "input_layout", "required": False, "type": "String"},
    {"default": "0", "name": "num_key_value_heads", "required": False, "type": "Int"},
    {"default": "0", "name": "sparse_mode", "required": False, "type": "Int"},
    {"default": "1", "name": "inner_precise", "required": False, "type": "Int"},
]
_PFA_INPUTS = [
    ("required", "query", "DT_FLOAT16, DT_BF16, DT_INT8"),
    ("required", "key", "DT_FLOAT16, DT_BF16, DT_INT8"),
    ("required", "value", "DT_FLOAT16, DT_BF16, DT_INT8"),
    ("optional", "pse_shift", "DT_FLOAT16, DT_BF16"),
    ("optional", "atten_mask", "DT_FLOAT16, DT_BOOL, DT_INT8, DT_UINT8"),
    ("optional", "actual_seq_lengths", "DT_INT64"),
    ("optional", "actual_seq_lengths_kv", "DT_INT64"),
    ("optional", "deq_scale1", "DT_UINT64, DT_FLOAT32"),
    ("optional", "quant_scale1", "DT_FLOAT32"),
    ("optional", "deq_scale2", "DT_UINT64, DT_FLOAT32"),
    ("optional", "quant_scale2", "DT_FLOAT32, DT_BF16"),
    ("optional", "quant_offset2", "DT_FLOAT32, DT_BF16"),
]
NEWER_PROTOS = {
    "PromptFlashAttention": {
        "attrs": _PFA_ATTRS,
        "inputs": [{"kind": k, "name": n, "types": f"TensorType({{{t}}})"}
                   for k, n, t in _PFA_INPUTS],
        "outputs": [{"kind": "required", "name": "attention_out",
                     "types": "TensorType({DT_FLOAT16, DT_BF16, DT_INT8})"}],
    },
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
        table[name] = FRAMEWORK_OPS.get(name) or NEWER_PROTOS.get(name) or reference[name]
    TABLE.write_text(json.dumps(dict(sorted(table.items())), indent=1, sort_keys=True) + "\n")
    print(f"{len(table)} op types in {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
