import gc

import pytest


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    """The benchmarks' full collections (``gc.collect()`` in ``runner.prime``,
    ``measure.allocations`` and ``measure.variant_run``; a few dozen per test) scan every
    tracked object: cheap in a fresh ``npu-bench`` process, but in a test worker that ran
    hundreds of tests before they were most of these tests' CPU (13 of 21 s for
    test_bench_runner.py after tests/lowering/test_nn.py). What the process held before the
    module moves to the permanent generation (``gc.freeze``) for the module, so the
    collections scan only what the benchmarks made: what they free and what the memory
    columns measure is unchanged."""
    gc.freeze()
    yield
    gc.unfreeze()
