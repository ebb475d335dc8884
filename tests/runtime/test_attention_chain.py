"""The host device's fused execution of fp32 attention chains (runtime/attention_chain.py):
the same GE graph loaded with and without the fusion gives the same results, the fused
step takes its fast path only when that is exact, and chains whose intermediates are read
elsewhere stay op by op."""

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import host_model_inputs, record_graphs  # noqa: E402

from npu_inductor.runtime import attention_chain  # noqa: E402
from npu_inductor.runtime.host_model import HostModel  # noqa: E402


def _loaded(fn, *inputs, dynamic=False):
    """The host model of ``fn``'s one GE graph and the inputs it was executed with."""
    torch._dynamo.reset()
    if dynamic:  # the sequence dims symbolic (head counts stay static)
        for t in inputs:
            torch._dynamo.mark_dynamic(t, 2)
    with record_graphs() as graphs:
        compiled = torch.compile(fn, backend="npu")
        compiled(*inputs)
    expected = fn(*inputs)
    got = []
    model, xs = host_model_inputs(graphs, lambda: got.append(compiled(*inputs)))
    torch.testing.assert_close(got[0], expected, rtol=1e-5, atol=1e-5)
    return model, xs


def _both(model, inputs):
    """Outputs of the graph loaded op by op and fused, and the fused model."""
    plain = HostModel(model.graph, model.allocator, fuse_attention=False)
    fused = HostModel(model.graph, model.allocator, fuse_attention=True)
    return plain.execute(inputs), fused.execute(inputs), fused


def _chains(model):
    return [st for st in model.steps if isinstance(st.fn, attention_chain.AttentionChainKernel)]


def _gqa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def _qkv(lq=7, s=7, hq=4, hk=2, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, hq, lq, d, generator=g), torch.randn(2, hk, s, d, generator=g),
            torch.randn(2, hk, s, d, generator=g))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_causal_gqa_chain_runs_fused_and_matches(dynamic):
    model, inputs = _loaded(_gqa_causal, *_qkv(), dynamic=dynamic)
    before = attention_chain.stats()
    plain, fused, fm = _both(model, inputs)
    assert len(_chains(fm)) == 1 and not _chains(HostModel(model.graph, None,
                                                           fuse_attention=False))
    assert attention_chain.stats()["fast"] == before["fast"] + 1
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)
    # the GE graph itself is unchanged: what the 910B accepts for fp32 attention
    counts = model.graph.op_counts()
    assert counts["BatchMatMulV2"] == 2 and counts["SoftmaxV2"] == 1
    # a dynamic graph builds its causal mask from Range ops: fused too (not built at all)
    fused_types = {st.op.type for st in _chains(fm)[0].chain}
    assert ("SelectV2" in fused_types) == dynamic and "SelectV2" not in {
        st.op.type for st in fm.steps}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_fallback_runs_the_op_kernels(dynamic, monkeypatch):
    """When a run-time check fails, the fused step runs its ops' kernels (the mask
    program included): bitwise what the unfused model gives."""
    model, inputs = _loaded(_gqa_causal, *_qkv(), dynamic=dynamic)
    monkeypatch.setattr(attention_chain.AttentionChainKernel, "fast", lambda *a: None)
    plain, fused, _ = _both(model, inputs)
    assert torch.equal(fused[0], plain[0])


def test_causal_with_fewer_queries_than_keys():
    """is_causal's band is top-left aligned for Lq != S, as the lowered mask is."""
    model, inputs = _loaded(_gqa_causal, *_qkv(lq=3, s=6))
    plain, fused, _ = _both(model, inputs)
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)


def _padding_mask(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_additive_padding_mask_runs_fused():
    q, k, v = _qkv(hq=2, hk=2)
    mask = torch.zeros(2, 1, 1, 7)
    mask[0, ..., 5:] = float("-inf")
    mask[1, ..., 2:4] = torch.finfo(torch.float32).min
    model, inputs = _loaded(_padding_mask, q, k, v, mask)
    before = attention_chain.stats()
    plain, fused, fm = _both(model, inputs)
    assert len(_chains(fm)) == 1
    assert attention_chain.stats()["fast"] == before["fast"] + 1
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)


def test_fully_masked_row_runs_op_by_op():
    """A row masked entirely is NaN op by op; the fused step gives exactly that."""
    q, k, v = _qkv(hq=2, hk=2)
    mask = torch.zeros(2, 1, 7, 7)
    model, inputs = _loaded(_padding_mask, q, k, v, mask)
    inputs[-1][1, 0, 3, :] = float("-inf")  # the mask input (last Data) of one call
    before = attention_chain.stats()
    plain, fused, _ = _both(model, inputs)
    assert attention_chain.stats()["fallback"] == before["fallback"] + 1
    assert torch.isnan(plain[0]).any()
    torch.testing.assert_close(fused, plain, rtol=0, atol=0, equal_nan=True)


def _explicit(q, k, v, mask):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask
    return torch.softmax(s, -1) @ v


def _explicit_with_probs(q, k, v, mask):
    p = torch.softmax(q @ k.transpose(-1, -2) + mask, -1)
    return p @ v, p


