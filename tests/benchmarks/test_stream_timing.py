"""The stream benchmarks' timing helpers (benchmarks/measure.py, dynamic.py, serve.py): the
CPU clock, how many passes run, medians and request-by-request interleaving. Fast: no
compiles, and no assert on how long anything took."""

from __future__ import annotations

import time

import pytest
import torch

from npu_inductor.benchmarks import dynamic, serve
from npu_inductor.benchmarks.measure import (
    Times,
    Warm,
    median_pass,
    median_ratio,
    ratios,
    select_names,
    stream_passes,
    timed,
)


def test_timed_adds_to_a_given_total_even_when_the_block_raises() -> None:
    total = Times(cpu=1.0, wall=2.0)
    with pytest.raises(RuntimeError), timed(total):
        raise RuntimeError("boom")
    assert total.cpu >= 1.0 and total.wall >= 2.0
    before = Times(total.cpu, total.wall)
    with timed(total) as same:
        sum(range(10_000))
    assert same is total and total.cpu >= before.cpu and total.wall > before.wall


def test_cpu_clock_does_not_count_waiting() -> None:
    # what makes the published figures reproduce on a loaded machine: time spent off the CPU
    # (here asleep; under load, waiting for a core) is wall time, not CPU time
    with timed() as t:
        time.sleep(0.2)
    assert t.wall >= 0.2
    assert t.cpu < 0.1


def _counting_pass(compiled: list[int], per_pass: list[int]):
    """A warm pass of 1 CPU s that adds ``per_pass[i]`` compiles on its i-th call."""
    calls = iter(per_pass)

    def run(i: int) -> Times:
        compiled[0] += next(calls, 0)
        return Times(cpu=1.0, wall=3.0)

    return run


def test_warm_passes_run_until_both_minimums() -> None:
    def passes(warm: Warm, **kw) -> int:
        compiled = [0]
        cold, done = stream_passes(lambda: Times(), _counting_pass(compiled, []),
                                   lambda t: t, lambda: compiled[0], warm, **kw)
        assert len(cold) == 1
        return len(done)

    assert passes(Warm(cpu_s=3.5, passes=2)) == 4
    assert passes(Warm(cpu_s=3.5, passes=6)) == 6
    assert passes(Warm(cpu_s=100, passes=1), max_passes=5) == 4  # the cold pass counts
    assert passes(Warm(cpu_s=0, passes=0)) == 1
    seen: list[int] = []
    stream_passes(lambda: Times(), lambda i: seen.append(i) or Times(1.0, 1.0), lambda t: t,
                  lambda: 0, Warm(cpu_s=0, passes=3))
    assert seen == [0, 1, 2]


def test_a_warm_pass_that_compiles_is_cold_and_restarts_the_warm_passes() -> None:
    compiled = [0]
    # warm pass 0 is steady, pass 1 compiles (auto after recording sizes), then steady
    cold, done = stream_passes(lambda: Times(cpu=9.0), _counting_pass(compiled, [0, 2]),
                               lambda t: t, lambda: compiled[0], Warm(cpu_s=0, passes=2))
    assert [t.cpu for t in cold] == [9.0, 1.0, 1.0] and len(done) == 2
    forever = [0]

    def always(i: int) -> Times:
        forever[0] += 1
        return Times()

    with pytest.raises(RuntimeError, match="still compiling after 5 passes"):
        stream_passes(lambda: Times(), always, lambda t: t, lambda: forever[0], Warm(),
                      max_passes=5)


def test_median_ratio_ignores_one_disturbed_pass() -> None:
    assert median_ratio([2.0, 4.0, 100.0], [1.0, 1.0, 1.0]) == 4.0
    assert median_ratio([3.0, 3.0], [1.0, 2.0]) == pytest.approx(2.25)
    with pytest.raises(ValueError, match="equal, non-empty"):
        median_ratio([1.0], [1.0, 2.0])


def test_dynamic_warm_pass_interleaves_and_alternates_order() -> None:
    calls: list[str] = []

    def eager(x: torch.Tensor) -> torch.Tensor:
        calls.append("e")
        return x

    def graph(x: torch.Tensor) -> torch.Tensor:
        calls.append("g")
        return x

    requests = [(torch.ones(1),)] * 3
    mine, theirs = dynamic._warm_pass(eager, graph, requests, 0)
    assert calls == ["e", "g", "g", "e", "e", "g"]
    assert isinstance(mine, Times) and isinstance(theirs, Times) and mine is not theirs
    calls.clear()
    dynamic._warm_pass(eager, graph, requests, 1)  # next pass: order flips
    assert calls == ["g", "e", "e", "g", "g", "e"]


