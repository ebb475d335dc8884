"""Run OpInfo entries through ``torch.compile(backend="npu")`` and compare with eager.

Shared by the ``test_opinfo_*.py`` files and ``tools/opinfo_report.py``. Budget choices
(the sweep must fit the CI budget on 2 cores): the first ``FLOAT32_SAMPLES`` samples in
float32 and the first ``OTHER_SAMPLES`` in float16 / bfloat16, int64 and bool, each where
the op supports it on CPU;
each (entry, dtype) gets its own code object, so Dynamo neither reuses nor evicts another
entry's cache and no ``torch._dynamo.reset()`` is needed between entries (one every
``RESET_EVERY`` runs bounds memory).

An (entry, dtype) whose samples eager rejects all (or that has none) is *not tested*: it is
reported apart and never counted as a pass.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from opinfo import manifest
from torch.utils._pytree import tree_leaves, tree_map

from npu_inductor.compile_fx import quiet_fallbacks, record_reports
from npu_inductor.ge import from_air, to_air
from npu_inductor.ge.device_rules import DeviceRuleError, find_violations

FLOAT32_SAMPLES = 2
OTHER_SAMPLES = 1  # float16, bfloat16, int64, bool: one sample each keeps the sweep's time
LOW_PRECISION = (torch.float16, torch.bfloat16)
INTEGER = torch.int64  # the representative integer dtype (indices, counts, most int ops)
# dtype family -> dtypes, in report order
FAMILIES = {"float32": (torch.float32,), "float16/bfloat16": LOW_PRECISION,
            "integer (int64)": (INTEGER,), "bool": (torch.bool,)}
ALL_DTYPES = tuple(d for ds in FAMILIES.values() for d in ds)
NOT_TESTED = "not tested: eager accepts none of its samples in this dtype"
RESET_EVERY = 100
# fp32: the project's 1e-5. Low precision: eager CPU kernels accumulate in fp32 while a
# lowered or decomposed chain rounds each intermediate to the low dtype, so allow a few ulp.
TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3),
              torch.bfloat16: (1.6e-2, 1.6e-2)}
# int64 / bool inputs: floating outputs (sqrt of an int) get float32's tolerance; on integer
# outputs 1e-5 is exact for every value below 1e5
TOLERANCES[INTEGER] = TOLERANCES[torch.bool] = TOLERANCES[torch.float32]
SEED = 1234


@dataclass
class Result:
    """One OpInfo entry in one dtype: did compiled match eager, and what ran in eager."""

    entry: str
    dtype: torch.dtype
    samples: int = 0  # samples eager accepted, each compared (0: not tested)
    error: str | None = None  # first mismatch or crash (None: every sample matched)
    fallbacks: Counter = field(default_factory=Counter)  # fallback op -> node count
    graph_breaks: Counter = field(default_factory=Counter)  # Dynamo graph-break reasons
    ge_graphs: int = 0

    @property
    def tested(self) -> bool:
        return self.samples > 0

    @property
    def passed(self) -> bool:
        """Every usable sample matched eager, and there was at least one."""
        return self.tested and self.error is None

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def zero_fallback(self) -> bool:
        """Matched eager entirely in GE: no fallback node and no Dynamo graph break."""
        return self.no_fallback_nodes and not self.graph_breaks

    @property
    def no_fallback_nodes(self) -> bool:
        return self.passed and not self.fallbacks


def entry_id(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


@functools.cache
def op_db() -> dict[str, Any]:
    from torch.testing._internal.common_methods_invocations import op_db as db

    return {entry_id(op): op for op in db}


def swept_dtypes(entry: str, family: tuple[torch.dtype, ...] = ALL_DTYPES) -> list[torch.dtype]:
    """The dtypes of ``family`` the entry supports on CPU (float32 always: it is the
    project's reference dtype; an entry without float32 support is reported not tested)."""
    supported = op_db()[entry].supported_dtypes("cpu")
    return [d for d in family if d in supported or d == torch.float32]


def low_precision_dtypes(entry: str) -> list[torch.dtype]:
    return swept_dtypes(entry, LOW_PRECISION)


def samples(entry: str, dtype: torch.dtype) -> list[Any]:
    op = op_db()[entry]
    count = FLOAT32_SAMPLES if dtype == torch.float32 else OTHER_SAMPLES
    torch.manual_seed(SEED)
    return list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False), count))


