"""Shape buckets: padding to buckets matches eager on the valid region for every size, the
padding-safety analysis refuses what it cannot prove, and compiles stay within budget."""

import itertools
import random

import pytest
import sympy
import torch
import torch.nn.functional as F
from harness import record_graphs
from models import make
from torch.fx.experimental.proxy_tensor import make_fx

import npu_inductor
from npu_inductor import buckets
from npu_inductor.bucket_cost import graph_cost
from npu_inductor.buckets import BucketError, optimal_buckets, round_up_nice
from npu_inductor.padding_safety import prefix_dim


def _last_report():
    return buckets.REPORTS[-1]


def test_llama_prefill_sequence_buckets_every_size():
    model, _ = make("llama")
    model.eval()
    sizes = [8, 16, 32]
    compiled = torch.compile(model, backend="npu", dynamic=True,
                             options={"shape_buckets": {"ids": {1: sizes}}})
    with torch.no_grad(), record_graphs() as graphs:
        for n in range(1, 33):
            ids = torch.randint(0, 128, (2, n))
            torch.testing.assert_close(compiled(ids), model(ids), rtol=1e-5, atol=1e-5)
    report = _last_report()
    assert report.safety.safe, report.safety
    assert report.compiles == len(graphs) <= len(sizes)
    assert list(report.buckets.values()) == [tuple(sizes)]


def test_bert_batch_buckets_every_size():
    model, (ids, mask) = make("bert")
    model.eval()
    sizes = [2, 4, 8]
    compiled = torch.compile(model, backend="npu", dynamic=True,
                             options={"shape_buckets": {"ids": {0: sizes},
                                                        "attention_mask": {0: sizes}}})
    with torch.no_grad(), record_graphs() as graphs:
        for b in range(1, 9):
            ids = torch.randint(0, 100, (b, 8))
            mask = torch.ones(b, 8, dtype=torch.long)
            mask[:, 6:] = 0
            torch.testing.assert_close(compiled(ids, mask), model(ids, mask),
                                       rtol=1e-5, atol=1e-5)
    report = _last_report()
    assert report.safety.safe, report.safety
    assert len(graphs) <= len(sizes)


def test_softmax_over_padded_dim_compiles_exactly():
    def f(x):
        return torch.softmax(x, dim=1) * 3

    compiled = torch.compile(f, backend="npu", dynamic=True,
                             options={"shape_buckets": {"x": {1: [8, 16]}}})
    with record_graphs() as graphs:
        for n in (3, 5, 3):
            x = torch.randn(2, n)
            torch.testing.assert_close(compiled(x), f(x))
    report = _last_report()
    assert not report.safety.safe and "_softmax" in report.safety.reason
    assert report.exact_reasons and len(graphs) == 2  # sizes 3 and 5, each exact


def test_sum_over_zero_padded_dim_is_exact_and_bucketed():
    def f(x, w):
        return (x * w).sum(dim=1)

    compiled = torch.compile(f, backend="npu", dynamic=True,
                             options={"shape_buckets": {"x": {1: [8]}, "w": {0: [8]}}})
    with record_graphs() as graphs:
        for n in (3, 5, 7):
            x, w = torch.randn(4, n), torch.randn(n)
            torch.testing.assert_close(compiled(x, w), f(x, w))
    assert _last_report().safety.safe and len(graphs) == 1


def test_set_buckets_per_tensor_and_above_largest_bucket():
    def f(x):
        return torch.relu(x) + 1

    compiled = torch.compile(f, backend="npu")
    x = npu_inductor.set_buckets(torch.randn(5, 3), {0: [4, 8]})
    torch.testing.assert_close(compiled(x), f(x))
    big = npu_inductor.set_buckets(torch.randn(9, 3), {0: [4, 8]})
    with pytest.raises(BucketError, match="above the largest bucket 8"):
        compiled(big)
    exact = torch.compile(f, backend="npu", options={"exact_above_buckets": True})
    x = npu_inductor.set_buckets(torch.randn(5, 3), {0: [4, 8]})
    exact(x)
    torch.testing.assert_close(exact(big), f(big))


def test_training_is_not_bucketed():
    lin = torch.nn.Linear(4, 4)
    compiled = torch.compile(lin, backend="npu", dynamic=True,
                             options={"shape_buckets": {0: {0: [8]}}})
    x = torch.randn(3, 4)
    out = compiled(x)
    out.sum().backward()
    ref = torch.nn.Linear(4, 4)
    ref.load_state_dict(lin.state_dict())
    torch.testing.assert_close(out, ref(x))
    assert "training graphs are not bucketed" in _last_report().exact_reasons


def test_auto_buckets_on_a_uniform_stream():
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
    compiled = torch.compile(mlp, backend="npu", dynamic=True,
                             options={"shape_buckets": "auto"})
    rng = random.Random(0)
    with torch.no_grad(), record_graphs() as graphs:
        for _ in range(200):
            x = torch.randn(rng.randint(1, 512), 16)
            torch.testing.assert_close(compiled(x), mlp(x))
    report = next(r for r in reversed(buckets.REPORTS) if r.dims)
    print(f"auto buckets: {report.compiles} compiles, padding overhead "
          f"{report.padding_overhead:.1%}, eager calls {report.eager_calls}")
    assert len(graphs) == report.compiles <= 8
    assert report.padding_overhead <= 0.15
    # the chosen sizes are reported; every compile was one of them
    (label, sizes), = report.buckets.items()
    assert label.endswith("dim 0") and 1 <= len(sizes) <= 8 and sizes == tuple(sorted(sizes))


