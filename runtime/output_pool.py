"""Large graph outputs reuse the memory of outputs nothing references any more.

[Note: host output pool]
On an Ascend device a graph's outputs come from the caching allocator: a training step's
gradients and logits land in blocks the previous step freed, and device memory never goes
back to the OS between steps. On the host device outputs are host tensors, and a fresh
multi-megabyte ``torch.empty`` goes to glibc, which trims or unmaps freed chunks that size:
every step the kernel zero-fills the pages again (a 32 MB embedding gradient is 8,000 page
faults, ~5 ms of system time). ``empty`` keeps the storage of each output of at least
``MIN_BYTES`` it hands out and serves a later request of the same byte size from one
whose only remaining reference is the pool's (the user, autograd and every view dropped it:
``torch._C._storage_Use_Count`` is 1), so the memory is reused in place like the device's
caching allocator does. Smaller outputs, which glibc's free lists serve without faults, are
plain ``torch.empty``. At most ``PER_SIZE`` storages are kept per size (the oldest is
forgotten, not freed, when all are in use), so outputs a caller keeps are never pinned
beyond that. The contents of a reused output are undefined, as ``torch.empty``'s are.
``NPU_INDUCTOR_HOST_OUTPUT_POOL=0`` turns it off.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import torch

from npu_inductor.config import env_bool

ENV_FLAG = "NPU_INDUCTOR_HOST_OUTPUT_POOL"
MIN_BYTES = 1 << 20
PER_SIZE = 8

_use_count = torch._C._storage_Use_Count
_free: dict[int, list[torch.UntypedStorage]] = {}
_lock = threading.Lock()
_STATS = {"reused": 0, "fresh": 0}


def enabled() -> bool:
    return env_bool(ENV_FLAG, True)


def empty(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A contiguous ``shape`` tensor of ``dtype`` for a graph output (see the note)."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or not _ENABLED[0]:
        return torch.empty(shape, dtype=dtype)
    with _lock:
        kept = _free.setdefault(nbytes, [])
        for st in kept:
            if _use_count(st._cdata) == 1:
                _STATS["reused"] += 1
                return torch.empty(0, dtype=dtype).set_(st, 0, shape)
        out = torch.empty(shape, dtype=dtype)
        if len(kept) >= PER_SIZE:
            kept.pop(0)
        kept.append(out.untyped_storage())
        _STATS["fresh"] += 1
        return out


def clear() -> None:
    """Forget every kept storage (memory still referenced elsewhere stays alive)."""
    with _lock:
        _free.clear()


def stats() -> dict[str, int]:
    """Outputs served from kept memory (``reused``) and freshly allocated (``fresh``)."""
    return dict(_STATS)


_ENABLED = [enabled()]
