"""The training graphs' kernels with ``out=``: ``RmsNormGrad`` and
``RotaryPositionEmbeddingGrad`` take an ``out=`` tuple (``MULTI_OUT_KERNELS``),
``SwiGluGrad``, ``SoftmaxGrad``, ``Log`` and ``Fill`` a single ``out=`` (``OUT_KERNELS``), so
a training step's backward graph writes their planned results into the workspace instead of
copying them there, also when another result of the same kernel is a graph output
(``host_model._can_out_multi``). A ``ConcatV2`` with a Const axis reads the axis once at load
(its specialized kernel)."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.benchmarks.zoo import Llama  # noqa: E402
from npu_inductor.runtime import host_codegen  # noqa: E402
from npu_inductor.runtime.kernels import KERNELS, MULTI_OUT_KERNELS, OUT_KERNELS  # noqa: E402

GRADS = ("RmsNormGrad", "RotaryPositionEmbeddingGrad", "SwiGluGrad", "SoftmaxGrad")


def _cases(dtype: torch.dtype, d: int) -> dict:
    g = torch.Generator().manual_seed(d)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype)
    x, dy = r(2, 5, 16), r(2, 5, 16)
    rstd = (x.float().square().mean(-1, keepdim=True) + 1e-6).rsqrt()
    rot_dy, cos, sin, rot_x = r(2, 5, 4, d), r(1, 5, 1, d), r(1, 5, 1, d), r(2, 5, 4, d)
    probs = torch.softmax(r(2, 3, 5, 5).float(), -1).to(dtype)
    return {"RmsNormGrad": ((dy, x, rstd, r(16)), {}),
            "RotaryPositionEmbeddingGrad": ((rot_dy, cos, sin), {"mode": 0}),
            "RotaryPositionEmbeddingGrad+x": ((rot_dy, cos, sin, rot_x), {"mode": 0}),
            "SwiGluGrad": ((r(2, 5, 8), x), {"dim": -1}),
            "SoftmaxGrad": ((probs, r(2, 3, 5, 5)), {"axes": [-1]}),
            "Log": ((x.abs() + 0.5,), {}),
            "Log+base": ((x.abs() + 0.5,), {"base": 3.0, "scale": 2.0, "shift": 0.25}),
            "Fill": ((torch.tensor([2, 3, 4]), r(1)[0]), {})}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("d", [8, 7], ids=["even", "odd"])
@pytest.mark.parametrize("case", ["RmsNormGrad", "RotaryPositionEmbeddingGrad",
                                  "RotaryPositionEmbeddingGrad+x"])
def test_grad_out_tuple_writes_in_place_and_matches(case, d, dtype):
    """Every result written into its given tensor, bitwise what the kernel returns without
    ``out=``; a None entry is allocated as before."""
    op = case.split("+")[0]
    assert op in MULTI_OUT_KERNELS
    args, attrs = _cases(dtype, d)[case]
    ref = KERNELS[op](*args, **attrs)
    outs = tuple(torch.full(t.shape, float("nan"), dtype=t.dtype) for t in ref)
    got = KERNELS[op](*args, out=outs, **attrs)
    for given, result, want in zip(outs, got, ref):
        assert result.data_ptr() == given.data_ptr()
        assert given.dtype == want.dtype and torch.equal(given, want), case
    some = tuple(None if i else torch.empty(t.shape, dtype=t.dtype) for i, t in enumerate(ref))
    for result, want in zip(KERNELS[op](*args, out=some, **attrs), ref):
        assert torch.equal(result, want), case


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", ["SwiGluGrad", "SoftmaxGrad", "Log", "Log+base", "Fill"])
def test_single_out_matches(case, dtype):
    """Single-output kernels of the training graphs (bf16 training: Log, Fill) with ``out=``:
    bitwise their result without it."""
    op = case.split("+")[0]
    assert op in OUT_KERNELS
    args, attrs = _cases(dtype, 8)[case]
    want = KERNELS[op](*args, **attrs)
    given = torch.full(want.shape, float("nan"), dtype=want.dtype)
    got = KERNELS[op](*args, out=given, **attrs)
    assert got.data_ptr() == given.data_ptr() and torch.equal(given, want)


@pytest.fixture(scope="module")
def llama():
    torch.manual_seed(0)
    model = Llama(vocab=64, hidden=32, heads=4, kv_heads=2, layers=2, ffn=48, max_pos=16)
    return model, torch.randint(0, 64, (2, 9))


def _train_step(model, ids):
    """One compiled forward + backward; (the backward's host model, loss, grads)."""
    torch._dynamo.reset()
    model.zero_grad(set_to_none=True)
    with record_graphs() as graphs:
        loss = torch.compile(model, backend="npu", dynamic=False)(ids).float().square().mean()
        loss.backward()
    ex = [g for g in graphs if "backward" in g.name][-1].executor
    grads = [p.grad.clone() for p in model.parameters()]
    return ex.device.acl.models[ex.model_id], loss.detach(), grads


@pytest.mark.parametrize("codegen", ["1", "0"], ids=["generated", "interpreter"])
def test_training_backward_copies_no_grad_kernel_result(llama, codegen, monkeypatch):
    """The backward graph writes the grad kernels' planned results in place: no ``store`` in
    the generated code, none in the interpreter; loss and gradients bitwise as on the other
    host path and close to eager."""
    monkeypatch.setenv(host_codegen.ENV_FLAG, codegen)
    from npu_inductor.runtime import host_model as hm_module
    stored = []
    original = hm_module._store
    monkeypatch.setattr(hm_module, "_store", lambda r, dst: stored.append(dst) or original(r, dst))
    model, ids = llama
    hm, loss, grads = _train_step(model, ids)
    assert hm.plan is not None
    fused = [b for b in hm.bound if b.step.op.type in GRADS]
    assert {b.step.op.type for b in fused} == set(GRADS)
    assert all(b.use_out for b in fused), [(b.step.op.type, b.dests) for b in fused]
    # a kernel with a planned result next to a graph output (RmsNormGrad's dgamma)
    assert any({d[0] for d in b.dests} >= {"ws", "graph"} for b in fused)
    if codegen == "1":
        assert hm._codegen[2] is not None and "store(" not in hm.codegen_source
    else:
        assert stored == []
    model.zero_grad(set_to_none=True)
    eager = model(ids).float().square().mean()
    eager.backward()
    torch.testing.assert_close(loss, eager.detach(), rtol=1e-5, atol=1e-6)
    for got, p in zip(grads, model.parameters()):
        torch.testing.assert_close(got, p.grad, rtol=1e-5, atol=1e-5)


def test_training_generated_and_interpreter_equal(llama, monkeypatch):
    model, ids = llama
    runs = []
    for flag in ("1", "0"):
        monkeypatch.setenv(host_codegen.ENV_FLAG, flag)
        runs.append(_train_step(model, ids))
    assert torch.equal(runs[0][1], runs[1][1])
    for a, b in zip(runs[0][2], runs[1][2]):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("axis", [torch.tensor(1), torch.tensor([-1])], ids=["0d", "1d"])
def test_concat_const_axis_read_once(axis, dtype):
    """A Const axis specializes ``ConcatV2`` (no ``int()`` of the axis per call), bitwise the
    generic kernel, with and without ``out=``; a runtime axis keeps the generic kernel."""
    from npu_inductor.runtime.kernels import RUNTIME, SPECIALIZERS
    spec = SPECIALIZERS["ConcatV2"]
    fn = spec([RUNTIME, axis.tolist()], {"N": 2})
    assert fn is not None and fn is not KERNELS["ConcatV2"]
    assert spec([RUNTIME, RUNTIME], {"N": 2}) is None
    xs = [torch.randn(2, 3, 4).to(dtype), torch.randn(2, 3, 4).to(dtype)]
    want = KERNELS["ConcatV2"](xs, axis, N=2)
    assert torch.equal(fn(xs, "ignored", N=2), want)
    given = torch.empty(want.shape, dtype=dtype)
    assert fn(xs, "ignored", N=2, out=given) is given and torch.equal(given, want)
