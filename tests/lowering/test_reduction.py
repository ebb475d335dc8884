"""Reduction and scan converters (reduction.py): compiled vs eager across dtypes, dims
(none, one, several, negative), keepdim, torch's result dtypes, and index results."""

from __future__ import annotations

import pytest
import torch
from harness import STRICT, check_ge_ops

aten = torch.ops.aten

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
I32, I64, U8, B = torch.int32, torch.int64, torch.uint8, torch.bool
FLOATS = (F32, F16, BF16)
ALL = FLOATS + (I32, I64, B)


def make(shape, dtype=F32):
    if dtype == B:
        return torch.randint(0, 2, shape).bool()
    if not dtype.is_floating_point:
        return torch.randint(0 if dtype == U8 else -5, 6, shape, dtype=dtype)
    return torch.randn(shape).to(dtype)


def distinct(shape, dtype):
    """No ties, so max/argmax indices are unique whatever the dtype."""
    n = torch.Size(shape).numel()
    return (torch.randperm(n) - n // 2).reshape(shape).to(dtype)


def tol(dtype):
    # fp16/bf16 sums: eager accumulates in float32 too, but the rounding point may differ.
    return {"rtol": 1e-2, "atol": 1e-2} if dtype in (F16, BF16) else {}


def run(fn, *inputs, ge=(), dtype=F32):
    return check_ge_ops(fn, *inputs, ge=ge, **tol(dtype))


DIMS = [None, 1, -1, (0, 2), (-1, 0)]
REDUCE = [  # (id, fn(x, dim, keepdim), GE op, dtypes)
    ("sum", lambda x, d, k: x.sum(d, keepdim=k) if d is not None else x.sum(), "ReduceSum", ALL),
    ("sum_dtype", lambda x, d, k: x.sum(d or 0, keepdim=k, dtype=torch.float32), "ReduceSum",
     (F16, I32)),
    ("mean", lambda x, d, k: x.mean(d, keepdim=k) if d is not None else x.mean(), "ReduceMean",
     FLOATS),
    ("prod", lambda x, d, k: x.prod(d if isinstance(d, int) else 0, keepdim=k), "ReduceProd",
     (F32, I64, B)),
    ("prod_all", lambda x, d, k: x.prod(), "ReduceProd", (F32, I32)),
    ("max_min_all", lambda x, d, k: (x.max(), x.min()), ("ReduceMax", "ReduceMin"), ALL),
    ("amax", lambda x, d, k: x.amax(d if d is not None else (), keepdim=k), "ReduceMax", ALL),
    ("amin", lambda x, d, k: x.amin(d if d is not None else (), keepdim=k), "ReduceMin", ALL),

    ("any", lambda x, d, k: x.any(d, keepdim=k) if d is not None else x.any(), "ReduceAny",
     (F32, I64, B, U8)),
    ("all", lambda x, d, k: x.all(d, keepdim=k) if d is not None else x.all(), "ReduceAll",
     (F32, B, U8)),
    ("var", lambda x, d, k: x.var(d, keepdim=k), "SquaredDifference", (F32, F16)),
    ("var_corr0", lambda x, d, k: torch.var(x, d, correction=0, keepdim=k), "SquaredDifference",
     (F32,)),
    ("std", lambda x, d, k: x.std(d, keepdim=k, correction=2), "Sqrt", (F32, BF16)),
    ("var_mean", lambda x, d, k: torch.var_mean(x, d, keepdim=k), "ReduceMean", (F32,)),
    ("std_mean", lambda x, d, k: torch.std_mean(x, d, keepdim=k), "Sqrt", (F32,)),
    ("norm2", lambda x, d, k: torch.linalg.vector_norm(x, 2, d, k), "LpNormV2", (F32, F16)),
    ("norm3", lambda x, d, k: torch.linalg.vector_norm(x, 3.0, d, k), "LpNormV2", (F32,)),
    ("norm1", lambda x, d, k: torch.linalg.vector_norm(x, 1, d, k), "LpNormV2", (F32,)),
    ("norm_inf", lambda x, d, k: torch.linalg.vector_norm(x, float("inf"), d, k), "ReduceMax",
     (F32,)),
    ("norm_ninf", lambda x, d, k: torch.linalg.vector_norm(x, -float("inf"), d, k), "ReduceMin",
     (F32,)),
]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name,fn,ge,dtypes", REDUCE, ids=[c[0] for c in REDUCE])
def test_reduce(name, fn, ge, dtypes, keepdim):
    for dtype in dtypes:  # one compile per dtype: every dim form in one graph
        run(lambda t: [fn(t, d, keepdim) for d in DIMS], make((2, 3, 4), dtype), ge=ge,
            dtype=dtype)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [F32, BF16, I64, I32])
