"""View / layout converters (shape.py): compiled vs eager across dtypes, negative dims and edge
slices, plus a golden dump of a small view chain."""

from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree
from harness import STRICT, check_fn, check_grad
from harness import random_tensor as make

from npu_inductor.ge import format_graph

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]


def ge_ops(graphs) -> set[str]:
    return {op.type for g in graphs for op in g.lowered.graph.ops}


# (id, fn, input shapes, GE op type expected in the graph)
CASES = [
    ("view", lambda x: x.view(6, 4) * 1, [(2, 3, 4)], "Reshape"),
    ("view_copy", lambda x: aten.view_copy(x, [4, 6]), [(2, 3, 4)], "Reshape"),
    ("permute_neg", lambda x: x.permute(-1, 0, 1).contiguous(), [(2, 3, 4)], "Transpose"),
    ("permute_copy", lambda x: aten.permute_copy(x, [2, 0, 1]), [(2, 3, 4)], "Transpose"),
    ("t", lambda x: aten.t(x), [(3, 4)], "Transpose"),
    ("transpose_neg", lambda x: aten.transpose(x, -1, -3), [(2, 3, 4)], "Transpose"),
    ("expand", lambda x: aten.expand(x, [2, 3, 4]), [(3, 1)], "BroadcastTo"),
    ("expand_minus1", lambda x: aten.expand(x, [5, -1, 4]), [(3, 1)], "BroadcastTo"),
    ("expand_copy", lambda x: aten.expand_copy(x, [2, 3, 4]), [(1, 4)], "BroadcastTo"),
    ("unsqueeze_neg", lambda x: aten.unsqueeze(x, -1), [(2, 3)], "Unsqueeze"),
    ("unsqueeze_0", lambda x: aten.unsqueeze(x, 0), [(2, 3)], "Unsqueeze"),
    ("unsqueeze_copy", lambda x: aten.unsqueeze_copy(x, 1), [(2, 3)], "Unsqueeze"),
    ("squeeze", lambda x: aten.squeeze(x), [(2, 1, 3, 1)], "Squeeze"),
    ("squeeze_dim_neg", lambda x: aten.squeeze(x, -1), [(2, 1, 3, 1)], "Squeeze"),
    ("squeeze_dims", lambda x: aten.squeeze(x, [1, 2, 3]), [(2, 1, 3, 1)], "Squeeze"),
    ("squeeze_copy", lambda x: aten.squeeze_copy(x, 1), [(2, 1, 3)], "Squeeze"),
    ("cat", lambda x, y: torch.cat([x, y, x], -1), [(2, 3), (2, 1)], "ConcatV2"),
    ("cat_dim0", lambda x, y: torch.cat([x, y]), [(2, 3), (1, 3)], "ConcatV2"),
    ("stack_neg", lambda x, y: torch.stack([x, y], -1), [(2, 3), (2, 3)], "Pack"),
    ("stack", lambda x, y: torch.stack([x, y, x]), [(2, 3), (2, 3)], "Pack"),
    ("split", lambda x: [t * 1 for t in torch.split(x, 2, -1)], [(3, 5)], "SplitV"),
    ("split_sizes", lambda x: aten.split_with_sizes(x, [1, 3, 1], 1), [(2, 5)], "SplitV"),
    ("split_one", lambda x: aten.split(x, 4, 0), [(3, 2)], "SplitV"),
    ("split_copy", lambda x: aten.split_with_sizes_copy(x, [2, 1], 0), [(3, 2)], "SplitV"),
    ("unbind", lambda x: aten.unbind(x, 1), [(2, 3, 2)], "Unpack"),
    ("unbind_neg", lambda x: torch.unbind(x, -1), [(2, 3)], "Unpack"),
    ("slice", lambda x: x[1:3], [(5, 3)], "StridedSliceV2"),
    ("slice_step", lambda x: x[:, 1::2], [(3, 7)], "StridedSliceV2"),
    ("slice_neg", lambda x: x[-3:-1], [(5, 3)], "StridedSliceV2"),
    ("slice_overflow", lambda x: aten.slice(x, 0, -100, 100), [(5, 3)], None),
    ("slice_end_big", lambda x: aten.slice(x, 1, 1, 2**62, 2), [(2, 6)], "StridedSliceV2"),
    ("slice_empty", lambda x: aten.slice(x, 0, 4, 2) + 0, [(5, 3)], None),
    ("slice_copy", lambda x: aten.slice_copy(x, -1, 1, -1), [(2, 5)], "StridedSliceV2"),
    ("narrow_copy", lambda x: aten.narrow_copy(x, 1, -3, 2), [(2, 5)], "StridedSliceV2"),
    ("select", lambda x: x[:, 1], [(2, 3, 4)], "StridedSliceV2"),
    ("select_neg", lambda x: aten.select(x, -1, -2), [(2, 3, 4)], "StridedSliceV2"),
    ("select_copy", lambda x: aten.select_copy(x, 0, 1), [(2, 3)], "StridedSliceV2"),
    ("as_strided", lambda x: aten.as_strided(x, [3, 3], [1, 2], 1), [(12,)], "AsStrided"),
    ("diagonal", lambda x: aten.diagonal(x), [(3, 4)], "MatrixDiagPartV2"),
    ("diagonal_off", lambda x: aten.diagonal(x, 1, -1, 0), [(2, 3, 4)], "MatrixDiagPartV2"),
    ("diagonal_neg", lambda x: aten.diagonal_copy(x, -1, 1, 2), [(2, 3, 4)], "MatrixDiagPartV2"),
    ("unfold", lambda x: aten.unfold(x, 1, 3, 2), [(2, 7, 3)], "GatherV2"),
    ("unfold_last", lambda x: aten.unfold(x, -1, 2, 1), [(2, 5)], "GatherV2"),
    ("flip", lambda x: torch.flip(x, [0, -1]), [(2, 3, 4)], "ReverseV2"),
    ("roll", lambda x: torch.roll(x, [1, -2], [0, 2]), [(2, 3, 4)], "Roll"),
    ("roll_flat", lambda x: torch.roll(x, 5), [(2, 3, 4)], "Roll"),
    ("repeat", lambda x: x.repeat(2, 1, 3), [(2, 3)], "Tile"),
    ("rot90", lambda x: torch.rot90(x, 1, [0, 1]), [(2, 3)], "ReverseV2"),
    ("rot90_k2", lambda x: torch.rot90(x, 2, [1, 0]), [(2, 3)], "ReverseV2"),
    ("rot90_k3", lambda x: torch.rot90(x, -1, [0, 2]), [(2, 3, 2)], "ReverseV2"),
    ("pad", lambda x: aten.constant_pad_nd(x, [1, 2, 0, 1], 0), [(2, 3)], "PadV3"),
    ("pad_neg", lambda x: aten.constant_pad_nd(x, [-1, 2, 1, -1]), [(3, 4)], "PadV3"),
    ("tril", lambda x: torch.tril(x, -1), [(3, 4)], "Tril"),
    ("triu", lambda x: torch.triu(x, 1), [(2, 3, 4)], "Triu"),
    ("alias", lambda x: torch.stack([aten.alias(x), aten.detach(x)]), [(2, 3)], "Pack"),
]
# Every case runs in float32; these also run in the other dtypes (the ones whose GE op lacks
# bool / bf16 / f16 exercise the exact-widening path), keeping the file fast.
SWEEP = {"permute_neg", "expand", "unsqueeze_neg", "squeeze_dims", "cat", "stack", "split",
         "unbind", "slice_step", "select_neg", "as_strided", "diagonal_off", "unfold", "flip",
         "roll", "repeat", "pad_neg", "tril", "alias"}
