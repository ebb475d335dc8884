"""The generated executor folds a dynamic graph's ``Reshape(x, Pack) -> MatMulV2`` pairs
into one ``torch.matmul`` on the 3-D input (``runtime/linear_fold.py``): results bitwise
equal to the interpreter's op-by-op run, and eager's."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.benchmarks.zoo import Llama  # noqa: E402
from npu_inductor.runtime import host_codegen, linear_fold  # noqa: E402


@pytest.fixture(scope="module")
def compiled():
    torch.manual_seed(0)
    model = Llama(vocab=64, hidden=32, heads=4, kv_heads=2, layers=2, ffn=48, max_pos=32).eval()
    torch._dynamo.reset()
    with record_graphs() as graphs, torch.no_grad():
        step = torch.compile(model, backend="npu", dynamic=True)
        step(torch.randint(0, 64, (2, 9)))
        step(torch.randint(0, 64, (2, 11)))
    ex = graphs[-1].executor
    return model, step, ex.device.acl.models[ex.model_id]


def test_plan_folds_the_linears_of_a_dynamic_llama(compiled):
    _, _, hm = compiled
    flat, mms = linear_fold.plan(hm)
    types = [hm.bound[k].step.op.type for k in mms]
    # per layer q, k, v, gate, up, down, and the LM head; o reads the heads' Transpose
    assert types == ["MatMulV2"] * 13, types
    assert all(hm.bound[k].step.op.type == "Reshape" for k in flat)
    src = host_codegen.host_model_source(hm)[0]
    assert src.count("= matmul(") == 13 and src.count("= mm(") == 2


@pytest.mark.parametrize("n", [3, 17])
def test_folded_run_equals_interpreter_and_eager(compiled, n, monkeypatch):
    model, step, _ = compiled
    ids = torch.randint(0, 64, (2, n), generator=torch.Generator().manual_seed(n))
    outs = {}
    with torch.no_grad():
        for flag in ("1", "0"):
            monkeypatch.setenv(host_codegen.ENV_FLAG, flag)
            outs[flag] = step(ids)
        assert torch.equal(outs["1"], outs["0"])
        torch.testing.assert_close(outs["1"], model(ids), rtol=1e-5, atol=1e-5)
