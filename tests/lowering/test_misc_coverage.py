"""Converters closed from the OpInfo sweep, compiled with fallback="error" vs eager:
median / nanmedian, mode, ord=0 norms, histc, histogram, segment_reduce (reduction.py);
scatter_reduce / index_reduce amax, amin, mean, prod, nonzero_static (index.py);
_trilinear (matmul.py); 3-d adaptive pooling, grid sampling, anti-aliased resize
(vision.py); conv3d and conv_transpose3d as a Conv2D (conv.py)."""

from __future__ import annotations

import pytest
import torch
from harness import STRICT, check_grad, check_refused, ge_op_types, record_graphs

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
# The 910B's Sort has float kernels only: int64/int32 rows sort by rank (lowering/int_sort.py,
# its LogicalOr of "before" and "tie before"), the small ints through float32 (exact)
RANK_SORTED = (torch.int64, torch.int32)


def sort_op(dtype: torch.dtype) -> str:
    return "LogicalOr" if dtype in RANK_SORTED else "Sort"


# fp16/bf16: eager and GE may round a chain of products or a mean's sum in another order.
TOLERANCES = {F16: (2e-3, 2e-3), BF16: (1.6e-2, 1.6e-2)}


def check(fn, *inputs, ge=(), rtol=1e-5, atol=1e-5, float32_reference=False):
    """check_ge_ops with NaN == NaN (medians of rows holding NaN are NaN).
    ``float32_reference``: compare with eager run on float32 copies of the inputs, rounded
    to the input dtype (for low-precision ops the device accumulates in float32)."""
    torch._dynamo.reset()
    with record_graphs() as graphs:
        actual = torch.compile(fn, backend="npu", options=STRICT)(*inputs)
    if float32_reference:
        dtype = inputs[0].dtype
        expected = [y.to(dtype) for y in fn(*(t.float() for t in inputs))]
    else:
        expected = fn(*inputs)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    types = ge_op_types(graphs)
    for t in (ge,) if isinstance(ge, str) else ge:
        assert t in types, f"{t} not in GE graph: {sorted(types)}"


