"""The communicator: runs the Hcom* GE ops of a loaded graph through ``torch.distributed``.

[Note: communicator groups]
A GE collective names its communicator in the string attr ``group``. Lowering turns the
torch group name an FX graph carries (``'0'`` for the world group) into a GE-valid name
with ``ge_group_name``: under HCCL (torch_npu) the communicator name the process group's
``ProcessGroupHCCL`` gives it, for every group including WORLD (torchair's
``get_hccl_comm_name(global_rank, init_comm=True)``; there is no ``hccl_world_group``
communicator under torch_npu); on the host device (gloo) ``hccl_world_group`` for the world
group and ``hccl_group_<torch group name>`` for the others. ``resolve_group`` maps a name
back to its ``ProcessGroup``: the host names from their spelling (so a graph loaded from a
cache, or a process group re-created after a failure, resolves correctly), HCCL
communicator names through the registry ``ge_group_name`` fills. The engine is the process group's
backend: ``hccl`` on an Ascend device with torch_npu, ``gloo`` on the host device. Rank,
world size and rendezvous come from the standard ``torchrun`` environment
(``init_distributed``).

Every collective waits with a deadline (``HCCL_EXEC_TIMEOUT`` seconds when set, else the
timeout the process group was created with), and any failure, a peer that died or a
peer that stalled past the deadline, becomes a ``CollectiveError`` naming the GE op, the
group and the rank.
"""

from __future__ import annotations

import datetime
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

# group naming is shared with lowering, so it lives below both (npu_inductor.ge.hccl_groups)
from npu_inductor.ge.hccl_groups import (  # noqa: F401  (re-exported)
    GROUP_PREFIX,
    MAX_GROUP_NAME,
    WORLD_GROUP,
    CollectiveError,
    ge_group_name,
    group_size,
    resolve_group,
    torch_npu_available,
)

DEFAULT_TIMEOUT_S = 1836.0  # HCCL_EXEC_TIMEOUT's default
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# GE ``reduction`` attr -> torch ReduceOp
REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
              "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}

_INIT_TIMEOUT_S: float | None = None


# ---- process-group setup -------------------------------------------------------------
def default_backend() -> str:
    """``hccl`` where torch_npu provides it (Ascend device), else ``gloo`` (host device)."""
    return "hccl" if torch_npu_available() else "gloo"


def env_timeout(name: str) -> float | None:
    """An HCCL timeout env var in seconds (None when unset; 0 means never)."""
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else None


def init_distributed(backend: str | None = None, timeout_s: float | None = None) -> Any:
    """Join the job described by the ``torchrun`` env (RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT) and return the world group; a no-op when already initialized.

    ``timeout_s`` defaults to ``HCCL_EXEC_TIMEOUT`` (then HCCL's default, 1836 s)."""
    global _INIT_TIMEOUT_S
    if dist.is_initialized():
        return dist.group.WORLD
    backend = backend or default_backend()
    if backend == "hccl":
        import torch_npu  # noqa: F401  (registers the hccl backend)

        prepare_acl_hccl(os.path.join(tempfile.gettempdir(), "npu_inductor_hccl"))
    if os.environ.get("MASTER_ADDR", "127.0.0.1") in LOOPBACK:
        # a loopback rendezvous means one machine: keep gloo's sockets on loopback too
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    timeout_s = timeout_s or env_timeout("HCCL_EXEC_TIMEOUT") or DEFAULT_TIMEOUT_S
    _INIT_TIMEOUT_S = timeout_s
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return dist.group.WORLD


# ---- running one collective ----------------------------------------------------------
def exec_timeout_s() -> float | None:
    """The per-collective deadline in seconds (None: the process group's own timeout)."""
    t = env_timeout("HCCL_EXEC_TIMEOUT")
    if t is not None:
        return t or None  # 0 = HCCL's "never": leave it to the process group
    return _INIT_TIMEOUT_S


def run_collective(op_type: str, group: str, launch: Callable[[Any], Any]) -> None:
    """Launch ``launch(pg)`` (an async torch.distributed call) and wait with the deadline;
    any failure becomes a ``CollectiveError`` naming ``op_type`` and ``group``."""
    pg = resolve_group(group)
    timeout = exec_timeout_s()
    start = time.monotonic()
    try:
        work = launch(pg)
        if timeout is None:
            work.wait()
        else:
            work.wait(timeout=datetime.timedelta(seconds=timeout))
    except Exception as e:
        waited = time.monotonic() - start
        limit = f"{timeout:g} s" if timeout is not None else "the process group's timeout"
        raise CollectiveError(
            f"{op_type} on group {group!r} (torch process group {pg.group_name!r}, rank "
            f"{pg.rank()} of {pg.size()}) failed after {waited:.1f} s (timeout {limit}): a "
            f"peer rank died, stalled or disagrees on the collective: {type(e).__name__}: "
            f"{e}") from e


