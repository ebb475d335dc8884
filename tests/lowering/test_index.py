"""Indexing converters (index.py): advanced indexing, index_put, gathers/scatters, the
functional ``*_scatter`` ops, masks, sort/topk, compiled vs eager."""

from __future__ import annotations

import pytest
import torch
from harness import STRICT, check_fn, check_grad, check_refused
from harness import random_tensor as make

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]


def idx(*values):
    return torch.tensor(values, dtype=torch.int64)


def ge_ops(graphs) -> set[str]:
    return {op.type for g in graphs for op in g.lowered.graph.ops}


# (id, fn, inputs(dtype) -> tuple, GE op expected)
CASES = [
    ("index_one", lambda x, i: aten.index(x, [None, i]),
     lambda d: (make((3, 4, 2), d), idx([1, -1], [0, 3])), "GatherV2"),
    ("index_lead", lambda x, i, j: aten.index(x, [i, j]),
     lambda d: (make((3, 4, 2), d), idx(2, 0, -1), idx(1, 3, 0)), "GatherNd"),
    ("index_mid", lambda x, i, j: aten.index(x, [None, i, j]),
     lambda d: (make((2, 3, 4, 2), d), idx([0, 2]), idx([[1], [3]])), "GatherNd"),
    ("index_split", lambda x, i, j: aten.index(x, [i, None, j]),
     lambda d: (make((3, 2, 4), d), idx(0, 2), idx(3, -4)), "GatherNd"),
    ("unsafe_index", lambda x, i: aten._unsafe_index(x, [i]),
     lambda d: (make((4, 3), d), idx(3, 0, 0)), "GatherV2"),
    ("index_put", lambda x, i, v: aten.index_put(x, [i], v),
     lambda d: (make((4, 3), d), idx(2, -1), make((2, 3), d)), "TensorScatterUpdate"),
    ("index_put_bcast", lambda x, i, j, v: aten.index_put(x, [None, i, j], v),
     lambda d: (make((2, 3, 4), d), idx(0, 2), idx(1, 3), make((1,), d)),
     "TensorScatterUpdate"),
    ("index_put_split", lambda x, i, j, v: aten.index_put(x, [i, None, j], v),
     lambda d: (make((3, 2, 4), d), idx(0, 2), idx(3, -4), make((2, 2), d)),
     "TensorScatterUpdate"),
    ("index_select", lambda x, i: torch.index_select(x, -1, i),
     lambda d: (make((2, 5), d), idx(4, 0, 4)), "GatherV2"),
    ("index_select_0d", lambda x, i: torch.index_select(x, 0, i),
     lambda d: (make((3, 2), d), torch.tensor(2)), "GatherV2"),
    ("take", lambda x, i: torch.take(x, i),
     lambda d: (make((3, 4), d), idx([0, -1], [5, 11])), "GatherV2"),
    ("gather", lambda x, i: torch.gather(x, 1, i),
     lambda d: (make((3, 4), d), idx([0, 3], [2, 2], [1, 0])), "GatherElements"),
    ("gather_neg", lambda x, i: torch.gather(x, -1, i),
     lambda d: (make((2, 3), d), idx([2, 0], [1, 1])), "GatherElements"),
    ("scatter_src", lambda x, i, s: torch.scatter(x, 0, i, s),
     lambda d: (make((3, 4), d), idx([0, 1, 2, 0]), make((2, 5), d)), "ScatterElements"),
    ("scatter_value", lambda x, i: torch.scatter(x, 1, i, 1),
     lambda d: (make((3, 4), d), idx([0, 3], [1, 2], [2, 0])), "ScatterElements"),
    ("slice_scatter", lambda x, s: aten.slice_scatter(x, s, 1, 1, 3),
     lambda d: (make((2, 5), d), make((2, 2), d)), "ConcatV2"),
    ("slice_scatter_step", lambda x, s: aten.slice_scatter(x, s, 0, -4, None, 2),
     lambda d: (make((5, 2), d), make((2, 2), d)), "ScatterElements"),
    ("slice_scatter_all", lambda x, s: aten.slice_scatter(x, s, 0),
     lambda d: (make((2, 2), d), make((2, 2), d)), None),
    ("select_scatter", lambda x, s: aten.select_scatter(x, s, -1, -1),
     lambda d: (make((2, 3), d), make((2,), d)), "ConcatV2"),
    ("diagonal_scatter", lambda x, s: aten.diagonal_scatter(x, s, 1),
     lambda d: (make((3, 4), d), make((3,), d)), "TensorScatterUpdate"),
    ("as_strided_scatter", lambda x, s: aten.as_strided_scatter(x, s, [2, 2], [1, 3], 1),
     lambda d: (make((3, 3), d), make((2, 2), d)), "TensorScatterUpdate"),
    ("index_copy", lambda x, i, s: torch.index_copy(x, 1, i, s),
     lambda d: (make((2, 4), d), idx(3, 0), make((2, 2), d)), "ScatterElements"),
    ("index_fill", lambda x, i: torch.index_fill(x, -1, i, 0),
     lambda d: (make((2, 4), d), idx(1, 2)), "ScatterElements"),
    ("masked_fill", lambda x, m: torch.masked_fill(x, m, 1),
     lambda d: (make((2, 3), d), make((3,), torch.bool)), "MaskedFill"),
    ("masked_fill_t", lambda x, m, v: torch.masked_fill(x, m, v),
     lambda d: (make((2, 3), d), make((2, 1), torch.bool), make((), d)), "MaskedFill"),
    ("masked_scatter", lambda x, m, s: torch.masked_scatter(x, m, s),
     lambda d: (make((2, 3), d), make((2, 3), torch.bool), make((7,), d)), "MaskedScatter"),
]
# these also run in every dtype (bool/bf16/int64 go through the exact-widening path)
SWEEP = {"index_lead", "index_put", "index_select", "gather", "scatter_src", "slice_scatter",
         "slice_scatter_step", "select_scatter", "diagonal_scatter", "masked_fill"}
