"""Creation and copy converters (creation.py): full/zeros/ones/empty/*_like/new_*, fill,
scalar_tensor, arange, linspace, eye, tril/triu_indices, clone/_to_copy/copy; compiled vs
eager, honouring the dtype argument."""

from __future__ import annotations

import importlib

import pytest
import torch
from harness import check_fn, record_graphs

aten = torch.ops.aten
# the module (the package re-exports a function under the same name)
constant_fold = importlib.import_module("npu_inductor.graph_passes.constant_fold")
STRICT = {"fallback": "error"}  # a refused converter must fail the test, not run eagerly
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]


@pytest.fixture(autouse=True)
def _no_constant_folding(monkeypatch):
    """Input-free creation ops would fold to a Const at compile time; these tests are about
    the converters, so folding is switched off."""
    monkeypatch.setattr(constant_fold, "MAX_FOLD_ELEMENTS", -1)


def ge_ops(graphs) -> set[str]:
    return {op.type for g in graphs for op in g.lowered.graph.ops}


def _value(dtype):
    return True if dtype == torch.bool else 3


# (id, fn(x, dtype), GE op expected); x is a float32 (2, 3) input
CASES = [
    ("full", lambda x, d: torch.full((2, 4), _value(d), dtype=d), "Fill"),
    ("zeros", lambda x, d: torch.zeros(3, 1, dtype=d), "Fill"),
    ("ones", lambda x, d: torch.ones(2, dtype=d), "Fill"),
    ("zeros_like", lambda x, d: torch.zeros_like(x, dtype=d), "Fill"),
    ("ones_like", lambda x, d: torch.ones_like(x, dtype=d), "Fill"),
    ("full_like", lambda x, d: torch.full_like(x, _value(d), dtype=d), "Fill"),
    ("new_zeros", lambda x, d: x.new_zeros((4,), dtype=d), "Fill"),
    ("new_ones", lambda x, d: x.new_ones((1, 2), dtype=d), "Fill"),
    ("new_full", lambda x, d: x.new_full((2, 2), _value(d), dtype=d), "Fill"),
    ("empty_zeroed", lambda x, d: torch.empty(2, 2, dtype=d).zero_(), "Fill"),
    ("empty_like_filled", lambda x, d: torch.empty_like(x, dtype=d).fill_(_value(d)), "Fill"),
    ("fill_tensor", lambda x, d: torch.zeros(3, dtype=d).fill_(x[0, 0].to(d)), "Fill"),
    ("scalar_tensor", lambda x, d: aten.scalar_tensor(_value(d), dtype=d), "Const"),
    ("eye", lambda x, d: torch.eye(3, dtype=d), "Eye"),
    ("eye_m", lambda x, d: torch.eye(2, 4, dtype=d), "Eye"),
    ("to_dtype", lambda x, d: (x * 2).to(d), None),
    ("clone", lambda x, d: x.to(d).clone(), None),
    ("copy", lambda x, d: torch.zeros(2, 3, dtype=d).copy_(x[0]), "BroadcastTo"),
]
PARAMS = [pytest.param(fn, d, op, id=f"{name}-{str(d)[6:]}") for name, fn, op in CASES
          for d in DTYPES]


@pytest.mark.parametrize("fn,dtype,ge_op", PARAMS)
def test_creation_op(fn, dtype, ge_op):
    graphs = check_fn(lambda x: fn(x, dtype), torch.randn(2, 3), options=STRICT)
    if ge_op is not None:
        assert ge_op in ge_ops(graphs)


RANGES = [
    ("arange", lambda x: torch.arange(5)),
    ("arange_start", lambda x: torch.arange(-3, 4)),
    ("arange_step", lambda x: torch.arange(1, 10, 3)),
    ("arange_neg_step", lambda x: torch.arange(5, -4, -2)),
    ("arange_float", lambda x: torch.arange(0.5, 2.0, 0.1)),
    ("arange_f16", lambda x: torch.arange(0, 3, 0.25, dtype=torch.float16)),
    ("arange_bf16", lambda x: torch.arange(0, 3, 0.5, dtype=torch.bfloat16)),
    ("arange_int32", lambda x: torch.arange(2, 9, 2, dtype=torch.int32)),
    ("arange_float_dtype", lambda x: torch.arange(4, dtype=torch.float32)),
    ("linspace", lambda x: torch.linspace(-1, 1, 7)),
    ("linspace_one", lambda x: torch.linspace(2, 5, 1)),
    ("linspace_f64", lambda x: torch.linspace(0, 1, 5, dtype=torch.float64)),
    ("linspace_tensors", lambda x: torch.linspace(x[0], x[1], 4)),
    ("linspace_tensor_scalar", lambda x: torch.linspace(x[0], 2.0, 3)),
    ("linspace_scalar_tensor", lambda x: torch.linspace(-2.0, x[1], 3)),
    ("empty_strided", lambda x: aten.empty_strided([2, 3], [3, 1]).zero_()),
    ("empty_permuted", lambda x: aten.empty_permuted([2, 3], [1, 0]).fill_(2)),
    ("new_empty", lambda x: aten.new_empty(x, [3]).fill_(1)),
    ("new_empty_strided", lambda x: aten.new_empty_strided(x, [2, 2], [2, 1]).fill_(4)),
    ("tril_indices", lambda x: torch.tril_indices(3, 4, 1)),
    ("triu_indices", lambda x: torch.triu_indices(4, 3, -1)),
]


@pytest.mark.parametrize("fn", [r[1] for r in RANGES], ids=[r[0] for r in RANGES])
def test_range_op(fn):
    check_fn(fn, torch.randn(2), options=STRICT)


def test_arange_feeds_compute():
    check_fn(lambda x: x * torch.arange(x.shape[-1]) + torch.linspace(0, 1, 3), torch.randn(2, 3),
             options=STRICT)


def test_to_copy_casts_once():
    with record_graphs() as graphs:
        check_fn(lambda x: x.to(torch.float16), torch.randn(3), options=STRICT)
    casts = [op for g in graphs for op in g.lowered.graph.ops if op.type == "Cast"]
    assert len(casts) == 1 and casts[0].attr("dst_type") == 1  # C++ DT_FLOAT16


def test_pinned_creation_is_refused():
    fn = lambda x: x + torch.ones(3, pin_memory=True)  # noqa: E731
    with pytest.raises(Exception, match="pin_memory"):
        torch.compile(fn, backend="npu", options=STRICT)(torch.randn(3))
