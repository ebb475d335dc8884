"""The cold path's shortcuts give what the long way gives: ``npu::matmul``'s fake kernel (shape
arithmetic, no fake dispatch of torch.matmul) against the real kernel's output; the passes'
dead-code sweep with its lint deferred (``lint_once``) against torch's eliminate_dead_code."""

from __future__ import annotations

import copy
import os
import sys

import pytest
import torch
from torch._subclasses import FakeTensorMode

from npu_inductor import ops  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.graph_passes.common import eliminate_dead_code, lint_once

sys.path.insert(0, os.path.dirname(__file__))
from pass_util import trace

npu = torch.ops.npu

# (x1 shape, x2 shape, transpose_x1, transpose_x2, bias size or None)
MATMULS = [
    ((4, 6), (6, 5), False, False, None),
    ((4, 6), (5, 6), False, True, 5),
    ((6, 4), (6, 5), True, False, None),
    ((2, 3, 6), (5, 6), False, True, 5),   # a Linear on [B, S, K]
    ((1, 3, 6), (6, 5), False, False, None),
    ((2, 6, 3), (2, 6, 5), True, False, None),  # bmm(permute(x), y)
    ((2, 3, 6), (2, 5, 6), False, True, None),
    ((2, 2, 3, 6), (2, 2, 6, 5), False, False, None),
    ((3, 6), (2, 6, 5), False, False, None),  # broadcast batch
    ((2, 1, 3, 6), (4, 6, 5), False, False, None),
    ((0, 3, 6), (6, 5), False, False, None),
]


@pytest.mark.parametrize("s1,s2,t1,t2,bias", MATMULS)
def test_matmul_fake_matches_real_kernel(s1, s2, t1, t2, bias):
    x1, x2 = torch.randn(s1), torch.randn(s2)
    b = torch.randn(bias) if bias is not None else None
    real = npu.matmul(x1, x2, b, t1, t2)
    mode = FakeTensorMode()
    with mode:
        fake = npu.matmul(mode.from_tensor(x1), mode.from_tensor(x2),
                          mode.from_tensor(b) if b is not None else None, t1, t2)
    assert (fake.shape, fake.stride(), fake.dtype) == (real.shape, real.stride(), real.dtype)


@pytest.mark.parametrize("s1,s2", [((4, 6), (5, 5)), ((2, 3, 6), (3, 5, 6))])
def test_matmul_fake_raises_where_the_real_kernel_does(s1, s2):
    x1, x2 = torch.randn(s1), torch.randn(s2)
    with pytest.raises(RuntimeError):
        npu.matmul(x1, x2, None, False, False)
    mode = FakeTensorMode()
    with pytest.raises(RuntimeError), mode:
        npu.matmul(mode.from_tensor(x1), mode.from_tensor(x2), None, False, False)


def _dead_code(x):
    a = torch.exp(x)
    torch.sin(a)  # dead, and makes a dead once removed
    torch.rand_like(x)  # random: kept unless the inductor config says otherwise
    return x + 1


def test_deferred_lint_sweep_removes_what_torch_removes():
    gm = trace(_dead_code, torch.randn(3))
    ref = copy.deepcopy(gm)
    ref.graph.eliminate_dead_code()
    with lint_once(lambda: gm):
        changed = eliminate_dead_code(gm)
    assert changed
    assert [n.target for n in gm.graph.nodes] == [n.target for n in ref.graph.nodes]


def test_lint_once_still_catches_a_graph_out_of_order():
    gm = trace(lambda x: torch.exp(x) + 1, torch.randn(3))
    exp = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.exp.default)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with pytest.raises(RuntimeError, match="before it has been defined"):
        with lint_once(lambda: gm):
            out.append(exp)  # exp moved after its user
            eliminate_dead_code(gm)
