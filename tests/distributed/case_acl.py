"""2-rank acl case: collectives compiled for the acl device through the fakes of ``acl``,
``atc`` and torch_npu's ``hccl`` backend (tests/fakes). Reports per rank the GE ``group``
attrs, the communicator names torch_npu gives, the device ACL was set to and the results."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from harness import record_graphs

OPTIONS = {"device": "acl", "fallback": "error"}


def _groups(graphs) -> list[str]:
    return [op.attr("group") for g in graphs for op in g.lowered.graph.ops
            if op.type.startswith("Hcom")]


def _comm_name(pg) -> str:
    return pg._get_backend(torch.device("npu")).get_hccl_comm_name(dist.get_rank())


def hccl_groups(rank: int, out_dir) -> dict:
    import acl

    solo = dist.new_group([1])  # on rank 1 the group-local rank (0) is not the global one

    def world_sum(x):
        return funcol.all_reduce(x, "sum", dist.group.WORLD) * 2

    def solo_max(x):
        return funcol.all_reduce(x, "max", solo) + 1

    x = torch.full((4,), float(rank + 1))
    with record_graphs() as graphs:
        out = torch.compile(world_sum, backend="npu", options=OPTIONS)(x)
    result = {"world_out": out.tolist(), "world_groups": _groups(graphs),
              "world_comm": _comm_name(dist.group.WORLD), "device": acl.rt.get_device()[0],
              "backend": dist.get_backend()}
    if rank == 1:
        torch._dynamo.reset()
        with record_graphs() as graphs:
            result["solo_out"] = torch.compile(solo_max, backend="npu", options=OPTIONS)(
                x).tolist()
        result["solo_groups"], result["solo_comm"] = _groups(graphs), _comm_name(solo)
    return result
