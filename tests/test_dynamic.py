"""Dynamic shapes without buckets: ``dynamic=True`` compiles one GE graph with ``-1`` dims
that runs for every size of the dynamic dims, matches eager forward and backward, and
leaves nothing to eager."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from harness import FP32_ATOL, FP32_RTOL, assert_close, record_graphs
from models import make

from npu_inductor.compile_fx import CompiledGraph, record_reports
from npu_inductor.ge.ir import DYNAMIC_DIM

# Sizes of the dynamic dim (batch for mlp/cnn, sequence for bert/llama). None equals another
# input dim (cnn: 3 channels, 8x8; bert/llama: batch 2): dynamo's duck sizing would give
# both one symbol, and a converter specialising one would specialise the other.
SIZES = (5, 6, 7)
CASES = [(m, t) for m in ("mlp", "cnn", "bert", "llama") for t in (False, True)]


def _inputs(name: str, n: int) -> tuple[torch.Tensor, ...]:
    """The model's example inputs with the dynamic dim resized to ``n``."""
    g = torch.Generator().manual_seed(n)
    if name == "mlp":
        return (torch.randn(n, 16, generator=g),)
    if name == "cnn":
        return (torch.randn(n, 3, 8, 8, generator=g),)
    if name == "bert":
        ids = torch.randint(0, 100, (2, n), generator=g)
        mask = torch.ones(2, n, dtype=torch.long)
        mask[1, n // 2:] = 0  # key padding in the second sequence
        return ids, mask
    return (torch.randint(0, 128, (2, n), generator=g),)




def _step(eager: torch.nn.Module, compiled_model: torch.nn.Module, compiled, inputs: tuple,
          train: bool, n: int) -> None:
    """One forward (and with ``train`` backward) of both models, compared."""
    for m in (eager, compiled_model):
        m.zero_grad(set_to_none=True)
    with torch.set_grad_enabled(train):
        expected, actual = eager(*inputs), compiled(*inputs)
    assert_close(actual, expected, FP32_RTOL, FP32_ATOL, f"output (size {n})")
    if train:
        grad = torch.randn_like(expected)
        expected.backward(grad)
        actual.backward(grad)
        for (name, p), (_, q) in zip(eager.named_parameters(), compiled_model.named_parameters()):
            assert q.grad is not None, f"no gradient for {name} (size {n})"
            assert_close(q.grad, p.grad, FP32_RTOL, FP32_ATOL, f"grad {name} (size {n})")
    for (name, b), (_, c) in zip(eager.named_buffers(), compiled_model.named_buffers()):
        assert_close(c, b, FP32_RTOL, FP32_ATOL, f"buffer {name} (size {n})")


def _has_dynamic_dims(g: CompiledGraph) -> bool:
    return any(DYNAMIC_DIM in out.shape for op in g.lowered.graph.ops for out in op.output_descs)


@pytest.mark.parametrize("name,train", CASES, ids=[f"{m}-{'train' if t else 'eval'}"
                                                   for m, t in CASES])
def test_one_graph_runs_every_size(name, train):
    model, _ = make(name)
    eager = copy.deepcopy(model).train(train)
    compiled_model = copy.deepcopy(model).train(train)
    compiled = torch.compile(compiled_model, backend="npu", dynamic=True)
    with record_graphs() as graphs, record_reports() as reports, \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _step(eager, compiled_model, compiled, _inputs(name, SIZES[0]), train, SIZES[0])
        first = len(graphs)
        for n in SIZES[1:]:
            _step(eager, compiled_model, compiled, _inputs(name, n), train, n)
    raw = [str(w.message) for w in caught if "Raw SymInt" in str(w.message)]
    assert raw == [], raw  # passes put the node computing a size in FX args, not a SymInt
    kinds = sorted(r.kind for r in reports)
    assert kinds == (["backward", "forward"] if train else ["inference"]), kinds
    assert len(graphs) == first == len(reports), "a new size compiled a new GE graph"
    fallbacks = [(r.name, f.target, f.reason) for r in reports for f in r.fallbacks]
    assert fallbacks == [], fallbacks
    assert all(_has_dynamic_dims(g) for g in graphs), "a GE graph was specialised to a size"
    for g in graphs:  # memory_plan is on: graphs with dynamic tensors run unplanned, and say so
        m = g.executor.device.acl.models[g.executor.model_id]
        assert m.plan is not None or "dynamic" in (m.plan_error or ""), m.plan_error


def _check_dynamic(fn, *sizes_inputs: tuple, grads: bool = False,
                   dim: int | None = None) -> None:
    """``fn`` compiled with dynamic=True (or only ``dim`` of every input marked dynamic) vs
    eager for each input tuple: one GE graph per FX graph, none falling back."""
    compiled = torch.compile(fn, backend="npu", dynamic=True if dim is None else None)
    with record_reports() as reports:
        for inputs in sizes_inputs:
            leaves = [x.detach().requires_grad_(grads) for x in inputs]
            for x in leaves if dim is not None else ():
                torch._dynamo.mark_dynamic(x, dim)
            copies = [x.detach().requires_grad_(grads) for x in inputs]
            actual, expected = compiled(*leaves), fn(*copies)
            assert_close(actual, expected, FP32_RTOL, FP32_ATOL, "output")
            if grads:
                actual.sum().backward()
                expected.sum().backward()
                assert_close([x.grad for x in leaves], [x.grad for x in copies], FP32_RTOL,
                             FP32_ATOL, "input grads")
    assert [f.target for r in reports for f in r.fallbacks] == []
    assert len(reports) == (2 if grads else 1), [r.name for r in reports]


def test_slice_with_symbolic_end_on_static_dim():
    table = torch.randn(16, 4)
    _check_dynamic(lambda x: table[:x.shape[0]] * x, (torch.randn(5, 4),), (torch.randn(7, 4),))


def test_select_and_slice_backward_pad_the_gradient():
    def fn(x):
        return x[:, 0] * 2 + x[1:, -1].sum() + x[:, 2:].mean()

    _check_dynamic(fn, (torch.randn(5, 6),), (torch.randn(7, 9),), grads=True)


def test_causal_attention_mask_is_built_at_run_time():
    def fn(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def qkv(s):
        return tuple(torch.randn(2, 4, s, 8) for _ in range(3))

    _check_dynamic(fn, qkv(5), qkv(7), grads=True, dim=2)  # the sequence dim


def test_size_expressions_with_powers_lower_to_scalar_ops():
    # (s, s) flattened: the Reshape's size is s**2, built as s * s at run time
    _check_dynamic(lambda x: (x @ x.T).reshape(-1) + 1, (torch.randn(5, 3),),
                   (torch.randn(7, 3),), dim=0)


def test_bf16_llama_training_fused_attention_is_dynamic():
    """fp16/bf16 training fuses attention into FlashAttentionScore(+Grad); the fused graphs
    stay dynamic too. Outputs: eager's own bf16 tolerance; gradients: against a float64
    reference of the same weights, graph mode's error at most twice eager's (plus 1e-3 of the
    gradient's scale): the host's bf16 attention backward rounds differently from eager's."""
    model, _ = make("llama")
    model = model.to(torch.bfloat16).train()
    twin = copy.deepcopy(model)
    ref = copy.deepcopy(model).double()
    compiled = torch.compile(twin, backend="npu", dynamic=True)
    with record_reports() as reports, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in SIZES[:2]:
            ids = _inputs("llama", n)[0]
            model.zero_grad(), twin.zero_grad(), ref.zero_grad()
            actual, expected = compiled(ids), model(ids)
            torch.testing.assert_close(actual, expected)
            actual.float().sum().backward()
            expected.float().sum().backward()
            ref(ids).sum().backward()
            for p, q, r in zip(model.parameters(), twin.parameters(), ref.parameters()):
                err_graph = (q.grad.double() - r.grad).abs().max().item()
                err_eager = (p.grad.double() - r.grad).abs().max().item()
                assert err_graph <= 2 * err_eager + 1e-3 * r.grad.abs().max().item()
    assert sorted(r.kind for r in reports) == ["backward", "forward"]
    assert [f.target for r in reports for f in r.fallbacks] == []
    assert not [w for w in caught if "Raw SymInt" in str(w.message)]
    ops = {op.type for r in reports for g in r.ge_graphs for op in g.lowered.graph.ops}
    assert "FlashAttentionScore" in ops


def test_size_one_reuses_the_dynamic_graph():
    """A pass comparing symbolic sizes (``s0*s1 == s0``, ``sq == 1``) would install a guard,
    and the first prompt of length 1 would compile a second graph (issue 19)."""
    import torch.fx.experimental._config as fx_config

    model, _ = make("llama")
    model.eval()
    compiled = torch.compile(model, backend="npu", dynamic=True)
    with record_reports() as reports, torch.no_grad(), \
            fx_config.patch(backed_size_oblivious=True):
        for n in (5, 3, 1):
            ids = _inputs("llama", n)
            assert_close(compiled(*ids), model(*ids), FP32_RTOL, FP32_ATOL, f"size {n}")
    assert [r.kind for r in reports] == ["inference"], [r.name for r in reports]
    assert [f.target for r in reports for f in r.fallbacks] == []
