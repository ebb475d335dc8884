"""Caching allocator: property tests over random alloc/free sequences, plus the config,
limit/OOM, expandable-segment and garbage-collection behaviour."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_inductor.runtime.allocator import (
    GRANULE,
    LARGE_BUFFER,
    SMALL_BUFFER,
    AllocatorError,
    AllocatorSettings,
    CachingAllocator,
    HostBackend,
    NpuOutOfMemoryError,
    parse_alloc_conf,
    round_size,
)
from npu_inductor.runtime.memory import SlabMemory

MiB = 1 << 20
SIZES = st.one_of(st.integers(0, 4096), st.integers(4096, 3 * MiB), st.integers(3 * MiB, 24 * MiB))
# an op is ("alloc", nbytes) or ("free", index into the live list) or ("empty_cache", 0)
OPS = st.lists(st.one_of(st.tuples(st.just("alloc"), SIZES),
                         st.tuples(st.just("free"), st.integers(0, 1 << 30)),
                         st.tuples(st.just("empty_cache"), st.just(0))), max_size=60)
CONFIGS = st.sampled_from([AllocatorSettings(), AllocatorSettings(max_split_size=21 * MiB),
                           AllocatorSettings(expandable_segments=True)])


def make(limit: int | None = None, **kw) -> CachingAllocator:
    return CachingAllocator(HostBackend(SlabMemory()), limit=limit,
                            settings=AllocatorSettings(**kw))


def check_live(a: CachingAllocator, live: dict[int, int]) -> None:
    """No two live blocks overlap; stats equal what the test itself counted."""
    a.check_invariants()
    spans = sorted((p, p + a.block_size(p)) for p in live)
    for (_, hi), (lo, _) in zip(spans, spans[1:]):
        assert hi <= lo, "live blocks overlap"
    stats = a.memory_stats()
    assert stats["requested_bytes"] == sum(live.values())
    assert stats["allocated_bytes"] == sum(a.block_size(p) for p in live)
    assert stats["allocated_bytes"] >= sum(round_size(n) for n in live.values())
    assert stats["active_blocks"] == len(live)
    assert stats["reserved_bytes"] >= stats["allocated_bytes"]


def apply(a: CachingAllocator, ops: list, live: dict[int, int]) -> None:
    for kind, arg in ops:
        if kind == "alloc":
            try:
                live[a.malloc(arg)] = arg
            except NpuOutOfMemoryError:
                pass
        elif kind == "free" and live:
            p = list(live)[arg % len(live)]
            a.free(p)
            del live[p]
        elif kind == "empty_cache":
            a.empty_cache()
        check_live(a, live)


@settings(max_examples=60, deadline=None)
@given(OPS, CONFIGS)
def test_random_sequences_keep_blocks_disjoint_and_stats_exact(ops, conf):
    a = CachingAllocator(HostBackend(SlabMemory()), settings=conf)
    live: dict[int, int] = {}
    apply(a, ops, live)
    for p in list(live):
        a.free(p)
        del live[p]
    check_live(a, live)
    a.empty_cache()
    assert a.memory_stats()["reserved_bytes"] == 0
    assert a.backend.memory.reserved_bytes == 0  # really given back to the backend


@settings(max_examples=40, deadline=None)
@given(OPS, st.integers(1, 40), CONFIGS)
def test_limit_and_oom_leave_allocator_consistent(ops, limit_mib, conf):
    a = CachingAllocator(HostBackend(SlabMemory()), limit=limit_mib * MiB, settings=conf)
    live: dict[int, int] = {}
    apply(a, ops, live)
    assert a.memory_stats()["reserved_bytes"] <= limit_mib * MiB
    for p in list(live):
        a.free(p)
        del live[p]
    p = a.malloc(512)  # still usable after any number of OOMs
    check_live(a, {p: 512})


@settings(max_examples=40, deadline=None)
@given(st.lists(SIZES, min_size=1, max_size=20), st.booleans())
def test_freed_memory_is_reused(sizes, expandable):
    a = make(expandable_segments=expandable)
    ptrs = [a.malloc(n) for n in sizes]
    for p in ptrs:
        a.free(p)
    before = a.memory_stats()
    for n in sizes:  # each size again fits in what its block merged into
        q = a.malloc(n)
        assert a.memory_stats()["reserved_bytes"] == before["reserved_bytes"]
        a.free(q)
    assert a.memory_stats()["num_segment_alloc"] == before["num_segment_alloc"]
    check_live(a, {})


def test_best_fit_split_and_merge():
    a = make()
    x, y, z = a.malloc(1000), a.malloc(3000), a.malloc(1000)
    assert a.block_size(x) == 1024 and y == x + 1024 and z == y + 3072  # split in order
    a.free(y)
    small = a.malloc(2000)  # best fit: the 3072 hole, not the big remainder
    assert small == y
    a.free(small), a.free(x), a.free(z)
    a.check_invariants()
    assert a.small.free == [(SMALL_BUFFER, x)]  # everything merged back into one block


def test_small_and_large_pools():
    a = make()
    a.malloc(1 * MiB)
    a.malloc(1 * MiB + 1)
    stats = a.memory_stats()
    assert stats["small_pool_reserved_bytes"] == SMALL_BUFFER
    assert stats["large_pool_reserved_bytes"] == LARGE_BUFFER


def test_block_memory_is_usable_and_disjoint():
    a = make()
    p, q = a.malloc(256), a.malloc(256)
    a.tensor(p, 256).fill_(1)
    a.tensor(q, 256).fill_(2)
    assert a.tensor(p, 256).sum().item() == 256 and a.tensor(q, 256).sum().item() == 512


def test_oom_message_states_the_numbers():
    a = make(limit=4 * MiB)
    a.malloc(3 * MiB)
    with pytest.raises(NpuOutOfMemoryError) as info:
        a.malloc(2 * MiB)
    msg = str(info.value)
    for part in ("2.00 MiB", "limit 4.00 MiB", "reserved 3.00 MiB", "allocated 3.00 MiB",
                 "largest free block", "NPU_INDUCTOR_MEMORY_LIMIT"):
        assert part in msg, (part, msg)
    assert isinstance(info.value, torch.OutOfMemoryError)
    assert a.memory_stats()["num_ooms"] == 1
    a.check_invariants()


def test_oom_retry_releases_cache_first():
    a = make(limit=24 * MiB)
    p = a.malloc(5 * MiB)  # a 20 MiB large segment
    a.free(p)
    q = a.malloc(22 * MiB)  # needs the cached segment released first
    stats = a.memory_stats()
    assert stats["num_alloc_retries"] == 1 and stats["reserved_bytes"] == 22 * MiB
    a.free(q)


def test_max_split_size_keeps_big_blocks_whole():
    a = make(max_split_size=30 * MiB)
    big = a.malloc(40 * MiB)
    a.free(big)
    small = a.malloc(5 * MiB)  # must not carve the cached 40 MiB block
    assert small != big
    again = a.malloc(40 * MiB)
    assert again == big


def test_expandable_segments_grow_one_segment_and_unmap_tail():
    a = make(expandable_segments=True)
    ptrs = [a.malloc(3 * MiB) for _ in range(4)]
    assert len(a.large.segments) == 1
    assert ptrs == [ptrs[0] + i * 3 * MiB for i in range(4)]  # contiguous growth
    assert a.memory_stats()["reserved_bytes"] == 12 * MiB
    a.free(ptrs[3]), a.free(ptrs[2])
    a.empty_cache()
    assert a.memory_stats()["reserved_bytes"] == 6 * MiB  # tail unmapped in granules
    a.check_invariants()
    assert 6 * MiB % GRANULE == 0


def test_garbage_collection_threshold_releases_old_segments():
    a = make(limit=64 * MiB, garbage_collection_threshold=0.5)
    ps = [a.malloc(12 * MiB) for _ in range(2)]  # two 12 MiB segments
    for p in ps:
        a.free(p)
    a.malloc(15 * MiB)  # 24 MiB cached > 50% of 64 MiB? no: 24 < 32, nothing released
    assert a.memory_stats()["num_gc_releases"] == 0
    a.malloc(30 * MiB)  # reserved 24 + 16: cached free segments are collected first
    assert a.memory_stats()["num_gc_releases"] >= 1
    a.check_invariants()


def test_reset_peak_and_empty_cache():
    a = make()
    p = a.malloc(5 * MiB)
    a.free(p)
    assert a.memory_stats()["peak_allocated_bytes"] == round_size(5 * MiB)
    a.reset_peak_memory_stats()
    assert a.memory_stats()["peak_allocated_bytes"] == 0
    a.empty_cache()
    assert a.memory_stats()["reserved_bytes"] == 0


def test_parse_alloc_conf():
    conf = parse_alloc_conf("max_split_size_mb:128, garbage_collection_threshold:0.6,"
                            "expandable_segments:True")
    assert conf == AllocatorSettings(128 * MiB, 0.6, True)
    assert parse_alloc_conf("") == AllocatorSettings()
    for bad in ("max_split_size_mb:10", "garbage_collection_threshold:1.5",
                "expandable_segments:maybe", "colour:blue", "nokey"):
        with pytest.raises(AllocatorError):
            parse_alloc_conf(bad)


def test_env_configuration(monkeypatch):
    monkeypatch.setenv("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("NPU_INDUCTOR_MEMORY_LIMIT", str(8 * MiB))
    a = CachingAllocator(HostBackend(SlabMemory()))
    assert a.settings.expandable_segments and a.limit == 8 * MiB
    with pytest.raises(NpuOutOfMemoryError):
        a.malloc(9 * MiB)


def test_free_unknown_address_is_an_error():
    a = make()
    with pytest.raises(AllocatorError):
        a.free(12345)