def all_reduce(x: torch.Tensor, reduction: str, group: str) -> torch.Tensor:
    """HcomAllReduce: elementwise ``reduction`` (sum|prod|max|min) across the group."""
    if reduction not in REDUCE_OPS:
        raise CollectiveError(f"HcomAllReduce: unknown reduction {reduction!r}")
    out = x.contiguous().clone()
    run_collective("HcomAllReduce", group, lambda pg: dist.all_reduce(
        out, op=REDUCE_OPS[reduction], group=pg, async_op=True))
    return out


def all_gather(x: torch.Tensor, rank_size: int, group: str) -> torch.Tensor:
    """HcomAllGather: every rank's ``x`` concatenated along dim 0 in rank order."""
    x = x.contiguous()
    out = x.new_empty((x.shape[0] * rank_size, *x.shape[1:]))
    run_collective("HcomAllGather", group, lambda pg: dist.all_gather_into_tensor(
        out, x, group=pg, async_op=True))
    return out


def reduce_scatter(x: torch.Tensor, reduction: str, rank_size: int, group: str) -> torch.Tensor:
    """HcomReduceScatter: reduce across the group, rank ``r`` keeps dim-0 chunk ``r``."""
    x = x.contiguous()
    out = x.new_empty((x.shape[0] // rank_size, *x.shape[1:]))
    run_collective("HcomReduceScatter", group, lambda pg: dist.reduce_scatter_tensor(
        out, x, op=REDUCE_OPS[reduction], group=pg, async_op=True))
    return out


def broadcast(xs: Sequence[torch.Tensor], root_rank: int, group: str) -> list[torch.Tensor]:
    """HcomBroadcast: every tensor takes group rank ``root_rank``'s value."""
    outs = [x.contiguous().clone() for x in xs]

    def launch(pg: Any) -> Any:
        works = [dist.broadcast(t, group_src=root_rank, group=pg, async_op=True) for t in outs]
        return _AllWork(works)

    run_collective("HcomBroadcast", group, launch)
    return outs


def all_to_all_v(send: torch.Tensor, send_counts: torch.Tensor, send_displs: torch.Tensor,
                 recv_counts: torch.Tensor, recv_displs: torch.Tensor,
                 group: str) -> torch.Tensor:
    """HcomAllToAllV: segment ``i`` of ``send`` (elements ``send_displs[i]`` ...) goes to
    rank ``i``; the segment from rank ``j`` lands at ``recv_displs[j]``. Returns 1-D."""
    flat = send.contiguous().reshape(-1)
    sc, sd, rc, rd = (t.tolist() for t in (send_counts, send_displs, recv_counts, recv_displs))
    packed = torch.cat([flat[d:d + c] for c, d in zip(sc, sd)])
    received = flat.new_empty(sum(rc))
    run_collective("HcomAllToAllV", group, lambda pg: dist.all_to_all_single(
        received, packed, output_split_sizes=rc, input_split_sizes=sc, group=pg,
        async_op=True))
    out = flat.new_zeros(max((d + c for c, d in zip(rc, rd)), default=0))
    for seg, (c, d) in zip(received.split(rc), zip(rc, rd)):
        out[d:d + c] = seg
    return out


class _AllWork:
    """Several works waited as one (HcomBroadcast of several tensors)."""

    def __init__(self, works: list[Any]) -> None:
        self.works = works

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        for w in self.works:
            w.wait() if timeout is None else w.wait(timeout=timeout)
        return True


# ---- acl device: HCCL configuration ----------------------------------------------------
CONNECT_TIMEOUT_RANGE = (120, 7200)  # HCCL_CONNECT_TIMEOUT, seconds
DEFAULT_BUFFSIZE_MB = 200


def rank_table(world_size: int, devices_per_server: int | None = None,
               device_ips: dict[int, str] | None = None) -> dict[str, Any]:
    """An HCCL rank table (A2 / 910B, version "1.0"): ``world_size`` ranks on
    ``world_size / devices_per_server`` servers ``node_0, node_1, ...``; rank ``r`` is device
    ``r % devices_per_server`` of server ``r // devices_per_server``. All values are strings,
    as HCCL requires; ``device_ip`` (per rank, from ``/etc/hccn.conf``) is listed where known
    and required for every device of a multi-server table."""
    per = devices_per_server or world_size
    if world_size < 1 or per < 1 or world_size % per:
        raise ValueError(f"rank_table: {world_size} ranks do not fill servers of {per} devices")
    device_ips = device_ips or {}
    missing = [r for r in range(world_size) if r not in device_ips]
    if world_size > per and missing:
        raise ValueError(f"rank_table: a multi-server rank table lists device_ip for every "
                         f"device (/etc/hccn.conf address_<id>); missing for ranks {missing}")
    servers = []
    for s in range(world_size // per):
        devices = []
        for d in range(per):
            rank = s * per + d
            entry = {"device_id": str(d), "rank_id": str(rank)}
            if rank in device_ips:
                entry["device_ip"] = device_ips[rank]
            devices.append(entry)
        servers.append({"server_id": f"node_{s}", "device": devices})
    return {"status": "completed", "version": "1.0", "server_count": str(len(servers)),
            "server_list": servers}


def hccl_env(rank: int, world_size: int, rank_table_file: str, device_id: int | None = None,
             connect_timeout_s: int = CONNECT_TIMEOUT_RANGE[0],
             exec_timeout_s: int = int(DEFAULT_TIMEOUT_S),
             buffsize_mb: int = DEFAULT_BUFFSIZE_MB) -> dict[str, str]:
    """The environment HCCL reads on the acl device for one rank (values checked against
    HCCL's documented ranges)."""
    lo, hi = CONNECT_TIMEOUT_RANGE
    if not lo <= connect_timeout_s <= hi:
        raise ValueError(f"HCCL_CONNECT_TIMEOUT must be in [{lo}, {hi}] s, got "
                         f"{connect_timeout_s}")
    if buffsize_mb < 1:
        raise ValueError(f"HCCL_BUFFSIZE must be >= 1 (MB), got {buffsize_mb}")
    if exec_timeout_s and exec_timeout_s <= connect_timeout_s:
        raise ValueError("HCCL recommends HCCL_CONNECT_TIMEOUT < HCCL_EXEC_TIMEOUT")
    return {"RANK_TABLE_FILE": rank_table_file, "RANK_ID": str(rank),
            "RANK_SIZE": str(world_size), "DEVICE_ID": str(rank if device_id is None
                                                         else device_id),
            "HCCL_CONNECT_TIMEOUT": str(connect_timeout_s),
            "HCCL_EXEC_TIMEOUT": str(exec_timeout_s), "HCCL_BUFFSIZE": str(buffsize_mb)}


HCCN_CONF = "/etc/hccn.conf"


def hccn_device_ips(path: str | None = None) -> dict[int, str]:
    """Device id -> device IP from ``hccn.conf`` (``address_<id>=<ip>`` lines); {} if absent."""
    try:
        with open(path or HCCN_CONF) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    ips = {}
    for line in lines:
        key, _, value = line.strip().partition("=")
        if key.startswith("address_") and key[len("address_"):].isdigit() and value:
            ips[int(key[len("address_"):])] = value.strip()
    return ips


def prepare_acl_hccl(folder: str, rank: int | None = None, world_size: int | None = None,
                     local_world_size: int | None = None) -> dict[str, str]:
    """Write this job's rank table into ``folder`` and export the HCCL env for this rank
    (torchrun env by default); variables the user already set win. Returns the env."""
    import json

    rank = int(os.environ.get("RANK", "0")) if rank is None else rank
    world_size = int(os.environ.get("WORLD_SIZE", "1")) if world_size is None else world_size
    per = local_world_size or int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
    path = os.environ.get("RANK_TABLE_FILE")
    if path is None:  # one server knows only its own device IPs: a multi-server job
        path = os.path.join(folder, f"rank_table_{world_size}.json")  # brings its own table
        node = rank // per
        device_ips = {node * per + d: ip for d, ip in hccn_device_ips().items() if d < per}
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.{rank}.tmp"  # every rank writes the same table; rename is atomic
        with open(tmp, "w") as f:
            json.dump(rank_table(world_size, per, device_ips), f, indent=1)
        os.replace(tmp, path)
    env = hccl_env(rank, world_size, path,
                   device_id=int(os.environ.get("LOCAL_RANK", rank % per)))
    for key, value in env.items():
        os.environ.setdefault(key, value)
    return {k: os.environ[k] for k in env}
