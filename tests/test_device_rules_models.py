"""Every model the suite compiles gives GE graphs with zero device-rule violations for
Ascend910B1, checked on the graph as built and as the device deserializes it: the CI-sized
benchmark zoo here (float32 inference and training, bfloat16 inference, float16 inference
of the transformers), tests/models.py in tests/test_models.py (whose compiles are reused).
The rules also run inside every build; this checks it explicitly, with
``find_violations`` listing every violation rather than the first."""

import pytest
import torch
from harness import STRICT, record_graphs

from npu_inductor.benchmarks.zoo import ZOO
from npu_inductor.ge import from_air, to_air
from npu_inductor.ge.device_rules import find_violations

ZOO_CASES = [(name, mode, dtype) for name, m in ZOO.items() if m.default
             for mode, dtype in [("eval", torch.float32), ("eval", torch.bfloat16)]
             + ([("eval", torch.float16)] if name.startswith(("llama", "bert")) else [])
             + ([("train", torch.float32)] if m.trainable else [])]


def _compile_and_run(model: torch.nn.Module, inputs: tuple, train: bool) -> list:
    torch._dynamo.reset()
    model.train(train)
    compiled = torch.compile(model, backend="npu", options=STRICT)
    with record_graphs() as graphs, torch.set_grad_enabled(train):
        out = compiled(*inputs)
        if train:
            leaves = [t for t in torch.utils._pytree.tree_leaves(out)
                      if isinstance(t, torch.Tensor) and t.requires_grad]
            torch.autograd.backward([t.float().sum() for t in leaves])
    assert graphs, "no GE graph was compiled"
    return graphs


def assert_no_violations(graphs: list) -> set[str]:
    types: set[str] = set()
    for g in graphs:
        for graph in (g.lowered.graph, from_air(to_air(g.lowered.graph))):
            violations = find_violations(graph)
            assert not violations, "\n".join(str(v) for v in violations)
        types |= {op.type for op in g.lowered.graph.ops}
    return types


def _cast(x, dtype):
    return x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x


@pytest.mark.parametrize("name,mode,dtype", ZOO_CASES,
                         ids=[f"{n}-{m}-{str(d).removeprefix('torch.')}"
                              for n, m, d in ZOO_CASES])
def test_zoo_graphs_obey_device_rules(name, mode, dtype):
    model, inputs = ZOO[name].build(2, 0)
    graphs = _compile_and_run(model.to(dtype), tuple(_cast(x, dtype) for x in inputs),
                              mode == "train")
    types = assert_no_violations(graphs)
    if name == "resnet18":  # the conv / batch-norm / pooling families were checked
        assert "Conv2D" in types
        assert types & {"BNInfer", "BatchNormV3"}
