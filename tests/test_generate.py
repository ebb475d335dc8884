"""transformers ``generate()`` with the forward compiled by ``backend="npu"``: tokens equal
eager (greedy, and sampling with a fixed seed), dynamic and static caches, bounded compiles,
no graph breaks. Prefill is bucketed over the prompt length (``shape_buckets`` on
``input_ids``); decode with a static cache is one static graph."""

import pytest
import torch
import torch.fx.experimental._config as fx_config
from harness import record_graphs

from npu_inductor import buckets

transformers = pytest.importorskip("transformers")

BUCKETS = [8, 16]
PROMPTS = (5, 9, 3)  # buckets 8, 16, 8


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: OpenMP threads only contend
    yield
    torch.set_num_threads(threads)


def _llama():
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=1, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def _generate(model, prompt, sample: bool, **kw):
    torch.manual_seed(1234)
    # generate's defaults: logits_to_keep=1, the prefill's hidden[:, -1:] gathers the last
    # valid row of the padded prompt (bucket_tails)
    return model.generate(prompt, max_new_tokens=4, do_sample=sample, pad_token_id=0, **kw)


def _run(cache_kw: dict, lengths: tuple[int, ...] = PROMPTS) -> tuple[list, list]:
    model = _llama()
    prompts = [torch.randint(1, 128, (1, n)) for n in lengths]
    runs = [(p, False) for p in prompts] + [(prompts[1], True)]
    expected = [_generate(model, p, s, **cache_kw) for p, s in runs]
    model.forward = torch.compile(model.forward, backend="npu",
                                  options={"shape_buckets": {"input_ids": {1: BUCKETS}}})
    torch._dynamo.utils.counters.clear()
    first_report = len(buckets.REPORTS)
    with torch.no_grad(), record_graphs() as graphs:
        for (p, s), want in zip(runs, expected):
            torch.testing.assert_close(_generate(model, p, s, **cache_kw), want, rtol=0, atol=0)
    assert not torch._dynamo.utils.counters["graph_break"], \
        dict(torch._dynamo.utils.counters["graph_break"])
    return graphs, buckets.REPORTS[first_report:]


def _ids_len(graph) -> int:
    return graph.lowered.graph.data_ops()[0].output_descs[0].shape[1]


def test_generate_dynamic_cache_greedy_and_sampling():
    graphs, reports = _run({})
    prefill = [g for g in graphs if _ids_len(g) > 1]
    decode = [g for g in graphs if _ids_len(g) == 1]
    # the first prompt's static first trace runs in eager; then one graph per bucket
    assert sorted(_ids_len(g) for g in prefill) == BUCKETS
    bucketed = [r for r in reports if r.dims]
    assert bucketed and all(r.safety.safe for r in bucketed), [str(r.safety) for r in bucketed]
    assert all(r.safety.tail_slices for r in bucketed)  # hidden[:, -1:]
    # decode: the key/value length grows every step: the first step's static trace runs in
    # eager once (EagerFirstCall), then ONE dynamic graph for every prompt and step
    assert len(decode) == 1
    print(f"dynamic cache: {len(prefill)} prefill + {len(decode)} decode GE graphs")


def test_generate_static_cache_one_decode_graph():
    graphs, reports = _run({"cache_implementation": "static"}, PROMPTS[:2])
    prefill = [g for g in graphs if _ids_len(g) > 1]
    decode = [g for g in graphs if _ids_len(g) == 1]
    assert len(decode) == 1  # one static decode graph for every prompt and step
    # prefill writes the static cache at cache_position (index_copy): zero-padded positions
    # would overwrite slot 0, so padding safety refuses and each length compiles exactly
    # (the first length's static trace ran in eager)
    assert len(prefill) <= len(set(PROMPTS[:2])) - 1
    assert any("index_copy" in str(r.safety) for r in reports if r.dims)
    print(f"static cache: {len(prefill)} prefill + {len(decode)} decode GE graphs")