PARAMS = [pytest.param(*c, dtype, id=f"{c[0]}-{str(dtype)[6:]}") for c in CASES
          for dtype in DTYPES if dtype == torch.float32 or c[0] in SWEEP]


@pytest.mark.parametrize("name,fn,inputs,ge_op,dtype", PARAMS)
def test_index_op(name, fn, inputs, ge_op, dtype):
    graphs = check_fn(fn, *inputs(dtype), options=STRICT)
    if ge_op == "MaskedFill" and dtype == torch.int64:
        ge_op = "SelectV2"  # the 910B has no int64 MaskedFill kernel
    if ge_op is not None:
        assert ge_op in ge_ops(graphs)


FLOAT_CASES = [
    ("index_put_acc", lambda x, i, v: aten.index_put(x, [i], v, True),
     (torch.zeros(5, 3), idx([1, 1], [4, -1]), torch.randn(2, 2, 3)), "ScatterNonAliasingAdd"),
    ("index_put_acc_mid", lambda x, i, v: aten.index_put(x, [None, i], v, True),
     (torch.randn(2, 4), idx(1, 1, 3), torch.randn(2, 3)), "ScatterNonAliasingAdd"),
    ("scatter_add", lambda x, i, s: torch.scatter_add(x, 1, i, s),
     (torch.randn(2, 4), idx([0, 0, 3], [1, 1, 1]), torch.randn(2, 3)), "ScatterElements"),
    ("scatter_reduce_sum", lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "sum"),
     (torch.randn(3, 2), idx([0, 1], [0, 0]), torch.randn(2, 2)), "ScatterElements"),
    ("scatter_reduce_prod", lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "prod"),
     (torch.randn(3, 2), idx([2, 1], [2, 0]), torch.randn(2, 2)), "ScatterElements"),
    ("scatter_mul", lambda x, i, s: torch.scatter(x, 0, i, s, reduce="multiply"),
     (torch.randn(3, 2), idx([2, 1], [2, 0]), torch.randn(2, 2)), "ScatterElements"),
    ("index_add", lambda x, i, s: torch.index_add(x, 0, i, s, alpha=2),
     (torch.randn(4, 2), idx(1, 3, 1), torch.randn(3, 2)), "ScatterElements"),
    ("index_fill_t", lambda x, i, v: torch.index_fill(x, 0, i, v),
     (torch.randn(3, 2), idx(2), torch.tensor(3.5)), "ScatterElements"),
    ("sort", lambda x: torch.sort(x, -1), (torch.randn(3, 5),), "Sort"),
    ("sort_desc", lambda x: torch.sort(x, 0, descending=True), (torch.randn(4, 2),), "Sort"),
    # int64: no int Sort kernel on the 910B, sorted by rank (lowering/int_sort.py)
    ("sort_stable", lambda x: torch.sort(x, stable=True), (torch.randint(0, 3, (9,)),),
     "LogicalOr"),
    ("sort_int_desc", lambda x: torch.sort(x, dim=0, descending=True, stable=True),
     (torch.tensor([[2**40 + 1, -3], [2**40, 7], [2**40 + 1, -3], [-(2**62), 2**31]]),),
     "LogicalOr"),
    ("sort_bf16", lambda x: torch.sort(x), (torch.randn(6).bfloat16(),), "Sort"),
    ("argsort", lambda x: torch.argsort(x, 1), (torch.randn(2, 5),), "Sort"),
    ("topk", lambda x: torch.topk(x, 2), (torch.randn(3, 5),), "TopKV2"),
    ("topk_small", lambda x: torch.topk(x, 3, 0, largest=False), (torch.randn(4, 2),),
     "TopKV2"),
    ("scatter_reduce_mean", lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "mean"),
     (torch.randn(3, 2), idx([0, 1], [0, 0]), torch.randn(2, 2)), "RealDiv"),
    ("scatter_reduce_mean_excl",
     lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "mean", include_self=False),
     (torch.randn(3, 2), idx([0, 1], [0, 0]), torch.randn(2, 2)), "RealDiv"),
    ("scatter_reduce_sum_excl",
     lambda x, i, s: torch.scatter_reduce(x, 1, i, s, "sum", include_self=False),
     (torch.randn(2, 3), idx([2, 2], [0, 1]), torch.randn(2, 2)), "ScatterElements"),
    ("scatter_reduce_prod_excl",
     lambda x, i, s: torch.scatter_reduce(x, 1, i, s, "prod", include_self=False),
     (torch.randn(2, 3), idx([2, 2], [0, 1]), torch.randn(2, 2)), "ScatterElements"),
    ("index_add_0d", lambda x, i, s: torch.index_add(x, 0, i, s),
     (torch.randn(()), idx(0), torch.randn(())), "ScatterElements"),
    ("index_fill_0d", lambda x, i: torch.index_fill(x, 0, i, 2.0),
     (torch.randn(()), idx(0)), "ScatterElements"),
    ("mask_put_scalar", lambda x, m: aten.index_put(x, [m], torch.tensor(0.5)),
     (torch.randn(3, 4), torch.rand(3, 4) > 0.5), "MaskedFill"),
    ("mask_put_rows", lambda x, m, v: aten.index_put(x, [m], v),
     (torch.randn(4, 2), torch.tensor([True, False, True, True]), torch.randn(3, 2)),
     "MaskedScatter"),
    ("mask_put_row_bcast", lambda x, m, v: aten.index_put(x, [m], v),
     (torch.randn(4, 2), torch.tensor([True, False, True, True]), torch.randn(2)), "SelectV2"),
    ("mask_put_inner", lambda x, m: aten.index_put(x, [None, m], torch.tensor(2.0)),
     (torch.randn(2, 3), torch.tensor([True, False, True])), "MaskedFill"),
    ("mask_setitem", lambda x: (lambda y: (y.__setitem__(y > 0, 0.0), y)[1])(x.clone()),
     (torch.randn(3, 3),), "MaskedFill"),
    ("kthvalue", lambda x: torch.kthvalue(x, 2, 1), (torch.randn(3, 5),), "TopKV2"),
    ("kthvalue_keep", lambda x: torch.kthvalue(x, 3, 0, True), (torch.randn(4, 2),), "TopKV2"),
    ("put", lambda x, i, s: torch.put(x, i, s), (torch.randn(3, 4), idx([0, -1], [5, 7]),
                                                  torch.randn(4)), "TensorScatterUpdate"),
    ("put_acc", lambda x, i, s: torch.put(x, i, s, accumulate=True),
     (torch.randn(2, 3), idx(1, 1, -6), torch.randn(3)), "ScatterNonAliasingAdd"),
    ("unsafe_index_put", lambda x, i, v: aten._unsafe_index_put(x, [None, i], v, True),
     (torch.randn(2, 3), idx(2, 2), torch.randn(2, 2)), "ScatterNonAliasingAdd"),
    ("scatter_value_reduce", lambda x, i: torch.scatter(x, 1, i, 2.0, reduce="multiply"),
     (torch.randn(2, 3), idx([0, 0], [2, 1])), "ScatterElements"),
    ("searchsorted", lambda s, v: torch.searchsorted(s, v),
     (torch.tensor([1.0, 2.0, 2.0, 5.0]), torch.tensor([[0.5, 2.0], [6.0, 2.5]])),
     "SearchSorted"),
    ("searchsorted_right_i32", lambda s, v: torch.searchsorted(s, v, right=True, out_int32=True),
     (torch.tensor([[1, 3, 3], [0, 2, 4]]), torch.tensor([[3, 0], [4, 2]])), "SearchSorted"),
    ("searchsorted_side_sorter",
     lambda s, v, o: torch.searchsorted(s, v, side="right", sorter=o),
     (torch.tensor([5.0, 1.0, 3.0]), torch.tensor([3.0, 4.0]), idx(1, 2, 0)), "SearchSorted"),
    ("searchsorted_scalar", lambda s: torch.searchsorted(s, 2.5),
     (torch.tensor([1.0, 2.0, 3.0]),), "SearchSorted"),
    ("bucketize", lambda x, b: torch.bucketize(x, b, right=True),
     (torch.tensor([[0.5, 2.0], [3.0, 9.0]]), torch.tensor([1.0, 2.0, 3.0])), "SearchSorted"),
]


