"""Compiled optimizer steps and gradient clipping: one GE graph per step that writes
parameters and optimizer state where they live (RefData + Assign), matching eager."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import npu_inductor
from npu_inductor.compile_fx import record_reports

OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=torch.tensor(1e-2), weight_decay=0.1),
    "adam": lambda ps: torch.optim.Adam(ps, lr=torch.tensor(1e-2)),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9),
}
OPTIONS = {"fallback": "error", "device": "host"}


def _model(layers: int = 4) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*(nn.Linear(64, 64) for _ in range(layers)))


def _set_grads(model: nn.Module, step: int) -> None:
    gen = torch.Generator().manual_seed(step)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=gen)


def _storages(model: nn.Module, opt: torch.optim.Optimizer) -> list[int]:
    state = [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return [t.data_ptr() for t in [*model.parameters(), *state]]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_compiled_step_is_one_ge_graph_updating_in_place(name):
    model, ref = _model(), _model()
    opt, ref_opt = OPTIMIZERS[name](list(model.parameters())), OPTIMIZERS[name](
        list(ref.parameters()))
    step = torch.compile(opt.step, backend="npu", options=OPTIONS)
    with record_reports() as reports:  # SGD's first step makes the momentum buffers
        for k in range(2):
            _set_grads(model, k)
            _set_grads(ref, k)
            step()
            ref_opt.step()
    storages = _storages(model, opt)
    with record_reports() as later:
        for k in range(2, 5):
            _set_grads(model, k)
            _set_grads(ref, k)
            step()
            ref_opt.step()
    assert not later  # no recompiles: lr as a tensor, the step count a graph input
    report = reports[-1]  # the steady-state step
    assert len(report.ge_graphs) == 1 and not report.fallbacks
    graph = report.ge_graphs[0].lowered
    assert not graph.outputs  # nothing returned: every update is an Assign into a RefData
    counts = graph.graph.op_counts()
    assert counts["Assign"] == counts["RefData"] == len(storages)
    assert _storages(model, opt) == storages
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    for s, r in zip(opt.state.values(), ref_opt.state.values()):
        for key in s:
            torch.testing.assert_close(s[key], r[key], rtol=1e-5, atol=1e-6)


def test_compiled_adamw_step_holds_no_copy_of_the_model():
    model = _model(layers=12)
    opt = OPTIMIZERS["adamw"](list(model.parameters()))
    step = torch.compile(opt.step, backend="npu", options=OPTIONS)
    _set_grads(model, 0)
    step()  # compile; state created
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    npu_inductor.reset_peak_memory_stats()
    before = npu_inductor.memory_stats()["allocated_bytes"]
    step()
    stats = npu_inductor.memory_stats()
    # the workspace holds one parameter's temporaries at a time: writes go straight to the
    # parameters, exp_avg and exp_avg_sq (a copy of any of them would be model_bytes)
    assert stats["peak_allocated_bytes"] - before < model_bytes / 2, stats
    assert stats["allocated_bytes"] == before


def test_compiled_clip_grad_norm_matches_eager():
    model, ref = _model(), _model()
    _set_grads(model, 0)
    _set_grads(ref, 0)

    def clip(ps):
        return torch.nn.utils.clip_grad_norm_(ps, 0.5)

    with record_reports() as reports:
        norm = torch.compile(clip, backend="npu", options=OPTIONS)(list(model.parameters()))
    ref_norm = clip(list(ref.parameters()))
    assert len(reports) == 1 and len(reports[0].ge_graphs) == 1
    torch.testing.assert_close(norm, ref_norm, rtol=1e-5, atol=0)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7)


def test_write_into_a_non_contiguous_input_reaches_the_caller():
    def fn(buf, x):
        buf.mul_(0.5).add_(x)
        return buf.sum()

    buf, x = torch.randn(6, 4).t(), torch.randn(4, 6)  # bound through a contiguous copy
    ref = buf.clone()
    with record_reports() as reports:
        out = torch.compile(fn, backend="npu", options=OPTIONS)(buf, x)
    expected = fn(ref, x)
    assert reports[0].ge_graphs[0].lowered.graph.op_counts().get("Assign") == 1
    torch.testing.assert_close(buf, ref)
    torch.testing.assert_close(out, expected)


def test_compiled_step_updates_in_place_with_the_compile_cache_on(tmp_path):
    """The compile cache (on by default for users; tests turn it off) goes through
    AOTAutograd's cache: the step still writes every parameter where it lives, on a miss
    and on a hit in a fresh compile, instead of returning new values for a copy back."""
    model, ref = _model(), _model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=1e-2)
    options = {**OPTIONS, "cache_dir": str(tmp_path)}
    for k in range(2):  # a miss, then (after a Dynamo reset) a hit
        torch._dynamo.reset()
        step = torch.compile(opt.step, backend="npu", options=options)
        storages = _storages(model, opt)
        _set_grads(model, k)
        _set_grads(ref, k)
        with record_reports() as reports:
            step()
        ref_opt.step()
        graph = reports[-1].ge_graphs[0].lowered
        assert not graph.outputs and graph.graph.op_counts()["Assign"] == len(storages)
        assert _storages(model, opt) == storages
    assert [r.cache for r in reports] == ["hit"]
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
