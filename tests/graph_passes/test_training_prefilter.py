"""The training fusions' pre-filter (``may_fuse``): the forward-only trace is skipped only
for Dynamo graphs where no training fusion can fire. For each way of writing RMSNorm,
SwiGLU and rotary, the filter says yes wherever the traced graph actually fuses."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from npu_inductor.config import resolve
from npu_inductor.graph_passes import training_fusions


def _rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _rms_method(x, w):
    return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt() * w


def _rms_functional(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, 1e-6)


def _swiglu(x, w):
    a, b = (x @ w).chunk(2, -1)
    return F.silu(a) * b


def _swiglu_module(x, w):
    a, b = (x @ w).chunk(2, -1)
    return torch.nn.SiLU()(a) * b


def _swiglu_sigmoid(x, w):
    a, b = (x @ w).chunk(2, -1)
    return a * torch.sigmoid(a) * b


def _rotary(x, w):
    cos, sin = torch.cos(w.detach()), torch.sin(w.detach())
    x1, x2 = x.chunk(2, -1)
    return x * cos + torch.cat((-x2, x1), -1) * sin


def _layer(x, w):  # BERT-like: no pattern can fire
    h = F.layer_norm(x @ w, (w.shape[-1],))
    return F.gelu(torch.softmax(h, -1) + torch.cat((h, h), -1)[..., :16])


# expected verdict: "fuses" (yes, and the trace fuses), "maybe" (yes: the names match,
# though the trace does not fuse this form today), "no"
CASES = [(_rms, "fuses"), (_rms_method, "fuses"), (_rms_functional, "maybe"),
         (_swiglu, "fuses"), (_swiglu_module, "fuses"), (_swiglu_sigmoid, "maybe"),
         (_rotary, "fuses"), (_layer, "no")]


def _verdict_and_fusion(fn, *args):
    """(may_fuse, whether the forward-only trace fused) for ``fn``'s Dynamo graph, both
    computed inside the compile (the graph's fake mode is live there)."""
    seen = []
    may_fuse = training_fusions.may_fuse

    def backend(gm, example_inputs):
        verdict = may_fuse(gm)
        training_fusions.may_fuse = lambda gm: True  # trace regardless of the verdict
        try:
            fused = training_fusions.fuse_for_training(gm, example_inputs, resolve({}))
        finally:
            training_fusions.may_fuse = may_fuse
        seen.append((verdict, fused is not gm))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(*args)
    (result,) = seen
    return result


@pytest.mark.parametrize("fn,expected", CASES, ids=[f.__name__ for f, _ in CASES])
def test_may_fuse_says_yes_wherever_the_trace_fuses(fn, expected):
    matmul = fn in (_swiglu, _swiglu_module, _swiglu_sigmoid, _layer)
    x = torch.randn(2, 4, 8, requires_grad=True)
    w = torch.randn(8, 16, requires_grad=True) if matmul else torch.randn(8)
    verdict, fused = _verdict_and_fusion(fn, x, w)
    assert verdict == (expected != "no")
    assert verdict or not fused  # never skips a graph that fuses
    if expected == "fuses":
        assert fused, f"{fn.__name__}: the trace did not fuse (the test case is stale)"
