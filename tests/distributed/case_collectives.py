"""Rank side of test_collectives.py: every collective inside a compiled graph vs eager.

Each case is ``fn(x, group)`` run eagerly and compiled with backend="npu" (dumping the GE
graphs); the rank reports, per case, whether outputs match and which GE op types the
dumped ``ge_graph.txt`` files contain.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def _uneven_all_to_all(x: torch.Tensor, group: Any) -> torch.Tensor:
    # rank 0 sends 1 row to itself and 2 to rank 1; rank 1 sends 3 rows to rank 0, 1 to 1
    rank = dist.get_rank(group)
    send = [1, 2] if rank == 0 else [3, 1]
    recv = [1, 3] if rank == 0 else [2, 1]
    return funcol.all_to_all_single(x[:sum(send)] * 2, recv, send, group)


def _inplace_all_reduce(x: torch.Tensor, group: Any) -> torch.Tensor:
    y = x * 3
    dist.all_reduce(y, group=group)  # Dynamo remaps this to _c10d_functional.all_reduce
    return y - 1


def _tp_like(x: torch.Tensor, group: Any) -> torch.Tensor:
    part = funcol.all_gather_single(x * 2, 0, group)
    return funcol.reduce_scatter_single(part + 1, "sum", 0, group) * 3


def _all_reduce(op: str) -> Callable:
    def fn(x: torch.Tensor, group: Any) -> torch.Tensor:
        return funcol.all_reduce(x * 2, op, group) + 1

    return fn


# name -> (fn(x, group), input dtype, GE op types the graph must contain)
CASES: dict[str, tuple[Callable, torch.dtype, tuple[str, ...]]] = {
    **{f"all_reduce_{op}": (_all_reduce(op), torch.float32,
                            ("HcomAllReduce", "RealDiv") if op == "avg" else ("HcomAllReduce",))
       for op in ("sum", "avg", "min", "max", "product")},
    "all_reduce_bf16": (lambda x, g: funcol.all_reduce(x * 2, "sum", g), torch.bfloat16,
                        ("HcomAllReduce", "Cast")),
    "all_reduce_int32": (lambda x, g: funcol.all_reduce(x * 2, "max", g), torch.int32,
                         ("HcomAllReduce",)),
    "all_reduce_inplace": (_inplace_all_reduce, torch.float32, ("HcomAllReduce",)),
    "all_gather": (lambda x, g: funcol.all_gather_single(x * 2, 0, g), torch.float32,
                   ("HcomAllGather",)),
    "all_gather_int64": (lambda x, g: funcol.all_gather_single(x * 2, 0, g), torch.int64,
                         ("HcomAllGather",)),
    "reduce_scatter_sum": (lambda x, g: funcol.reduce_scatter_single(x * 2, "sum", 0, g),
                           torch.float32, ("HcomReduceScatter",)),
    "reduce_scatter_max": (lambda x, g: funcol.reduce_scatter_single(x * 2, "max", 0, g),
                           torch.float32, ("HcomReduceScatter",)),
    "broadcast": (lambda x, g: funcol.broadcast(x * 2, 1, g), torch.float32,
                  ("HcomBroadcast",)),
    "all_to_all_single": (_uneven_all_to_all, torch.float32, ("HcomAllToAllV", "Reshape")),
    "all_to_all_even": (lambda x, g: funcol.all_to_all_single(x * 2, None, None, g),
                        torch.float32, ("HcomAllToAllV",)),
    "subgroup_all_reduce": (lambda x, g: funcol.all_reduce(x * 2, "sum", g), torch.float32,
                            ("HcomAllReduce",)),
    "all_reduce_coalesced": (lambda x, g: funcol.all_reduce_coalesced([x * 2, x[0] + 1], "avg",
                                                                      g), torch.float32,
                             ("HcomAllReduce", "RealDiv")),
    "all_gather_coalesced": (lambda x, g: funcol.all_gather_single_coalesced([x * 2, x[1]], g),
                             torch.float32, ("HcomAllGather",)),
    "reduce_scatter_coalesced": (lambda x, g: funcol.reduce_scatter_single_coalesced(
        [x * 2, x[:2] * 3], "sum", [0, 0], g), torch.float32, ("HcomReduceScatter",)),
    "gather_then_scatter": (_tp_like, torch.float32, ("HcomAllGather", "HcomReduceScatter")),
}


def _input(rank: int, dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(4, 3, generator=gen) * 10
    return x.to(dtype) if dtype.is_floating_point else x.round().to(dtype)


def _wait(t: Any) -> Any:
    if isinstance(t, (list, tuple)):
        return [_wait(x) for x in t]
    return t.wait() if isinstance(t, funcol.AsyncCollectiveTensor) else t


def _ge_ops(dump: Path) -> list[str]:
    text = "".join(p.read_text() for p in sorted(dump.glob("*/ge_graph.txt")))
    return sorted(set(re.findall(r"= (\w+)\(", text)))


def run_case(name: str, rank: int, out_dir: Path) -> dict[str, Any]:
    fn, dtype, want = CASES[name]
    group = dist.new_group([0, 1]) if name.startswith("subgroup") else dist.group.WORLD
    x = _input(rank, dtype)
    expected = _wait(fn(x.clone(), group))
    dump = out_dir / f"dump_{name}_rank{rank}"
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="npu", fullgraph=True, options={"dump_dir": str(dump)})
    actual = _wait(compiled(x.clone(), group))
    ops = _ge_ops(dump)
    # bf16 sums: both sides round once per rank pair, exact for 2 ranks
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    missing = [op for op in want if op not in ops]
    assert not missing, f"GE graph lacks {missing}; has {ops}"
    return {"ok": True, "ops": ops, "groups": _groups(dump)}


def _groups(dump: Path) -> list[str]:
    text = "".join(p.read_text() for p in dump.glob("*/ge_graph.txt"))
    return sorted(set(re.findall(r"group='([^']*)'", text)))


def run_all(rank: int, out_dir: Path) -> dict[str, Any]:
    results = {}
    for name in CASES:
        try:
            results[name] = run_case(name, rank, out_dir)
        except Exception:  # noqa: BLE001  (reported per case)
            results[name] = {"ok": False, "error": traceback.format_exc()}
    return results
