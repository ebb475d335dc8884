"""A fake of torch_npu's distributed side for the 2-rank acl test: the ``npu`` device name
and an ``hccl`` process-group backend (``ProcessGroupHCCL``) whose collectives run on gloo
and whose ``get_hccl_comm_name(rank, init_comm=True)`` returns the communicator name, as
torch_npu's does. Strict where torchair relies on it: the rank must be the *global* rank."""

from __future__ import annotations

import itertools
import types

import torch
import torch.distributed as dist

torch.utils.rename_privateuse1_backend("npu")
# torch.npu: no NPU tensors exist here (device memory belongs to the fake acl)
torch._register_device_module("npu", types.SimpleNamespace(
    is_available=lambda: False, device_count=lambda: 0, __name__="torch.npu"))
_COUNTER = itertools.count()
_ALIVE: list = []  # keep the Python side of every backend alive (pybind11 subclass)


class ProcessGroupHCCL(dist.ProcessGroupGloo):
    def get_hccl_comm_name(self, rank: int, init_comm: bool = True) -> str:
        if rank != dist.get_rank():
            raise RuntimeError(f"get_hccl_comm_name({rank}): expected the global rank "
                               f"{dist.get_rank()}")
        return self.comm_name


def _create_hccl(store, group_rank: int, group_size: int, timeout) -> ProcessGroupHCCL:
    pg = ProcessGroupHCCL(store, group_rank, group_size, timeout)
    # creation order is the same on every rank, so every member agrees on the name
    pg.comm_name = f"127.0.0.1%lo_60000_{next(_COUNTER)}_fakehccl"
    _ALIVE.append(pg)
    return pg


dist.Backend.register_backend("hccl", _create_hccl, devices=["cpu", "npu"])
