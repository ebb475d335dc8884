"""The host device's in-place execution of ``Assign(ref, Add(ref, x))`` and
``Assign(ref, AxpyV2(ref, x, c))`` (runtime/assign_steps.py): a compiled SGD step updates
each parameter with one add into its own memory (all of them in one foreach add), bitwise
what the same graph gives op by op."""

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.runtime import assign_steps  # noqa: E402
from npu_inductor.runtime.host_model import HostModel  # noqa: E402


def _sgd_step_model():
    """The host model of a compiled SGD step over a small Linear, and its inputs."""
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(3, 8)).sum().backward()
    torch._dynamo.reset()
    step = torch.compile(opt.step, backend="npu")
    with record_graphs() as graphs:
        step()
    (graph,) = graphs
    loaded = graph.executor.device.acl.models[graph.executor.model_id]
    seen = []
    orig = loaded.execute
    loaded.execute = lambda xs: seen.append([x.clone() for x in xs]) or orig(xs)
    before = [p.detach().clone() for p in model.parameters()]
    ptrs = [p.data_ptr() for p in model.parameters()]
    step()
    for p, b, ptr in zip(model.parameters(), before, ptrs):  # in place, SGD's update
        assert p.data_ptr() == ptr
        torch.testing.assert_close(p.detach(), b - 0.1 * p.grad, rtol=1e-6, atol=1e-7)
    return loaded, seen[-1]


def test_sgd_update_is_one_add_into_the_parameter():
    loaded, inputs = _sgd_step_model()
    fused = HostModel(loaded.graph, loaded.allocator, fuse_attention=True)
    plain = HostModel(loaded.graph, loaded.allocator, fuse_attention=False)
    (update,) = [st for st in fused.steps if isinstance(st.fn, assign_steps.ForeachAxpy)]
    assert len(update.args[0]) == 2 and len(update.chain) == 4  # 2 x (AxpyV2, Assign)
    assert not {"Add", "Mul", "AxpyV2"} & {st.op.type for st in fused.steps}
    assert "AxpyV2" in {st.op.type for st in plain.steps}  # the GE graph is unchanged
    a, b = [x.clone() for x in inputs], [x.clone() for x in inputs]
    ptrs = [x.data_ptr() for x in a]
    fused.execute(a)
    plain.execute(b)
    assert [x.data_ptr() for x in a] == ptrs
    changed = [i for i, (x, y) in enumerate(zip(a, inputs)) if not torch.equal(x, y)]
    assert len(changed) == 2  # weight and bias written in place
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_add_into_rejects_a_growing_broadcast():
    ref = torch.zeros(3)
    try:
        assign_steps.add_into(ref, torch.ones(2, 3))
    except ValueError as e:
        assert "added into" in str(e)
    else:
        raise AssertionError("a sum larger than ref was accepted")


def test_foreach_update_batches_under_the_byte_cap(monkeypatch):
    """Batches of at most FOREACH_BYTES of products (a larger tensor alone), written to one
    kept scratch buffer, bitwise the per-parameter update, call after call."""
    monkeypatch.setattr(assign_steps, "FOREACH_BYTES", 100)
    assert assign_steps._batches([40, 40, 40, 200, 10]) == [(0, 2), (2, 3), (3, 4), (4, 5)]
    shapes = [(10,), (2, 5), (10,), (50,), (2,)]
    update = assign_steps.ForeachUpdate([(torch.float32, s) for s in shapes])
    assert update.batches == [(0, 2), (2, 3), (3, 4), (4, 5)]
    refs = [torch.randn(s) for s in shapes]
    c = torch.tensor(-0.37)
    for _ in range(2):
        grads = [torch.randn_like(r) for r in refs]
        want = [r + g * c for r, g in zip(refs, grads)]
        got = update(refs, grads, c)
        assert all(a is b for a, b in zip(got, refs))
        assert all(torch.equal(a, b) for a, b in zip(got, want))
    scratch = {o.untyped_storage().data_ptr() for outs in update._scratch() for o in outs}
    assert len(scratch) == 1


def test_foreach_update_rejects_a_shape_it_was_not_compiled_for():
    update = assign_steps.ForeachUpdate([(torch.float32, (3,)), (torch.float32, (2,))])
    try:
        update([torch.zeros(3), torch.zeros(3)], [torch.ones(3), torch.ones(3)],
               torch.tensor(1.0))
    except ValueError as e:
        assert "compiled for" in str(e)
    else:
        raise AssertionError("a parameter of another shape was updated")


def test_bf16_sgd_step_rounds_each_update_once():
    """``p.add_(g, alpha=-lr)`` lowers to AxpyV2 (torchair's choice): in bf16 the compiled
    step equals eager's one-rounding update with the bf16 alpha, bitwise (Mul then Add
    would round the product first)."""
    torch.manual_seed(0)
    model = nn.Linear(64, 32).bfloat16()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(5, 64, dtype=torch.bfloat16)).float().square().sum().backward()
    torch._dynamo.reset()
    step = torch.compile(opt.step, backend="npu", options={"fallback": "error"})
    alpha = float(torch.tensor(-0.1, dtype=torch.bfloat16))
    for _ in range(2):
        want = [p.detach().add(p.grad, alpha=alpha) for p in model.parameters()]
        step()
        for p, w in zip(model.parameters(), want):
            assert torch.equal(p.detach(), w)


def test_foreach_axpy_rejects_a_shape_it_was_not_compiled_for():
    update = assign_steps.ForeachAxpy([(torch.float32, (3,)), (torch.float32, (2,))])
    try:
        update((torch.zeros(3), torch.zeros(3)), (torch.ones(3), torch.ones(3)),
               torch.tensor(1.0))
    except ValueError as e:
        assert "compiled for" in str(e)
    else:
        raise AssertionError("a parameter of another shape was updated")
