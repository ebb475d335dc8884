"""The stream benchmarks' timing helpers (benchmarks/measure.py, dynamic.py, serve.py): the
CPU clock, how many passes run, medians and request-by-request interleaving. Fast: no
compiles, and no assert on how long anything took."""

from __future__ import annotations

import time

import pytest
import torch

from npu_inductor.benchmarks import dynamic, serve
from npu_inductor.benchmarks.measure import Times, median_ratio, settle, timed, warm_passes


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


def test_warm_passes_run_until_both_minimums() -> None:
    def one_second(i: int) -> Times:
        return Times(cpu=1.0, wall=3.0)

    assert len(warm_passes(one_second, min_cpu_s=3.5, min_passes=2)) == 4
    assert len(warm_passes(one_second, min_cpu_s=3.5, min_passes=6)) == 6
    assert len(warm_passes(one_second, min_cpu_s=100, min_passes=1, max_passes=5)) == 5
    assert len(warm_passes(one_second, min_cpu_s=0, min_passes=0)) == 1
    seen: list[int] = []
    warm_passes(lambda i: seen.append(i) or Times(1.0, 1.0), min_cpu_s=0, min_passes=3)
    assert seen == [0, 1, 2]


def test_settle_repeats_cold_passes_while_they_compile() -> None:
    compiled = [0]
    per_pass = iter([5, 2, 0, 0])  # compiles in pass 1, pass 2, then none

    def run() -> Times:
        compiled[0] += next(per_pass)
        return Times(1.0, 1.0)

    assert len(settle(run, lambda: compiled[0])) == 3
    assert len(settle(lambda: Times(), lambda: 0)) == 1  # nothing compiled: one pass
    growing = [0]

    def always() -> Times:
        growing[0] += 1
        return Times()

    assert len(settle(always, lambda: growing[0], max_passes=4)) == 4


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
    eager_times: list[Times] = []
    mine = dynamic._warm_pass(eager, graph, requests, 0, eager_times)
    assert calls == ["e", "g", "g", "e", "e", "g"]
    assert len(eager_times) == 1 and isinstance(mine, Times) and mine is not eager_times[0]
    calls.clear()
    dynamic._warm_pass(eager, graph, requests, 1, eager_times)  # next pass: order flips
    assert calls == ["g", "e", "e", "g", "g", "e"]


def test_serve_warm_pass_keeps_the_variants_first_token_times() -> None:
    calls: list[str] = []

    def gen(name: str, ttft: float) -> serve.Generate:
        def generate(r: serve.Request) -> tuple[torch.Tensor, Times]:
            calls.append(name)
            return r.prompt, Times(ttft, ttft)
        return generate

    reqs = [serve.Request(torch.ones(1, 2, dtype=torch.long), 1)] * 2
    eager_times: list[Times] = []
    ttfts: list[Times] = []
    serve._warm_pass(gen("e", 1.0), gen("g", 2.0), reqs, 1, eager_times, ttfts)
    assert calls == ["g", "e", "e", "g"]
    assert [t.cpu for t in ttfts] == [2.0, 2.0] and len(eager_times) == 1


def test_variants_selection_keeps_eager_and_order() -> None:
    names = [v.name for v in dynamic.select(dynamic.variants(64), ["auto", "npu_dynamic"])]
    assert names == ["eager", "npu_dynamic", "npu_auto"]
    assert serve.select(["pow2", "exact"]) == ["eager", "npu_exact", "npu_pow2"]
    assert serve.select(None) == list(serve.VARIANTS)
    with pytest.raises(SystemExit, match="unknown --variants"):
        serve.select(["fast"])
