"""A tensor-parallel MLP written with functional collectives compiles into forward and
backward GE graphs holding the Hcom ops, and matches eager (outputs and gradients)."""

from __future__ import annotations

import pytest
from launcher import describe, run_ranks

pytestmark = pytest.mark.distributed


def test_tensor_parallel_mlp(tmp_path):
    results = run_ranks("case_tp:run", tmp_path, timeout_s=90)
    for r in results:
        assert r.returncode == 0 and "error" not in r.result, describe(results)
        graphs = r.result["graphs"]
        fwd = set().union(*(ops for g, ops in graphs.items() if g.startswith("forward")))
        bwd = set().union(*(ops for g, ops in graphs.items() if g.startswith("backward")))
        assert {"HcomAllGather", "HcomReduceScatter"} <= fwd, graphs
        assert {"HcomAllGather", "HcomReduceScatter"} <= bwd, graphs
