"""A dynamic graph's size arithmetic runs once per input-size signature in the generated
host executor (runtime/size_prelude.py): bitwise the op-by-op run, for sizes seen before
and new ones, with the GE graph unchanged."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.benchmarks.zoo import Llama  # noqa: E402
from npu_inductor.runtime import host_codegen, host_model  # noqa: E402


@pytest.fixture(scope="module")
def llama():
    """A one-layer zoo LLaMA under dynamic=True, the graph compiled once (lengths 6, 9)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Llama(vocab=64, hidden=32, heads=4, kv_heads=2, layers=1, ffn=64,
                  max_pos=64).eval()
    compiled = torch.compile(model, backend="npu", dynamic=True)
    with torch.no_grad(), record_graphs() as graphs:
        for n in (6, 9):
            compiled(torch.randint(0, 64, (2, n)))
    assert len(graphs) == 1
    ex = graphs[0].executor
    return model, compiled, ex.device.acl.models[ex.model_id]


def _captured_inputs(compiled, ids):
    """The host model's inputs of one compiled call (and that call's outputs)."""
    seen = []
    original = host_model.HostModel.execute

    def spy(self, inputs):
        seen.append(list(inputs))
        return original(self, inputs)

    host_model.HostModel.execute = spy
    try:
        out = compiled(ids)
    finally:
        host_model.HostModel.execute = original
    return seen[0], out


def test_size_steps_run_in_the_prelude_and_the_graph_keeps_them(llama):
    _, _, hm = llama
    src = hm.codegen_source
    head, run = src.split("    def run(", 1)
    assert "def prelude(" in head
    sizes = [b for b in hm.bound if b.step.op.type in ("Pack", "Mul")
             and b.step.sigs[0][0] in (torch.int32, torch.int64)]
    assert sizes  # the graph computes sizes: Pack / Mul of the size inputs
    for b in sizes:  # ... in the prelude, not in the run
        k = hm.bound.index(b)
        assert f"# step {k}: " in head and f"# step {k}: " not in run
    # the GE graph is what it was: those ops are still its ops (the device runs them)
    names = {op.name for op in hm.graph.ops}
    assert all(b.step.op.name in names for b in sizes)
    assert "scalar_size(" not in run  # no 0-d size tensor is converted per call
    assert "sizes=z" in run  # the fused attention reads its sizes as ints


@pytest.mark.parametrize("lengths", [(5, 12, 5, 9, 12)])
def test_generated_run_is_bitwise_the_interpreter_for_seen_and_new_sizes(llama, lengths):
    model, compiled, hm = llama
    with torch.no_grad():
        for n in lengths:  # 5 and 12 twice: the second call reads the prelude's cache
            ids = torch.randint(0, 64, (2, n))
            inputs, out = _captured_inputs(compiled, ids)
            ref = hm._interpret(inputs, {}, None)  # op by op (fused steps, no codegen)
            gen = hm.execute(inputs)
            assert len(ref) == len(gen) and all(torch.equal(a, b) for a, b in zip(ref, gen))
            torch.testing.assert_close(out, model(ids), rtol=1e-5, atol=1e-5)


def test_a_training_forward_hands_its_sliced_tables_over(llama):
    """With grad on, the forward graph returns the sliced rotary tables (saved for the
    backward): a StridedSliceV2 whose end comes from the prelude, handed to the caller."""
    model, compiled, _ = llama
    for n in (5, 10, 5):
        ids = torch.randint(0, 64, (2, n))
        out, ref = compiled(ids), model(ids)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        out.sum().backward()  # the saved slices feed the backward graph


def test_a_stale_size_cannot_be_read(llama):
    """The cache is keyed by the size inputs' values: the prelude's values for one length
    are never used for another (the StridedSlice of the rotary table would be wrong)."""
    _, compiled, hm = llama
    with torch.no_grad():
        a, _ = _captured_inputs(compiled, torch.randint(0, 64, (2, 7)))
        b, _ = _captured_inputs(compiled, torch.randint(0, 64, (2, 11)))
        out_a, out_b = hm.execute(a), hm.execute(b)
    assert out_a[0].shape[1] == 7 and out_b[0].shape[1] == 11
    assert torch.equal(out_b[0], hm._interpret(b, {}, None)[0])


def test_an_error_in_a_run_step_still_names_its_ge_op(llama):
    """The generated lines map back to steps by their index (the prelude's steps are
    written before the run's)."""
    _, compiled, hm = llama
    source, closure, lines = host_codegen.host_model_source(hm)
    k = next(i for i, b in enumerate(hm.bound) if b.step.op.type == "AddRmsNorm")

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    closure["K"] = list(closure["K"])
    closure["K"][k] = broken
    filename = "<test size prelude>"
    namespace = {}
    exec(compile(source, filename, "exec"), namespace)
    run = host_codegen._guarded(namespace["make"](**closure), hm, filename, lines)
    with torch.no_grad():
        inputs, _ = _captured_inputs(compiled, torch.randint(0, 64, (2, 6)))
    with pytest.raises(host_model.HostExecutionError, match=hm.bound[k].step.op.name):
        run(inputs, {}, None)