PARAMS = [pytest.param(*c, dtype, id=f"{c[0]}-{str(dtype)[6:]}") for c in CASES
          for dtype in DTYPES if dtype == torch.float32 or c[0] in SWEEP]


@pytest.mark.parametrize("name,fn,shapes,ge_op,dtype", PARAMS)
def test_layout_op(name, fn, shapes, ge_op, dtype):
    inputs = [make(s, dtype) for s in shapes]
    # A graph output that is only a view is replayed on the host tensor, not lowered
    # (lowering/output_views.py): an elementwise reader makes GE compute the view.
    negate = torch.logical_not if dtype == torch.bool else torch.neg
    graphs = check_fn(lambda *a: pytree.tree_map(negate, fn(*a)), *inputs, options=STRICT)
    if ge_op == "PadV3" and dtype == torch.int64:
        ge_op = "ConcatV2"  # the 910B PadV3 has no int64 kernel: constant blocks concatenated
    if ge_op is not None:
        assert ge_op in ge_ops(graphs)
        assert "PadV3" not in ge_ops(graphs) or dtype != torch.int64


FLOAT_CASES = [
    ("pad_value", lambda x: aten.constant_pad_nd(x, [1, 1], 2.5), [(2, 3)], "PadV3"),
    ("reflect1d", lambda x: torch.nn.functional.pad(x, [2, 1], mode="reflect"), [(2, 3, 5)],
     "PadV3"),
    ("reflect2d", lambda x: torch.nn.functional.pad(x, [1, 2, 2, 1], mode="reflect"),
     [(1, 2, 4, 5)], "PadV3"),
    ("replicate2d", lambda x: torch.nn.functional.pad(x, [1, 2, 0, 3], mode="replicate"),
     [(1, 2, 3, 4)], "PadV3"),
    ("replicate3d", lambda x: aten.replication_pad3d(x, [1, 0, 0, 1, 2, 1]), [(1, 2, 3, 3, 2)],
     "PadV3"),
    ("reflect3d", lambda x: aten.reflection_pad3d(x, [1, 1, 0, 1, 1, 0]), [(1, 2, 3, 3, 2)],
     "PadV3"),
    ("replicate1d", lambda x: aten.replication_pad1d(x, [0, 2]), [(2, 3, 4)], "PadV3"),
    ("pixel_shuffle", lambda x: torch.pixel_shuffle(x, 2), [(1, 8, 2, 3)], "Transpose"),
    ("pixel_unshuffle", lambda x: torch.pixel_unshuffle(x, 2), [(1, 2, 4, 6)], "Transpose"),
    ("channel_shuffle", lambda x: torch.channel_shuffle(x, 2), [(1, 4, 2, 2)], "Transpose"),
    ("view_dtype", lambda x: x.view(torch.int32), [(2, 3)], "Bitcast"),
    ("cat_promote", lambda x: torch.cat([x, x.to(torch.float16)], 1), [(2, 3)], "ConcatV2"),
]


