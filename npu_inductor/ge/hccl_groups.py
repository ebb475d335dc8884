"""The GE ``group`` attr of a collective: HCCL communicator names for torch process groups.

Shared by lowering (which names a group when it emits an Hcom* op) and the runtime (which
resolves the name back to a ``ProcessGroup`` when it runs one), so it sits below both.
See [Note: communicator groups] in ``runtime/collectives.py``.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch
import torch.distributed as dist

WORLD_GROUP = "hccl_world_group"
GROUP_PREFIX = "hccl_group_"
MAX_GROUP_NAME = 128  # HCCL's limit on a group name (hcom_ops.h)

_GROUPS: dict[str, Any] = {}


class CollectiveError(RuntimeError):
    """A collective failed or timed out; the message names the op, group and rank."""


def torch_npu_available() -> bool:
    return importlib.util.find_spec("torch_npu") is not None


def _torch_group(group: Any) -> Any:
    if isinstance(group, dist.ProcessGroup):
        return group
    from torch.distributed.distributed_c10d import _resolve_process_group

    return _resolve_process_group(str(group))


def _hccl_backend(pg: Any) -> Any:
    """The process group's HCCL backend (torch_npu ``ProcessGroupHCCL``), or None."""
    try:
        backend = pg._get_backend(torch.device("npu"))
    except (RuntimeError, AttributeError, ValueError):
        return None  # no "npu" device type (no torch_npu) or no backend for it
    return backend if hasattr(backend, "get_hccl_comm_name") else None


def _hccl_comm_name(pg: Any) -> str | None:
    """torch_npu's HCCL communicator name for ``pg`` (None off Ascend), as torchair asks
    for it: with the *global* rank, creating the communicator if needed."""
    backend = _hccl_backend(pg)
    if backend is None:
        return None
    return backend.get_hccl_comm_name(dist.get_rank(), init_comm=True)


def ge_group_name(group: Any) -> str:
    """The GE ``group`` attr for a torch group (name string or ProcessGroup); registers it.
    Under HCCL (torch_npu) it is the communicator name for every group, WORLD included."""
    pg = _torch_group(group)
    name = _hccl_comm_name(pg)
    if name is None:  # host device (gloo): names that spell the torch group
        name = WORLD_GROUP if pg == dist.group.WORLD else GROUP_PREFIX + pg.group_name
    if len(name) > MAX_GROUP_NAME:
        raise CollectiveError(f"group name {name!r} is longer than HCCL's {MAX_GROUP_NAME}")
    _GROUPS[name] = pg
    return name


def resolve_group(name: str) -> Any:
    """The ``ProcessGroup`` a GE ``group`` attr names. Names that spell a torch group are
    looked up in c10d each time, so a re-created process group is never served stale."""
    if not dist.is_initialized():
        raise CollectiveError(f"GE collective on group {name!r}: torch.distributed is not "
                              f"initialized (call npu_inductor.runtime.collectives."
                              f"init_distributed() or torch.distributed.init_process_group)")
    if name == WORLD_GROUP:
        return dist.group.WORLD
    if name.startswith(GROUP_PREFIX):
        try:
            return _torch_group(name[len(GROUP_PREFIX):])
        except (ValueError, RuntimeError) as e:
            raise CollectiveError(f"communicator group {name!r}: no such torch process group "
                                  f"in this process ({e})") from e
    pg = _GROUPS.get(name)  # torch_npu HCCL communicator names
    if pg is None:
        raise CollectiveError(f"unknown communicator group {name!r}; known: {sorted(_GROUPS)}")
    return pg


def group_size(group: Any) -> int:
    return _torch_group(group).size()
