"""One numerics harness: compile with backend="npu", compare with eager, forward and
backward; and a recorder of the GE graphs each compile produced."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import torch

from npu_inductor.compile_fx import COMPILE_HOOKS, CompiledGraph, recording

FP32_RTOL = 1e-5
FP32_ATOL = 1e-5
# A refused or missing converter must fail the test, not run eagerly. A test that means to
# exercise the fallback passes {"fallback": "eager"}. The FX verifier is switched on for every
# test by tests/conftest.py (config.patch), where the few known gaps are listed.
STRICT = {"fallback": "error"}


def strict(options: dict | None = None) -> dict:
    """The harness's compile options: ``STRICT`` unless ``options`` says otherwise, or the
    test is marked ``@pytest.mark.fallback`` (conftest then leaves the default ``eager``)."""
    from npu_inductor import config

    marked = config.resolve().fallback == "eager"  # conftest patches "error" unless marked
    return {**({} if marked else STRICT), **(options or {})}


def random_tensor(shape, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Random test data of any dtype: bools, small signed ints, normal floats."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    if not dtype.is_floating_point:
        return torch.randint(-5, 5, shape, dtype=dtype)
    return torch.randn(shape).to(dtype)


def ge_op_types(graphs: list[CompiledGraph]) -> set[str]:
    return {op.type for g in graphs for op in g.lowered.graph.ops}


def record_graphs() -> contextlib.AbstractContextManager[list[CompiledGraph]]:
    """Collect every CompiledGraph compiled inside the block."""
    return recording(COMPILE_HOOKS)


def host_model_inputs(graphs: list[CompiledGraph], call: Any) -> tuple[Any, list]:
    """The host model of the one GE graph in ``graphs`` and (clones of) the inputs that
    ``call()`` hands it."""
    assert len(graphs) == 1
    ex = graphs[0].executor
    model = ex.device.acl.models[ex.model_id]
    seen: list = []
    orig = model.execute
    model.execute = lambda xs: seen.append([x.clone() for x in xs]) or orig(xs)
    call()
    return model, seen[-1]


def _tree_tensors(x: Any) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def assert_close(actual: Any, expected: Any, rtol: float, atol: float, what: str) -> None:
    a, e = _tree_tensors(actual), _tree_tensors(expected)
    assert len(a) == len(e), f"{what}: {len(a)} tensors vs {len(e)} in eager"
    for i, (x, y) in enumerate(zip(a, e)):
        torch.testing.assert_close(x, y, rtol=rtol, atol=atol,
                                   msg=lambda m, i=i: f"{what}[{i}]: {m}")


def check_model(model: torch.nn.Module, inputs: tuple, *, train: bool = True,
                rtol: float = FP32_RTOL, atol: float = FP32_ATOL,
                options: dict | None = None) -> list[CompiledGraph]:
    """Compiled (strict: ``fallback="error"`` unless ``options`` overrides) vs
    eager: outputs, and with ``train`` every parameter gradient and buffer.
    Returns the GE graphs compiled (at least one, or the GE path did not run)."""
    torch._dynamo.reset()
    eager = copy.deepcopy(model).train(train)
    compiled_model = copy.deepcopy(model).train(train)
    compiled = torch.compile(compiled_model, backend="npu", options=strict(options))
    with record_graphs() as graphs:
        with torch.set_grad_enabled(train):
            expected = eager(*inputs)
            actual = compiled(*inputs)
        assert_close(actual, expected, rtol, atol, "output")
        if train:
            grads = [torch.randn_like(t) for t in _tree_tensors(expected)]
            torch.autograd.backward(_tree_tensors(expected), grads)
            torch.autograd.backward(_tree_tensors(actual), grads)
            pairs = zip(eager.named_parameters(), compiled_model.named_parameters())
            for (name, p), (_, q) in pairs:
                assert q.grad is not None, f"no gradient for {name}"
                assert_close(q.grad, p.grad, rtol, atol, f"grad {name}")
        for (name, b), (_, c) in zip(eager.named_buffers(), compiled_model.named_buffers()):
            assert_close(c, b, rtol, atol, f"buffer {name}")
    assert graphs, "no GE graph was compiled"
    return graphs


def check_fn(fn: Callable, *inputs: Any, rtol: float = FP32_RTOL, atol: float = FP32_ATOL,
             options: dict | None = None) -> list[CompiledGraph]:
    """Compiled (strict unless ``options`` overrides) vs eager for a plain function (forward
    only)."""
    torch._dynamo.reset()
    with record_graphs() as graphs:
        actual = torch.compile(fn, backend="npu", options=strict(options))(*inputs)
    assert_close(actual, fn(*inputs), rtol, atol, "output")
    assert graphs, "no GE graph was compiled"
    return graphs


def check_ge_ops(fn: Callable, *inputs: Any, ge: str | tuple = (), **tolerances: float
                 ) -> list[CompiledGraph]:
    """Compiled with ``fallback="error"`` vs eager; the GE graphs must hold the ``ge`` types."""
    graphs = check_fn(fn, *inputs, **tolerances)
    types = ge_op_types(graphs)
    for t in (ge,) if isinstance(ge, str) else ge:
        assert t in types, f"{t} not in GE graph: {sorted(types)}"
    return graphs


def check_grad(fn: Callable, *inputs: torch.Tensor) -> None:
    """Compiled (fallback="error") vs eager: the output and the gradient of every floating
    input, for a function with one tensor output."""
    torch._dynamo.reset()
    ours = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    ref = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    actual = torch.compile(fn, backend="npu", options=STRICT)(*ours)
    expected = fn(*ref)
    torch.testing.assert_close(actual, expected)
    grad = torch.randn_like(expected)
    actual.backward(grad)
    expected.backward(grad)
    for a, e in zip(ours, ref):
        if e.grad is not None:
            torch.testing.assert_close(a.grad, e.grad)


def check_refused(fn: Callable, *inputs: Any, ops: str | tuple, dtype: str,
                  soc: str = "Ascend910B1", rtol: float = 0.0, atol: float = 0.0) -> None:
    """The dtype gate's explicit refusal: the target SoC has no kernel for ``ops`` (aten
    targets, e.g. ``"aten.lgamma.default"``) at ``dtype`` (GE name, e.g. ``"DOUBLE"``) and no
    exact form exists. With ``fallback="error"`` compiling raises an error naming each op,
    the SoC and the dtype; with ``fallback="eager"`` exactly those ops run in eager (the
    warning says why) and the result is eager's. The caller marks the test
    ``@pytest.mark.fallback``."""
    import warnings

    import pytest

    from npu_inductor.compile_fx import FallbackWarning, record_reports, reset_fallback_warnings

    ops = (ops,) if isinstance(ops, str) else ops
    torch._dynamo.reset()
    with pytest.raises(Exception) as refused:
        torch.compile(fn, backend="npu", options={"fallback": "error"})(*inputs)
    msg = str(refused.value)
    for what in (*ops, soc, f"dtype {dtype}"):
        assert what in msg, f"{what!r} not named by the refusal: {msg[:600]}"
    torch._dynamo.reset()
    reset_fallback_warnings()
    with record_reports() as reports, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FallbackWarning)
        actual = torch.compile(fn, backend="npu", options={"fallback": "eager"})(*inputs)
    fell = {f.target for r in reports for f in r.fallbacks}
    assert fell == set(ops), f"ran in eager: {sorted(fell)}, expected exactly {sorted(ops)}"
    for r in reports:
        for f in r.fallbacks:
            assert soc in f.reason and f"dtype {dtype}" in f.reason, f.reason
    said = " ".join(str(w.message) for w in caught if issubclass(w.category, FallbackWarning))
    for op in ops:
        assert op in said and soc in said, f"no fallback warning names {op} on {soc}: {said}"
    assert_close(actual, fn(*inputs), rtol, atol, "output")