@pytest.mark.parametrize("name,fn,shapes,ge_op", FLOAT_CASES, ids=[c[0] for c in FLOAT_CASES])
def test_float_layout_op(name, fn, shapes, ge_op):
    graphs = check_fn(fn, *[make(s) for s in shapes], options=STRICT)
    assert ge_op in ge_ops(graphs)


def test_view_chain_trains():
    def fn(x, y):
        z = torch.cat([x.t(), y], 0)[1:, ::2].unsqueeze(0).expand(2, -1, -1)
        return (z * z).sum()

    torch._dynamo.reset()
    x, y = torch.randn(3, 4, requires_grad=True), torch.randn(2, 3, requires_grad=True)
    x2, y2 = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    torch.compile(fn, backend="npu", options=STRICT)(x, y).backward()
    fn(x2, y2).backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(y.grad, y2.grad)


# strides [1] reuses the identical begin Const (small constants are shared graph-wide)
GOLDEN = """\
graph "inference_N":
  %arg0_1 = Data()[index=0] -> f32[12]
  %view_shape = Const()[value=i64[2]{2, 6}] -> i64[2]
  %view = Reshape(%arg0_1, %view_shape) -> f32[2, 6]
  %permute_perm = Const()[value=i64[2]{1, 0}] -> i64[2]
  %permute = Transpose(%view, %permute_perm) -> f32[6, 2]
  %slice_1_begin = Const()[value=i64[1]{1}] -> i64[1]
  %slice_1_end = Const()[value=i64[1]{6}] -> i64[1]
  %slice_1_axes = Const()[value=i64[1]{0}] -> i64[1]
  %slice_1 = StridedSliceV2(%permute, %slice_1_begin, %slice_1_end, %slice_1_axes, \
%slice_1_begin) -> f32[5, 2]
  %neg = Neg(%slice_1) -> f32[5, 2]
  return (%neg)
"""


