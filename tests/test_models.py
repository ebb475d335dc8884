"""The four reference models match eager, forward and backward, in float32."""

import pytest
from harness import check_model
from models import make

from npu_inductor.ge.device_rules import find_violations
from npu_inductor.ge.op_specs import get_spec

# (model, train) pairs; train=True also compares every parameter gradient.
CASES = [(m, t) for m in ("mlp", "cnn", "bert", "llama", "llama_tied") for t in (False, True)]


@pytest.mark.parametrize("name,train", CASES, ids=[f"{m}-{'train' if t else 'eval'}"
                                                   for m, t in CASES])
def test_model_matches_eager(name, train):
    model, inputs = make(name)
    graphs = check_model(model, inputs, train=train, rtol=1e-5, atol=1e-5)
    for g in graphs:
        for op in g.lowered.graph.ops:
            get_spec(op.type)  # every emitted op type is in the op-spec table
        assert find_violations(g.lowered.graph) == []  # device rules (Ascend910B1)
    if train:
        kinds = {g.name.split("_")[0] for g in graphs}
        assert {"forward", "backward"} <= kinds, kinds
