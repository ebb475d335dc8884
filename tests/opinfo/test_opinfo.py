"""OpInfo sweep: every ``op_db`` entry through torch.compile(backend="npu") vs eager on its
first sample inputs (float32; float16 and bfloat16 where the op supports them on CPU), and
zero fallback nodes for supported ops. Expected failures live in ``manifest.py`` (strict
xfail: an entry that starts passing must leave the manifest)."""

from __future__ import annotations

import functools

import pytest
import torch
from opinfo import manifest, sweep

ENTRIES = list(sweep.op_db())
LOW_PRECISION = [(e, d) for e in ENTRIES for d in sweep.low_precision_dtypes(e)]


def _xfail(values: tuple, reason: str | None) -> object:
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(*values, marks=marks)


@functools.cache
def result(entry: str, dtype: torch.dtype) -> sweep.Result:
    return sweep.run(entry, dtype)


@pytest.mark.parametrize("entry", [_xfail((e,), manifest.FLOAT32.get(e)) for e in ENTRIES])
def test_float32_matches_eager(entry):
    r = result(entry, torch.float32)
    assert r.passed, r.error


@pytest.mark.parametrize("entry,dtype", [
    _xfail((e, d), manifest.LOW_PRECISION.get(f"{e}:{str(d).removeprefix('torch.')}"))
    for e, d in LOW_PRECISION])
def test_low_precision_matches_eager(entry, dtype):
    r = result(entry, dtype)
    assert r.passed, r.error


@pytest.mark.parametrize("entry", [
    _xfail((e,), manifest.FLOAT32.get(e) or manifest.FALLBACK.get(e)) for e in ENTRIES])
def test_float32_zero_fallback(entry):
    r = result(entry, torch.float32)
    assert r.passed, r.error
    assert not r.fallbacks, f"fallback nodes: {dict(r.fallbacks)}"
    assert not r.graph_breaks, f"graph breaks: {dict(r.graph_breaks)}"
