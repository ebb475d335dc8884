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
    # logits_to_keep=0: the prefill returns every position's logits. generate's default (1)
    # slices the last row, x[:, -1:], which reads the padded tail: padding safety refuses it
    # and each prompt length would compile exactly.
    return model.generate(prompt, max_new_tokens=4, do_sample=sample,
                          pad_token_id=0, logits_to_keep=0, **kw)


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
    # decode: the key/value length grows every step; at most the first step's static trace
    # (run in eager once, then compiled if repeated) and one dynamic graph
    assert 1 <= len(decode) <= 2
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
    generate's defaults (``logits_to_keep`` is a symbolic int, ``hidden[:, -k:]``): that
    slice is rewritten per call to gather the last valid rows, so prefill is bucketed; decode is
    ONE graph whose cache length stays symbolic (not a graph per cache length). Before,
    the symbolic slice start passed the analysis and slicing back the data-dependent
    logits length raised ``TypeError: Cannot convert symbols to int``."""
    model = _llama()
    prompts = [torch.randint(1, 128, (1, n)) for n in (5, 3)]

    def generate(p):
        return model.generate(p, attention_mask=torch.ones_like(p), max_new_tokens=4,
                              min_new_tokens=4, do_sample=False, pad_token_id=0)

    expected = [generate(p) for p in prompts]
    model.forward = torch.compile(model.forward, backend="npu", dynamic=True,
                                  options={"shape_buckets": {"input_ids": {1: BUCKETS}}})
    first_report = len(buckets.REPORTS)
    # the benchmark's setting: size 1 stays symbolic, so the int logits_to_keep (1) does too
    with torch.no_grad(), record_graphs() as graphs, fx_config.patch(backed_size_oblivious=True):
        for p, want in zip(prompts, expected):
            torch.testing.assert_close(generate(p), want, rtol=0, atol=0)
    reports = [r for r in buckets.REPORTS[first_report:] if r.dims]
    # prefill: hidden[:, -k:] by the int logits_to_keep is proven (bucket_tails)
    prefill = [r for r in reports if r.safety.safe and r.safety.tail_slices]
    assert prefill, [str(r.safety) for r in reports]
    # every Dynamo graph compiles ONE GE graph: prefill pads both prompts to 8, decode keeps
    # the cache length symbolic (5 cache lengths); Dynamo traces prefill and decode twice
    assert all(r.compiles == 1 for r in reports), [(str(r.safety), r.compiles) for r in reports]
    assert len(graphs) == len(reports) <= 4, len(graphs)


def test_generate_auto_buckets_bounded():
    """``shape_buckets="auto"`` (the serve benchmark's setting): padding is not proven for
    generate's default prefill (``hidden[:, -k:]``) nor for decode (the new key/value row is
    concatenated along the cache), so auto keeps those dims symbolic: no eager profiling
    calls and no graph per prompt length or cache length."""
    model = _llama()
    prompts = [torch.randint(1, 128, (1, n)) for n in (5, 9, 3)]

    def generate(p):
        return model.generate(p, attention_mask=torch.ones_like(p), max_new_tokens=3,
                              min_new_tokens=3, do_sample=False, pad_token_id=0)

    expected = [generate(p) for p in prompts]
    model.forward = torch.compile(model.forward, backend="npu", dynamic=True,
                                  options={"shape_buckets": "auto"})
    first_report = len(buckets.REPORTS)
    with torch.no_grad(), record_graphs() as graphs, fx_config.patch(backed_size_oblivious=True):
        for p, want in zip(prompts, expected):
            torch.testing.assert_close(generate(p), want, rtol=0, atol=0)
    reports = buckets.REPORTS[first_report:]
    assert sum(r.eager_calls for r in reports) == 0
    # Dynamo's prefill graphs (its first trace, then one more) and one decode graph
    assert len(graphs) <= 3, len(graphs)
