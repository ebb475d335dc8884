import os
import sys
from collections import Counter

import pytest

# Tests use tiny shapes and CI runs two xdist workers on two cores: intra-op OpenMP threads only
# contend (a tiny eager model ran ~400x slower with 2 threads on a loaded machine). Subprocesses
# started by tests (fresh-process cache tests, examples, distributed ranks) inherit the variable.
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402

torch.set_num_threads(1)
# Dynamo times every new guard set once, after flushing the CPU cache, for a debug log line and
# a compile metric (guard_latency_us) that no test reads: ~30 ms of CPU per compile, and the
# flush evicts the other xdist worker's cache too. The suite skips it (as tests/fuzz and the
# OpInfo sweep already did); what the guards check is unchanged.
torch._dynamo.guards.profile_guard_manager = lambda *args, **kwargs: 0.0

sys.path.insert(0, os.path.dirname(__file__))
# The compile cache is off in tests (the default folder is the user's ~/.cache): a test
# that uses it passes options={"cache_dir": tmp_path} (explicit options beat this).
os.environ["NPU_INDUCTOR_CACHE_DIR"] = "off"

from npu_inductor import config  # noqa: E402

# Every test compiles strictly (fallback="error", FX verifier on) unless it says otherwise with
# ``@pytest.mark.fallback("why")``. These folders classify fallbacks themselves (the OpInfo sweep
# records which ops fall back) or compile in worker processes that set their own options.
_OWN_FALLBACK_POLICY = {
    "opinfo": "the sweep classifies each op as GE / fallback / failing itself",
    "distributed": "workers run in their own processes with their own options",
    "fuzz": "the fuzzer compiles with fallback='error' only where its ops are supported",
}
# Files where the FX verifier cannot run yet (a known gap, not a pass): still fallback="error".
_VERIFIER_GAPS: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fallback(reason): the test exercises the eager fallback, so it compiles "
                   "with the default fallback='eager' instead of the strict test default")
    # CI's ``-n 2 --dist loadfile``: files handed out longest first (file_costs.py), not by
    # number of tests (xdist's default reordering, off here; the workers order the collection)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _fallback_reason(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("fallback")
    if marker is not None:
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
        if not reason:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.fallback needs a reason")
        return reason
    parts = os.path.relpath(str(item.path), os.path.dirname(__file__)).split(os.sep)
    return _OWN_FALLBACK_POLICY.get(parts[0])


@pytest.fixture(autouse=True)
def _strict_by_default(request):
    if _fallback_reason(request.node) is not None:
        yield
        return
    verify = os.path.basename(str(request.node.path)) not in _VERIFIER_GAPS
    with config.patch(fallback="error", verify=verify):
        yield


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield


@pytest.fixture(autouse=True)
def _host_device_unless_asked():
    # tests run on the host device unless they ask for acl (options={"device": "acl"})
    with config.patch(device="host"):
        yield


# ---- the OpInfo sweep's per-dtype-family table (here, not in opinfo/conftest.py, so that
# the pytest-xdist controller, which loads only this conftest, prints it too) --------------
_OPINFO_COUNTS: dict[str, Counter] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count each sweep test's recorded (family, tested, passed, failed)."""
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == "opinfo":
            family, tested, passed, failed = value
            c = _OPINFO_COUNTS.setdefault(family, Counter())
            c.update(runs=1, tested=tested, not_tested=not tested, passed=passed,
                     failed=failed)


def pytest_terminal_summary(terminalreporter) -> None:
    if not _OPINFO_COUNTS:
        return
    from opinfo import sweep

    terminalreporter.write_sep("=", "OpInfo sweep: (entry, dtype) runs per dtype family")
    terminalreporter.write_line(sweep.family_table(_OPINFO_COUNTS))
    terminalreporter.write_line(f"({sweep.NOT_TESTED}: reported as skipped, never passed)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests listed in ``known_failures.py`` (each with its reason) are expected failures:
    reported as xfailed, never as passed."""
    from known_failures import KNOWN_FAILURES

    for item in items:
        reason = KNOWN_FAILURES.get(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=False))
    if hasattr(config, "workerinput"):  # an xdist worker: see pytest_configure
        from file_costs import longest_first

        items[:] = longest_first(items)
