"""2 ranks on the acl device through the fakes (tests/fakes: ``acl``, ``atc`` and torch_npu's
``hccl`` backend): every rank sets its own device (LOCAL_RANK), and the GE ``group`` attr of
each Hcom op is the communicator name the process group's ``ProcessGroupHCCL`` gives, WORLD
included, asked for with the global rank."""

from __future__ import annotations

import importlib.util
import os

import pytest
from fakes.fixtures import FAKES, env_for_workers
from launcher import HERE, describe, run_ranks

pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    for module in ("acl", "torch_npu"):
        spec = importlib.util.find_spec(module)
        if spec is not None and not str(spec.origin).startswith(str(FAKES)):
            pytest.skip(f"a real {module} is installed; the fakes would shadow it")
    tmp = tmp_path_factory.mktemp("acl_hccl")
    env = env_for_workers(tmp)
    env["PYTHONPATH"] = os.pathsep.join([str(FAKES), str(HERE), str(HERE.parent),
                                         os.environ.get("PYTHONPATH", "")])
    env["NPU_INDUCTOR_DEVICE"] = "acl"
    results = run_ranks("case_acl:hccl_groups", tmp, timeout_s=240, env=env)
    for r in results:
        assert r.returncode == 0 and "error" not in r.result, describe(results)
    return results


def test_each_rank_on_its_own_device(job):
    assert [r.result["device"] for r in job] == [0, 1]
    assert {r.result["backend"] for r in job} == {"hccl"}


def test_world_group_is_the_hccl_communicator_name(job):
    names = {r.result["world_comm"] for r in job}
    assert len(names) == 1 and "hccl_world_group" not in names
    for r in job:
        assert r.result["world_groups"] == [r.result["world_comm"]]
        assert r.result["world_out"] == [6.0] * 4  # (1 + 2) * 2


def test_subgroup_name_asked_with_the_global_rank(job):
    rank1 = job[1].result
    assert rank1["solo_groups"] == [rank1["solo_comm"]] != [rank1["world_comm"]]
    assert rank1["solo_out"] == [3.0] * 4  # max over the one-rank group, + 1
