"""Mutation check: the model tests must catch a broken compiler.

Each case breaks one piece of the real compiler — a converter of one op family (made to
raise, or to build a wrong result), one host kernel, or one FX pass — and runs the model
tests' own check (``harness.check_model`` on a reference model from ``models.py``, strict:
``fallback="error"``, verifier on). The check must fail, and the failure must come from the
mutant (its marker in the error, or a numeric mismatch after the mutant ran). The same
checks pass on the real code: that is ``test_models.py``.

Families patched: elementwise (add), activation (the shared Relu/Sigmoid/Tanh/Mish/HardSwish
converter), matmul (npu::matmul, what every Linear becomes), conv (convolution), norm
(native_layer_norm), reduction (sum.dim_IntList), index (embedding), pooling
(max_pool2d_with_indices), fusion (npu::rms_norm), one host kernel (Relu),
one pass (cse).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch
from harness import check_model
from models import make

from npu_inductor import graph_passes
from npu_inductor.graph_passes.common import finish
from npu_inductor.lowering.elementwise import pointwise
from npu_inductor.lowering.registry import CONVERTERS
from npu_inductor.runtime.kernels import KERNELS, SPECIALIZERS

aten = torch.ops.aten
npu = torch.ops.npu
MARK = "deliberately broken by test_mutation"


class Mutant:
    """Counts how often the broken piece ran (a mutant that never ran proves nothing)."""

    def __init__(self) -> None:
        self.calls = 0


def raising_converter(target, monkeypatch, mutant: Mutant) -> None:
    spec = CONVERTERS[target]

    def broken(ctx, *args, **kwargs):
        mutant.calls += 1
        raise RuntimeError(f"{MARK}: {target}")

    monkeypatch.setitem(CONVERTERS, target, dataclasses.replace(spec, fn=broken))


def wrong_converter(target, monkeypatch, mutant: Mutant) -> None:
    """The real converter's graph, then a Neg on its (first) result: a silently wrong
    answer."""
    spec = CONVERTERS[target]

    def broken(ctx, *args, **kwargs):
        mutant.calls += 1
        y = spec.fn(ctx, *args, **kwargs)
        first = y[0] if isinstance(y, (tuple, list)) else y
        wrong = pointwise(ctx, "Neg", [first], first.dtype, suffix="mutant")
        return (wrong, *y[1:]) if isinstance(y, (tuple, list)) else wrong

    monkeypatch.setitem(CONVERTERS, target, dataclasses.replace(spec, fn=broken))


def wrong_kernel(op_type: str, monkeypatch, mutant: Mutant) -> None:
    real = KERNELS[op_type]

    def broken(*args, out=None, **kwargs):
        mutant.calls += 1
        y = real(*args, **kwargs) + 0.5
        return y if out is None else out.copy_(y)

    monkeypatch.setitem(KERNELS, op_type, broken)
    if op_type in SPECIALIZERS:
        monkeypatch.delitem(SPECIALIZERS, op_type)


def _sloppy_cse(gm: torch.fx.GraphModule, config) -> torch.fx.GraphModule:
    """A classic CSE bug: nodes with the same target and output shape are merged even when
    their arguments differ."""
    seen: dict[tuple, torch.fx.Node] = {}
    for node in list(gm.graph.nodes):
        val = node.meta.get("val")
        if node.op != "call_function" or not isinstance(val, torch.Tensor):
            continue
        key = (node.target, tuple(val.shape), val.dtype)
        if key in seen and seen[key].args != node.args:
            _SLOPPY_CALLS.calls += 1
            node.replace_all_uses_with(seen[key])
        else:
            seen.setdefault(key, node)
    return finish(gm)


_SLOPPY_CALLS = Mutant()


def broken_pass(monkeypatch, mutant: Mutant) -> None:
    global _SLOPPY_CALLS
    _SLOPPY_CALLS = mutant
    passes = [_sloppy_cse if p is graph_passes.cse else p for p in graph_passes.PASSES]
    monkeypatch.setattr(graph_passes, "PASSES", passes)


def _activation(monkeypatch, mutant):
    """The shared converter (``register_activation``) behind Relu, Sigmoid, Tanh, Mish and
    HardSwish: each target holds its own closure of it, so all five are broken."""
    for target in (aten.relu.default, aten.sigmoid.default, aten.tanh.default,
                   aten.mish.default, aten.hardswish.default):
        raising_converter(target, monkeypatch, mutant)


# family -> (how to break it, model, train)
CASES: dict[str, tuple[Callable, str, bool]] = {
    "elementwise": (lambda mp, m: raising_converter(aten.add.Tensor, mp, m), "bert", False),
    "activation": (_activation, "mlp", False),
    # fuse_matmul turns every Linear's addmm/mm into npu::matmul, lowered to MatMulV2
    "matmul": (lambda mp, m: wrong_converter(npu.matmul.default, mp, m), "mlp", False),
    "conv": (lambda mp, m: wrong_converter(aten.convolution.default, mp, m), "cnn", False),
    "norm": (lambda mp, m: raising_converter(aten.native_layer_norm.default, mp, m), "bert",
             False),
    "reduction": (lambda mp, m: raising_converter(aten.sum.dim_IntList, mp, m), "mlp", True),
    "index": (lambda mp, m: raising_converter(aten.embedding.default, mp, m), "bert", False),
    "pooling": (lambda mp, m: raising_converter(aten.max_pool2d_with_indices.default, mp, m),
                "cnn", False),
    # a fused op of the fusion passes; npu::flash_attention does not fire on the float32 test
    # LLaMA (checked: the mutant never ran), npu::rms_norm does
    "fusion": (lambda mp, m: wrong_converter(npu.rms_norm.default, mp, m), "llama", False),
    "host_kernel": (lambda mp, m: wrong_kernel("Relu", mp, m), "mlp", False),
    "pass": (lambda mp, m: broken_pass(mp, m), "bert", False),
}


@pytest.mark.parametrize("family", list(CASES))
def test_model_check_catches_a_broken(family, monkeypatch):
    breaker, model_name, train = CASES[family]
    mutant = Mutant()
    breaker(monkeypatch, mutant)
    model, inputs = make(model_name)
    with pytest.raises(Exception) as caught:  # noqa: B017, PT011 - which kind is checked below
        check_model(model, inputs, train=train)
    assert mutant.calls > 0, f"the broken {family} piece never ran on {model_name}"
    error = caught.value
    assert isinstance(error, AssertionError) or MARK in str(error), \
        f"{model_name} failed, but not because of the mutant: {error!r}"
