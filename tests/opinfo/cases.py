"""What the OpInfo sweep's test files share: every ``op_db`` entry through
torch.compile(backend="npu") vs eager on its first sample inputs, float32 (and zero
fallback nodes for supported ops) in ``test_opinfo_float32.py``, float16 and bfloat16 in
``test_opinfo_low_precision.py``, int64 and bool in ``test_opinfo_int_bool.py`` (three
files so that ``pytest -n 2 --dist loadfile`` spreads the sweep over both workers).
Expected failures live in ``manifest.py`` (strict xfail: an entry that starts passing must
leave the manifest; not strict for the few whose eager reference depends on the CPU,
``manifest.CPU_DEPENDENT``). An (entry, dtype) without a usable sample is *not tested*: skipped
with that reason, never a pass; the per-family counts print at the end of the run
(``tests/conftest.py``)."""

from __future__ import annotations

import functools

import pytest
import torch
from opinfo import sweep

ENTRIES = list(sweep.op_db())
FLOAT32 = [e for e in ENTRIES if torch.float32 in sweep.swept_dtypes(e)]
LOW_PRECISION = [(e, d) for e in ENTRIES for d in sweep.low_precision_dtypes(e)]
INT_BOOL = [(e, d) for e in ENTRIES
            for d in sweep.swept_dtypes(e, (sweep.INTEGER, torch.bool))]


def key(entry: str, dtype: torch.dtype) -> str:
    return f"{entry}:{str(dtype).removeprefix('torch.')}"


def xfail(values: tuple, reason: str | None, strict: bool = True) -> object:
    marks = [pytest.mark.xfail(reason=reason, strict=strict)] if reason else []
    ident = ":".join(str(v).removeprefix("torch.") for v in values)  # entry[:dtype]
    return pytest.param(*values, marks=marks, id=ident)


@functools.cache
def result(entry: str, dtype: torch.dtype) -> sweep.Result:
    return sweep.run(entry, dtype)


def tested_result(entry: str, dtype: torch.dtype, record_property) -> sweep.Result:
    """The sweep's result, recorded for the end-of-run table; skipped when not tested."""
    r = result(entry, dtype)
    record_property("opinfo", (sweep.family_of(dtype), r.tested, r.passed, r.failed))
    if not r.tested:
        pytest.skip(sweep.NOT_TESTED)
    return r


def check_device_rules() -> None:
    """Every GE graph the sweep compiled in this process so far (as built and deserialized)
    breaks no device rule for Ascend910B1 (issue 13's done-when for the OpInfo sweep graphs);
    run alone, it sweeps a few entries itself so that it always checks some graphs. Each
    sweep file ends with it, so every graph is checked by its file's last test."""
    if not sweep.GRAPHS_CHECKED["graphs"]:
        for entry in ("add", "nn.functional.conv2d", "sort", "cumsum"):
            result(entry, torch.float32)
    assert sweep.GRAPHS_CHECKED["graphs"] > 0
    assert not sweep.VIOLATIONS, "\n".join(sweep.VIOLATIONS[:20])
