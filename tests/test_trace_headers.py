"""Frames Dynamo traces for npu_inductor skip the source-tokenizing log header (the function
name lookup of ``get_line_of_code_header``); other backends' frames and an enabled
``trace_call`` / ``trace_source`` log keep it; the graph and outputs are unchanged."""

import functools
import logging
import re

import pytest
import torch
from torch._dynamo import funcname_cache
from torch._dynamo.symbolic_convert import (
    InstructionTranslatorBase,
    trace_call_log,
    trace_source_log,
)
from torch._dynamo.utils import counters

from npu_inductor import trace_headers
from npu_inductor.backend import npu_backend


@pytest.fixture
def lookups(monkeypatch):
    """The source files torch's function-name lookup tokenizes (its cache emptied)."""
    assert trace_headers.install()
    real, files = funcname_cache._add_file, []

    def counting(filename):
        files.append(filename)
        return real(filename)

    monkeypatch.setattr(funcname_cache, "cache", {})
    monkeypatch.setattr(funcname_cache, "_add_file", counting)
    torch._dynamo.reset()
    counters.clear()
    yield files
    torch._dynamo.reset()


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))


def test_npu_frames_skip_the_lookup_outputs_unchanged(lookups):
    m = _model()
    for backend in ("npu", "npu_inductor", npu_backend):
        torch._dynamo.reset()
        compiled = torch.compile(m, backend=backend)
        for rows in (2, 3):  # 3 rows: a second frame (recompile), traced for npu too
            x = torch.randn(rows, 8)
            torch.testing.assert_close(compiled(x), m(x), rtol=1e-5, atol=1e-6)
    assert InstructionTranslatorBase.get_line_of_code_header is (
        trace_headers._get_line_of_code_header)
    assert counters["stats"]["unique_graphs"] == 6  # every frame was traced and compiled
    assert lookups == []


def test_other_backends_still_look_up(lookups):
    m, x = _model(), torch.randn(2, 8)
    torch.compile(m, backend="aot_eager")(x)
    assert any(f.endswith("linear.py") for f in lookups)  # Linear.forward's file


@pytest.mark.parametrize("artifact_log", [trace_call_log, trace_source_log],
                         ids=["trace_call", "trace_source"])
def test_enabled_trace_logs_get_the_full_header(lookups, artifact_log):
    m, x = _model(), torch.randn(2, 8)
    lines = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: lines.append(record.getMessage())
    level = artifact_log.level
    artifact_log.setLevel(logging.DEBUG)
    artifact_log.addHandler(handler)
    try:
        torch.compile(m, backend="npu")(x)
    finally:
        artifact_log.removeHandler(handler)
        artifact_log.setLevel(level)
    assert any(f.endswith("linear.py") for f in lookups)
    # the headers name the enclosing function, as torch prints them: "f.py:12 in forward
    # (Linear.forward)"
    assert any(re.search(r"\.py:\d+ in \w+ \([\w.]+\)", line) for line in lines)


def test_header_without_the_function_name(lookups):
    """The cheap header is torch's header minus its `` (funcname)`` part."""
    seen = []

    def backend(gm, example_inputs):
        return npu_backend(gm, example_inputs)

    real = trace_headers._ORIGINAL

    def both(self, lineno=None):
        seen.append((trace_headers._get_line_of_code_header(self, lineno),
                     real(self, lineno)))
        return seen[-1][0]

    wrapped = functools.partial(npu_backend)  # a partial unwraps to npu_backend too
    assert trace_headers.is_npu_compile(wrapped)
    assert not trace_headers.is_npu_compile(backend)  # a user's function around it: theirs
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(InstructionTranslatorBase, "get_line_of_code_header", both)
        torch.compile(_model(), backend=wrapped)(torch.randn(2, 8))
    assert seen
    for cheap, full in seen:  # torch's header is file:line in name (funcname)[ (depth)]
        assert re.sub(r" \([\w.<>]+\)(?=( \(inline depth: \d+\))?$)", "", full) == cheap
    assert any(cheap != full for cheap, full in seen)
