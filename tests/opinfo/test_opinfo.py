"""OpInfo sweep: every ``op_db`` entry through torch.compile(backend="npu") vs eager on its
first sample inputs (float32; float16, bfloat16, int64 and bool where the op supports them
on CPU), and zero fallback nodes for supported ops. Expected failures live in
``manifest.py`` (strict xfail: an entry that starts passing must leave the manifest). An
(entry, dtype) without a usable sample is *not tested*: skipped with that reason, never a
pass; the per-family counts print at the end of the run (``conftest.py``)."""

from __future__ import annotations

import functools

import pytest
import torch
from opinfo import manifest, sweep

ENTRIES = list(sweep.op_db())
FLOAT32 = [e for e in ENTRIES if torch.float32 in sweep.swept_dtypes(e)]
LOW_PRECISION = [(e, d) for e in ENTRIES for d in sweep.low_precision_dtypes(e)]
INT_BOOL = [(e, d) for e in ENTRIES
            for d in sweep.swept_dtypes(e, (sweep.INTEGER, torch.bool))]


def _key(entry: str, dtype: torch.dtype) -> str:
    return f"{entry}:{str(dtype).removeprefix('torch.')}"


def _xfail(values: tuple, reason: str | None) -> object:
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    ident = ":".join(str(v).removeprefix("torch.") for v in values)  # entry[:dtype]
    return pytest.param(*values, marks=marks, id=ident)


@functools.cache
def result(entry: str, dtype: torch.dtype) -> sweep.Result:
    return sweep.run(entry, dtype)


def _tested_result(entry: str, dtype: torch.dtype, record_property) -> sweep.Result:
    """The sweep's result, recorded for the end-of-run table; skipped when not tested."""
    r = result(entry, dtype)
    record_property("opinfo", (sweep.family_of(dtype), r.tested, r.passed, r.failed))
    if not r.tested:
        pytest.skip(sweep.NOT_TESTED)
    return r


@pytest.mark.parametrize("entry", [_xfail((e,), manifest.FLOAT32.get(e)) for e in FLOAT32])
def test_float32_matches_eager(entry, record_property):
    r = _tested_result(entry, torch.float32, record_property)
    assert r.passed, r.error


@pytest.mark.parametrize("entry,dtype", [
    _xfail((e, d), manifest.LOW_PRECISION.get(_key(e, d))) for e, d in LOW_PRECISION])
def test_low_precision_matches_eager(entry, dtype, record_property):
    r = _tested_result(entry, dtype, record_property)
    assert r.passed, r.error


@pytest.mark.parametrize("entry,dtype", [
    _xfail((e, d), manifest.INT_BOOL.get(_key(e, d))) for e, d in INT_BOOL])
def test_int64_and_bool_match_eager(entry, dtype, record_property):
    r = _tested_result(entry, dtype, record_property)
    assert r.passed, r.error


@pytest.mark.parametrize("entry", [
    _xfail((e,), manifest.FLOAT32.get(e) or manifest.FALLBACK.get(e)) for e in FLOAT32])
def test_float32_zero_fallback(entry):
    r = result(entry, torch.float32)
    if not r.tested:
        pytest.skip(sweep.NOT_TESTED)
    assert r.passed, r.error
    assert not r.fallbacks, f"fallback nodes: {dict(r.fallbacks)}"
    assert not r.graph_breaks, f"graph breaks: {dict(r.graph_breaks)}"


def test_sweep_graphs_obey_device_rules():
    """Every GE graph the sweep compiled in this run (as built and deserialized) breaks no
    device rule for Ascend910B1 (issue 13's done-when for the OpInfo sweep graphs); run
    alone, it sweeps a few entries itself so that it always checks some graphs."""
    if not sweep.GRAPHS_CHECKED["graphs"]:
        for entry in ("add", "nn.functional.conv2d", "sort", "cumsum"):
            result(entry, torch.float32)
    assert sweep.GRAPHS_CHECKED["graphs"] > 0
    assert not sweep.VIOLATIONS, "\n".join(sweep.VIOLATIONS[:20])