@pytest.mark.parametrize("name,fn,inputs,ge_op", FLOAT_CASES, ids=[c[0] for c in FLOAT_CASES])
def test_index_op_float(name, fn, inputs, ge_op):
    graphs = check_fn(fn, *inputs, options=STRICT)
    assert ge_op in ge_ops(graphs)


@pytest.mark.fallback("an int64 row too long for the rank sort is refused by the 910B gate")
def test_int_sort_of_long_rows_refused():
    x = torch.randint(-9, 9, (4097,), generator=torch.Generator().manual_seed(0))
    check_refused(lambda t: torch.sort(t, stable=True), x, ops="aten.sort.stable",
                  dtype="INT64")


def test_embedding_backward_scatter_adds():
    """embedding's backward becomes index_put(accumulate=True): repeated ids must add."""
    torch._dynamo.reset()
    w = torch.randn(6, 3, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    ids = idx([1, 1, 5], [0, 1, 1])

    def fn(w, ids):
        return (torch.nn.functional.embedding(ids, w) * torch.arange(3.0)).sum()

    torch.compile(fn, backend="npu", options=STRICT)(w, ids).backward()
    fn(w2, ids).backward()
    torch.testing.assert_close(w.grad, w2.grad)


TRAIN = [
    ("gather", lambda x: torch.gather(x, 1, idx([0, 2], [1, 1])), [(2, 3)]),
    ("scatter", lambda x, s: torch.scatter(x, 1, idx([0, 2], [1, 0]), s), [(2, 3), (2, 2)]),
    ("scatter_add", lambda x, s: torch.scatter_add(x, 1, idx([0, 0], [1, 0]), s),
     [(2, 3), (2, 2)]),
    ("index_twice", lambda x: x[idx(0, 2, 2)] * 2, [(3, 2)]),
    ("index_split", lambda x: x[idx(0, 2), :, idx(1, 0)], [(3, 2, 2)]),
    ("index_put", lambda x, v: aten.index_put(x, [idx(1, 0)], v), [(3, 2), (2, 2)]),
    ("index_select", lambda x: torch.index_select(x, 1, idx(1, 1, 0)), [(2, 3)]),
    ("index_add", lambda x, s: torch.index_add(x, 0, idx(1, 1), s), [(3, 2), (2, 2)]),
    ("index_copy", lambda x, s: torch.index_copy(x, 0, idx(2, 0), s), [(3, 2), (2, 2)]),
    ("take", lambda x: torch.take(x, idx(0, 5, 5)), [(2, 3)]),
    ("sort", lambda x: torch.sort(x, 1)[0], [(2, 5)]),
    ("topk", lambda x: torch.topk(x, 2)[0], [(2, 5)]),
    ("kthvalue", lambda x: torch.kthvalue(x, 2)[0], [(2, 5)]),
    ("masked_fill", lambda x: x.masked_fill(x > 0, 0.5), [(3, 4)]),
    ("select_scatter", lambda x, s: aten.select_scatter(x, s * 2, 1, 0), [(2, 3), (2,)]),
    ("slice_scatter", lambda x, s: aten.slice_scatter(x, s * 2, 0, 0, 4, 2), [(4, 2), (2, 2)]),
    ("masked_scatter", lambda x, s: x.masked_scatter(x > 0, s), [(2, 3), (7,)]),
    ("masked_scatter_bcast", lambda x, s: x.masked_scatter(idx(1, 0, 1).bool(), s),
     [(2, 3), (2, 4)]),
]


# backward-only overloads (AOT decomposes them unless a converter exists), called directly
BACKWARD_OPS = [
    ("slice_backward", lambda g: aten.slice_backward(g, [5, 3], 0, 1, 100, 2), [(2, 3)]),
    ("slice_backward_step1", lambda g: aten.slice_backward(g, [2, 6], -1, -4, -1, 1), [(2, 3)]),
    ("select_backward", lambda g: aten.select_backward(g, [2, 4, 3], 1, -1), [(2, 3)]),
    ("diagonal_backward", lambda g: aten.diagonal_backward(g, [3, 4], 1, 0, 1), [(3,)]),
    ("unfold_backward", lambda g: aten.unfold_backward(g, [2, 7], 1, 3, 2), [(2, 3, 3)]),
    ("unfold_backward_mid", lambda g: aten.unfold_backward(g, [5, 2], 0, 2, 1), [(4, 2, 2)]),
    ("masked_scatter_backward",
     lambda g, m: aten.masked_scatter_backward(g, m, [2, 5]), [(2, 3), (3,)]),
]


@pytest.mark.parametrize("fn,shapes", [c[1:] for c in BACKWARD_OPS],
                         ids=[c[0] for c in BACKWARD_OPS])
def test_backward_ops(fn, shapes):
    inputs = [make(s, torch.bool if i else torch.float32) for i, s in enumerate(shapes)]
    check_fn(fn, *inputs, options=STRICT)


@pytest.mark.parametrize("fn,shapes", [c[1:] for c in TRAIN], ids=[c[0] for c in TRAIN])
def test_index_op_backward(fn, shapes):
    check_grad(fn, *[make(s) for s in shapes])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_v2_kernel_one_index_is_a_fresh_contiguous_copy(axis):
    """GatherV2 with a 0-d index (``aten.select``) takes the slice and copies it; the
    result equals index_select's, owns its bytes, and writes ``out`` when given. Negative
    indices count from the end only with ``negative_index_support``; out of range still
    raises."""
    from npu_inductor.runtime.kernels import KERNELS

    g = KERNELS["GatherV2"]
    x = torch.randn(3, 4, 5).permute(2, 0, 1)  # strided input
    n = x.shape[axis]
    for i in (0, n - 1):
        want = x.index_select(axis, idx(i)).squeeze(axis)
        got = g(x, torch.tensor(i), axis)
        assert torch.equal(got, want) and got.is_contiguous()
        assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
        out = torch.full_like(want, float("nan"))
        assert g(x, torch.tensor(i), axis, out=out) is out and torch.equal(out, want)
    last = x.index_select(axis, idx(n - 1)).squeeze(axis)
    assert torch.equal(g(x, torch.tensor(-1), axis, negative_index_support=True), last)
    for bad in (-1, n):
        with pytest.raises((IndexError, RuntimeError), match="out of|index"):
            g(x, torch.tensor(bad), axis)
