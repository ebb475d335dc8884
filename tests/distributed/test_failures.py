"""A rank that dies or stalls makes the other rank's compiled collective fail with a clear
error naming the GE op and group, within HCCL_EXEC_TIMEOUT, instead of hanging."""

from __future__ import annotations

import re

import pytest
from launcher import describe, run_ranks

pytestmark = pytest.mark.distributed
TIMEOUT_S = 5  # HCCL_EXEC_TIMEOUT given to the ranks


def _check_rank0(results, what: str) -> float:
    r0 = results[0]
    assert r0.returncode == 0, describe(results)  # rank 0 returned by itself: no hang
    assert r0.result["raised"], f"{what}: the collective did not fail\n{describe(results)}"
    msg = r0.result["message"]
    assert "HcomAllReduce" in msg and "'hccl_world_group'" in msg, msg
    assert "rank 0 of 2" in msg, msg
    waited = float(re.search(r"failed after ([0-9.]+) s", msg).group(1))
    assert waited <= TIMEOUT_S + 3, msg
    return waited


def test_dead_peer_fails_fast(tmp_path):
    results = run_ranks("case_failures:dead_peer", tmp_path, timeout_s=60,
                        env={"HCCL_EXEC_TIMEOUT": str(TIMEOUT_S)})
    assert results[1].returncode == 7, describe(results)
    _check_rank0(results, "dead peer")


def test_stalled_peer_times_out(tmp_path):
    results = run_ranks("case_failures:stalled_peer", tmp_path, timeout_s=60,
                        env={"HCCL_EXEC_TIMEOUT": str(TIMEOUT_S)})
    waited = _check_rank0(results, "stalled peer")
    assert waited >= TIMEOUT_S - 0.5, "failed before the timeout: not a stall detection"
    assert "timeout 5 s" in results[0].result["message"]
