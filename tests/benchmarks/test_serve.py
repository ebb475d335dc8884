"""``npu-bench --mode serve`` on a handful of tiny requests: it runs every variant and
reports the columns (never timings)."""

from __future__ import annotations

import pytest

from npu_inductor.benchmarks import cli
from npu_inductor.benchmarks.serve import COLUMNS, VARIANTS, stream


def test_stream_is_seeded_and_within_limits() -> None:
    a, b = stream(5, 7, 3, seed=1), stream(5, 7, 3, seed=1)
    assert all(torch_equal(x.prompt, y.prompt) and x.new_tokens == y.new_tokens
               for x, y in zip(a, b))
    assert all(1 <= r.prompt.shape[1] <= 7 and 1 <= r.new_tokens <= 3 for r in a)


def torch_equal(x, y) -> bool:
    return x.shape == y.shape and bool((x == y).all())


@pytest.mark.slow  # ~10 small compiles (~35 s of CPU)
def test_serve_mode_reports_every_variant(capsys) -> None:
    code = cli.main(["--mode", "serve", "--requests", "2", "--max-len", "4", "--max-new", "2",
                     "--threads", "1", "--warm-s", "0", "--passes", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    header = "| " + " | ".join(h for _, h, _ in COLUMNS) + " |"
    assert header in out, out
    rows = {line.split(" | ")[0].strip("| "): line.strip("| ").split(" | ")
            for line in out.splitlines() if line.startswith("| npu_") or line.startswith("| eager")}
    assert list(rows) == list(VARIANTS), out
    col = {c: i for i, (c, _, _) in enumerate(COLUMNS)}
    for variant, cells in rows.items():
        assert len(cells) == len(COLUMNS), cells
        for name in ("cold_cpu", "tok_per_s", "ttft_ms", "vs_eager", "cold_s", "tok_per_s_own",
                     "ttft_ms_own",
                     "tok_per_s_wall", "ttft_ms_wall", "vs_eager_wall"):
            assert cells[col[name]] != "n/a", (variant, name, cells)
        assert (cells[col["compile_cpu"]] == "n/a") == (variant == "eager"), cells
        if variant != "eager":  # the compiles' own CPU time, never 0 for a variant that compiled
            assert float(cells[col["compile_cpu"]]) > 0, cells
        assert cells[col["match"]] == "2/2", (variant, cells)  # greedy tokens equal eager's
    # eager's warm passes are the ones interleaved with each variant
    passes = {v: int(cells[col["warm_passes"]]) for v, cells in rows.items()}
    assert passes["eager"] == sum(n for v, n in passes.items() if v != "eager"), passes
    assert passes["npu_dynamic"] == 1, passes  # --passes 1 --warm-s 0, nothing compiles late
    assert rows["eager"][1] == "0" and int(rows["npu_dynamic"][1]) >= 1
    assert "fail_to_run" not in out


@pytest.mark.slow  # ~5 small compiles
def test_dynamic_stream_reports_compile_time_apart_from_steady_state() -> None:
    from npu_inductor.benchmarks.dynamic import run_dynamic
    from npu_inductor.benchmarks.measure import Warm
    from npu_inductor.benchmarks.runner import Settings

    # (not a first length of 2: it would share the batch dim's symbol, duck sizing)
    rows = {r.backend: r for r in run_dynamic(3, 6, Settings(seed=0),
                                               warm=Warm(cpu_s=0, passes=2))}  # lengths 4, 4, 1
    assert list(rows) == ["eager", "npu_exact", "npu_dynamic", "npu_pow2", "npu_auto"]
    assert all(r.accuracy == "pass" and not r.error for r in rows.values()), rows
    assert all(r.steady_speedup > 0 and r.steady_speedup_wall > 0 for r in rows.values())
    assert all(r.steady_ms > 0 for r in rows.values())
    assert rows["npu_dynamic"].warm_passes == rows["npu_exact"].warm_passes == 2
    # eager's warm passes are the ones interleaved with each variant
    assert rows["eager"].warm_passes == sum(r.warm_passes for b, r in rows.items() if b != "eager")
    assert all((r.compile_cpu is None) == (b == "eager") for b, r in rows.items())
    assert all((r.compile_time is None) == (b == "eager") for b, r in rows.items())
    assert all(r.total_cpu > 0 and r.total_time > 0 for r in rows.values())
    # the cold pass compiled, the warm passes only ran: compile CPU is most of the cold pass
    assert all(rows[b].compile_cpu > rows[b].total_cpu / 2 for b in ("npu_dynamic", "npu_exact"))
    # no backed_size_oblivious flag: plain dynamic=True specializes the length-1 request
    # (Dynamo's 0/1 specialization); shape_buckets keep size 1 in their bucket graph
    assert rows["npu_dynamic"].compiles == 2
    assert rows["npu_exact"].compiles == 2


def test_eager_base_is_its_least_disturbed_passes() -> None:
    """tok/s and TTFT scale from eager's 10th-percentile pass and per-request TTFT (a load
    spike in some passes does not move them), the ``own`` columns stay medians."""
    from npu_inductor.benchmarks.measure import Times
    from npu_inductor.benchmarks.serve import ServeRow, _warm_figures, scale_to_eager

    eager, variant = ServeRow("m", "eager", 2, tokens=10), ServeRow("m", "npu_dynamic", 2, 10)
    cpu = [1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]  # 8 of 11 passes disturbed
    # request 0 took 2 ms to its first token, request 1 4 ms; disturbed passes 3x
    ttfts = [Times(x * ms / 1e3, 0) for x in cpu for ms in (2, 4)]
    _warm_figures(eager, [Times(c, c) for c in cpu], ttfts)
    variant.vs_eager, variant.ttft_vs_eager = 0.5, 2.0
    scale_to_eager([eager, variant])
    assert eager.tok_per_s_own == 10 / 3.0 and abs(eager.ttft_ms_own - 6.0) < 1e-9  # 6 of 2..12
    assert eager.tok_per_s == 10 / 1.0 and abs(eager.ttft_ms - 3.0) < 1e-9  # median(2, 4)
    assert variant.tok_per_s == 5.0 and abs(variant.ttft_ms - 6.0) < 1e-9
