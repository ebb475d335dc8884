"""Caching device-memory allocator (the NPU counterpart of PyTorch's CUDA caching allocator).

[Note: caching allocator]
Device ``malloc``/``free`` are slow and synchronising on a real device, so memory is taken
from the backend in *segments* and handed out as *blocks* carved from them:

* Sizes round up to 512 B. Requests up to 1 MiB come from the **small pool** (2 MiB
  segments); larger ones from the **large pool** (20 MiB segments for requests under
  10 MiB, else the request rounded up to 2 MiB).
* **Best fit**: the smallest cached free block that fits (ties: lowest address). A block
  bigger than the request is **split**; the remainder stays cached. Freeing a block
  **merges** it with free neighbours of the same segment, so fragments heal.
* Nothing goes back to the backend until ``empty_cache()``, a memory-limit retry, or the
  garbage-collection threshold releases whole free segments.
* ``memory_limit`` (option / ``NPU_INDUCTOR_MEMORY_LIMIT``) caps reserved bytes. An
  allocation past it first releases every cached free segment and retries, then raises
  ``NpuOutOfMemoryError`` naming the request, reserved, allocated, the limit and the
  largest free block. The allocator's state is untouched by a failed allocation.

``PYTORCH_NPU_ALLOC_CONF`` (same syntax as ``PYTORCH_CUDA_ALLOC_CONF``:
``key:value,key:value``) sets:

* ``max_split_size_mb``: cached blocks of at least this size are never split, and
  requests below it never take them; this keeps big blocks whole for big requests
  (less fragmentation on workloads that mix sizes). A request at least this size may
  take an oversize block wasting at most 20 MiB. Must be > 20.
* ``garbage_collection_threshold``: a fraction in (0, 1) of ``memory_limit``. Before new
  memory is taken while reserved bytes exceed it, whole free segments are released,
  least recently used first, until reserved is back under the threshold (instead of
  waiting for an out-of-memory retry to release everything). Needs ``memory_limit``.
* ``expandable_segments``: ``True`` gives each pool one growable segment: a large
  virtual reservation into which 2 MiB granules are mapped on demand
  (``reserve``/``map``/``unmap``), so a growing workload extends one segment instead of
  leaving many half-used ones; ``empty_cache()`` unmaps the free tail. Backends without
  virtual memory ignore it with a warning.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from npu_inductor.config import parse_size

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
MIN_BLOCK = 512          # every size rounds up to this
SMALL_SIZE = 1 * MiB     # largest request served by the small pool
SMALL_BUFFER = 2 * MiB   # small-pool segment size
LARGE_BUFFER = 20 * MiB  # large-pool segment for requests below MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 * MiB
ROUND_LARGE = 2 * MiB    # larger segments round up to this
GRANULE = 2 * MiB        # expandable segments map memory in these steps
VIRTUAL_SIZE = 64 * GiB  # address space reserved per expandable segment (910B HBM)
ALLOC_CONF_ENV = "PYTORCH_NPU_ALLOC_CONF"
LIMIT_ENV = "NPU_INDUCTOR_MEMORY_LIMIT"
_IGNORED_KEYS = ("roundup_power2_divisions", "roundup_bypass_threshold_mb",
                 "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
                 "pinned_num_register_threads", "pinned_use_host_register", "base_addr_aligned_kb",
                 "page_size", "segment_size_mb")


class NpuOutOfMemoryError(torch.OutOfMemoryError):
    """The caching allocator could not satisfy a request within the memory limit."""


class AllocatorError(RuntimeError):
    """Misuse of the allocator: freeing an unknown address, a bad configuration."""


# ---- configuration -------------------------------------------------------------------------
@dataclass(frozen=True)
class AllocatorSettings:
    """Parsed ``PYTORCH_NPU_ALLOC_CONF``; sizes in bytes."""

    max_split_size: int | None = None
    garbage_collection_threshold: float | None = None
    expandable_segments: bool = False


def _parse_bool(key: str, value: str) -> bool:
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise AllocatorError(f"{ALLOC_CONF_ENV}: {key} must be True or False, got {value!r}")


def _parse_item(key: str, value: str) -> dict[str, Any]:
    if key == "max_split_size_mb":
        mb = int(value)
        if mb <= LARGE_BUFFER // MiB:
            raise AllocatorError(f"{ALLOC_CONF_ENV}: max_split_size_mb must be > "
                                 f"{LARGE_BUFFER // MiB}, got {mb}")
        return {"max_split_size": mb * MiB}
    if key == "garbage_collection_threshold":
        frac = float(value)
        if not 0.0 < frac < 1.0:
            raise AllocatorError(f"{ALLOC_CONF_ENV}: garbage_collection_threshold must be in "
                                 f"(0, 1), got {value}")
        return {"garbage_collection_threshold": frac}
    if key == "expandable_segments":
        return {"expandable_segments": _parse_bool(key, value)}
    if key in _IGNORED_KEYS:
        warnings.warn(f"{ALLOC_CONF_ENV}: {key} is not used by npu_inductor's allocator",
                      stacklevel=3)
        return {}
    raise AllocatorError(f"{ALLOC_CONF_ENV}: unknown option {key!r}; valid: "
                         f"max_split_size_mb, garbage_collection_threshold, expandable_segments")


def parse_alloc_conf(text: str | None) -> AllocatorSettings:
    """Parse ``"max_split_size_mb:128,expandable_segments:True"`` (PyTorch's syntax)."""
    values: dict[str, Any] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition(":")
        if not sep:
            raise AllocatorError(f"{ALLOC_CONF_ENV}: expected key:value, got {item!r}")
        values.update(_parse_item(key.strip(), value.strip()))
    return AllocatorSettings(**values)


def limit_from_env() -> int | None:
    """``NPU_INDUCTOR_MEMORY_LIMIT``: bytes or a size string (``"512MiB"``); a bad value
    raises naming the variable."""
    return parse_size(os.environ.get(LIMIT_ENV), what=LIMIT_ENV)


def format_bytes(n: int | None) -> str:
    if n is None:
        return "unlimited"
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


# ---- backends ------------------------------------------------------------------------------
class Backend(Protocol):
    """Raw device memory. Optional for expandable segments: reserve/map/unmap/release."""

    def malloc(self, size: int) -> int: ...

    def free(self, ptr: int) -> None: ...


class HostBackend:
    """The host device's slabs (``runtime.memory.SlabMemory``)."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self.malloc, self.free, self.resolve = memory.malloc, memory.free, memory.resolve
        self.reserve, self.map, self.unmap = memory.reserve, memory.map, memory.unmap
        self.release = memory.release


class AclBackend:
    """A real device through pyACL (``acl.rt.malloc`` / ``acl.rt.free``)."""

    HUGE_FIRST = 0

    def __init__(self, acl: Any) -> None:
        self.acl = acl

    def malloc(self, size: int) -> int:
        ptr, ret = self.acl.rt.malloc(size, self.HUGE_FIRST)
        if ret != 0:
            raise MemoryError(f"acl.rt.malloc({size}) failed with ACL error {ret}")
        return ptr

    def free(self, ptr: int) -> None:
        ret = self.acl.rt.free(ptr)
        if ret != 0:
            raise AllocatorError(f"acl.rt.free({ptr:#x}) failed with ACL error {ret}")


# ---- blocks, segments, pools ---------------------------------------------------------------
@dataclass(eq=False)
class Segment:
    addr: int
    size: int  # mapped bytes (the whole segment unless expandable)
    pool: Pool
    expandable: bool = False
    last_used: int = 0
    head: Block | None = None  # the block at ``addr`` (merges keep the lower block)


@dataclass(eq=False)
class Block:
    segment: Segment
    addr: int
    size: int
    allocated: bool = False
    requested: int = 0
    prev: Block | None = None
    next: Block | None = None


@dataclass(eq=False)
class Pool:
    """Free blocks of one size class, sorted by (size, address) for best fit."""

    name: str
    free: list[tuple[int, int]] = field(default_factory=list)
    by_addr: dict[int, Block] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)

    def insert(self, b: Block) -> None:
        bisect.insort(self.free, (b.size, b.addr))
        self.by_addr[b.addr] = b

    def remove(self, b: Block) -> None:
        i = bisect.bisect_left(self.free, (b.size, b.addr))
        del self.free[i]
        del self.by_addr[b.addr]

    def best_fit(self, size: int, max_split: int | None) -> Block | None:
        i = bisect.bisect_left(self.free, (size, -1))
        if i == len(self.free):
            return None
        b = self.by_addr[self.free[i][1]]
        if max_split is not None:
            if size < max_split <= b.size:
                return None  # keep oversize blocks for big requests
            if size >= max_split and b.size >= size + LARGE_BUFFER:
                return None
        return b

    def largest_free(self) -> int:
        return self.free[-1][0] if self.free else 0


def round_size(nbytes: int) -> int:
    return max(MIN_BLOCK, (nbytes + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK)


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


# ---- the allocator -------------------------------------------------------------------------
_COUNTERS = ("num_alloc", "num_free", "num_segment_alloc", "num_segment_free", "num_ooms",
             "num_alloc_retries", "num_gc_releases")


class CachingAllocator:
    """Caching allocator over a device-memory ``Backend`` (see the note at the top)."""

    def __init__(self, backend: Backend, *, limit: int | None = None,
                 settings: AllocatorSettings | None = None) -> None:
        self.backend = backend
        self.limit = limit if limit is not None else limit_from_env()
        self.settings = settings or parse_alloc_conf(os.environ.get(ALLOC_CONF_ENV))
        if self.settings.expandable_segments and not hasattr(backend, "reserve"):
            warnings.warn(f"{ALLOC_CONF_ENV}: expandable_segments needs a backend with "
                          f"virtual memory; using fixed segments", stacklevel=2)
            self.settings = AllocatorSettings(self.settings.max_split_size,
                                              self.settings.garbage_collection_threshold)
        self.small, self.large = Pool("small"), Pool("large")
        self._live: dict[int, Block] = {}
        self._lock = threading.RLock()
        self._tick = itertools.count(1)
        self.allocated = self.requested = self.reserved = 0
        self.peak_allocated = self.peak_reserved = 0
        self.counts = dict.fromkeys(_COUNTERS, 0)
        # bumped whenever memory goes back to the backend (host views of it become stale)
        self.generation = 0

    # ---- public API ------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> int:
        """Allocate ``nbytes`` and return the block's device address."""
        if nbytes < 0:
            raise AllocatorError(f"negative allocation size {nbytes}")
        with self._lock:
            size = round_size(nbytes)
            pool = self.small if size <= SMALL_SIZE else self.large
            block = pool.best_fit(size, self.settings.max_split_size)
            if block is None:
                block = self._new_memory(nbytes, size, pool)
            pool.remove(block)
            self._take(block, size, nbytes, pool)
            return block.addr

    def free(self, addr: int) -> None:
        """Return a block to the cache, merging it with free neighbours."""
        with self._lock:
            block = self._live.pop(int(addr), None)
            if block is None:
                raise AllocatorError(f"free of {int(addr):#x}, which is not an allocated block")
            block.allocated = False
            self.allocated -= block.size
            self.requested -= block.requested
            self.counts["num_free"] += 1
            block.segment.last_used = next(self._tick)
            pool = block.segment.pool
            for nb in (block.prev, block.next):
                if nb is not None and not nb.allocated:
                    pool.remove(nb)
                    block = _merge(block, nb)
            pool.insert(block)

    def block_size(self, addr: int) -> int:
        """The (rounded, possibly unsplit) size of the live block at ``addr``."""
        return self._live[int(addr)].size

    def tensor(self, addr: int, nbytes: int) -> torch.Tensor:
        """Host view of an allocation (host backend only)."""
        return self.backend.resolve(addr, nbytes)  # type: ignore[attr-defined]

    def empty_cache(self) -> None:
        """Give every cached free segment (and free expandable tail) back to the backend."""
        with self._lock:
            for pool in (self.small, self.large):
                for seg in list(pool.segments):
                    self._trim(seg)

    def set_memory_limit(self, limit: int | str | None) -> None:
        """Cap reserved bytes (an int, a size string such as ``"512MiB"``, or None)."""
        limit = parse_size(limit, what="memory limit")
        with self._lock:
            self.limit = limit

    def reset_peak_memory_stats(self) -> None:
        with self._lock:
            self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def memory_stats(self) -> dict[str, Any]:
        """Current and peak bytes, counts, and fragmentation (see ``_fragmentation``)."""
        with self._lock:
            free_cached = self.reserved - self.allocated
            largest = max(self.small.largest_free(), self.large.largest_free())
            return {
                "allocated_bytes": self.allocated, "requested_bytes": self.requested,
                "reserved_bytes": self.reserved, "peak_allocated_bytes": self.peak_allocated,
                "peak_reserved_bytes": self.peak_reserved, "active_blocks": len(self._live),
                "segments": len(self.small.segments) + len(self.large.segments),
                "free_cached_bytes": free_cached, "largest_free_block": largest,
                "inactive_split_bytes": self._inactive_split(),
                "fragmentation": 1.0 - largest / free_cached if free_cached else 0.0,
                "limit": self.limit, **self.counts,
                **{f"{p.name}_pool_reserved_bytes": sum(s.size for s in p.segments)
                   for p in (self.small, self.large)},
            }

    def check_invariants(self) -> None:
        """Raise AssertionError if blocks, pools and counters disagree (used by tests)."""
        with self._lock:
            _check(self)

    # ---- internals ---------------------------------------------------------------------------
    def _take(self, block: Block, size: int, nbytes: int, pool: Pool) -> None:
        if self._should_split(block, size, pool):
            rest = Block(block.segment, block.addr + size, block.size - size,
                         prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, size
            pool.insert(rest)
        block.allocated, block.requested = True, nbytes
        self._live[block.addr] = block
        self.allocated += block.size
        self.requested += nbytes
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.counts["num_alloc"] += 1

    def _should_split(self, block: Block, size: int, pool: Pool) -> bool:
        remaining = block.size - size
        if pool is self.small or block.segment.expandable:
            return remaining >= MIN_BLOCK
        max_split = self.settings.max_split_size
        return (max_split is None or block.size < max_split) and remaining > SMALL_SIZE

    def _new_memory(self, nbytes: int, size: int, pool: Pool) -> Block:
        """A free block of at least ``size`` from fresh backend memory (or raise OOM)."""
        self._garbage_collect()
        block = self._grow(size, pool)
        if block is None:
            self.counts["num_alloc_retries"] += 1
            self.empty_cache()
            block = self._grow(size, pool)
        if block is None:
            self.counts["num_ooms"] += 1
            raise NpuOutOfMemoryError(self._oom_message(nbytes, size, pool))
        return block

    def _grow(self, size: int, pool: Pool) -> Block | None:
        if self.settings.expandable_segments:
            return self._grow_expandable(size, pool)
        seg_size = self._segment_size(size, pool)
        if not self._fits(seg_size):
            return None
        try:
            addr = int(self.backend.malloc(seg_size))
        except (MemoryError, RuntimeError):
            return None  # the backend itself is out of memory
        seg = Segment(addr, seg_size, pool, last_used=next(self._tick))
        return self._add_segment(seg)

    def _segment_size(self, size: int, pool: Pool) -> int:
        if pool is self.small:
            seg = SMALL_BUFFER
        elif size < MIN_LARGE_ALLOC:
            seg = LARGE_BUFFER
        else:
            seg = _round_up(size, ROUND_LARGE)
        # Under a limit, a full segment may not fit where the request itself would.
        return seg if self._fits(seg) else size

    def _map_size(self, need: int) -> int:
        """Granules to map for ``need`` more bytes (just ``need`` if a granule breaks the limit)."""
        extra = _round_up(need, GRANULE)
        return extra if self._fits(extra) else need

    def _fits(self, extra: int) -> bool:
        return self.limit is None or self.reserved + extra <= self.limit

    def _add_segment(self, seg: Segment) -> Block:
        pool = seg.pool
        pool.segments.append(seg)
        self._account_reserved(seg.size)
        self.counts["num_segment_alloc"] += 1
        block = seg.head = Block(seg, seg.addr, seg.size)
        pool.insert(block)
        return block

    def _account_reserved(self, delta: int) -> None:
        self.reserved += delta
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def _grow_expandable(self, size: int, pool: Pool) -> Block | None:
        seg = next((s for s in reversed(pool.segments) if s.expandable), None)
        tail = _last_block(seg) if seg is not None else None
        have = tail.size if tail is not None and not tail.allocated else 0
        extra = self._map_size(size - have)
        if seg is None or seg.size + extra > VIRTUAL_SIZE:
            if not self._fits(size):
                return None
            seg = Segment(int(self.backend.reserve(VIRTUAL_SIZE)), 0, pool, expandable=True)
            pool.segments.append(seg)
            self.counts["num_segment_alloc"] += 1
            tail, have, extra = None, 0, self._map_size(size)
        if not self._fits(extra):
            return None
        self.backend.map(seg.addr, seg.size, extra)
        self._account_reserved(extra)
        return self._extend_tail(seg, tail if have else None, extra)

    def _extend_tail(self, seg: Segment, free_tail: Block | None, extra: int) -> Block:
        pool = seg.pool
        old_end = seg.size
        seg.size += extra
        if free_tail is not None:
            pool.remove(free_tail)
            free_tail.size += extra
            pool.insert(free_tail)
            return free_tail
        block = Block(seg, seg.addr + old_end, extra, prev=_last_block(seg))
        if block.prev is not None:
            block.prev.next = block
        else:
            seg.head = block
        pool.insert(block)
        return block

    def _trim(self, seg: Segment) -> None:
        """Release a wholly free segment, or an expandable segment's free tail."""
        pool = seg.pool
        tail = _last_block(seg)
        if tail is None or tail.allocated:
            return
        whole = tail.prev is None
        if seg.expandable:
            keep = _round_up(tail.addr - seg.addr, GRANULE)
            cut = seg.size - keep
            if cut <= 0:
                return
            pool.remove(tail)
            self.backend.unmap(seg.addr, keep, cut)
            self.generation += 1
            seg.size = keep
            tail.size -= cut
            self._account_reserved(-cut)
            if tail.size:
                pool.insert(tail)
            elif tail.prev is not None:
                tail.prev.next = None
            else:
                seg.head = None
            if seg.size == 0:
                pool.segments.remove(seg)
                self.backend.release(seg.addr)
                self.counts["num_segment_free"] += 1
            return
        if whole:
            pool.remove(tail)
            pool.segments.remove(seg)
            self.backend.free(seg.addr)
            self.generation += 1
            self._account_reserved(-seg.size)
            self.counts["num_segment_free"] += 1

    def _garbage_collect(self) -> None:
        frac = self.settings.garbage_collection_threshold
        if frac is None or self.limit is None or self.reserved <= frac * self.limit:
            return
        segs = sorted(self.small.segments + self.large.segments, key=lambda s: s.last_used)
        for seg in segs:
            if self.reserved <= frac * self.limit:
                break
            before = self.reserved
            self._trim(seg)
            if self.reserved < before:
                self.counts["num_gc_releases"] += 1

    def _inactive_split(self) -> int:
        """Free bytes inside segments that also hold live blocks (unreleasable)."""
        total = 0
        for pool in (self.small, self.large):
            for seg in pool.segments:
                blocks = list(_blocks(seg))
                if any(b.allocated for b in blocks):
                    total += sum(b.size for b in blocks if not b.allocated)
        return total

    def _oom_message(self, nbytes: int, size: int, pool: Pool) -> str:
        largest = max(self.small.largest_free(), self.large.largest_free())
        return (f"NPU out of memory: tried to allocate {format_bytes(nbytes)} "
                f"({nbytes} bytes, rounded to {size}, {pool.name} pool). "
                f"Memory limit {format_bytes(self.limit)}; reserved {format_bytes(self.reserved)}"
                f"; allocated {format_bytes(self.allocated)}; largest free block "
                f"{format_bytes(largest)}. Cached free segments were released and the "
                f"allocation retried. Raise the limit (option memory_limit / {LIMIT_ENV}), "
                f"free tensors, or, if reserved is far above allocated, set "
                f"{ALLOC_CONF_ENV}=expandable_segments:True to reduce fragmentation.")


def _merge(a: Block, b: Block) -> Block:
    """Merge adjacent blocks ``a`` and ``b`` (either order); returns the survivor."""
    first, second = (a, b) if a.addr < b.addr else (b, a)
    first.size += second.size
    first.next = second.next
    if second.next is not None:
        second.next.prev = first
    return first


def _blocks(seg: Segment) -> Iterator[Block]:
    b = seg.head
    while b is not None:
        yield b
        b = b.next


def _last_block(seg: Segment) -> Block | None:
    last = None
    for b in _blocks(seg):
        last = b
    return last


def _check_segment(seg: Segment, live: dict[int, Block]) -> list[Block]:
    end, prev, free = seg.addr, None, []
    for b in _blocks(seg):
        assert b.segment is seg and b.addr == end and b.prev is prev and b.size > 0, b
        assert not (prev is not None and not prev.allocated and not b.allocated), "unmerged"
        assert (live.get(b.addr) is b) == b.allocated, b
        if not b.allocated:
            free.append(b)
        end, prev = b.addr + b.size, b
    assert end == seg.addr + seg.size, (hex(end), seg)
    return free


def _check(a: CachingAllocator) -> None:
    for pool in (a.small, a.large):
        free = [b for seg in pool.segments for b in _check_segment(seg, a._live)]
        assert sorted((b.size, b.addr) for b in free) == pool.free, pool.name
        assert {b.addr: b for b in free} == pool.by_addr, pool.name
    assert a.allocated == sum(b.size for b in a._live.values())
    assert a.requested == sum(b.requested for b in a._live.values())
    assert a.reserved == sum(s.size for p in (a.small, a.large) for s in p.segments)
    assert a.peak_allocated >= a.allocated and a.peak_reserved >= a.reserved
    assert a.limit is None or a.reserved <= a.limit