def with_ties_and_nans(shape, dtype, seed=0):
    """Few distinct values (ties decide the index), ~30% NaN, one all-NaN and one mostly
    NaN row."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 4, shape, generator=g).to(dtype)
    if dtype.is_floating_point:
        x[torch.rand(shape, generator=g) < 0.3] = float("nan")
        x[0] = float("nan")
        x[1, : shape[1] // 2 + 1] = float("nan")
    return x


# ---- median / nanmedian ------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 4, 9, 33])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_median_nan_and_ties(dtype, n):
    x = with_ties_and_nans((6, n), dtype)
    check(lambda t: (t.median(1), t.nanmedian(1), t.median(), t.nanmedian()), x, ge="Sort")


@pytest.mark.parametrize("dtype", INTS)
def test_median_int(dtype):
    x = with_ties_and_nans((5, 8), dtype)
    check(lambda t: (t.median(0), t.median(-1, keepdim=True), t.median()), x,
          ge=sort_op(dtype))


def test_median_keepdim_3d_and_0d():
    x = with_ties_and_nans((4, 6, 5), F32)
    check(lambda t: (t.median(1, keepdim=True), t.nanmedian(0, keepdim=True),
                     t.nanmedian(-1)), x, ge="Sort")
    check(lambda t: (t.median(0), t.median(), t.nanmedian(0)), torch.tensor(3.0), ge="Sort")


def test_median_float64_falls_back():
    x = torch.randn(4, 5, dtype=torch.float64)
    with pytest.raises(Exception, match="median"):
        torch.compile(lambda t: t.median(1), backend="npu", options=STRICT)(x)


# ---- mode ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [*INTS, torch.bool])
@pytest.mark.parametrize("shape,dim", [((6, 9), 1), ((6, 9), 0), ((3, 4, 16), -1), ((1,), 0),
                                       ((5, 1), 1)])
def test_mode(dtype, shape, dim):
    """Few distinct values, so several share the top count (the smallest wins, and the
    index is its last occurrence: std::sort is an insertion sort up to 16 elements)."""
    x = torch.randint(0, 4, shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    check(lambda t: (t.mode(dim), t.mode(dim, keepdim=True)), x, ge=sort_op(dtype), rtol=0,
          atol=0)


def test_mode_values_of_long_rows_and_0d():
    x = torch.randint(0, 4, (4, 40), generator=torch.Generator().manual_seed(1))
    check(lambda t: t.mode(1).values, x, ge="ArgMaxV2", rtol=0, atol=0)
    check(lambda t: t.mode(), torch.tensor(3), rtol=0, atol=0)


def test_mode_index_of_long_rows_falls_back():
    with pytest.raises(Exception, match="mode"):
        torch.compile(lambda t: t.mode(1).indices, backend="npu",
                      options=STRICT)(torch.zeros(2, 17, dtype=torch.int64))


@pytest.mark.fallback("floating mode is refused by design and must run in eager")
def test_float_mode_falls_back_and_matches_eager_on_nan():
    """Eager's order around NaN is std::sort's own: floating mode stays in eager."""
    x = torch.randint(0, 4, (3, 7), generator=torch.Generator().manual_seed(2)).float()
    x[0, 1] = x[2, 3] = x[2, 5] = float("nan")
    with pytest.raises(Exception, match="mode of floating-point data"):
        torch.compile(lambda t: t.mode(1), backend="npu", options=STRICT)(x)
    torch._dynamo.reset()
    actual = torch.compile(lambda t: t.mode(1), backend="npu")(x)
    expected = x.mode(1)
    torch.testing.assert_close(actual.values, expected.values, equal_nan=True)
    torch.testing.assert_close(actual.indices, expected.indices)


# ---- scatter_reduce / index_reduce ------------------------------------------------------
REDUCES = ["amax", "amin", "mean", "prod", "sum"]
SCATTER_DTYPES = [F32, F16, BF16, torch.int64, torch.int32, torch.uint8, torch.int8]


def values(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 5
    return x.to(dtype) if dtype.is_floating_point else x.round().abs().to(dtype)


def _ge(reduce):
    return {"amax": "TensorScatterMax", "amin": "TensorScatterMin"}.get(reduce,
                                                                        "ScatterElements")


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", SCATTER_DTYPES)
def test_scatter_reduce(dtype, reduce, include_self):
    x, src = values((5, 6), dtype, 0), values((4, 7), dtype, 1)
    g = torch.Generator().manual_seed(2)
    i0, i1 = torch.randint(0, 5, (3, 6), generator=g), torch.randint(0, 6, (4, 4), generator=g)
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))

    def fn(x, i0, i1, src):
        return (torch.scatter_reduce(x, 0, i0, src, reduce, include_self=include_self),
                torch.scatter_reduce(x, -1, i1, src, reduce, include_self=include_self))
    check(fn, x, i0, i1, src, ge=_ge(reduce), rtol=rtol, atol=atol)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin", "mean", "prod"])
@pytest.mark.parametrize("dtype", SCATTER_DTYPES)
def test_index_reduce(dtype, reduce, include_self):
    x, src = values((5, 6), dtype, 0), values((6, 6), dtype, 1)
    index = torch.tensor([0, 2, 2, 4, 0, 1])
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))

    def fn(x, index, src):
        return (x.index_reduce(0, index, src, reduce, include_self=include_self),
                x.index_reduce(1, index, src[:5], reduce, include_self=include_self))
    check(fn, x, index, src, ge=_ge(reduce), rtol=rtol, atol=atol)


def test_scatter_amax_nan_and_3d():
    x, src = values((3, 4, 5), F32, 0), values((3, 4, 5), F32, 1)
    src[1, 2, 3] = float("nan")
    index = torch.randint(0, 4, (2, 3, 5), generator=torch.Generator().manual_seed(3))
    check(lambda x, i, s: (torch.scatter_reduce(x, 1, i, s, "amax"),
                           torch.scatter_reduce(x, 1, i, s, "amin", include_self=False)),
          x, index, src, ge=("TensorScatterMax", "TensorScatterMin"))


# ---- ord=0 norms (a count of nonzeros) ----------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_norm_ord0(dtype):
    x = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(0))
    x = x.masked_fill(x.abs() < 0.5, 0).to(dtype)
    check(lambda t: (torch.linalg.vector_norm(t, 0),
                     torch.linalg.vector_norm(t, 0, dim=(0, 2), keepdim=True),
                     t.norm(0, dim=1), torch.dist(t, t.flip(0), 0)), x, ge="NotEqual")


# ---- histc ----------------------------------------------------------------------------------
HISTC_ARGS = [dict(bins=7, min=-3, max=3), dict(bins=12, min=-3, max=3), dict(bins=100),
              dict(bins=3, min=0.1, max=2.7), dict(bins=10, min=2, max=2)]


@pytest.mark.parametrize("kwargs", HISTC_ARGS, ids=str)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])  # float64: test_histc_float64_refused
def test_histc(dtype, kwargs):
    """Elements on bin edges, outside the range, and a data-derived range (min == max)."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randint(-12, 13, (200,), generator=g) / 4).to(dtype)
    x[:3] = torch.tensor([-10, 10, 0.3333])
    check(lambda t: torch.histc(t, **kwargs), x, ge="ScatterNonAliasingAdd", rtol=0, atol=0)


