"""Timing tools that need a real compile: ``measure.compile_clock`` and the decode-step
split of ``benchmarks/step_split.py`` (tiny graphs; no assert on how long anything took)."""

from __future__ import annotations

import pytest
import torch

from npu_inductor import compile_fx
from npu_inductor.benchmarks.measure import compile_clock, timed
from npu_inductor.benchmarks.step_split import decode_split
from npu_inductor.benchmarks.zoo import Llama


def test_compile_clock_times_the_compile_once_and_not_the_calls() -> None:
    f = torch.compile(lambda x: torch.relu(x) * 2, backend="npu")
    x = torch.randn(4)
    with timed() as block, compile_clock() as clock:
        f(x)
    # nearly all of the block is the compile; counted twice (Dynamo's callback around our
    # backend's functions) it would exceed the block
    assert 0.5 * block.cpu < clock.cpu <= block.cpu
    with compile_clock() as warm:
        f(x)
    assert warm.cpu == 0.0 and warm.wall == 0.0
    from npu_inductor import backend
    assert backend.compile_fx_graph.__name__ == "compile_fx_graph"
    assert not hasattr(backend.compile_fx_graph, "__wrapped__")  # restored


@pytest.mark.slow  # one small decode compile
def test_decode_split_times_every_layer_and_restores_them() -> None:
    before = compile_fx.CompiledGraph.__call__
    torch.manual_seed(0)
    model = Llama(vocab=16, hidden=16, heads=4, kv_heads=2, layers=1, ffn=16, max_pos=8).eval()
    split = decode_split(model, past=3, dynamic=False, passes=1, calls=3)
    layers = ("dynamo + aot", "compile_fx glue", "executor glue", "host model")
    assert set(split) == {"call", "eager", "dynamo + aot, graph stubbed", "ge ops", "host steps",
                          *layers}
    # every timer was crossed (a layer the call skips would leave the host model at 0 and
    # its time in the layer above)
    assert split["host model"] > 0 and split["ge ops"] > 0
    assert 0 < split["host steps"] <= split["ge ops"]
    assert all(split[name] >= 0 for name in layers), split
    assert compile_fx.CompiledGraph.__call__ is before


@pytest.mark.slow  # one small bucket compile
def test_prefill_split_of_a_bucketed_call_times_the_bucket_wrapper() -> None:
    from npu_inductor import buckets
    from npu_inductor.benchmarks.step_split import prefill_split

    before = buckets.BucketedGraph.__call__
    torch.manual_seed(0)
    model = Llama(vocab=1000, hidden=16, heads=4, kv_heads=2, layers=1, ffn=16,
                  max_pos=16).eval()
    split = prefill_split(model, 5, passes=1, calls=3, buckets=[8, 16])
    layers = ("dynamo + aot", "bucket wrapper", "compile_fx glue", "executor glue",
              "host model")
    assert set(layers) <= set(split)
    # the call pads 5 to 8: the wrapper's padding and narrowing were timed, the graph ran
    assert split["bucket wrapper"] > 0 and split["host model"] > 0
    assert all(split[name] >= 0 for name in layers), split
    assert buckets.REPORTS[-1].padded_elements > buckets.REPORTS[-1].real_elements
    assert buckets.BucketedGraph.__call__ is before


@pytest.mark.slow  # one dynamic compile of the stream's decoder
def test_stream_split_times_each_layer_on_every_request_and_restores_the_hooks() -> None:
    from npu_inductor.benchmarks.step_split import stream_split
    from npu_inductor.runtime import host_codegen

    guarded, call = host_codegen._guarded, compile_fx.CompiledGraph.__call__
    ratios = stream_split(passes=2, requests=4, max_len=24, seed=1)
    assert list(ratios) == ["torch.compile call", "CompiledGraph call", "host model"]
    assert all(len(v) == 2 and all(r > 0 for r in v) for v in ratios.values()), ratios
    assert host_codegen._guarded is guarded and compile_fx.CompiledGraph.__call__ is call
