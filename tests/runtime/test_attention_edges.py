"""The host device folds the query Reshape / scale and the output Reshape of an fp32
attention chain, and the copy before a rotary embedding, into the steps they feed
(runtime/attention_edges.py): the same GE graph loaded with and without host fusion gives
the same results, with fewer steps, on the fast path and on the op-by-op path."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import host_model_inputs, record_graphs  # noqa: E402

from npu_inductor.benchmarks.zoo import LlamaLayer  # noqa: E402
from npu_inductor.runtime import attention_chain  # noqa: E402
from npu_inductor.runtime.attention_edges import EdgeAttentionKernel  # noqa: E402
from npu_inductor.runtime.host_model import HostModel  # noqa: E402


class _Block(torch.nn.Module):
    """One LLaMA layer (rotary, GQA causal attention, gated MLP) over embedded tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = LlamaLayer(hidden=32, heads=4, kv_heads=2, ffn=64)
        pos = torch.outer(torch.arange(16).float(), 1.0 / 10000 ** (torch.arange(0, 8, 2) / 8))
        emb = torch.cat((pos, pos), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.shape[1]
        return self.layer(x, self.cos[:s], self.sin[:s])


def _loaded(dynamic: bool, seq: int = 6) -> tuple[HostModel, list[torch.Tensor]]:
    """The block's one GE graph, loaded, and the inputs it ran with."""
    torch.manual_seed(0)
    block = _Block().eval()
    x = torch.randn(2, seq, 32)
    torch._dynamo.reset()
    if dynamic:
        torch._dynamo.mark_dynamic(x, 1)
    with torch.no_grad(), record_graphs() as graphs:
        compiled = torch.compile(block, backend="npu")
        got = compiled(x)
        torch.testing.assert_close(got, block(x), rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        return host_model_inputs(graphs, lambda: compiled(x))


@pytest.fixture(scope="module", params=[False, True], ids=["static", "dynamic"])
def loaded(request):
    return _loaded(request.param)


def _edges(model: HostModel) -> list:
    return [st for st in model.steps if isinstance(st.fn, EdgeAttentionKernel)]


def test_edges_fold_into_the_chain_step_and_match(loaded):
    model, inputs = loaded
    plain = HostModel(model.graph, model.allocator, fuse_attention=False)
    fused = HostModel(model.graph, model.allocator, fuse_attention=True)
    (edge,) = _edges(fused)
    assert edge.fn.reshape_q and edge.fn.reshape_out and edge.fn.scale_step is not None
    assert edge.fn.factor == pytest.approx(8 ** -0.5)
    # the rotary op reads q and k themselves: no TensorMove step runs
    assert "TensorMove" in {st.op.type for st in fused.op_steps}
    assert "TensorMove" not in {st.op.type for st in fused.steps}
    before = attention_chain.stats()["fast"]
    got = fused.execute(inputs)
    assert attention_chain.stats()["fast"] == before + 1
    torch.testing.assert_close(got, plain.execute(inputs), rtol=1e-5, atol=1e-6)


def test_fallback_runs_the_folded_steps(loaded, monkeypatch):
    """A failed run-time check runs the Reshape, the scale and the chain's kernels: bitwise
    what the unfused model gives."""
    model, inputs = loaded
    plain = HostModel(model.graph, model.allocator, fuse_attention=False)
    fused = HostModel(model.graph, model.allocator, fuse_attention=True)
    monkeypatch.setattr(attention_chain.AttentionChainKernel, "fast", lambda *a: None)
    assert torch.equal(fused.execute(inputs)[0], plain.execute(inputs)[0])


def test_planned_graph_keeps_flash_output_out_of_the_workspace():
    """In a static graph the folded output is flash's own memory (kept, not planned), and
    the plan still holds the other intermediates."""
    model, inputs = _loaded(dynamic=False)
    fused = HostModel(model.graph, model.allocator, fuse_attention=True)
    assert fused.plan is not None
    (edge,) = _edges(fused)
    assert edge.outs[0] not in fused.plan.offsets
    plain = HostModel(model.graph, model.allocator, fuse_attention=False)
    torch.testing.assert_close(fused.execute(inputs), plain.execute(inputs), rtol=1e-5,
                               atol=1e-6)


def _bert_loaded() -> tuple[HostModel, list[torch.Tensor]]:
    from models import make

    model, inputs = make("bert")
    model = model.eval()
    torch._dynamo.reset()
    with torch.no_grad(), record_graphs() as graphs:
        compiled = torch.compile(model, backend="npu")
        torch.testing.assert_close(compiled(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        return host_model_inputs(graphs, lambda: compiled(*inputs))


def test_dense_copies_of_query_key_value_fold_and_the_mask_stays_a_view(monkeypatch):
    """BERT's q/k/v reach the chain as Identity (aten.clone: a dense copy of the transposed
    heads) [+ Reshape to batch * heads]: the fused step reads the transposed views, and its
    padding mask ([B, 1, 1, S]) reaches flash broadcast over heads and rows, not copied."""
    model, inputs = _bert_loaded()
    plain = HostModel(model.graph, model.allocator, fuse_attention=False)
    fused = HostModel(model.graph, model.allocator, fuse_attention=True)
    edges = _edges(fused)
    assert edges and all(e.fn.reshape_k and e.fn.reshape_v for e in edges)
    folded = [st.op.type for e in edges for st in e.chain]
    assert folded.count("Identity") == 3 * len(edges)  # q, k and v
    copies = sum(st.op.type == "Identity" for st in fused.op_steps)
    assert sum(st.op.type == "Identity" for st in fused.steps) == copies - 3 * len(edges)
    masks, flash = [], attention_chain._FLASH

    def spy(*args, **kwargs):
        masks.append(kwargs.get("attn_mask"))
        return flash(*args, **kwargs)

    monkeypatch.setattr(attention_chain, "_FLASH", spy)
    before = attention_chain.stats()["fast"]
    got = fused.execute(inputs)
    assert attention_chain.stats()["fast"] == before + len(edges)
    assert len(masks) == len(edges) and all(m.stride()[1:3] == (0, 0) for m in masks)
    torch.testing.assert_close(got, plain.execute(inputs), rtol=1e-5, atol=1e-6)
    # a refused fast path runs the folded copies' reshapes and the chain op by op
    monkeypatch.setattr(attention_chain.AttentionChainKernel, "fast", lambda *a: None)
    assert torch.equal(fused.execute(inputs)[0], plain.execute(inputs)[0])


def test_unreshaped_flash_output_stays_out_of_the_workspace():
    """ViT's chain result ([B, H, S, D], flash's memory stored [B, S, H, D]) without an
    output Reshape to fold: kept, so the Transpose + Reshape after it are views, where a
    workspace copy (dense [B, H, S, D]) would be copied again by that Reshape."""
    from npu_inductor.benchmarks.zoo import ViT

    torch.manual_seed(0)
    vit, inputs = ViT(image=8, patch=4, hidden=16, heads=2, layers=1).eval(), \
        (torch.randn(2, 3, 8, 8),)
    torch._dynamo.reset()
    with torch.no_grad(), record_graphs() as graphs:
        compiled = torch.compile(vit, backend="npu")
        torch.testing.assert_close(compiled(*inputs), vit(*inputs), rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        model, seen = host_model_inputs(graphs, lambda: compiled(*inputs))
    fused = HostModel(model.graph, model.allocator, fuse_attention=True)
    chains = [st for st in fused.steps
              if isinstance(st.fn, attention_chain.AttentionChainKernel)]
    assert chains and fused.plan is not None
    assert all(st.outs[0] not in fused.plan.offsets for st in chains)
    readers = [st for st in fused.steps if set(st.args) & {c.outs[0] for c in chains}]
    assert readers and all(st.op.type == "Transpose" for st in readers)
    plain = HostModel(model.graph, model.allocator, fuse_attention=False)
    torch.testing.assert_close(fused.execute(seen), plain.execute(seen), rtol=1e-5, atol=1e-6)
