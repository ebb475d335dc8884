"""The host device's fused execution of fp32 attention backward chains
(runtime/attention_grad_chain.py): the backward GE graph of a trained attention loaded with
and without the fusion gives the same gradients, the graph itself keeps its ops, and the
fused step falls back to the chain's kernels when a run-time check fails."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.runtime import attention_grad_chain as agc  # noqa: E402
from npu_inductor.runtime.host_model import HostModel  # noqa: E402


def _gqa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def _masked(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _qkv(lq=8, s=8, hq=4, hk=2, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, hq, lq, d, generator=g), torch.randn(2, hk, s, d, generator=g),
            torch.randn(2, hk, s, d, generator=g))


def _backward_graph(fn, q, k, v, *rest, dynamic=False):
    """The backward GE graph of ``fn`` trained through and the inputs of its last run;
    the compiled gradients match eager's (fp32, 1e-5)."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="npu")
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    if dynamic:  # the sequence dims symbolic (head counts stay static)
        for t in leaves:
            torch._dynamo.mark_dynamic(t, 2)
    with record_graphs() as graphs:
        compiled(*leaves, *rest).square().sum().backward()
    (graph,) = [g for g in graphs if g.name.startswith("backward")]
    model = graph.executor.device.acl.models[graph.executor.model_id]
    seen = []
    orig = model.execute
    model.execute = lambda xs: seen.append([x.clone() for x in xs]) or orig(xs)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    compiled(*leaves, *rest).square().sum().backward()
    eager = [t.clone().requires_grad_() for t in (q, k, v)]
    fn(*eager, *rest).square().sum().backward()
    for a, b in zip(leaves, eager):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-5)
    return model, seen[-1]


def _both(model, inputs, monkeypatch=None):
    """Outputs of the backward graph loaded op by op (no step fusions) and fused."""
    plain = HostModel(model.graph, model.allocator, fuse_attention=False)
    fused = HostModel(model.graph, model.allocator, fuse_attention=True)
    return plain.execute(inputs), fused.execute(inputs), fused


def _chains(model):
    return [st for st in model.steps if isinstance(st.fn, agc.AttentionGradKernel)]


@pytest.fixture(autouse=True)
def _short_chains_fuse(monkeypatch):
    """Short static chains stay op by op by default (FUSE_MIN_KEYS); fused here to test."""
    monkeypatch.setattr(agc, "FUSE_MIN_KEYS", 1)


def test_short_static_chain_stays_op_by_op(causal_backward, monkeypatch):
    model, _ = causal_backward
    monkeypatch.setattr(agc, "FUSE_MIN_KEYS", 256)
    assert not _chains(HostModel(model.graph, model.allocator, fuse_attention=True))


@pytest.fixture(scope="module")
def causal_backward():
    return _backward_graph(_gqa_causal, *_qkv())


def test_causal_gqa_backward_runs_fused_and_bitwise_equal(causal_backward):
    """The direct path makes the op kernels' own torch calls: bitwise their results."""
    model, inputs = causal_backward
    counts = model.graph.op_counts()  # the GE graph keeps the decomposed backward
    assert counts["SoftmaxGrad"] == 1 and counts["BatchMatMulV2"] >= 5
    before = agc.stats()
    plain, fused, fm = _both(model, inputs)
    (chain,) = _chains(fm)
    assert len(chain.outs) == 3
    assert {"SoftmaxGrad", "SoftmaxV2", "BatchMatMulV2"} <= {st.op.type for st in chain.chain}
    assert "SoftmaxGrad" not in {st.op.type for st in fm.steps}
    assert agc.stats()["fast"] == before["fast"] + 1
    assert len(fused) == len(plain)
    for a, b in zip(fused, plain):
        assert torch.equal(a, b)


def test_flash_path_matches_op_by_op(causal_backward, monkeypatch):
    """Long sequences take the flash forward + backward: fp32 rounding only."""
    model, inputs = causal_backward
    monkeypatch.setattr(agc, "FLASH_MIN_KEYS", 1)
    calls = []
    flash_bwd = agc._FLASH_BWD
    monkeypatch.setattr(agc, "_FLASH_BWD", lambda *a, **kw: calls.append(1) or flash_bwd(*a, **kw))
    plain, fused, _ = _both(model, inputs)
    assert calls
    for a, b in zip(fused, plain):
        # fp32 rounding of a different summation order: absolute error relative to the
        # gradient's scale (elements near 0 have no meaningful relative error; on an AMD EPYC
        # they differ by up to 1.7e-6 where the largest element is 4.4-17)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6 * b.abs().max().item())


def test_fallback_runs_the_op_kernels(causal_backward, monkeypatch):
    model, inputs = causal_backward
    monkeypatch.setattr(agc.AttentionGradKernel, "fast", lambda *a: None)
    before = agc.stats()
    plain, fused, _ = _both(model, inputs)
    assert agc.stats()["fallback"] == before["fallback"] + 1
    for a, b in zip(fused, plain):
        assert torch.equal(a, b)


def test_padding_mask_backward_fuses():
    """An additive mask input (a padded key, a fully masked row's NaN-free variant)."""
    q, k, v = _qkv(hq=2, hk=2)
    mask = torch.zeros(2, 1, 1, 8)
    mask[0, ..., 6:] = float("-inf")
    model, inputs = _backward_graph(_masked, q, k, v, mask)
    plain, fused, fm = _both(model, inputs)
    assert len(_chains(fm)) == 1
    for a, b in zip(fused, plain):
        assert torch.equal(a, b)


def test_dynamic_causal_backward_fuses_its_mask_program():
    """A dynamic graph builds the causal band from Range ops: fused too (not built)."""
    model, inputs = _backward_graph(_gqa_causal, *_qkv(lq=6, s=6), dynamic=True)
    plain, fused, fm = _both(model, inputs)
    (chain,) = _chains(fm)
    assert "SelectV2" in {st.op.type for st in chain.chain}
    assert "SelectV2" not in {st.op.type for st in fm.steps}
    for a, b in zip(fused, plain):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
