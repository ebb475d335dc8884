"""Static memory plans: every plan of the test models is valid and near the lower bound,
the models still match eager executing in the planned workspace, and a wrong plan would
be caught (the workspace is really used)."""

from __future__ import annotations

import json
import random

import pytest
import torch
from harness import check_fn, check_model, record_graphs
from models import MODEL_NAMES, make

from npu_inductor.runtime.memory_plan import (
    ALIGN,
    MemoryPlan,
    PlanError,
    PlanStep,
    lower_bound,
    plan_memory,
    validate,
)

MAX_RATIO = 1.10
CASES = [(m, t) for m in MODEL_NAMES for t in (False, True)]


def host_model(compiled):
    ex = compiled.executor
    return ex.device.acl.models[ex.model_id]


@pytest.mark.parametrize("name,train", CASES, ids=[f"{m}-{'train' if t else 'eval'}"
                                                   for m, t in CASES])
def test_model_plans_are_valid_and_near_lower_bound(name, train):
    model, inputs = make(name)
    graphs = check_model(model, inputs, train=train)  # matches eager with planning on
    for g in graphs:
        m = host_model(g)
        assert m.plan is not None, f"{g.name}: not planned: {m.plan_error}"
        validate(m.plan_steps, m.plan)
        p = m.plan
        print(f"{name:10s} {g.name:16s} workspace {p.workspace_bytes:7d} B  lower bound "
              f"{p.lower_bound:7d} B  naive {p.naive_bytes:7d} B  ratio {p.ratio:.3f}")
        assert p.lower_bound <= p.workspace_bytes <= MAX_RATIO * p.lower_bound, g.name
        assert p.workspace_bytes <= p.naive_bytes


@pytest.mark.parametrize("name", ["mlp", "llama"])
def test_models_match_eager_with_planning_off(name):
    model, inputs = make(name)
    graphs = check_model(model, inputs, train=True, options={"memory_plan": False})
    assert all(host_model(g).plan is None for g in graphs)


def _mlp_like(x, w1, w2):
    h = torch.relu(x @ w1) * 2.0 + 1.0
    return (h @ w2).reshape(-1).neg(), torch.tanh(h).sum(0)  # (a bare view output is no
    # GE output of its own: lowering/output_views.py)


def _inputs():
    torch.manual_seed(0)
    return torch.randn(8, 16), torch.randn(16, 32), torch.randn(32, 8)


def test_wrong_plan_corrupts_results():
    """Planned intermediates really live in the workspace: collapsing every offset to 0
    (tensors alive together now share bytes) must break the result."""
    graphs = check_fn(_mlp_like, *_inputs())
    m = host_model(graphs[0])
    assert m.plan is not None and len(m.plan.offsets) >= 3
    good = [t.clone() for t in m.execute(list(_inputs()))]
    m.plan.offsets = dict.fromkeys(m.plan.offsets, 0)
    m._views = None
    with pytest.raises(PlanError):
        validate(m.plan_steps, m.plan)
    bad = m.execute(list(_inputs()))
    assert any(not torch.equal(a, b) for a, b in zip(good, bad))


def test_outputs_survive_the_next_run_and_do_not_alias_inputs():
    x, w1, w2 = _inputs()
    f = torch.compile(lambda x, w1, w2: (torch.relu(x @ w1), (x @ w1).sum(0), x + 1),
                      backend="npu")
    first = f(x, w1, w2)
    kept = [t.clone() for t in first]
    f(x * 3, w1 * 3, w2)  # a second run reuses the same workspace
    for a, b in zip(first, kept):
        assert torch.equal(a, b), "a returned output was overwritten by the next run"
    inputs = {t.untyped_storage().data_ptr() for t in (x, w1, w2)}
    assert not {t.untyped_storage().data_ptr() for t in first} & inputs


def test_inputs_are_bound_zero_copy_and_never_written():
    x, w1, w2 = _inputs()
    saved = [t.clone() for t in (x, w1, w2)]
    check_fn(lambda x, w1, w2: torch.relu(x @ w1 + 1.0) @ w2, x, w1, w2)
    for a, b in zip((x, w1, w2), saved):
        assert torch.equal(a, b)