def test_serve_warm_pass_keeps_the_variants_first_token_times() -> None:
    calls: list[str] = []

    def gen(name: str, ttft: float) -> serve.Generate:
        def generate(r: serve.Request) -> tuple[torch.Tensor, Times]:
            calls.append(name)
            return r.prompt, Times(ttft, ttft)
        return generate

    reqs = [serve.Request(torch.ones(1, 2, dtype=torch.long), 1)] * 2
    mine, theirs, ttfts, eager_ttfts = serve._warm_pass(gen("e", 1.0), gen("g", 2.0), reqs, 1)
    assert calls == ["g", "e", "e", "g"]
    assert [t.cpu for t in ttfts] == [2.0, 2.0] and [t.cpu for t in eager_ttfts] == [1.0, 1.0]
    assert mine is not theirs


def test_variants_selection_keeps_eager_and_order() -> None:
    names = [v.name for v in dynamic.variants(64)]
    assert select_names(names, ["auto", "npu_dynamic"]) == ["eager", "npu_dynamic", "npu_auto"]
    assert select_names(serve.VARIANTS, ["pow2", "exact"]) == ["eager", "npu_exact", "npu_pow2"]
    assert select_names(serve.VARIANTS, None) == list(serve.VARIANTS)
    with pytest.raises(SystemExit, match="unknown --variants"):
        select_names(serve.VARIANTS, ["fast"])


def test_median_pass_and_ratios_take_cpu_and_wall_apart() -> None:
    passes = [Times(1.0, 9.0), Times(3.0, 1.0), Times(2.0, 5.0)]
    assert median_pass(passes) == Times(2.0, 5.0)  # not the wall time of the median CPU pass
    vs = ratios([Times(4.0, 4.0), Times(6.0, 2.0)], [Times(2.0, 1.0), Times(2.0, 1.0)])
    assert vs == Times(2.5, 3.0)


def test_serve_figures_are_eagers_scaled_by_each_variants_ratio() -> None:
    # the base: eager's quiet (10th-percentile) figures, not its medians
    eager = serve.ServeRow("m", "eager", 2, tokens=10, tok_per_s_own=400.0, ttft_ms_own=2.5,
                           tok_per_s_quiet=500.0, ttft_ms_quiet=2.0)
    graph = serve.ServeRow("m", "npu_dynamic", 2, tokens=10, tok_per_s_own=200.0,
                           ttft_ms_own=9.0, vs_eager=0.5, ttft_vs_eager=1.5)
    failed = serve.ServeRow("m", "npu_exact", 2, error="boom")
    serve.scale_to_eager([eager, graph, failed])
    assert (eager.tok_per_s, eager.ttft_ms, eager.vs_eager) == (500.0, 2.0, 1.0)
    assert graph.tok_per_s == pytest.approx(250.0) and graph.ttft_ms == pytest.approx(3.0)
    assert graph.tok_per_s_own == 200.0  # its own median stays beside it
    assert failed.tok_per_s is None and failed.ttft_ms is None


def test_cache_folders_fresh_per_run_or_kept_with_cache_dir(tmp_path) -> None:
    import os

    from npu_inductor.benchmarks import cli

    names = ("NPU_INDUCTOR_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")
    before = [os.environ.get(n) for n in names]
    with cli.fresh_caches():
        fresh = [os.environ[n] for n in names]
        assert all(os.path.isdir(f) and not os.listdir(f) for f in fresh)
    assert not any(os.path.exists(f) for f in fresh)  # removed after the run
    keep = cli.parse_args(["--mode", "serve", "--cache-dir", str(tmp_path)]).cache_dir
    with cli.fresh_caches(keep):
        kept = [os.environ[n] for n in names]
        assert kept == [str(tmp_path / "npu_inductor"), str(tmp_path / "torch")]
        os.makedirs(kept[0])
    assert os.path.isdir(kept[0])  # kept
    assert [os.environ.get(n) for n in names] == before  # environment restored


def test_padding_bound_pads_each_request_to_the_buckets_it_used() -> None:
    from npu_inductor.buckets import BucketReport

    ids = torch.arange(10).reshape(2, 5)
    padded = dynamic._padded(ids, (4, 8, 16))
    assert padded.shape == (2, 8) and padded[:, :5].equal(ids) and not padded[:, 5:].any()
    assert dynamic._padded(ids, (2, 4)).equal(ids)  # above the largest bucket: as it is
    seq = BucketReport(["L['ids'] dim 0", "L['ids'] dim 1"],
                       buckets={"L['ids'] dim 0": (2,), "L['ids'] dim 1": (8, 64)})
    assert dynamic._sequence_buckets([BucketReport([]), seq]) == (8, 64)
    assert dynamic._sequence_buckets([BucketReport(["L['ids'] dim 0"])]) is None
    calls = []
    model = lambda ids: calls.append(ids.shape[1])  # noqa: E731
    requests = [(ids,), (ids[:, :3],)]
    bound = dynamic.padding_bound(model, requests, (4, 8), passes=2)
    assert bound is not None and bound > 0
    # every request ran at its own length and at its bucket's, in both orders
    assert sorted(calls) == sorted([5, 8, 3, 4] * 2)
    assert calls[:4] == [5, 8, 4, 3]
