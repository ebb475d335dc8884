"""The host executor's direct call (``executor.py.jinja``, ``HostAcl.run_tensors``): the
inputs of a graph (static, or with dynamic dims) go to the model as the list they are,
checked for all inputs at once, instead of one data buffer per input per call. Same
results as the binding path, no input kept after the call, a new or non-contiguous input
seen, a wrong one named."""

import gc
import weakref

import pytest
import torch

from npu_inductor.codegen import executor_source, load_executor
from npu_inductor.ge import GraphBuilder, to_air
from npu_inductor.runtime.device import GraphInputError, get_device


def _executor(ref: bool = False, rows: int = 3):
    """``rows=-1``: x's first dim is dynamic."""
    b = GraphBuilder("direct")
    x = b.data(torch.float32, (rows, 4), "x", ref=ref)
    w = b.data(torch.float32, (4, 4), "w")
    (y,) = b.op("MatMulV2", "mm", [x, w], {"transpose_x1": False, "transpose_x2": False},
                [(torch.float32, (rows, 4))])
    (z,) = b.op("Relu", "relu", [y], {}, [(torch.float32, (rows, 4))])
    if ref:
        b.op("Assign", "assign", [x, z], {}, [(torch.float32, (rows, 4))])
    b.output([z])
    g = b.build()
    module = load_executor(executor_source(g, "host"), g.name)
    return module.Executor(get_device("host"), to_air(g))


def _ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w)


@pytest.mark.parametrize("rows", [3, -1])
def test_direct_call_matches_the_binding_path_bitwise(rows):
    ex = _executor(rows=rows)
    direct = ex.direct
    assert direct is not None  # a static or dynamic graph on the host device
    try:
        w = torch.randn(4, 4)
        for n in (3, 5, 1):
            x = torch.randn(3 if rows > 0 else n, 4)
            (a,) = ex.run([x, w])
            ex.direct = None  # the binding path (data buffers, one per input)
            (b,) = ex.run([x, w])
            ex.direct = direct
            assert torch.equal(a, b)
            torch.testing.assert_close(a, _ref(x, w), rtol=1e-6, atol=1e-6)
    finally:
        ex.close()


def test_direct_call_sees_new_and_changed_inputs_and_keeps_none():
    ex = _executor()
    try:
        w = torch.randn(4, 4)
        refs = []
        for _ in range(3):
            x = torch.randn(3, 4)
            torch.testing.assert_close(ex.run([x, w])[0], _ref(x, w), rtol=1e-6, atol=1e-6)
            x.mul_(-2)  # same tensor, new values
            torch.testing.assert_close(ex.run([x, w])[0], _ref(x, w), rtol=1e-6, atol=1e-6)
            refs.append(weakref.ref(x))
            del x
            gc.collect()
        assert all(r() is None for r in refs)  # nothing of a call outlives it
        assert ex.bound == [None, None]  # and no data buffer was bound
        wt = torch.randn(4, 4).t()  # non-contiguous: passed as a contiguous copy
        x = torch.randn(3, 4)
        torch.testing.assert_close(ex.run([x, wt])[0], _ref(x, wt), rtol=1e-6, atol=1e-6)
    finally:
        ex.close()


def test_binding_path_then_direct_call_releases_what_was_bound():
    """A call that needs the binding path (a written input that is not contiguous: bound
    through a copy, written back) leaves its inputs bound; the next direct call unbinds
    them, so that input is not kept alive."""
    ex = _executor(ref=True)
    try:
        w = torch.randn(4, 4)
        x = torch.randn(4, 3).t()  # RefData input, non-contiguous
        want = _ref(x, w)
        (out,) = ex.run([x, w])
        torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(x, want, rtol=1e-6, atol=1e-6)  # written back
        assert ex.held
        y = torch.randn(3, 4)
        want = _ref(y, w)
        (out,) = ex.run([y, w])
        torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(y, want, rtol=1e-6, atol=1e-6)  # written in place
        assert not ex.held and ex.bound == [None, None]
    finally:
        ex.close()


@pytest.mark.parametrize("rows", [3, -1])
@pytest.mark.parametrize("bad", [torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 3),
                                 torch.randn(3, 4, device="meta"), 3.0, torch.randn(3, 4, 1),
                                 torch.randn(4)])
def test_a_wrong_input_still_gets_the_binding_paths_error(bad, rows):
    """For a dynamic graph too: a wrong static dim or rank is not a dynamic size."""
    ex = _executor(rows=rows)
    try:
        with pytest.raises(GraphInputError, match=r"input 0 \('x'\)"):
            ex.run([bad, torch.randn(4, 4)])
    finally:
        ex.close()
