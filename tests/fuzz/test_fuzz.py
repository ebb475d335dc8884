"""Fuzzer: random programs over the lowered ops, compiled with ``backend="npu"`` and
``fallback="error"``, must match eager (outputs, mutated inputs, and input gradients for
the float32 programs that run backward).

CI runs ``NPU_INDUCTOR_FUZZ_EXAMPLES`` programs (default 300) drawn by hypothesis with a
fixed derandomized seed, then every program in ``seeds.txt`` (regressions: programs the
fuzzer once failed on). Longer runs: ``NPU_INDUCTOR_FUZZ_EXAMPLES=5000 pytest
tests/fuzz`` or ``python tools/fuzz.py`` (see docs/fuzzing.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import check
import pytest
import torch
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from programs import Program, generate, hypothesis_draw, random_draw

EXAMPLES = int(os.environ.get("NPU_INDUCTOR_FUZZ_EXAMPLES", "300"))
SEEDS_FILE = Path(__file__).with_name("seeds.txt")


@pytest.fixture(autouse=True)
def _no_guard_profiling(monkeypatch):
    """Dynamo times every new guard set once for its logs (a CPU-cache flush, ~20% of a
    fuzz program's compile); the number is only logged, so the fuzzer skips it."""
    monkeypatch.setattr(torch._dynamo.guards, "profile_guard_manager", lambda *a: 0.0)


@st.composite
def programs(draw) -> Program:
    return generate(hypothesis_draw(draw))


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck), print_blob=False)
@given(programs())
def test_random_program(prog: Program) -> None:
    try:
        check.run(prog)
    except check.InvalidProgram:
        reject()


def load_seeds(path: Path = SEEDS_FILE) -> list:
    """Non-comment lines of the seed list, with their line numbers as test ids: a
    program's text (``Program.to_text``) or an integer seed (``tools/fuzz.py``'s stream)."""
    lines = [ln.strip() for ln in path.read_text().splitlines()]
    return [pytest.param(ln, id=f"seeds.txt:{n}") for n, ln in enumerate(lines, 1)
            if ln and not ln.startswith("#")]


def program_of(line: str) -> Program:
    return Program.from_text(line) if line.startswith("{") else generate(random_draw(int(line)))


@pytest.mark.parametrize("line", load_seeds())
def test_regression(line: str) -> None:
    check.run(program_of(line))
