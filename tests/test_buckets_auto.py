"""Buckets that just work: ``set_buckets`` and ``shape_buckets`` with no ``dynamic=True`` and
no ``backed_size_oblivious`` in user code; padding safety proves masked attention, so
BERT-style encoders bucket over the sequence."""

import math

import pytest
import torch
import torch.fx.experimental._config as fx_config
import torch.nn.functional as F
from harness import record_graphs
from models import make
from torch.fx.experimental.proxy_tensor import make_fx

import npu_inductor
from npu_inductor import buckets
from npu_inductor.padding_safety import analyze

MIN = torch.finfo(torch.float32).min


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # tiny models: OpenMP threads only contend on a loaded machine
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tagged(t: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    return npu_inductor.set_buckets(t, {1: sizes})


def test_set_buckets_prompt_lengths_1_to_32_three_graphs():
    model, _ = make("llama")
    model.eval()
    compiled = torch.compile(model, backend="npu")
    assert not fx_config.backed_size_oblivious  # no user flag
    with torch.no_grad(), record_graphs() as graphs:
        for n in range(1, 33):
            ids = _tagged(torch.randint(0, 128, (2, n)), [8, 16, 32])
            torch.testing.assert_close(compiled(ids), model(ids), rtol=1e-5, atol=1e-5)
    assert sorted(g.lowered.graph.data_ops()[0].output_descs[0].shape[1] for g in graphs) \
        == [8, 16, 32]
    assert not fx_config.backed_size_oblivious  # restored after each compile


def test_shape_buckets_option_without_dynamic_true():
    lin = torch.nn.Linear(8, 8).eval()

    def f(x):
        return torch.relu(lin(x)) * 2

    compiled = torch.compile(f, backend="npu", options={"shape_buckets": {"x": {0: [4, 8, 16]}}})
    with torch.no_grad(), record_graphs() as graphs:
        for n in (3, 5, 3, 1, 9, 16, 2):
            x = torch.randn(n, 8)
            torch.testing.assert_close(compiled(x), f(x))
    assert len(graphs) == 3  # one per bucket: the first (static) trace ran in eager once
    assert any(r.eager_calls == 1 and "ran in eager" in r.exact_reasons[0]
               for r in buckets.REPORTS[-3:])


# ---- BERT-style encoders ---------------------------------------------------------------

def _bert_inputs(b: int, n: int, sizes: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(1, 100, (b, n))
    mask = torch.ones(b, n, dtype=torch.long)
    mask[-1, max(1, n - 3):] = 0  # the last sequence is padded by the user
    return _tagged(ids, sizes), _tagged(mask, sizes)


EDGES = (2, 3, 15, 16, 17, 31, 32, 33, 63, 64)


def test_bert_sequence_buckets_additive_mask_every_length():
    """The zoo encoder: ``(1 - mask) * finfo.min`` added to the scores, softmax, matmul;
    every length 1..64, then 1 again. Length 1 first: torch's matmul decomposition pins the
    size to 1 in Dynamo's first graph; that graph runs once in eager, then the frame's
    general bucketed graph (``bucket_frames``): 3 graphs, not a 4th for length 1."""
    model, _ = make("bert")
    model.eval()
    compiled = torch.compile(model, backend="npu")
    first_report = len(buckets.REPORTS)
    with torch.no_grad(), record_graphs() as graphs:
        for n in [*range(1, 65), 1]:
            ids, mask = _bert_inputs(2, n, [16, 32, 64])
            torch.testing.assert_close(compiled(ids, mask), model(ids, mask),
                                       rtol=1e-5, atol=1e-5)
    reports = buckets.REPORTS[first_report:]
    general = [r for r in reports if r.safety is not None]
    assert len(general) == 1 and general[0].safety.safe, [str(r.safety) for r in reports]
    assert len(graphs) == general[0].compiles == 3
    assert sorted(g.lowered.graph.data_ops()[0].output_descs[0].shape[1] for g in graphs) \
        == [16, 32, 64]
    assert sum(r.eager_calls for r in reports) == 1  # length 1's first call


def test_transformers_bert_sequence_buckets_sdpa_mask():
    """transformers' BertModel (sdpa): its boolean padding mask indexed by arange, turned
    into ``where(mask, 0, -inf)`` for scaled_dot_product_attention."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=4, intermediate_size=64,
                                  max_position_embeddings=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    compiled = torch.compile(model, backend="npu")
    with torch.no_grad(), record_graphs() as graphs:
        for n in EDGES:
            ids, mask = _bert_inputs(2, n, [16, 32, 64])
            out = compiled(input_ids=ids, attention_mask=mask)
            ref = model(input_ids=ids, attention_mask=mask)
            torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state,
                                       rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out.pooler_output, ref.pooler_output,
                                       rtol=1e-5, atol=1e-5)
    report = buckets.REPORTS[-1]
    assert report.safety.safe, report.safety
    assert len(graphs) == report.compiles == 3


# ---- the analysis on small graphs --------------------------------------------------------

def _safety(fn, *inputs, padded: tuple[int, ...]):
    """Trace ``fn`` symbolically; the symbol of dim 1 of the first input is bucketed."""
    gm = make_fx(fn, tracing_mode="symbolic")(*inputs)
    first = next(n for n in gm.graph.nodes if n.op == "placeholder")
    return analyze(gm, {first.meta["val"].shape[d].node.expr for d in padded})


def _attn_inputs(n: int = 5):
    mask = torch.ones(2, n, dtype=torch.long)
    return mask, torch.randn(2, 4, n, 8), torch.randn(2, 4, n, 8), torch.randn(2, 4, n, 8)


def _eager_attention(additive):
    def f(mask, q, k, v):
        scores = q @ k.transpose(-1, -2) / math.sqrt(8) + additive(mask)
        return scores.softmax(-1) @ v
    return f


@pytest.mark.parametrize("additive", [
    lambda m: (1.0 - m[:, None, None, :].float()) * MIN,
    lambda m: torch.where(m[:, None, None, :].bool(), 0.0, -math.inf),
    lambda m: torch.zeros(m.shape, dtype=torch.float32)[:, None, None, :].masked_fill(
        m[:, None, None, :] == 0, MIN),
], ids=["one_minus_mask_times_min", "where_minus_inf", "masked_fill_eq_zero"])
def test_additive_key_masks_are_proven(additive):
    report = _safety(_eager_attention(additive), *_attn_inputs(), padded=(1,))
    assert report.safe, report


def test_boolean_sdpa_mask_is_proven():
    def f(mask, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :].bool())

    assert _safety(f, *_attn_inputs(), padded=(1,)).safe


def test_mask_that_does_not_mask_padded_keys_is_refused():
    def f(mask, q, k, v):  # 0 where masked: padded keys (mask 0) get weight exp(0)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :].float())

    report = _safety(f, *_attn_inputs(), padded=(1,))
    assert not report.safe and "does not mask" in report.reason


def test_mask_that_masks_whole_padded_query_rows_is_refused():
    def f(mask, q, k, v):  # masks padded queries too: their softmax rows would be NaN
        both = mask[:, None, :, None].bool() & mask[:, None, None, :].bool()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=both)

    report = _safety(f, *_attn_inputs(), padded=(1,))
    assert not report.safe and "query rows" in report.reason


def test_softmax_over_an_unmasked_padded_dim_is_still_refused():
    report = _safety(_eager_attention(lambda m: m[:, None, None, :].float()),
                     *_attn_inputs(), padded=(1,))
    assert not report.safe and "_softmax" in report.reason


def test_stack_is_proven_and_keeps_a_zero_tail():
    def f(x, y):  # the zero tail survives the stack, so the sum over the padded dim is exact
        return torch.stack([x, y * 2], dim=0).sum(-1)

    x, y = torch.randn(3, 5), torch.randn(3, 5)
    assert _safety(f, x, y, padded=(1,)).safe
    compiled = torch.compile(f, backend="npu", options={"shape_buckets": {"x": {1: [8]},
                                                                          "y": {1: [8]}}})
    with record_graphs() as graphs:
        for n in (3, 5, 7):
            x, y = torch.randn(3, n), torch.randn(3, n)
            torch.testing.assert_close(compiled(x, y), f(x, y))
    assert buckets.REPORTS[-1].safety.safe and len(graphs) == 1


# ---- slices from the end by an int input (transformers' logits_to_keep) -----------------

@pytest.mark.parametrize("keep", [1, 0])
def test_transformers_llama_prefill_logits_to_keep_buckets(keep):
    """``hidden[:, -logits_to_keep:]``: 1 (what generate() passes) gathers rows n-1 of the
    padded hidden states, 0 keeps the whole (padded, sliced back) dim; both bucket."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    compiled = torch.compile(model.forward, backend="npu", dynamic=True,
                             options={"shape_buckets": {"input_ids": {1: [8, 16]}}})
    with torch.no_grad(), record_graphs() as graphs:
        for n in (3, 5, 8, 11, 16):
            ids = torch.randint(1, 100, (1, n))
            kw = {"attention_mask": torch.ones_like(ids), "logits_to_keep": keep}  # as generate()
            out = compiled(input_ids=ids, **kw).logits
            ref = model(input_ids=ids, **kw).logits
            assert out.shape == ref.shape == (1, keep or n, 100)
            torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    report = buckets.REPORTS[-1]
    assert report.safety.safe, report.safety
    # keep=1 is a constant (Dynamo specializes 1): a tail slice gathers row n-1. keep=0 is
    # a symbolic k, traced as x[:, -k:] with k = 0 under the guard -k >= 0 (no size-oblivious
    # flag: this test's first compile follows a torch._dynamo.reset()): a slice from a start
    # the guards prove non-negative, its dim n + k sliced back per call
    assert bool(report.safety.tail_slices) == (keep == 1), report.safety
    assert len(graphs) == report.compiles == 2


def test_slice_from_a_guarded_nonnegative_start():
    """``x[:, -k:]`` traced with k <= 0 guards ``-k >= 0``: a slice from the start |k| whose
    dim ``s + k`` is a prefix (sliced back per call); traced with k > 0 it reads the padded
    end and is refused."""
    def f(x, k):
        return (x * 2)[:, -k:] + 1

    assert _safety(f, torch.randn(2, 7), -3, padded=(1,)).safe
    refused = _safety(f, torch.randn(2, 7), 3, padded=(1,))
    assert not refused.safe and "from its end" in refused.reason


def test_constant_tail_slice_gathers_the_last_valid_rows():
    """``x[:, -4:]`` with a constant (Dynamo specializes generate()'s ``logits_to_keep=1``
    to one): rows n-4 .. n-1 gathered from the padded dim; n < 4 compiles exactly."""
    def f(x):
        return (x * 2)[:, -4:] + 1

    compiled = torch.compile(f, backend="npu", dynamic=True,
                             options={"shape_buckets": {"x": {1: [8]}}})
    with record_graphs() as graphs:
        for n in (5, 7, 6, 3):  # n = 3 last: its graph (size-oblivious) also takes n >= 4
            x = torch.randn(2, n)
            torch.testing.assert_close(compiled(x), f(x))
    tail, small = buckets.REPORTS[-2:]
    # Dynamo's graph for n >= 4 (a guard): one gather graph at bucket 8 for n = 5, 7, 6
    assert tail.safety.safe and [t.keep for t in tail.safety.tail_slices] == [4]
    assert (tail.calls, tail.compiles) == (3, 1)
    # its graph for n < 4 (eager keeps all n rows) is not padded: n = 3 compiles exactly
    assert not small.safety.safe and small.compiles == 1
    assert len(graphs) == 2


class _TinyCausal(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.qkv = torch.nn.Embedding(64, 16), torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.emb(ids)).unflatten(-1, (3, 2, 8)).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(attn.transpose(1, 2).flatten(2))


@pytest.mark.parametrize("dynamic", [None, True], ids=["default", "dynamic_true"])
def test_shape_buckets_option_lengths_1_to_32_no_flag(dynamic):
    """``options={"shape_buckets": ...}`` with no other setting: lengths 1..32, then 1 again.
    Length 1 first: Dynamo specializes it and that call runs in eager; the next length
    recompiles the general graph size-oblivious (``bucket_options``), so a later length 1
    runs it padded to 8: 3 GE graphs, not a 4th for length 1."""
    torch.manual_seed(0)
    model = _TinyCausal().eval()
    compiled = torch.compile(model, backend="npu", dynamic=dynamic,
                             options={"shape_buckets": {"ids": {1: [8, 16, 32]}}})
    first_report = len(buckets.REPORTS)
    assert not fx_config.backed_size_oblivious  # no user flag
    with torch.no_grad(), record_graphs() as graphs:
        for n in [*range(1, 33), 1]:
            ids = torch.randint(0, 64, (2, n))
            torch.testing.assert_close(compiled(ids), model(ids), rtol=1e-5, atol=1e-5)
    assert not fx_config.backed_size_oblivious  # restored after each compile
    reports = buckets.REPORTS[first_report:]
    general = [r for r in reports if r.dims]
    assert len(general) == 1 and general[0].safety.safe, [str(r.safety) for r in reports]
    assert general[0].calls == 32  # lengths 2..32 and the second length 1
    assert len(graphs) == general[0].compiles == 3
    # lengths 2..8 and the second 1 at 8 (8 calls), 9..16 at 16 (8), 17..32 at 32 (16)
    assert general[0].padded_elements == 8 * 8 + 8 * 16 + 16 * 32
    assert sum(r.eager_calls for r in reports) == 1  # length 1's first call
