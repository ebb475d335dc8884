"""A dynamic graph's Reshape(x, Pack(sizes)) pairs run as one host step
(runtime/shape_steps.py): same results as op by op, for every size."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.runtime import shape_steps  # noqa: E402
from npu_inductor.runtime.host_model import HostModel  # noqa: E402


def _fn(x, w):
    return (torch.relu(x) @ w).transpose(0, 1).reshape(x.shape[1], -1)


def test_reshape_of_pack_runs_as_one_step():
    torch._dynamo.reset()
    x, w = torch.randn(2, 5, 8), torch.randn(8, 4)
    torch._dynamo.mark_dynamic(x, 1)
    with record_graphs() as graphs:
        torch.compile(_fn, backend="npu")(x, w)
    ex = graphs[0].executor
    loaded = ex.device.acl.models[ex.model_id]
    plain = HostModel(loaded.graph, loaded.allocator, fuse_attention=False)
    fused = HostModel(loaded.graph, loaded.allocator, fuse_attention=True)
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
    torch._dynamo.reset()
    x, w = torch.randn(2, 5, 8), torch.randn(8, 4)
    torch._dynamo.mark_dynamic(x, 1)
    with record_graphs() as graphs:
        torch.compile(_fn, backend="npu")(x, w)
    ex = graphs[0].executor
    return ex.device.acl.models[ex.model_id], w


def test_generated_code_reshapes_inline_and_converts_each_size_once():
    loaded, w = _loaded_dynamic()
    model = HostModel(loaded.graph, loaded.allocator, fuse_attention=True)
    x = torch.randn(2, 7, 8)
    out = model.execute(_inputs(loaded, x, w))
    assert torch.equal(out[0], _fn(x, w))
    src = model.codegen_source
    merged = [st for st in model.steps if st.fn is shape_steps.packed_reshape]
    assert merged and src.count(".reshape((") == len(merged)
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
    with pytest.raises(HostExecutionError, match=r"Reshape.*expected 0-d int sizes"):
        model.execute(inputs)
