"""OpInfo sweep, float16 and bfloat16: every ``op_db`` entry that supports them on CPU,
compiled vs eager (what the sweep does and its manifest: ``cases.py``)."""

from __future__ import annotations

import pytest
from opinfo import cases, manifest


@pytest.mark.parametrize("entry,dtype", [
    cases.xfail((e, d), manifest.LOW_PRECISION.get(cases.key(e, d)),
                strict=cases.key(e, d) not in manifest.CPU_DEPENDENT)
    for e, d in cases.LOW_PRECISION])
def test_low_precision_matches_eager(entry, dtype, record_property):
    r = cases.tested_result(entry, dtype, record_property)
    assert r.passed, r.error


def test_sweep_graphs_obey_device_rules():
    cases.check_device_rules()
