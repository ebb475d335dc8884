"""Collective lowering in one process over a fake 2-rank process group (no peers needed):
golden GE text, group-name registry, dtype carriers and refusals."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from harness import check_fn, record_graphs
from torch.testing._internal.distributed.fake_pg import FakeStore

from npu_inductor.ge import format_graph
from npu_inductor.runtime import collectives as comm


@pytest.fixture
def fake_world():
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def _graph_text(fn, *inputs) -> str:
    with record_graphs() as graphs:
        torch.compile(fn, backend="npu", fullgraph=True)(*inputs)
    # the graph header carries a process-wide counter: compare the ops only
    return "".join(format_graph(g.lowered.graph).split("\n", 1)[1] for g in graphs)


def test_golden_all_reduce_avg_and_all_to_all(fake_world):
    def fn(x):
        y = funcol.all_reduce(x, "avg", fake_world)
        return funcol.all_to_all_single(y, [1, 3], [3, 1], fake_world)

    assert _graph_text(fn, torch.randn(4, 2)) == """\
  %arg0_1 = Data()[index=0] -> f32[4, 2]
  %all_reduce = HcomAllReduce(%arg0_1)[fusion=0, group='hccl_world_group', reduction='sum'] -> f32[4, 2]
  %all_reduce_const = Const()[value=f32[]{2}] -> f32[]
  %all_reduce_avg = RealDiv(%all_reduce, %all_reduce_const) -> f32[4, 2]
  %wait_tensor = Identity(%all_reduce_avg) -> f32[4, 2]
  %all_to_all_single_send_counts = Const()[value=i64[2]{6, 2}] -> i64[2]
  %all_to_all_single_sdispls = Const()[value=i64[2]{0, 6}] -> i64[2]
  %all_to_all_single_recv_counts = Const()[value=i64[2]{2, 6}] -> i64[2]
  %all_to_all_single_rdispls = Const()[value=i64[2]{0, 2}] -> i64[2]
  %all_to_all_single = HcomAllToAllV(%wait_tensor, %all_to_all_single_send_counts, %all_to_all_single_sdispls, %all_to_all_single_recv_counts, %all_to_all_single_rdispls)[group='hccl_world_group'] -> f32[8]
  %all_to_all_single_shape = Const()[value=i64[2]{4, 2}] -> i64[2]
  %all_to_all_single_reshape = Reshape(%all_to_all_single, %all_to_all_single_shape) -> f32[4, 2]
  %wait_tensor_1 = Identity(%all_to_all_single_reshape) -> f32[4, 2]
  return (%wait_tensor_1)
"""  # noqa: E501


def test_bf16_reduces_in_fp32(fake_world):
    text = _graph_text(lambda x: funcol.all_reduce(x, "max", fake_world),
                       torch.randn(3, dtype=torch.bfloat16))
    assert text == """\
  %arg0_1 = Data()[index=0] -> bf16[3]
  %all_reduce_cast = Cast(%arg0_1)[dst_type=0] -> f32[3]
  %all_reduce = HcomAllReduce(%all_reduce_cast)[fusion=0, group='hccl_world_group', reduction='max'] -> f32[3]
  %all_reduce_cast_1 = Cast(%all_reduce)[dst_type=27] -> bf16[3]
  return (%all_reduce_cast_1)
"""  # noqa: E501


def test_bool_broadcast_moves_as_uint8(fake_world):
    text = _graph_text(lambda x: funcol.broadcast(x, 1, fake_world), torch.ones(3).bool())
    assert "Cast(%arg0_1)[dst_type=4] -> u8[3]" in text, text
    assert "HcomBroadcast(%broadcast_cast)[group='hccl_world_group', root_rank=1] -> u8[3]" \
        in text, text


def test_int64_all_reduce_is_refused(fake_world):
    def fn(x):
        return funcol.all_reduce(x * 2, "sum", fake_world)

    with pytest.raises(Exception, match="int64: the Hcom prototype has no such dtype"):
        torch.compile(fn, backend="npu", options={"fallback": "error"})(torch.ones(3).long())
    torch._dynamo.reset()
    check_fn(fn, torch.arange(3))  # fallback="eager": the collective runs in eager


def test_group_names_round_trip(fake_world):
    assert comm.ge_group_name(fake_world.group_name) == comm.WORLD_GROUP
    assert comm.resolve_group(comm.WORLD_GROUP) is fake_world
    sub = dist.new_group([0, 1])
    name = comm.ge_group_name(sub)
    assert name == comm.GROUP_PREFIX + sub.group_name
    assert comm.resolve_group(name) is sub
    with pytest.raises(comm.CollectiveError, match="unknown communicator group 'nope'"):
        comm.resolve_group("nope")
    with pytest.raises(comm.CollectiveError, match="no such torch process group"):
        comm.resolve_group(comm.GROUP_PREFIX + "no_such_group")


def test_unknown_group_without_init():
    with pytest.raises(comm.CollectiveError, match="not initialized"):
        comm.resolve_group("hccl_group_never_made")
