"""The public device-memory API and the ``memory_limit`` option end to end."""

from __future__ import annotations

import pytest
import torch

import npu_inductor
from npu_inductor.runtime.allocator import NpuOutOfMemoryError


@pytest.fixture
def unlimited():
    yield
    npu_inductor.set_memory_limit(None)


def _fn(x):
    return torch.relu(x @ x) @ x + 1.0


def test_memory_stats_track_workspaces():
    x = torch.randn(64, 64)
    npu_inductor.empty_cache()
    npu_inductor.reset_peak_memory_stats()
    torch.compile(_fn, backend="npu")(x)
    stats = npu_inductor.memory_stats()
    assert stats["allocated_bytes"] == 0  # the workspace is returned after the run
    assert stats["peak_allocated_bytes"] >= 64 * 64 * 4  # x @ x lived in it
    assert stats["reserved_bytes"] > 0  # ... and stays cached for the next run
    npu_inductor.empty_cache()
    assert npu_inductor.memory_stats()["reserved_bytes"] == 0
    assert "peak_allocated_bytes" in npu_inductor.memory_summary()


def test_memory_limit_option_raises_clear_oom_then_recovers(unlimited):
    x = torch.randn(64, 64)
    npu_inductor.empty_cache()
    f = torch.compile(_fn, backend="npu", options={"memory_limit": 4096})
    with pytest.raises(NpuOutOfMemoryError, match=r"limit 4\.00 KiB.*largest free block"):
        f(x)
    npu_inductor.set_memory_limit(None)
    torch.testing.assert_close(f(x), _fn(x), rtol=1e-5, atol=1e-5)  # still usable
    assert npu_inductor.memory_stats()["num_ooms"] >= 1