def test_golden_view_permute_slice():
    graphs = check_fn(lambda x: x.view(2, 6).permute(1, 0)[1:].neg(), torch.randn(12),
                      options=STRICT)
    (g,) = graphs
    text = format_graph(g.lowered.graph)
    name = g.lowered.graph.name
    assert text.replace(f'"{name}"', '"inference_N"') == GOLDEN


F = torch.nn.functional
TRAIN = [
    ("reflect2d", lambda x: F.pad(x, [1, 2, 2, 1], mode="reflect"), [(1, 2, 4, 5)]),
    ("reflect1d", lambda x: F.pad(x, [2, 1], mode="reflect"), [(2, 3, 4)]),
    ("replicate1d", lambda x: F.pad(x, [1, 2], mode="replicate"), [(1, 2, 4)]),
    ("replicate2d", lambda x: F.pad(x, [0, 2, 1, 1], mode="replicate"), [(1, 2, 3, 3)]),
    ("reflect3d", lambda x: F.pad(x, [1, 1, 0, 1, 1, 0], mode="reflect"), [(1, 1, 2, 3, 2)]),
    ("replicate3d", lambda x: F.pad(x, [1, 0, 0, 2, 1, 1], mode="replicate"), [(1, 1, 2, 3, 2)]),
    ("constant_crop", lambda x: F.pad(x, [1, -1, 2, 0], value=1.5), [(2, 3, 4)]),
    ("cat_split", lambda x, y: torch.cat([x, y], 1).split([1, 4], 1)[1] * 2, [(2, 2), (2, 3)]),
    ("stack_unbind", lambda x, y: torch.stack([x, y], 1).unbind(0)[1], [(2, 3), (2, 3)]),
    ("flip_roll_repeat", lambda x: torch.roll(torch.flip(x, [0]), 1, 1).repeat(2, 1), [(2, 3)]),
    ("unfold", lambda x: x.unfold(1, 2, 1) * 3, [(2, 4)]),
    ("diagonal_tril", lambda x: torch.diagonal(torch.tril(x), 1) * 3, [(3, 4)]),
    ("slices", lambda x: x[1:, ::2] * x[0].sum(), [(3, 5)]),
    ("as_strided", lambda x: x.as_strided([2, 2], [1, 2], 1) * 2, [(6,)]),
    ("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2) * 2, [(1, 4, 2, 2)]),
    ("fold_unfold", lambda x: F.fold(F.unfold(x, 2), (3, 3), 2), [(1, 2, 3, 3)]),
]


@pytest.mark.parametrize("fn,shapes", [c[1:] for c in TRAIN], ids=[c[0] for c in TRAIN])
def test_layout_op_backward(fn, shapes):
    check_grad(fn, *[make(s) for s in shapes])


# *_copy and other overloads the tracer never produces by itself: called explicitly
VARIANTS = [
    ("reshape_alias", lambda x: aten._reshape_alias(x, [6, 2], [2, 1]) * 1, [(3, 4)]),
    ("reshape_copy", lambda x: aten._reshape_copy(x, [2, 6]), [(3, 4)]),
    ("alias_copy", lambda x: aten.alias_copy(x) * 2, [(3, 4)]),
    ("detach_copy", lambda x: aten.detach_copy(x) * 2, [(3, 4)]),
    ("lift_fresh_copy", lambda x: aten.lift_fresh_copy(x) * 2, [(3, 4)]),
    ("as_strided_copy", lambda x: aten.as_strided_copy(x, [2, 2], [4, 1]), [(3, 4)]),
    ("split_copy", lambda x: aten.split_copy(x, 2, 1), [(3, 4)]),
    ("squeeze_copy", lambda x: aten.squeeze_copy(x), [(3, 1, 4)]),
    ("squeeze_copy_dims", lambda x: aten.squeeze_copy(x, [0, 1]), [(1, 1, 4)]),
    ("t_copy", lambda x: aten.t_copy(x), [(3, 4)]),
    ("transpose_copy", lambda x: aten.transpose_copy(x, 0, -1), [(3, 2, 4)]),
    ("unbind_copy", lambda x: aten.unbind_copy(x, -1), [(3, 2)]),
    ("unfold_copy", lambda x: aten.unfold_copy(x, 0, 2, 2), [(5, 2)]),
    ("view_copy_dtype", lambda x: aten.view_copy(x, torch.int32), [(3, 4)]),
]


@pytest.mark.parametrize("fn,shapes", [c[1:] for c in VARIANTS], ids=[c[0] for c in VARIANTS])
def test_copy_variants(fn, shapes):
    check_fn(fn, *[make(s) for s in shapes], options=STRICT)


DYNAMIC = [
    ("cat_slice", lambda x: torch.cat([x, x], 0)[1:-1] * 2),
    ("select_neg", lambda x: x[-1] * 2),
    ("expand", lambda x: x.unsqueeze(0).expand(3, -1, -1) * 2),
    ("split", lambda x: torch.split(x, 1, 1)[0] * 2),
    ("arange", lambda x: x * torch.arange(x.shape[0]).unsqueeze(1)),
    ("zeros_like", lambda x: torch.zeros_like(x) + x),
    ("index", lambda x: x[torch.tensor([0, -1])] * 2),
    ("pad", lambda x: torch.nn.functional.pad(x, [1, 1]) * 2),
    ("flip_stack", lambda x: torch.stack([x, torch.flip(x, [0])]) * 2),
]


@pytest.mark.parametrize("fn", [c[1] for c in DYNAMIC], ids=[c[0] for c in DYNAMIC])
def test_dynamic_dims(fn):
    """One graph with a dynamic leading dim serves several sizes."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="npu", dynamic=True, options=STRICT)
    for n in (3, 5):
        x = torch.randn(n, 2)
        torch.testing.assert_close(compiled(x), fn(x))


def test_unbind_static_dim_of_dynamic_tensor():
    """Only the unbound dim must be static; the others may stay dynamic."""
    torch._dynamo.reset()
    fn = lambda x: [t * 2 for t in torch.unbind(x, 1)]  # noqa: E731
    compiled = torch.compile(fn, backend="npu", dynamic=True, options=STRICT)
    for n in (3, 5):
        x = torch.randn(n, 2)
        torch.testing.assert_close(compiled(x), fn(x))


def test_replicate_pad_with_negative_amounts():
    """Negative reflect/edge pads read the original edges (not crop-then-pad)."""
    fn = lambda x: torch.nn.functional.pad(x, [-2, 3, 1, -1], mode="replicate")  # noqa: E731
    graphs = check_fn(fn, torch.randn(1, 2, 4, 4), options=STRICT)
    assert "GatherV2" in ge_ops(graphs)


def test_complex_constant_pad_kernel():
    from npu_inductor.runtime.kernels.array import pad_v3

    x = torch.randn(2, 3, dtype=torch.complex64)
    value = torch.tensor(1 + 2j, dtype=torch.complex64)
    expected = torch.full((3, 4), 1 + 2j, dtype=torch.complex64)
    expected[:2, 1:] = x
    torch.testing.assert_close(pad_v3(x, torch.tensor([0, 1, 1, 0]), value), expected)


def test_reshape_overload_lowers_with_its_own_schema_names():
    # aten.reshape is CompositeImplicit (absent from AOT graphs) but passes may emit it
    from torch._subclasses.fake_tensor import FakeTensorMode

    from npu_inductor.config import resolve
    from npu_inductor.ge import GraphBuilder  # noqa: F401  (import check)
    from npu_inductor.lowering import lower_graph

    mode = FakeTensorMode()
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = mode.from_tensor(torch.randn(2, 6))
    r = g.call_function(torch.ops.aten.reshape.default, (x, [3, 4]))
    r.meta["val"] = mode.from_tensor(torch.randn(3, 4))
    g.output((r,))
    ops = lower_graph(torch.fx.GraphModule({}, g), "g", resolve()).graph.op_counts()
    assert ops.get("Reshape") == 1


def test_int64_constant_pad_concatenates_blocks():
    """910B's PadV3 has no int64 kernel: transformers' shifted labels (pad with -100) become
    ConcatV2 of constant blocks."""
    from harness import check_ge_ops

    labels = torch.randint(0, 50, (2, 6))
    graphs = check_ge_ops(lambda t: torch.nn.functional.pad(t, (1, 2), value=-100), labels,
                          ge="ConcatV2")
    assert not any(op.type == "PadV3" for g in graphs for op in g.lowered.graph.ops)