def test_explicit_attention_fuses_unless_probs_are_read():
    """k^T reaches the chain as BatchMatMulV2's x2 as is (S == D: a strided k read as k^T
    would still have the right shape)."""
    q, k, v = _qkv(lq=8, s=8, hq=2, hk=2, d=8)
    mask = torch.randn(8, 8)
    model, inputs = _loaded(_explicit, q, k, v, mask)
    plain, fused, fm = _both(model, inputs)
    assert len(_chains(fm)) == 1
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)
    model, inputs = _loaded(_explicit_with_probs, q, k, v, mask)
    plain, fused, fm = _both(model, inputs)
    assert not _chains(fm) and len(fm.steps) == len(fm.op_steps)
    for a, b in zip(fused, plain):
        assert torch.equal(a, b)


def test_switch_turns_it_off(monkeypatch):
    model, _ = _loaded(_gqa_causal, *_qkv())
    monkeypatch.setenv(attention_chain.ENV_FLAG, "0")
    assert not _chains(HostModel(model.graph, None))
    monkeypatch.setenv(attention_chain.ENV_FLAG, "1")
    assert _chains(HostModel(model.graph, None))


def test_fp16_chain_is_not_fused():
    """Only fp32 chains fuse: fp16 attention is the fused GE op on the 910B, and op by op
    its intermediates round to fp16 as the device's do."""
    def fn(q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2), -1) @ v
    q, k, v = (t.half() for t in _qkv(hq=2, hk=2))
    torch._dynamo.reset()
    with record_graphs() as graphs:
        torch.compile(fn, backend="npu")(q, k, v)
    ex = graphs[0].executor
    model = ex.device.acl.models[ex.model_id]
    assert not _chains(model)


def test_bert_attention_with_materialized_key_transpose():
    """The zoo BERT's k^T reaches the chain contiguous (the kernel then reads k = k^T.mT,
    strided in its last dim, which torch's CPU flash kernel misreads unless copied)."""
    from models import make

    model, inputs = make("bert")
    model = model.eval()
    with torch.no_grad():
        loaded, seen = _loaded(model, *inputs)
    before = attention_chain.stats()
    plain, fused, fm = _both(loaded, seen)
    assert len(_chains(fm)) >= 1
    assert attention_chain.stats()["fast"] == before["fast"] + len(_chains(fm))
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)


def _training_forward(q, k, v):
    """The forward GE graph of a causal GQA attention trained through (its logsumexp is
    saved for the backward) and the inputs of its last run; gradients match eager."""
    torch._dynamo.reset()
    compiled = torch.compile(_gqa_causal, backend="npu")
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with record_graphs() as graphs:
        compiled(*leaves).sum().backward()
    assert [g.name.split("_")[0] for g in graphs] == ["forward", "backward"]
    ex = graphs[0].executor
    model = ex.device.acl.models[ex.model_id]
    seen = []
    orig = model.execute
    model.execute = lambda xs: seen.append([x.clone() for x in xs]) or orig(xs)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    compiled(*leaves).sum().backward()
    eager = [t.clone().requires_grad_() for t in (q, k, v)]
    _gqa_causal(*eager).sum().backward()
    for a, b in zip(leaves, eager):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-5)
    return model, seen[-1]


def test_training_forward_fuses_the_saved_logsumexp():
    """A training forward's chain also feeds ReduceLogSumExp (saved for the backward): it
    fuses with it, one flash call giving both outputs, handed over without copies."""
    model, inputs = _training_forward(*_qkv(lq=8, s=8, hq=4, hk=2, d=8))
    assert model.graph.op_counts()["ReduceLogSumExp"] == 1  # the GE graph is unchanged
    before = attention_chain.stats()
    plain, fused, fm = _both(model, inputs)
    (chain,) = _chains(fm)
    assert len(chain.outs) == 2 and "ReduceLogSumExp" in {st.op.type for st in chain.chain}
    assert "ReduceLogSumExp" not in {st.op.type for st in fm.steps}
    assert attention_chain.stats()["fast"] == before["fast"] + 1
    assert len(fused) == len(plain)
    for a, b in zip(fused, plain):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # both results are fresh flash outputs: the Reshapes to the graph outputs view them
    bound = next(b for b in fm.bound if b.step is chain)
    assert bound.dests == (("keep",), ("keep",))


def test_training_forward_fallback_gives_both_outputs(monkeypatch):
    model, inputs = _training_forward(*_qkv(lq=8, s=8, hq=4, hk=2, d=8))
    monkeypatch.setattr(attention_chain.AttentionChainKernel, "fast", lambda *a: None)
    plain, fused, _ = _both(model, inputs)
    for a, b in zip(fused, plain):
        assert torch.equal(a, b)


def test_padding_mask_masking_a_whole_batch_runs_op_by_op():
    """The fully-masked-row check reads the mask as it broadcasts ([B, 1, 1, S] here: every
    query row of batch 1 masked), not a copy expanded to the scores."""
    q, k, v = _qkv(hq=2, hk=2)
    model, inputs = _loaded(_padding_mask, q, k, v, torch.zeros(2, 1, 1, 7))
    inputs[-1][1] = float("-inf")
    before = attention_chain.stats()
    plain, fused, _ = _both(model, inputs)
    assert attention_chain.stats()["fallback"] == before["fallback"] + 1
    assert torch.isnan(plain[0][1]).all() and not torch.isnan(plain[0][0]).any()
    torch.testing.assert_close(fused, plain, rtol=0, atol=0, equal_nan=True)
