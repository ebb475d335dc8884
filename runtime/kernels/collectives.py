"""Hcom* GE ops (HCCL collectives) on the host device, run by the communicator
(``npu_inductor.runtime.collectives``) through ``torch.distributed``."""

from __future__ import annotations

from npu_inductor.runtime import collectives as comm
from npu_inductor.runtime.kernels import kernel


@kernel("HcomAllReduce")
def hcom_all_reduce(x, reduction, group, fusion=1, fusion_id=-1):
    return comm.all_reduce(x, reduction, group)


@kernel("HcomAllGather")
def hcom_all_gather(x, rank_size, group, fusion=0, fusion_id=-1):
    return comm.all_gather(x, rank_size, group)


@kernel("HcomReduceScatter")
def hcom_reduce_scatter(x, reduction, group, rank_size, fusion=0, fusion_id=-1):
    return comm.reduce_scatter(x, reduction, rank_size, group)


@kernel("HcomBroadcast")
def hcom_broadcast(x, root_rank, group, fusion=0, fusion_id=-1):
    outs = comm.broadcast(x, root_rank, group)
    return outs[0] if len(outs) == 1 else tuple(outs)


@kernel("HcomAllToAllV")
def hcom_all_to_all_v(send_data, send_counts, send_displacements, recv_counts,
                      recv_displacements, group):
    return comm.all_to_all_v(send_data, send_counts, send_displacements, recv_counts,
                             recv_displacements, group)