@pytest.mark.fallback("float64 histc is refused by the 910B dtype gate")
def test_histc_float64_refused():
    # no float64 LessEqual / ReduceMin kernel on the 910B, and narrowing would move elements
    # across bin edges: histc runs in eager, with a warning naming it, DOUBLE and the SoC
    x = torch.tensor([-10.0, 10.0, 0.3333, 1.0, 2.5], dtype=torch.float64)
    check_refused(lambda t: torch.histc(t, bins=7, min=-3, max=3), x, ops="aten.histc.default",
                  dtype="DOUBLE")


def test_histc_constant_and_empty():
    check(lambda t: torch.histc(t, bins=4), torch.full((5,), 3.0), rtol=0, atol=0)
    check(lambda t: torch.histc(t.reshape(2, 0), bins=4, min=0, max=1), torch.ones(0),
          rtol=0, atol=0)


@pytest.mark.parametrize("density", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_histogram(weighted, density):
    """Given edges (NaN and out-of-range elements skipped), a static range, and one bin over
    the data's range (also for constant data)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-12, 13, (60,), generator=g) / 4
    x[0] = -10.0
    w = torch.rand(60, generator=g) if weighted else None
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.25, 2.5])

    def fn(t, e, w):
        with_nan = torch.cat([t, t.new_full((1,), float("nan"))])
        w_nan = None if w is None else torch.cat([w, w[:1]])
        return (torch.histogram(with_nan, e, weight=w_nan, density=density),
                torch.histogram(t, 7, range=(-3.0, 2.5), weight=w, density=density),
                torch.histogram(t, 1, weight=w, density=density),
                torch.histogram(t[1:2] * 0 + 3, 1, density=density))
    check(fn, x, edges, w, ge="SearchSorted")


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_histc_data_range_not_finite_raises_like_eager(bad):
    x = torch.tensor([1.0, bad, 2.0])
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histc(x, bins=4)
    with pytest.raises(Exception, match="histc_range_is_finite"):
        torch.compile(lambda t: torch.histc(t, bins=4), backend="npu", options=STRICT)(x)


def test_histc_too_many_bf16_elements_falls_back():
    with pytest.raises(Exception, match="histc"):
        torch.compile(lambda t: torch.histc(t, bins=4), backend="npu",
                      options=STRICT)(torch.randn(300).to(BF16))


# ---- _trilinear (nn.functional.bilinear) ----------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_bilinear(dtype):
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(8, 5, generator=g).to(dtype), torch.randn(8, 7, generator=g).to(dtype)
    w, b = torch.randn(4, 5, 7, generator=g).to(dtype), torch.randn(4, generator=g).to(dtype)
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    f = torch.nn.functional.bilinear
    check(lambda a, c, w, b: (f(a, c, w, b), f(a, c, w), f(a.reshape(2, 4, 5),
                                                         c.reshape(2, 4, 7), w, b)),
          x1, x2, w, b, ge="BatchMatMulV2", rtol=rtol, atol=atol)


@pytest.mark.parametrize("sumdim", [[1], [1, 2], [], [0, 1, 2]])
def test_trilinear_patterns(sumdim):
    g = torch.Generator().manual_seed(1)
    a, b, c = (torch.randn(s, generator=g) for s in ((3, 4), (4, 5), (3, 5)))
    check(lambda a, b, c: torch.ops.aten._trilinear(a, b, c, [2], [0], [1], sumdim), a, b, c)


def test_bilinear_grad():
    g = torch.Generator().manual_seed(2)
    check_grad(torch.nn.functional.bilinear, torch.randn(6, 5, generator=g),
               torch.randn(6, 7, generator=g), torch.randn(3, 5, 7, generator=g),
               torch.randn(3, generator=g))


# ---- nonzero_static ---------------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 3, 7, 40])
@pytest.mark.parametrize("dtype", [F32, BF16, torch.int64, torch.uint8, torch.bool])
def test_nonzero_static(dtype, size):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(4, 6, generator=g) > 0.3).to(dtype)
    check(lambda t: (torch.nonzero_static(t, size=size, fill_value=-7),
                     torch.nonzero_static(t.reshape(2, 3, 4), size=size)), x,
          ge="TensorScatterUpdate" if size else ())


def test_nonzero_static_nan_0d_and_empty():
    x = torch.tensor([0.0, float("nan"), 0.0, 2.0])
    check(lambda t: torch.nonzero_static(t, size=3), x, ge="TensorScatterUpdate")
    check(lambda t: (torch.nonzero_static(t[1], size=2), torch.nonzero_static(t[:0], size=2)),
          x)


# ---- segment_reduce -------------------------------------------------------------------------
@pytest.mark.parametrize("initial", [None, 2])
@pytest.mark.parametrize("reduce", ["sum", "prod", "max", "min", "mean"])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_segment_reduce(dtype, reduce, initial):
    """Empty segments (initial, the identity, or NaN for a mean), N-D rows, and offsets that
    skip leading rows."""
    data = torch.randn(10, 3, 2, generator=torch.Generator().manual_seed(0)).to(dtype)
    lengths = torch.tensor([1, 2, 0, 6, 0, 1])
    offsets = torch.tensor([1, 3, 3, 9, 9])
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    check(lambda x, n, o: (torch.segment_reduce(x, reduce, lengths=n, initial=initial),
                           torch.segment_reduce(x[:, 0, 0], reduce, lengths=n, initial=initial),
                           torch.segment_reduce(x, reduce, offsets=o, initial=initial,
                                                unsafe=True)),
          data, lengths, offsets, rtol=rtol, atol=atol)


@pytest.mark.parametrize("kind,bad", [("lengths", [2, 2]), ("lengths", [-1, 6]),
                                      ("offsets", [0, 3, 2])])
def test_segment_reduce_invalid_segments_raise_like_eager(kind, bad):
    """Eager raises for lengths that are negative or do not cover every row and for
    decreasing offsets; the graph raises from a GE Assert instead of returning garbage."""
    x = torch.randn(5, 2)

    def fn(t, b):
        return torch.segment_reduce(t, "sum", **{kind: b})

    with pytest.raises(RuntimeError):
        fn(x, torch.tensor(bad))
    compiled = torch.compile(fn, backend="npu", options=STRICT, dynamic=False)
    good = torch.tensor([2, 3] if kind == "lengths" else [0, 2, 5])
    torch.testing.assert_close(compiled(x, good), fn(x, good))
    with pytest.raises(Exception, match=f"segment_{kind}_valid"):
        compiled(x, torch.tensor(bad))
    unsafe = torch.compile(lambda t, b: torch.segment_reduce(t, "sum", lengths=b, unsafe=True),
                           backend="npu", options=STRICT, dynamic=False)
    short = torch.tensor([2, 2])  # unsafe=True: eager checks nothing and skips the last row
    torch.testing.assert_close(unsafe(x, short),
                               torch.segment_reduce(x, "sum", lengths=short, unsafe=True))


def test_segment_reduce_batched_lengths_falls_back():
    with pytest.raises(Exception, match="segment_reduce"):
        torch.compile(lambda x, n: torch.segment_reduce(x, "sum", lengths=n, axis=1),
                      backend="npu", options=STRICT)(torch.ones(2, 3),
                                                     torch.tensor([[1, 2], [3, 0]]))


# ---- 3-d adaptive pooling, grid_sampler_3d --------------------------------------------------
@pytest.mark.parametrize("size", [(5, 7, 4), (1, 1, 1), (8, 3, 6), (2, 4, 3)])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_adaptive_avg_pool3d(dtype, size):
    x = torch.randn(2, 3, 8, 6, 6, generator=torch.Generator().manual_seed(0)).to(dtype)
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    f = torch.nn.functional.adaptive_avg_pool3d
    ge = "MatMulV2" if size != (1, 1, 1) else ()  # (1, 1, 1) decomposes to a mean
    check(lambda t: (f(t, size), f(t[0], size)), x, ge=ge, rtol=rtol, atol=atol)


@pytest.mark.parametrize("size", [(4, 3, 2), (1, 1, 1), (8, 6, 6)])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_adaptive_max_pool3d_even_windows(dtype, size):
    x = torch.randn(2, 3, 8, 6, 6, generator=torch.Generator().manual_seed(0)).to(dtype)
    f = torch.nn.functional.adaptive_max_pool3d
    check(lambda t: (f(t, size, return_indices=True), f(t[0], size, return_indices=True)), x,
          ge="MaxPool3DWithArgmaxV2", rtol=0, atol=0)


def test_adaptive_max_pool3d_uneven_windows_fall_back():
    with pytest.raises(Exception, match="adaptive_max_pool3d"):
        torch.compile(lambda t: torch.nn.functional.adaptive_max_pool3d(t, (3, 3, 3)),
                      backend="npu", options=STRICT)(torch.randn(1, 1, 4, 4, 4))


@pytest.mark.parametrize("mode,padding,align", [("bilinear", "zeros", False),
                                                ("nearest", "border", True),
                                                ("bilinear", "reflection", True)])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_grid_sampler_3d(dtype, mode, padding, align):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 5, 6, generator=g).to(dtype)
    grid = (torch.rand(2, 3, 4, 2, 3, generator=g) * 2.4 - 1.2).to(dtype)
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    check(lambda x, gr: torch.nn.functional.grid_sample(x, gr, mode, padding, align), x, grid,
          ge="GridSampler3D", rtol=rtol, atol=atol)


def test_grid_sampler_3d_grad():
    g = torch.Generator().manual_seed(1)
    check_grad(lambda x, gr: torch.nn.functional.grid_sample(x, gr, align_corners=False),
               torch.randn(1, 2, 3, 4, 5, generator=g),
               torch.rand(1, 2, 3, 2, 3, generator=g) * 2 - 1)


# ---- conv3d ---------------------------------------------------------------------------------
CONV3D = [dict(), dict(stride=2), dict(padding=1, dilation=2), dict(padding="same"),
          dict(stride=(2, 1, 3), padding=(2, 0, 1), dilation=(1, 2, 1))]


def _check_conv3d(f, dtype, kwargs, x_shape, w_shape, bias, in_channels, out_channels,
                  float32_reference=False):
    """f(x, w, b, groups=2) and an ungrouped f on a slice, as one Conv2D-lowered graph."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*x_shape, generator=g).to(dtype)
    w = torch.randn(*w_shape, generator=g).to(dtype)
    b = torch.randn(bias, generator=g).to(dtype)
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    check(lambda x, w, b: (f(x, w, b, groups=2, **kwargs),
                           f(x[:1, :in_channels], w[:out_channels], **kwargs)),
          x, w, b, ge="Conv2D", rtol=rtol, atol=atol, float32_reference=float32_reference)


@pytest.mark.parametrize("kwargs", CONV3D, ids=str)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_conv3d(dtype, kwargs):
    _check_conv3d(torch.nn.functional.conv3d, dtype, kwargs, (2, 6, 7, 8, 9), (4, 3, 3, 2, 3),
                  4, 3, 4)


CONV_T3D = [dict(stride=2, padding=2, output_padding=1),
            dict(stride=(3, 2, 1), padding=(1, 2, 3), output_padding=(2, 1, 0), dilation=2),
            dict(), dict(stride=2, padding=(0, 1, 3), dilation=(1, 2, 1))]


@pytest.mark.parametrize("kwargs", CONV_T3D, ids=str)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_conv_transpose3d(dtype, kwargs):
    # fp16/bf16: the 910B's Conv2D (Cube) accumulates in float32 and rounds once, as the host
    # device does; eager CPU's low-precision conv_transpose3d accumulates in the low dtype
    # (fp16: error 1e-2 against float64, past the fp16 tolerance), so the reference is eager
    # in float32 rounded to the dtype
    _check_conv3d(torch.nn.functional.conv_transpose3d, dtype, kwargs, (2, 4, 3, 4, 5),
                  (4, 3, 3, 2, 4), 6, 2, 2, float32_reference=dtype != F32)


def test_conv3d_backward_falls_back():
    x, w = torch.randn(1, 2, 4, 4, 4, requires_grad=True), torch.randn(3, 2, 2, 2, 2)
    with pytest.raises(Exception, match="convolution_backward"):
        torch.compile(torch.nn.functional.conv3d, backend="npu", options=STRICT)(x, w).sum() \
            .backward()


# ---- anti-aliased bilinear resize -----------------------------------------------------------
@pytest.mark.parametrize("kwargs", [dict(size=(3, 3)), dict(size=(25, 7)),
                                    dict(scale_factor=(1.7, 0.9)),
                                    dict(scale_factor=(0.8, 1.0), align_corners=True)], ids=str)
def test_upsample_bilinear2d_aa(kwargs):
    x = torch.randn(2, 3, 10, 20, generator=torch.Generator().manual_seed(0))
    check(lambda t: torch.nn.functional.interpolate(t, mode="bilinear", antialias=True,
                                                    **kwargs), x, ge="MatMulV2")
