"""transformers models (tests/hf/archs.py: 12 architectures, tiny configs, random weights)
compiled with backend="npu" under fallback="error" (tests/conftest.py): zero graph breaks,
zero fallbacks, and eager's results. Here one training step each (float32, train mode,
dropout off): the forward outputs (loss, logits or hidden states) and the gradient of every
parameter match eager at 1e-5 relative. Inference: test_hf_inference.py.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from archs import ARCHS, build  # noqa: E402
from harness import assert_close, record_graphs  # noqa: E402

FP32 = {"rtol": 1e-5, "atol": 1e-5}


def _main(out) -> torch.Tensor:
    for key in ("logits", "last_hidden_state"):
        if getattr(out, key, None) is not None:
            return getattr(out, key)
    raise AssertionError(f"no main output in {type(out).__name__}")


def _outputs(out) -> list[torch.Tensor]:
    loss = getattr(out, "loss", None)
    return ([loss] if loss is not None else []) + [_main(out)]


def _compile(model: torch.nn.Module, options: dict | None = None):
    torch._dynamo.utils.counters.clear()
    return torch.compile(model, backend="npu", options=options)


def _graph_breaks() -> dict:
    return dict(torch._dynamo.utils.counters["graph_break"])


def _backward(out) -> None:
    loss = getattr(out, "loss", None)
    if loss is None:  # encoders: a fixed random cotangent on the hidden states
        h = _main(out)
        gen = torch.Generator().manual_seed(1)
        h.backward(torch.randn(h.shape, generator=gen, dtype=h.dtype))
    else:
        loss.backward()


@pytest.mark.parametrize("name", list(ARCHS))
def test_training_step(name):
    model, inputs = build(ARCHS[name])
    model.train()
    compiled_model, _ = build(ARCHS[name])
    compiled_model.train()
    compiled = _compile(compiled_model)
    with record_graphs() as graphs:
        actual = compiled(**inputs)
        _backward(actual)
    expected = model(**inputs)
    _backward(expected)
    assert _graph_breaks() == {}, _graph_breaks()
    assert {g.name.split("_")[0] for g in graphs} >= {"forward", "backward"}
    for i, (a, e) in enumerate(zip(_outputs(actual), _outputs(expected), strict=True)):
        assert_close(a, e, what=f"{name} output {i}", **FP32)
    pairs = zip(model.named_parameters(), compiled_model.named_parameters(), strict=True)
    for (pname, p), (_, q) in pairs:
        if not p.requires_grad:  # e.g. Whisper's fixed sinusoidal positions
            assert q.grad is None
            continue
        assert q.grad is not None, f"{name}: no gradient for {pname}"
        assert_close(q.grad, p.grad, what=f"{name} grad {pname}", **FP32)