def test_optimal_buckets_minimises_padding():
    samples = [1, 2, 3, 10, 11, 12, 100]
    got = optimal_buckets(samples, 3, 100)
    assert got == (3, 12, 100)
    pad = sum(min(b for b in got if b >= s) - s for s in samples)
    assert pad == (2 + 1) + (2 + 1)
    assert round_up_nice(482) == 512 and round_up_nice(100) == 104


def test_optimal_buckets_minimise_a_quadratic_cost():
    rng = random.Random(2)
    samples = [rng.randint(1, 64) for _ in range(20)]

    def quadratic(b):
        return b + b * b / 8

    def total(bs, cost):
        return sum(cost(min(b for b in bs if b >= s)) for s in samples)

    got = optimal_buckets(samples, 3, 64, quadratic)
    # brute force over every choice of 2 sample sizes below the top bucket
    lower = sorted({s for s in samples if s < 64})
    best = min(total((*pair, 64), quadratic) for pair in itertools.combinations(lower, 2))
    assert got[-1] == 64 and len(got) <= 3 and total(got, quadratic) == best
    linear = optimal_buckets(samples, 3, 64)
    assert total(got, quadratic) < total(linear, quadratic)  # the cost changes the choice


def test_graph_cost_is_quadratic_with_attention_linear_without():
    def attn(q):
        return F.scaled_dot_product_attention(q, q, q, is_causal=True)

    def mlp(x, w):
        return torch.relu(x @ w)

    def cost_of(fn, *args):
        gm = make_fx(fn, tracing_mode="symbolic")(*args)
        first = next(n for n in gm.graph.nodes if n.op == "placeholder").meta["val"]
        sym = first.shape[2 if fn is attn else 0]
        cost = graph_cost(gm, sym.node.expr)
        return [cost(n) for n in (8, 16, 32)]

    c8, c16, c32 = cost_of(attn, torch.randn(1, 2, 8, 4))
    assert c32 - c16 > 2 * (c16 - c8) * 1.5  # second differences grow: quadratic
    m8, m16, m32 = cost_of(mlp, torch.randn(8, 4), torch.randn(4, 4))
    assert m32 - m16 == 2 * (m16 - m8)  # linear


def test_prefix_dim():
    s, b = sympy.symbols("s b", positive=True, integer=True)
    assert prefix_dim(s, {s}) and prefix_dim(s - 1, {s})
    assert not prefix_dim(2 * s, {s}) and not prefix_dim(b * s, {s})


def test_buckets_export_as_atc_gears():
    def f(x, w):
        return torch.relu(x @ w)

    compiled = torch.compile(f, backend="npu", dynamic=True,
                             options={"shape_buckets": {"x": {0: [4, 8, 16]}}})
    compiled(torch.randn(3, 8), torch.randn(8, 2))
    report = _last_report()
    # x's batch dim is the gear; w keeps its traced sizes
    shapes = dict(s.split(":") for s in report.atc_input_shape.split(";"))
    assert sorted(shapes.values()) == ["-1,8", "8,2"]
    assert report.atc_dynamic_dims == "4;8;16"


def test_explain_shows_why_a_size_compiled_exactly():
    def f(x):
        return torch.softmax(x, dim=0)

    x = npu_inductor.set_buckets(torch.randn(5, 3), {0: [8]})
    text = str(npu_inductor.explain(f, x))
    assert "Shape buckets on L['x'] dim 0" in text
    assert "compiled exactly" in text and "_softmax" in text


def test_auto_buckets_profile_every_dim_together():
    def f(x):
        return torch.relu(x) * 2

    compiled = torch.compile(f, backend="npu", dynamic=True, options={"shape_buckets": "auto"})
    rng = random.Random(1)
    with record_graphs() as graphs:
        for _ in range(buckets.AUTO_PROFILE_CALLS + 8):
            x = torch.randn(rng.randint(2, 3), rng.randint(1, 40))
            torch.testing.assert_close(compiled(x), f(x))
    report = _last_report()
    assert len(report.dims) == 2
    assert report.eager_calls == buckets.AUTO_PROFILE_CALLS - 1  # then both dims are decided
    assert 1 <= len(graphs) == report.compiles <= 8


def test_explain_size_one_frame_runs_the_general_bucketed_graph():
    def f(x):  # torch's matmul decomposition pins a transposed q's size 1 (bucket_frames)
        b, s, _ = x.shape
        q = x.view(b, s, 2, 4).transpose(1, 2)
        return q @ q.transpose(-1, -2)

    x = npu_inductor.set_buckets(torch.randn(2, 1, 8), {1: [4, 8]})
    text = str(npu_inductor.explain(f, x))
    assert "Shape buckets on L['x'] dim 1: 0 compile(s)" in text
    assert "runs the frame's general bucketed graph" in text
    assert "compiled exactly" not in text
