"""One rank of a test job: ``python -m worker <module>:<function> <out_dir>``.

Joins the job from the torchrun environment through npu_inductor's communicator, runs
``<module>.<function>(rank, out_dir)`` and writes what it returns to ``rank<N>.json``;
an exception is recorded there as ``{"error": traceback}``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from pathlib import Path

import torch.distributed as dist

from npu_inductor.runtime.collectives import init_distributed


def main(case: str, out_dir: Path) -> int:
    rank = int(os.environ["RANK"])
    init_distributed(timeout_s=float(os.environ.get("NPU_TEST_PG_TIMEOUT", "30")))
    module, fn = case.split(":")
    try:
        result, code = getattr(importlib.import_module(module), fn)(rank, out_dir), 0
    except Exception:  # noqa: BLE001  (reported to the launcher)
        result, code = {"error": traceback.format_exc()}, 1
    (out_dir / f"rank{rank}.json").write_text(json.dumps(result, indent=1))
    sys.stdout.flush()
    if code == 0 and not result.get("skip_teardown"):
        dist.destroy_process_group()
    return code


if __name__ == "__main__":
    code = main(sys.argv[1], Path(sys.argv[2]))
    sys.stdout.flush()
    os._exit(code)  # never block on a broken peer while exiting