def _clone(x: Any) -> Any:
    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def _fresh(fn: Callable, tag: str) -> Callable:
    """``fn`` behind a function with its own code object (its own Dynamo cache)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    name = "opinfo_" + "".join(c if c.isalnum() else "_" for c in tag)
    call.__code__ = call.__code__.replace(co_name=name, co_qualname=name)
    return call


SEED_WRAPPER = "wrapper_set_seed"


def _compiled(op: Any, tag: str) -> Callable:
    """``op.op`` under ``torch.compile(backend="npu")``.

    OpInfo wraps random ops (dropout, sdpa, normal, ...) as ``lambda *a:
    wrapper_set_seed(fn, *a)``, which seeds the RNG with ``torch.manual_seed(42)`` — a call
    Dynamo refuses to trace, so compiling the lambda always breaks the graph there. The
    seeding is test scaffolding, not the op: for those entries the wrapper runs in eager
    (same seed, same RNG state restore as eager) and only ``fn`` is compiled."""
    compile_ = functools.partial(torch.compile, backend="npu", dynamic=False)
    lam = op.op
    code = getattr(lam, "__code__", None)
    if code is None or SEED_WRAPPER not in code.co_names:
        return compile_(_fresh(lam, tag))
    seed_wrapper = lam.__globals__[SEED_WRAPPER]
    compiled: dict[Any, Callable] = {}

    def wrapped(fn: Callable, *args: Any, **kwargs: Any) -> Any:
        if fn not in compiled:
            compiled[fn] = compile_(_fresh(fn, tag))
        return seed_wrapper(compiled[fn], *args, **kwargs)

    def call(*args: Any, **kwargs: Any) -> Any:
        lam.__globals__[SEED_WRAPPER] = wrapped
        try:
            return lam(*args, **kwargs)
        finally:
            lam.__globals__[SEED_WRAPPER] = seed_wrapper

    return call




def _graph_breaks() -> Counter:
    """Dynamo's graph breaks, including the silent kind: an exception Dynamo allows as a
    fallback (e.g. AOTAutograd's DataDependentOutputException) runs the frame in eager and
    is counted only under ``unimplemented`` ("Backend compiler exception")."""
    counters = torch._dynamo.utils.counters
    return Counter(counters["graph_break"]) + Counter(counters["unimplemented"])


_RUNS = itertools.count(1)
# Device-rule violations (Ascend910B1) of every GE graph the sweep compiled, as built and as
# the device deserializes it, and of every compile a device rule refused: never an expected
# failure (the manifest cannot hold them), asserted empty by the test_opinfo_*.py files.
VIOLATIONS: list[str] = []
GRAPHS_CHECKED = Counter()


def _check_device_rules(entry: str, reports: list) -> None:
    for r in reports:
        for g in r.ge_graphs:
            GRAPHS_CHECKED["graphs"] += 1
            for graph in (g.lowered.graph, from_air(to_air(g.lowered.graph))):
                VIOLATIONS.extend(f"{entry}: {v}" for v in find_violations(graph))


def run(entry: str, dtype: torch.dtype) -> Result:
    """Compile and compare every chosen sample of ``entry`` in ``dtype``."""
    if next(_RUNS) % RESET_EVERY == 0:
        torch._dynamo.reset()
    op, result = op_db()[entry], Result(entry, dtype)
    fn = _compiled(op, f"{entry}_{dtype}")
    for sample in samples(entry, dtype):
        args = (sample.input, *sample.args)
        try:
            expected = _eager(op, args, sample.kwargs)
        except Exception:  # noqa: BLE001, S112 - a sample eager rejects says nothing about us
            continue
        result.samples += 1
        error = _compare_sample(fn, args, sample.kwargs, expected, dtype, result)
        if error is not None:
            result.error = error
            break
    return result


def _eager(op: Any, args: tuple, kwargs: dict) -> Any:
    torch.manual_seed(SEED)
    return op.op(*_clone(args), **_clone(kwargs))


def _compare_sample(fn: Callable, args: tuple, kwargs: dict, expected: Any,
                    dtype: torch.dtype, result: Result) -> str | None:
    breaks = _graph_breaks()
    with record_reports() as reports, quiet_fallbacks():
        try:
            torch.manual_seed(SEED)
            actual = fn(*_clone(args), **_clone(kwargs))
        except Exception as e:  # noqa: BLE001 - recorded as this entry's failure
            if isinstance(e, DeviceRuleError) or "DeviceRuleError" in str(e):
                VIOLATIONS.append(f"{result.entry}: {type(e).__name__}: {e}")
            return _short(f"{type(e).__name__}: {e}")
    _check_device_rules(result.entry, reports)
    result.graph_breaks.update(_graph_breaks() - breaks)
    for r in reports:
        result.fallbacks.update(f.target for f in r.fallbacks)
        result.ge_graphs += len(r.ge_graphs)
    return compare(actual, expected, *TOLERANCES[dtype],
                   values=result.entry not in manifest.UNDEFINED_VALUES)


def _short(text: str, limit: int = 240) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def compare(actual: Any, expected: Any, rtol: float, atol: float,
            values: bool = True) -> str | None:
    """None when equal (tensors within tolerance, NaNs equal; only shape and dtype when
    not ``values``), else why not."""
    a, e = tree_leaves(actual), tree_leaves(expected)
    if len(a) != len(e):
        return f"{len(a)} outputs vs {len(e)} in eager"
    for i, (x, y) in enumerate(zip(a, e)):
        why = _compare_leaf(x, y, rtol, atol, values)
        if why is not None:
            return _short(f"output {i}: {why}")
    return None


def _compare_leaf(x: Any, y: Any, rtol: float, atol: float, values: bool) -> str | None:
    if isinstance(y, torch.Tensor):
        if not isinstance(x, torch.Tensor):
            return f"got {type(x).__name__}, eager gave a tensor"
        if not values:
            same = (x.shape, x.dtype) == (y.shape, y.dtype)
            return None if same else f"{x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"
        if y.dtype.is_floating_point and y.dtype.itemsize == 1:  # float8: no tolerances
            x, y = x.float(), y.float()
        try:
            torch.testing.assert_close(x, y, rtol=rtol, atol=atol, equal_nan=True,
                                       check_device=False)
        except AssertionError as err:
            return str(err)
        return None
    if isinstance(y, float) and isinstance(x, (int, float)):
        ok = math.isclose(x, y, rel_tol=rtol, abs_tol=atol) or (math.isnan(x) and math.isnan(y))
        return None if ok else f"{x} != {y}"
    return None if x == y else f"{x!r} != {y!r}"


@contextlib.contextmanager
def fast_dynamo() -> Iterator[None]:
    """Dynamo settings for thousands of tiny compiles: a per-frame recompile limit that
    leaves room for shared helper frames, and no guard-latency profiling (Dynamo times
    every new guard set after a cache flush: ~0.1 s per compile, for a log line)."""
    import torch._dynamo.guards as guards

    saved = guards.profile_guard_manager
    guards.profile_guard_manager = lambda *args, **kwargs: 0.0
    try:
        with torch._dynamo.config.patch(recompile_limit=32):
            yield
    finally:
        guards.profile_guard_manager = saved


def run_all(entries: list[str] | None = None, progress: Callable[[Result], None] | None = None,
            dtypes: tuple[torch.dtype, ...] = ALL_DTYPES) -> list[Result]:
    """Every entry in each of ``dtypes`` it supports (float32 always)."""
    results = []
    with warnings.catch_warnings(), fast_dynamo():
        warnings.simplefilter("ignore")
        for entry in entries or list(op_db()):
            for dtype in swept_dtypes(entry, dtypes):
                results.append(run(entry, dtype))
                if progress:
                    progress(results[-1])
    return results


def family_of(dtype: torch.dtype) -> str:
    return next(name for name, ds in FAMILIES.items() if dtype in ds)


def family_table(counts: dict[str, Counter]) -> str:
    """``counts[family]`` has keys runs/tested/not_tested/passed/failed -> a text table."""
    head = f"{'dtype family':<18} {'runs':>5} {'tested':>7} {'not tested':>11} " \
           f"{'passed':>7} {'failed':>7}"
    rows = [head]
    for family in FAMILIES:
        c = counts.get(family, Counter())
        rows.append(f"{family:<18} {c['runs']:>5} {c['tested']:>7} {c['not_tested']:>11} "
                    f"{c['passed']:>7} {c['failed']:>7}")
    return "\n".join(rows)


def tally(results: list[Result]) -> dict[str, Counter]:
    counts: dict[str, Counter] = {}
    for r in results:
        c = counts.setdefault(family_of(r.dtype), Counter())
        c.update(runs=1, tested=r.tested, not_tested=not r.tested, passed=r.passed,
                 failed=r.failed)
    return counts
