"""The four test models and the LLaMA prefill/decode zoo entries on the acl device, through
the strict fakes of ``acl`` and ``atc`` (tests/fakes): static shapes, ``dynamic=True`` and
shape buckets (exactly one ATC run per bucketed graph, the gear selected on every call), each
compared with eager. Inference only: the acl path is the same for forward and backward
graphs, and the host-device suites cover training."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.fx.experimental._config as fx_config
from fakes.fixtures import fake_acl  # noqa: F401  (fixture)
from harness import FP32_ATOL, FP32_RTOL, STRICT, assert_close, record_graphs
from models import make

from npu_inductor.benchmarks.zoo import ZOO

ACL = {**STRICT, "device": "acl"}


def _model_inputs(name: str, n: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Inputs of the test models with the dim that varies (batch / sequence) set to ``n``."""
    g = torch.Generator().manual_seed(seed + n)
    if name == "mlp":
        return (torch.randn(n, 16, generator=g),)
    if name == "cnn":
        return (torch.randn(n, 3, 8, 8, generator=g),)
    if name in ("bert", "bert_batch"):  # bert_batch: n is the batch (sequence 8)
        b, s = (n, 8) if name == "bert_batch" else (2, n)
        mask = torch.ones(b, s, dtype=torch.long)
        mask[-1, s // 2:] = 0
        return torch.randint(0, 100, (b, s), generator=g), mask
    return (torch.randint(0, 128, (2, n), generator=g),)


# the varying dim of each model's inputs, and its buckets (shape_buckets option)
BUCKETS = {"mlp": {"x": {0: [6, 8]}}, "cnn": {"x": {0: [6, 8]}},
           # padding BERT's sequence is not exact (softmax over padded keys): its batch
           "bert": {"ids": {0: [6, 8]}, "attention_mask": {0: [6, 8]}},
           "llama": {"ids": {1: [6, 8]}}}
SIZES = {"static": (6,), "dynamic": (5, 7), "buckets": (5, 8, 6)}  # not 2 or 3: those
# equal other dims of the inputs, and Dynamo's duck sizing would tie the symbols


def _run(model, calls, options, dynamic):
    eager = copy.deepcopy(model).eval()
    compiled = torch.compile(copy.deepcopy(model).eval(), backend="npu", dynamic=dynamic,
                             options=options)
    with torch.no_grad(), record_graphs() as graphs:
        for inputs in calls:
            assert_close(compiled(*inputs), eager(*inputs), FP32_RTOL, FP32_ATOL, "output")
    assert graphs and all(g.executor.device.kind == "acl" for g in graphs)
    return graphs


def _gears_selected(fake) -> list[list[int]]:
    return [args[2]["dims"] for call, args in fake.calls
            if call == "mdl.set_input_dynamic_dims"]


@pytest.fixture
def _size_oblivious():
    with fx_config.patch(backed_size_oblivious=True):  # size 1 / duck sizes stay symbolic
        yield


@pytest.mark.parametrize("mode", ["static", "dynamic", "buckets"])
@pytest.mark.parametrize("name", ["mlp", "cnn", "bert", "llama"])
def test_model_on_acl(fake_acl, name, mode):  # noqa: F811
    model, _ = make(name)
    along = "bert_batch" if (name, mode) == ("bert", "buckets") else name
    calls = [_model_inputs(along, n) for n in SIZES[mode]]
    options = {**ACL, "shape_buckets": BUCKETS[name]} if mode == "buckets" else ACL
    if name == "cnn" and mode == "buckets":
        # the padding-safety analysis does not know max_pool2d (it would compile each size
        # exactly); padding the batch of an eval CNN is safe, so trust it here
        options["pad"] = "trust"
    graphs = _run(model, calls, options, dynamic=mode != "static")
    runs = fake_acl.atc_runs()
    assert len(runs) == len(graphs) == 1, [r["argv"] for r in runs]
    if mode == "buckets":
        assert len(runs[0]["gears"]) == 2, runs[0]
        assert len(_gears_selected(fake_acl)) == len(calls)
    else:
        assert runs[0]["gears"] == [] and _gears_selected(fake_acl) == []


# The zoo's LLaMA entries at one layer (``layers`` overrides the CI-sized config): the acl
# path is the same for every layer, and one layer is a quarter of the graph to compile.
LAYERS = 1


def _zoo_calls(entry: str, batches: tuple[int, ...]):
    model, _ = ZOO[entry].build(batches[0], 0, layers=LAYERS)
    return model, [ZOO[entry].build(b, 0, layers=LAYERS)[1] for b in batches]


@pytest.mark.parametrize("entry", ["llama_prefill", "llama_decode"])
def test_llama_zoo_static_and_dynamic_on_acl(fake_acl, entry):  # noqa: F811
    model, calls = _zoo_calls(entry, (3, 5))  # not 2: the KV heads
    graphs = _run(model, calls[:1], ACL, dynamic=False)
    assert len(fake_acl.atc_runs()) == len(graphs) == 1
    torch._dynamo.reset()
    graphs = _run(model, calls, ACL, dynamic=True)
    assert len(fake_acl.atc_runs()) == 1 + len(graphs) == 2


def test_llama_zoo_buckets_on_acl(fake_acl, _size_oblivious):  # noqa: F811
    """Prefill bucketed on the prompt length, decode on the batch (KV cache included)."""
    model, _ = ZOO["llama_prefill"].build(2, 0, layers=LAYERS)
    vocab = model.llama.embed.num_embeddings
    calls = [(torch.randint(0, vocab, (2, s), generator=torch.Generator().manual_seed(s)),)
             for s in (9, 16, 12)]
    # pad="trust": the analysis does not know aten.stack (the KV caches); padding the end of
    # a causal prompt leaves the valid positions exact, and the outputs are sliced back
    _run(model, calls, {**ACL, "shape_buckets": {"ids": {1: [12, 16]}}, "pad": "trust"},
         dynamic=True)
    assert len(fake_acl.atc_runs()) == 1 and len(_gears_selected(fake_acl)) == 3
    torch._dynamo.reset()
    model, calls = _zoo_calls("llama_decode", (5, 3))
    buckets = {"ids": {0: [3, 6]}, "past_k": {1: [3, 6]}, "past_v": {1: [3, 6]}}
    _run(model, calls, {**ACL, "shape_buckets": buckets, "pad": "trust"}, dynamic=True)
    runs = fake_acl.atc_runs()
    assert len(runs) == 2 and len(runs[1]["gears"]) == 2, runs
    assert len(_gears_selected(fake_acl)) == 5
