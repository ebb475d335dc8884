"""The host device's in-place execution of ``Assign(ref, Add(ref, x))`` (runtime/
assign_steps.py): a compiled SGD step updates each parameter with one add into its own
memory (all of them in one foreach multiply and add), bitwise what the same graph gives op
by op."""

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
    (update,) = [st for st in fused.steps if isinstance(st.fn, assign_steps.ForeachUpdate)]
    assert len(update.args[0]) == 2 and len(update.chain) == 6  # 2 x (Mul, Add, Assign)
    assert not {"Add", "Mul"} & {st.op.type for st in fused.steps}
    assert "Add" in {st.op.type for st in plain.steps}  # the GE graph is unchanged
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
    """Batches of at most FOREACH_BYTES of products, bitwise the per-parameter update."""
    monkeypatch.setattr(assign_steps, "FOREACH_BYTES", 100)
    batches = assign_steps._batches([40, 40, 40, 200, 10])
    assert batches == [(0, 2), (2, 3), (3, 4), (4, 5)]
    refs = [torch.randn(10), torch.randn(10), torch.randn(10), torch.randn(50), torch.randn(2)]
    grads = [torch.randn_like(r) for r in refs]
    c = torch.tensor(-0.37)
    want = [r + g * c for r, g in zip(refs, grads)]
    got = assign_steps.ForeachUpdate(batches)(refs, grads, c)
    assert all(a is b for a, b in zip(got, refs))
    assert all(torch.equal(a, b) for a, b in zip(got, want))
