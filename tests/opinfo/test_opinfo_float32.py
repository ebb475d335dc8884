"""OpInfo sweep, float32: every ``op_db`` entry compiled vs eager, and zero fallback nodes
and graph breaks for supported ops (what the sweep does and its manifest: ``cases.py``)."""

from __future__ import annotations

import pytest
import torch
from opinfo import cases, manifest, sweep


@pytest.mark.parametrize("entry", [cases.xfail((e,), manifest.FLOAT32.get(e))
                                   for e in cases.FLOAT32])
def test_float32_matches_eager(entry, record_property):
    r = cases.tested_result(entry, torch.float32, record_property)
    assert r.passed, r.error


@pytest.mark.parametrize("entry", [
    cases.xfail((e,), manifest.FLOAT32.get(e) or manifest.FALLBACK.get(e))
    for e in cases.FLOAT32])
def test_float32_zero_fallback(entry):
    r = cases.result(entry, torch.float32)
    if not r.tested:
        pytest.skip(sweep.NOT_TESTED)
    assert r.passed, r.error
    assert not r.fallbacks, f"fallback nodes: {dict(r.fallbacks)}"
    assert not r.graph_breaks, f"graph breaks: {dict(r.graph_breaks)}"


def test_sweep_graphs_obey_device_rules():
    cases.check_device_rules()