def test_max_min_dim_values_and_indices(dtype, keepdim):
    x = distinct((3, 4, 5), dtype)
    run(lambda t: [(*t.max(d, keepdim), *t.min(d, keepdim)) for d in (0, -1, 1)], x,
        ge=("ReduceMax", "ArgMaxV2", "ReduceMin", "ArgMin"))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [F32, F16, I64, U8])
def test_argmax_argmin(dtype, keepdim):
    x = distinct((3, 4, 5), dtype) if dtype != U8 else make((3, 4, 5), U8)
    run(lambda t: [(t.argmax(d, keepdim), t.argmin(d, keepdim)) for d in (None, 0, -1)], x,
        ge=("ArgMaxV2", "ArgMin"))


@pytest.mark.parametrize("dtype", [F32, F16, I32, I64, B])
def test_cumsum_cumprod(dtype):
    run(lambda t: [(torch.cumsum(t, d), torch.cumprod(t, d)) for d in (0, 1, -1)]
        + [torch.cumsum(t, 1, dtype=torch.float32)], make((3, 4), dtype),
        ge=("Cumsum", "Cumprod"), dtype=dtype)


def test_reductions_of_0d_and_size_one():
    s = torch.tensor(2.5)
    run(lambda t: (t.sum(), t.amax(), t.mean(), t.max(0)[0], t.argmax()), s, ge="ReduceSum")
    run(lambda t: (t.sum(1), t.var(2), t.prod(1, keepdim=True)), torch.randn(1, 1, 3),
        ge="ReduceSum")


def test_var_with_correction_beyond_count_gives_inf_like_eager():
    x = torch.randn(2, 3)
    run(lambda t: (torch.var(t, 0, correction=2), torch.var(t, 1, correction=1.5)), x,
        ge="SquaredDifference")


def test_any_all_of_uint8_keep_uint8_result():
    x = torch.tensor([[0, 3, 0], [0, 0, 0]], dtype=U8)
    graphs = run(lambda t: (t.any(1), t.all(0), t.any()), x, ge=("ReduceAny", "ReduceAll"))
    outs = [d.dtype for op in graphs[0].lowered.graph.ops if op.type == "NetOutput"
            for d in op.input_descs]
    assert outs == [U8, U8, U8]


@pytest.mark.parametrize("dtype", [F32, BF16, I64])
def test_cummax_cummin(dtype):
    x = distinct((3, 5), dtype)
    run(lambda t: [(*torch.cummax(t, d), *torch.cummin(t, d)) for d in (0, -1)], x,
        ge=("Cummax", "Cummin"), dtype=dtype)


def test_logcumsumexp_aminmax_nansum():
    x = torch.randn(3, 5)
    x[1, 2] = float("nan")
    y = torch.randn(3, 5)
    run(lambda t: [torch.logcumsumexp(t, d) for d in (0, 1)], y, ge="CumulativeLogsumexp")
    run(lambda t: [(*torch.aminmax(t), *torch.aminmax(t, dim=1, keepdim=True))], y,
        ge=("ReduceMin", "ReduceMax"))
    run(lambda t: (torch.nansum(t), torch.nansum(t, 1), torch.nansum(t, 0, keepdim=True)), x,
        ge=("IsNan", "ReduceSum"))
    run(lambda t: torch.nansum(t, 1), torch.arange(6).reshape(2, 3), ge="ReduceSum")


def test_dist():
    a, b = torch.randn(3, 4), torch.randn(4)
    run(lambda x, y: [torch.dist(x, y, p) for p in (2, 1, 3.5)], a, b, ge="LpNormV2")
    run(lambda x, y: (torch.dist(x, y, float("inf")), torch.dist(x, y, -float("inf"))), a, b,
        ge=("ReduceMax", "ReduceMin"))


def test_dynamic_dims():
    """Symbolic dims: broadcasting, reductions, arg/scan ops and var's run-time count."""
    import torch.nn.functional as F

    def fn(x, y):
        return (F.gelu(x) * y + 1, x.sum(1), x.amax(-1, keepdim=True), x.argmax(1),
                torch.where(x > 0, x, y), x.max(0)[1], torch.cumsum(x, 1), x.var(0),
                x.std(1, keepdim=True), x.mean(), (x == y).any(1))

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="npu", dynamic=True, options=STRICT)
    for n in (3, 6):
        x, y = torch.randn(n, n + 1), torch.randn(n, n + 1)
        for got, want in zip(compiled(x, y), fn(x, y)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
