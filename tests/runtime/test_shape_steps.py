"""A dynamic graph's Reshape(x, Pack(sizes)) pairs run as one host step
(runtime/shape_steps.py): same results as op by op, for every size."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.runtime import linear_fold, shape_steps  # noqa: E402
from npu_inductor.runtime.host_model import HostModel  # noqa: E402


def _fn(x, w):
    return (torch.relu(x) @ w).transpose(0, 1).reshape(x.shape[1], -1)


def _compiled_dynamic(fn, x, *rest):
    """The loaded GE graph of ``fn`` compiled with ``x``'s dim 1 dynamic."""
    torch._dynamo.reset()
    torch._dynamo.mark_dynamic(x, 1)
    with record_graphs() as graphs:
        torch.compile(fn, backend="npu")(x, *rest)
    ex = graphs[0].executor
    return ex.device.acl.models[ex.model_id]


def _plain_and_fused(loaded):
    return (HostModel(loaded.graph, loaded.allocator, fuse_attention=False),
            HostModel(loaded.graph, loaded.allocator, fuse_attention=True))


def test_reshape_of_pack_runs_as_one_step():
    w = torch.randn(8, 4)
    loaded = _compiled_dynamic(_fn, torch.randn(2, 5, 8), w)
    plain, fused = _plain_and_fused(loaded)
    packs = [st for st in plain.steps if st.op.type == "Pack"]
    merged = [st for st in fused.steps if st.fn is shape_steps.packed_reshape]
    assert packs and len(merged) == len(packs)
    assert not any(st.op.type == "Pack" for st in fused.steps)
    for n in (1, 3, 9):
        x = torch.randn(2, n, 8)
        inputs = [x if t.dim() == 3 else t for t in _inputs(loaded, x, w)]
        a, b = plain.execute(inputs), fused.execute(inputs)
        assert len(a) == len(b) and all(torch.equal(p, q) for p, q in zip(a, b))
        assert torch.equal(b[0], _fn(x, w))


def _inputs(model, x, w):
    """The graph's inputs for (x, w): its Data ops in order (symbolic sizes as 0-d int64)."""
    out = []
    for op in model.inputs:
        desc = op.output_descs[0]
        if len(desc.shape) == 3:
            out.append(x)
        elif len(desc.shape) == 2:
            out.append(w)
        else:
            out.append(torch.tensor(x.shape[1]))
    return out


def test_packed_reshape_refuses_a_non_scalar_size():
    with pytest.raises(ValueError, match="expected 0-d int sizes"):
        shape_steps.packed_reshape(torch.zeros(6), [torch.tensor([2]), torch.tensor(3)])


def _loaded_dynamic():
    w = torch.randn(8, 4)
    return _compiled_dynamic(_fn, torch.randn(2, 5, 8), w), w


def test_generated_code_reshapes_inline_and_converts_each_size_once():
    loaded, w = _loaded_dynamic()
    model = HostModel(loaded.graph, loaded.allocator, fuse_attention=True)
    x = torch.randn(2, 7, 8)
    out = model.execute(_inputs(loaded, x, w))
    assert torch.equal(out[0], _fn(x, w))
    src = model.codegen_source
    merged = [st for st in model.steps if st.fn is shape_steps.packed_reshape]
    # (a linear's input Reshape is folded into its matmul: runtime/linear_fold.py)
    folded = len(linear_fold.plan(model)[0])
    assert merged and src.count(".reshape((") == len(merged) - folded
    sized = [line.split("=")[0].strip() for line in src.splitlines()
             if "= scalar_size(" in line]
    assert sized and len(sized) == len(set(sized))  # one conversion per size slot


def test_generated_code_refuses_a_non_scalar_size():
    """The size check moved to one conversion per slot: still an error naming the op."""
    from npu_inductor.runtime.host_model import HostExecutionError

    loaded, w = _loaded_dynamic()
    model = HostModel(loaded.graph, loaded.allocator, fuse_attention=True)
    x = torch.randn(2, 3, 8)
    inputs = [t if t.dim() else torch.tensor([3]) for t in _inputs(loaded, x, w)]
    # the size input itself is named (its value is the key of the size prelude's cache)
    with pytest.raises(HostExecutionError, match=r"graph input .*expected 0-d int sizes"):
        model.execute(inputs)


def _half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _sized(x, table):
    """Rotary on a prompt (the rotary fusion reads cos/sin's size off the sliced table)."""
    b, s = x.shape[0], x.shape[1]
    q = x.view(b, s, 2, 4).transpose(1, 2)
    k = (x * 2).view(b, s, 2, 4).transpose(1, 2)
    cos, sin = table[:s].cos(), table[:s].sin()
    return q * cos + _half(q) * sin, k * cos + _half(k) * sin


def test_size_of_a_tensor_runs_as_one_step():
    """GatherV2(Shape(t), i, 0) (a size read off a tensor) is one DimSize step, same
    results as the two ops for every size."""
    table = torch.randn(16, 4)
    loaded = _compiled_dynamic(_sized, torch.randn(2, 5, 8), table)
    plain, fused = _plain_and_fused(loaded)
    gathers = [st for st in plain.steps if st.op.type == "GatherV2"]
    sized = [st for st in fused.steps if isinstance(st.fn, shape_steps.DimSize)]
    assert gathers and len(sized) == len(gathers)
    assert not any(st.op.type == "Shape" for st in fused.steps)
    for n in (1, 3, 9):
        x = torch.randn(2, n, 8)
        ranks = [len(op.output_descs[0].shape) for op in loaded.inputs]
        inputs = [x if r == 3 else table if r == 2 else torch.tensor(n) for r in ranks]
        a, b = plain.execute(inputs), fused.execute(inputs)
        assert len(a) == len(b) and all(torch.equal(p, q) for p, q in zip(a, b))
        for got, want in zip(b, _sized(x, table)):  # the graph's outputs are [b, s, h, d]
            torch.testing.assert_close(got, want.transpose(1, 2), rtol=1e-5, atol=1e-6)