def test_generate_buckets_with_dynamic_true_one_decode_graph():
    """``npu-bench --mode serve --hf llama``'s pow2 variant: ``dynamic=True`` and buckets,
    generate's defaults and no other setting. ``logits_to_keep=1`` is specialized by Dynamo,
    so the prefill ends in ``hidden[:, -1:]``: rewritten per call to gather the last valid
    row (``bucket_tails``), so prefill is bucketed; decode is ONE graph whose cache length
    stays symbolic. Before: with ``backed_size_oblivious`` (which the test used to set) the
    decode step's ``q_len > 1`` became a SymBool that sdpa's ``is_causal`` rejects (a graph
    break: Dynamo re-traced the forward's inner frame, 2 prefill + 2 decode graphs); without
    it, the prefill's sliced-back key/value cache had the bucket's strides, so the decode
    graph traced on it recompiled on the next step."""
    model = _llama()
    prompts = [torch.randint(1, 128, (1, n)) for n in (5, 3)]

    def generate(p):
        return model.generate(p, attention_mask=torch.ones_like(p), max_new_tokens=4,
                              min_new_tokens=4, do_sample=False, pad_token_id=0)

    expected = [generate(p) for p in prompts]
    model.forward = torch.compile(model.forward, backend="npu", dynamic=True,
                                  options={"shape_buckets": {"input_ids": {1: BUCKETS}}})
    first_report = len(buckets.REPORTS)
    torch._dynamo.utils.counters.clear()
    assert not fx_config.backed_size_oblivious  # no user flag
    with torch.no_grad(), record_graphs() as graphs:
        for p, want in zip(prompts, expected):
            torch.testing.assert_close(generate(p), want, rtol=0, atol=0)
    assert not torch._dynamo.utils.counters["graph_break"]
    reports = [r for r in buckets.REPORTS[first_report:] if r.dims]
    # prefill: hidden[:, -1:] is proven (bucket_tails); both prompts run at bucket 8
    assert len(reports) == 1 and reports[0].safety.tail_slices, [str(r.safety) for r in reports]
    assert reports[0].compiles == 1 and reports[0].calls == 2
    # one prefill graph (bucket 8) and ONE decode graph for 2 prompts x 3 cache lengths
    assert sorted(_ids_len(g) for g in graphs) == [1, 8], [_ids_len(g) for g in graphs]
    print(f"dynamic=True + buckets: {len(graphs)} GE graphs (1 prefill, 1 decode)")


def test_generate_auto_buckets_bounded():
    """``shape_buckets="auto"`` (the serve benchmark's setting), generate's defaults, no
    other setting. The prefill's padding is proven (``hidden[:, -1:]``: ``bucket_tails``),
    so its calls are profiled in eager (the first ``AUTO_PROFILE_CALLS``), then compile at
    most ``max_buckets`` graphs; decode (the new key/value row is concatenated along the
    cache: not provable) keeps its dims symbolic: ONE graph for every prompt and cache
    length, no profiling calls."""
    model = _llama()
    prompts = [torch.randint(1, 128, (1, n)) for n in (5, 9, 3)]

    def generate(p):
        return model.generate(p, attention_mask=torch.ones_like(p), max_new_tokens=3,
                              min_new_tokens=3, do_sample=False, pad_token_id=0)

    expected = [generate(p) for p in prompts]
    model.forward = torch.compile(model.forward, backend="npu", dynamic=True,
                                  options={"shape_buckets": "auto"})
    first_report = len(buckets.REPORTS)
    with torch.no_grad(), record_graphs() as graphs:
        for p, want in zip(prompts, expected):
            torch.testing.assert_close(generate(p), want, rtol=0, atol=0)
    reports = buckets.REPORTS[first_report:]
    prefill = [r for r in reports if r.safety.safe]
    assert len(prefill) == 1 and prefill[0].safety.tail_slices, [str(r.safety) for r in reports]
    # 3 prompts < AUTO_PROFILE_CALLS: every prefill ran in eager (profiling), none compiled
    assert (prefill[0].calls, prefill[0].eager_calls, prefill[0].compiles) == (3, 3, 0)
    assert buckets.AUTO_PROFILE_CALLS > len(prompts)
    # decode: one graph for 3 prompts x 2 cache lengths
    assert [_ids_len(g) for g in graphs] == [1], [_ids_len(g) for g in graphs]
