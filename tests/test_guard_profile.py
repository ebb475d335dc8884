"""Frames npu_inductor compiles skip Dynamo's guard-latency profiling (a cache flush per
frame); other backends' frames and a DEBUG guards log keep it; the guards still guard."""

import logging

import pytest
import torch
from torch._dynamo.utils import counters

from npu_inductor import guard_profile


@pytest.fixture
def profiled(monkeypatch):
    """Counts calls of torch's ``profile_guard_manager`` behind npu_inductor's wrapper."""
    assert guard_profile.install()
    real, calls = guard_profile._ORIGINAL, []

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(guard_profile, "_ORIGINAL", counting)
    torch._dynamo.reset()
    counters.clear()  # (the process's earlier tests counted their graphs too)
    yield calls
    torch._dynamo.reset()


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())


def test_npu_frames_skip_profiling_and_still_guard(profiled):
    m = _model()
    compiled = torch.compile(m, backend="npu")
    for rows in (2, 3, 2):  # 3 rows fails the first frame's shape guard: a second frame
        x = torch.randn(rows, 8)
        torch.testing.assert_close(compiled(x), m(x), rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == 2  # the third call reused the first frame
    assert torch._dynamo.guards.profile_guard_manager is guard_profile._profile_guard_manager
    assert profiled == []


def test_other_backends_and_debug_guards_log_still_profile(profiled):
    m, x = _model(), torch.randn(2, 8)
    torch.compile(m, backend="npu")(x)  # marks its frame; the next frame is not npu's
    torch._dynamo.reset()
    torch.compile(m, backend="aot_eager")(x)
    assert profiled == [1]
    torch._dynamo.reset()
    guards_log = torch._dynamo.guards.guards_log
    level = guards_log.level
    guards_log.setLevel(logging.DEBUG)
    try:
        torch.compile(m, backend="npu")(x)
    finally:
        guards_log.setLevel(level)
    assert profiled == [1, 1]


def test_precompile_cold_path_skips_profiling_and_still_guards(profiled, tmp_path,
                                                               monkeypatch):
    """``precompile`` builds its guards in torch's ``aot_compile`` (no frame to mark)."""
    import npu_inductor

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch"))
    m, x = _model(), torch.randn(2, 8)
    with torch.no_grad():
        compiled = npu_inductor.precompile(m, (x,), options={"cache_dir": str(tmp_path)})
        torch.testing.assert_close(compiled(x), m(x), rtol=1e-5, atol=1e-6)
        assert compiled.source == "miss"
        assert compiled._compiled.guard_check(m, x)  # the guards were built and pass
        assert not compiled._compiled.guard_check(m, torch.randn(2, 8, 1))
    assert profiled == []
    torch._dynamo.reset()
    torch.compile(m, backend="aot_eager")(x)  # the skip ended with the precompile
    assert profiled == [1]