def test_memory_plan_json_in_dump_dir(tmp_path):
    check_fn(_mlp_like, *_inputs(), options={"dump_dir": str(tmp_path)})
    plans = list(tmp_path.rglob("memory_plan.json"))
    assert len(plans) == 1
    data = json.loads(plans[0].read_text())
    assert data["planned"] is True
    for key in ("workspace_bytes", "lower_bound_bytes", "naive_bytes", "buffers"):
        assert key in data
    assert data["lower_bound_bytes"] <= data["workspace_bytes"] <= data["naive_bytes"]
    assert all(b["tensors"] for b in data["buffers"])


# ---- the planner on random graphs ------------------------------------------------------------
def _random_steps(rng: random.Random, n: int) -> tuple[list[PlanStep], set[int]]:
    """A random DAG: each step reads 1-3 earlier slots (or graph inputs 0..3)."""
    steps, slots, next_slot = [], [0, 1, 2, 3], 4
    sig = {s: (torch.float32, (4,)) for s in slots}
    for _ in range(n):
        ins = tuple(rng.sample(slots, min(len(slots), rng.randint(1, 3))))
        op = rng.choice(["Add", "MatMulV2", "Reshape", "Mul", "Split"])
        nout = 2 if op == "Split" else 1
        outs = tuple(range(next_slot, next_slot + nout))
        next_slot += nout
        shape = (4,) if rng.random() < 0.5 else (rng.randint(1, 64),)
        out_sig = sig[ins[0]] if op in ("Reshape", "Add") else (torch.float32, shape)
        for s in outs:
            sig[s] = out_sig
        nbytes = tuple(out_sig[1][0] * 4 for _ in outs)
        steps.append(PlanStep(op, ins, outs, nbytes, tuple(sig[s] for s in outs),
                              tuple(sig[s] for s in ins), writes_early=op in ("Add", "MatMulV2")))
        slots.extend(outs)
    return steps, set(range(4, next_slot)) - set(rng.sample(range(4, next_slot), 2))


@pytest.mark.parametrize("seed", range(30))
def test_random_plans_validate(seed):
    steps, planned = _random_steps(random.Random(seed), 40)
    plan = plan_memory(steps, planned)
    validate(steps, plan)
    assert plan.lower_bound <= plan.workspace_bytes
    assert all(off % ALIGN == 0 for off in plan.offsets.values())


def test_validator_rejects_overlap_of_live_tensors():
    steps = [PlanStep("MatMulV2", (0,), (1,), (256,)), PlanStep("MatMulV2", (0,), (2,), (256,)),
             PlanStep("Add", (1, 2), (3,), (256,))]
    plan = plan_memory(steps, {1, 2})
    validate(steps, plan)
    broken = MemoryPlan({1: 0, 2: 128}, plan.nbytes, plan.buffers, 512, plan.lower_bound,
                        plan.naive_bytes, "broken")
    with pytest.raises(PlanError):
        validate(steps, broken)


def test_lower_bound_and_inplace_on_a_chain():
    # x -> a = x@w -> b = a + 1 (in place over a) -> c = b@w: a and b share bytes
    sig = (torch.float32, (8, 8))
    steps = [PlanStep("MatMulV2", (0, 9), (1,), (256,), (sig,), (sig, sig), True),
             PlanStep("Add", (1, 8), (2,), (256,), (sig,), (sig, sig), True),
             PlanStep("MatMulV2", (2, 9), (3,), (256,), (sig,), (sig, sig), True)]
    plan = plan_memory(steps, {1, 2, 3})
    validate(steps, plan)
    assert plan.inplace == {2: 1} and plan.offsets[1] == plan.offsets[2]
    assert plan.workspace_bytes == plan.lower_bound == 512 == lower_bound(plan.buffers)


def test_execute_with_inputs_that_require_grad():
    """out= kernels reject autograd inputs; the device runs its kernels without autograd."""
    x, w1, w2 = _inputs()
    graphs = check_fn(_mlp_like, x, w1, w2)
    m = host_model(graphs[0])
    args = [t.requires_grad_() for t in (x.clone(), w1.clone(), w2.clone())]
    outs = m.execute(args)
    for a, b in zip(outs, _mlp_like(x, w1, w2)):
        torch.testing.assert_close(a, b.reshape(a.shape), rtol=1e-5, atol=1e-5)


def test_dynamic_shapes_run_unplanned_with_a_reason():
    x, w1, w2 = _inputs()
    f = torch.compile(_mlp_like, backend="npu", dynamic=True)
    with record_graphs() as graphs:
        for n in (8, 5):
            for a, b in zip(f(x[:n], w1, w2), _mlp_like(x[:n], w1, w2)):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    m = host_model(graphs[0])
    assert m.plan is None and "dynamic" in m.plan_error
