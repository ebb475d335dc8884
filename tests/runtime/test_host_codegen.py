"""The generated host executor (runtime/host_codegen.py) against the interpreter and eager."""

import copy
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import check_model, record_graphs  # noqa: E402
from models import make  # noqa: E402

from npu_inductor.runtime import host_codegen  # noqa: E402
from npu_inductor.runtime.host_model import HostExecutionError  # noqa: E402


def _host_model(compiled):
    ex = compiled.executor
    return ex.device.acl.models[ex.model_id]


def _tensors(x):
    return [t for t in torch.utils._pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


@pytest.mark.parametrize("name", ["mlp", "cnn", "bert", "llama"])
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_generated_matches_interpreter_and_eager(name, train, monkeypatch):
    """One loaded model, both paths: bitwise equal outputs (and grads), both match eager."""
    model, inputs = make(name)
    torch._dynamo.reset()
    compiled_model = torch.compile(copy.deepcopy(model).train(train), backend="npu")
    results = {}
    with record_graphs() as graphs, torch.set_grad_enabled(train):
        for flag in ("1", "0"):
            monkeypatch.setenv(host_codegen.ENV_FLAG, flag)
            out = compiled_model(*inputs)
            grads = []
            if train:
                compiled_model.zero_grad()
                sum(t.float().sum() for t in _tensors(out)).backward()
                grads = [p.grad.clone() for p in compiled_model.parameters()]
            results[flag] = (_tensors(out), grads)
            used = [_host_model(g)._codegen[2] is not None for g in graphs]
            assert used and all(u == (flag == "1") for u in used), (flag, used)
    for a, b in zip(*(results[f][0] + results[f][1] for f in ("1", "0"))):
        assert torch.equal(a, b)
    monkeypatch.setenv(host_codegen.ENV_FLAG, "1")
    check_model(model, inputs, train=train)


def test_interpreter_still_matches_eager(monkeypatch):
    monkeypatch.setenv(host_codegen.ENV_FLAG, "0")
    model, inputs = make("llama")
    check_model(model, inputs, train=True)


def _compiled_graph(fn, *inputs):
    torch._dynamo.reset()
    with record_graphs() as graphs:
        torch.compile(fn, backend="npu")(*inputs)
    return graphs[0]


def test_generated_source_is_straight_line():
    def fn(x, y):
        return torch.relu(x @ y + 1).sum(0), x.reshape(-1)

    hm = _host_model(_compiled_graph(fn, torch.randn(3, 4), torch.randn(4, 5)))
    src = hm.codegen_source
    assert "def run(inputs, W, ws_ptr):" in src
    assert "# step 0:" in src and "vals[" not in src
    assert src.count("= k") >= 3  # one kernel call per GE op


def test_error_names_the_ge_op():
    def fn(x, idx):
        return torch.index_select(x, 0, idx) * 2

    compiled = _compiled_graph(fn, torch.randn(4, 3), torch.tensor([0, 1]))
    hm = _host_model(compiled)
    with pytest.raises(HostExecutionError, match=r"GE op .* failed on the host device"):
        hm.execute([torch.randn(4, 3), torch.tensor([0, 9])])  # index out of range


def test_dump_dir_holds_the_generated_executor(tmp_path):
    torch._dynamo.reset()
    fn = torch.compile(lambda x: torch.relu(x) * 2, backend="npu",
                       options={"dump_dir": str(tmp_path)})
    fn(torch.randn(3))
    dumped = list(tmp_path.rglob("host_model.py"))
    assert dumped and "def run(inputs, W, ws_ptr):" in dumped[0].read_text()
