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


@pytest.mark.parametrize("transpose", [False, True])
def test_matmul_graph_output_is_the_fresh_mm_result(transpose, monkeypatch):
    """A 2-D matmul that is a graph output (a backward's weight gradient) is ``mm(...)``'s
    own result, no out= tensor allocated for it: bitwise what the interpreter's out= call
    gives, a fresh contiguous tensor not sharing memory with inputs or other outputs."""
    def fn(x, y):
        a = (x.t() if transpose else x) @ y
        return a, torch.relu(a) @ y.t()

    x, y = torch.randn(4, 4), torch.randn(4, 6)
    compiled = _compiled_graph(fn, x, y)
    hm = _host_model(compiled)
    src = hm.codegen_source
    assert "= mm(" in src and "out=empty(" not in src, src
    outs = {}
    for flag in ("1", "0"):
        monkeypatch.setenv(host_codegen.ENV_FLAG, flag)
        outs[flag] = compiled([x, y])
    assert all(torch.equal(a, b) for a, b in zip(outs["1"], outs["0"]))
    torch.testing.assert_close(outs["1"][0], fn(x, y)[0], rtol=1e-6, atol=1e-6)
    ptrs = {t.untyped_storage().data_ptr() for t in outs["1"]}
    assert all(t.is_contiguous() for t in outs["1"]) and len(ptrs) == 2
    assert not ptrs & {x.untyped_storage().data_ptr(), y.untyped_storage().data_ptr()}
