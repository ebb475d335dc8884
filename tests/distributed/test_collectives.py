"""Every _c10d_functional collective inside a compiled graph matches eager on 2 gloo ranks
(127.0.0.1), and the dumped GE graph holds the Hcom op. One job runs all cases."""

from __future__ import annotations

import pytest
from case_collectives import CASES
from launcher import describe, run_ranks

pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    results = run_ranks("case_collectives:run_all", tmp_path_factory.mktemp("collectives"),
                        timeout_s=120)
    for r in results:
        assert r.returncode == 0 and "error" not in r.result, describe(results)
    return results


@pytest.mark.parametrize("name", list(CASES))
def test_collective_matches_eager(job, name):
    for r in job:
        case = r.result[name]
        assert case["ok"], f"rank {r.rank}: {case.get('error')}"
    hcom = [{op for op in r.result[name]["ops"] if op.startswith("Hcom")} for r in job]
    assert hcom[0] == hcom[1], hcom


