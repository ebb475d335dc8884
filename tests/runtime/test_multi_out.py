"""Multi-output host kernels with an ``out=`` tuple (``RmsNorm``, ``AddRmsNorm``,
``ApplyRotaryPosEmb``): they write their planned results into the workspace, so a static
graph copies none of them there (``MULTI_OUT_KERNELS``, ``host_model._can_out_multi``)."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.benchmarks.zoo import Llama  # noqa: E402
from npu_inductor.runtime import host_codegen  # noqa: E402
from npu_inductor.runtime.kernels import KERNELS, MULTI_OUT_KERNELS  # noqa: E402

FUSED = ("RmsNorm", "AddRmsNorm", "ApplyRotaryPosEmb")


def _cases(dtype: torch.dtype, d: int) -> dict:
    g = torch.Generator().manual_seed(d)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype)
    x, x2, gamma = r(2, 5, 16), r(2, 5, 16), r(16)
    q, k, cos, sin = r(2, 5, 4, d), r(2, 5, 2, d), r(1, 5, 1, d), r(1, 5, 1, d)
    return {"RmsNorm": ((x, gamma), {"epsilon": 1e-5}),
            "AddRmsNorm": ((x, x2, gamma), {"epsilon": 1e-5}),
            "ApplyRotaryPosEmb": ((q, k, cos, sin), {"layout": 1, "rotary_mode": "half"})}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("d", [8, 7], ids=["even", "odd"])
@pytest.mark.parametrize("op", FUSED)
def test_out_tuple_writes_in_place_and_matches(op, d, dtype):
    """Every result written into its given tensor, bitwise what the kernel returns without
    ``out=``; a None entry is allocated (what a dropped output gets)."""
    assert op in MULTI_OUT_KERNELS
    args, attrs = _cases(dtype, d)[op]
    ref = KERNELS[op](*args, **attrs)
    outs = tuple(torch.full_like(t, float("nan")) for t in ref)
    got = KERNELS[op](*args, out=outs, **attrs)
    for given, result, want in zip(outs, got, ref):
        assert result.data_ptr() == given.data_ptr()
        assert given.dtype == want.dtype and torch.equal(given, want), op
    some = tuple(None if i == 1 else torch.empty_like(t) for i, t in enumerate(ref))
    for result, want in zip(KERNELS[op](*args, out=some, **attrs), ref):
        assert torch.equal(result, want)


@pytest.fixture(scope="module")
def llama():
    torch.manual_seed(0)
    model = Llama(vocab=64, hidden=32, heads=4, kv_heads=2, layers=2, ffn=48, max_pos=16).eval()
    return model, torch.randint(0, 64, (2, 9))


def _static_host_model(model, ids):
    torch._dynamo.reset()
    with record_graphs() as graphs, torch.no_grad():
        out = torch.compile(model, backend="npu", dynamic=False)(ids)
    ex = graphs[-1].executor
    return ex.device.acl.models[ex.model_id], out


@pytest.mark.parametrize("codegen", ["1", "0"], ids=["generated", "interpreter"])
def test_static_llama_copies_no_fused_result(llama, codegen, monkeypatch):
    """In a memory-planned graph the fused ops' results are not copied into the workspace
    (no ``store`` of them in the generated code, none in the interpreter), and the outputs
    still match eager."""
    monkeypatch.setenv(host_codegen.ENV_FLAG, codegen)
    from npu_inductor.runtime import host_model as hm_module
    stored = []
    original = hm_module._store
    monkeypatch.setattr(hm_module, "_store", lambda r, dst: stored.append(dst) or original(r, dst))
    model, ids = llama
    hm, out = _static_host_model(model, ids)
    assert hm.plan is not None
    fused = [b for b in hm.bound if b.step.op.type in FUSED]
    assert sorted({b.step.op.type for b in fused}) == sorted(FUSED)
    assert all(b.use_out for b in fused), [(b.step.op.type, b.dests) for b in fused]
    if codegen == "1":
        assert hm._codegen[2] is not None and "store(" not in hm.codegen_source
    else:
        assert stored == []
    with torch.no_grad():
        torch.testing.assert_close(out, model(ids), rtol=1e-5, atol=1e-5)


def test_generated_and_interpreter_equal_with_out_tuples(llama, monkeypatch):
    """The two host paths give bitwise equal outputs for the same loaded plan."""
    model, ids = llama
    results = []
    for flag in ("1", "0"):
        monkeypatch.setenv(host_codegen.ENV_FLAG, flag)
        results.append(_static_host_model(model, ids)[1])
    assert torch.equal(*results)
