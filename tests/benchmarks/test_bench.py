"""npu-bench on a tiny configuration: output schema and accuracy, never timings."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from npu_inductor.benchmarks import cli
from npu_inductor.benchmarks.dynamic import padding_overhead, pow2_buckets
from npu_inductor.benchmarks.hf import available as hf_available
from npu_inductor.benchmarks.hf import hf_models
from npu_inductor.benchmarks.results import ACCURACY_STATES, COLUMNS
from npu_inductor.benchmarks.runner import Backend, Settings, make_backends, run_case
from npu_inductor.benchmarks.zoo import ZOO, Llama, expand_names

BACKENDS = ("eager", "npu", "npu_nofuse")


@pytest.fixture(scope="module")
def bench_out(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("bench")
    cli.main(["--models", "mlp", "--mode", "inference", "--repeat", "2",
              "--warmup", "0", "--threads", "1", "--out", str(out)])
    return out


def test_csv_schema_and_accuracy(bench_out) -> None:
    with (bench_out / "results.csv").open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == COLUMNS
    assert [(r["model"], r["mode"], r["backend"]) for r in rows] == [
        ("mlp", "inference", b) for b in BACKENDS]
    for r in rows:
        assert r["accuracy"] == "pass", r
        assert float(r["abs_latency"]) > 0 and float(r["speedup"]) > 0
        assert float(r["dynamo_peak_mem"]) >= 0
    graph_rows = [r for r in rows if r["backend"] != "eager"]
    assert all(int(r["ge_graphs"]) >= 1 and int(r["ge_ops"]) > 0 for r in graph_rows)
    # kernel kinds on the target SoC (Ascend910B1): the MLP is all AI Core
    assert all(0 < int(r["aicore_ops"]) <= int(r["ge_ops"]) for r in graph_rows), graph_rows
    assert all(r["aicpu_ops"] == "0" and r["unproven_ops"] == "0" for r in graph_rows)
    assert all(float(r["compilation_latency"]) > 0 for r in graph_rows)
    npu = next(r for r in rows if r["backend"] == "npu")  # cold: an empty compile cache
    assert int(npu["cache_misses"]) >= 1 and int(npu["cache_hits"]) == 0
    assert npu["warm_kind"] == "fresh_process_warm_cache"  # warm: every graph a cache hit
    assert int(npu["warm_cache_hits"]) == int(npu["cache_misses"])


def test_json_and_charts(bench_out) -> None:
    data = json.loads((bench_out / "results.json").read_text())
    assert {"machine", "command", "settings", "notes", "results"} <= set(data)
    assert data["machine"]["threads"] == 1
    assert all(tuple(r) == COLUMNS for r in data["results"])
    assert {r["accuracy"] for r in data["results"]} <= set(ACCURACY_STATES)
    for chart in ("speedup", "memory", "compile_time"):
        assert (bench_out / f"{chart}.png").read_bytes()[:4] == b"\x89PNG"


def _raise(gm, example_inputs):
    raise RuntimeError("backend exploded")


def test_failing_backend_is_a_row_not_a_crash() -> None:
    broken = Backend("broken", lambda m: torch.compile(m, backend=_raise))
    eager = Backend("eager", lambda m: m)
    rows = run_case(ZOO["mlp"], "inference", [eager, broken], Settings(repeat=1, warmup=0))
    assert [r.accuracy for r in rows] == ["pass", "fail_to_run"]
    assert "backend exploded" in rows[1].error and rows[1].abs_latency is None


def test_llama_decode_matches_prefill() -> None:
    """One cached decode step gives the logits of a full prefill's last position."""
    torch.manual_seed(0)
    llama = Llama(vocab=64, hidden=32, heads=4, kv_heads=2, layers=2, ffn=48).eval()
    ids = torch.randint(0, 64, (2, 9))
    with torch.no_grad():
        full, k_full, _ = llama.prefill(ids)
        _, k, v = llama.prefill(ids[:, :8])
        step, k2, _ = llama.decode(ids[:, 8:], k, v)
    torch.testing.assert_close(step[:, 0], full[:, -1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k2, k_full, rtol=1e-5, atol=1e-5)


def test_zoo_names_and_buckets() -> None:
    assert expand_names(["mlp", "llama"]) == ["mlp", "llama_prefill", "llama_decode"]
    with pytest.raises(KeyError, match="unknown model"):
        expand_names(["nope"])
    assert pow2_buckets(96) == [8, 16, 32, 64, 96]
    base = expand_names(["base"])
    assert base and all(n.endswith("_base") and not ZOO[n].default for n in base)
    assert {n.removesuffix("_base") for n in base} == {n for n, m in ZOO.items() if m.default}


def test_base_zoo_entry_compiles_and_matches() -> None:
    """One realistic-size entry end to end (the others share its architectures)."""
    backends = make_backends([])[:2]  # eager, npu
    rows = run_case(ZOO["mlp_base"], "inference", backends, Settings(repeat=1, warmup=0))
    assert [r.accuracy for r in rows] == ["pass", "pass"], [r.error for r in rows]
    assert padding_overhead([5, 8, 9], [8, 16]) == pytest.approx((8 + 8 + 16) / 22 - 1)


def test_hf_models_need_transformers() -> None:
    entries, message = hf_models(["gpt2"])
    if hf_available():
        assert [e.name for e in entries] == ["hf_gpt2"] and message is None
    else:
        assert entries == [] and "transformers is not installed" in message


def test_npu_freeze_variant_folds_and_runs_inference_only() -> None:
    backends = [b for b in make_backends(["npu_freeze"]) if b.name in ("eager", "npu_freeze")]
    settings = Settings(repeat=1, warmup=0)
    rows = run_case(ZOO["resnet18"], "inference", backends, settings)
    frozen = next(r for r in rows if r.backend == "npu_freeze")
    assert frozen.accuracy == "pass"
    assert frozen.ge_ops is not None and frozen.ge_ops < 69  # BatchNorms folded into Conv2D
    rows = run_case(ZOO["mlp"], "training", backends, settings)
    assert [r.backend for r in rows] == ["eager"]


def test_training_rows_report_step_cpu_time() -> None:
    """Training rows carry each backend's median step CPU ms and eager's over it."""
    from npu_inductor.benchmarks.report import TRAINING, format_markdown

    backends = [b for b in make_backends([]) if b.name in ("eager", "npu")]
    rows = run_case(ZOO["mlp"], "training", backends, Settings(repeat=3, warmup=0))
    eager, npu = rows
    assert eager.accuracy == npu.accuracy == "pass"
    assert eager.step_cpu_ms > 0 and npu.step_cpu_ms > 0
    assert eager.cpu_speedup == 1.0
    assert npu.cpu_speedup == pytest.approx(eager.step_cpu_ms / npu.step_cpu_ms)
    table = format_markdown(rows, TRAINING)
    assert "| step cpu ms | cpu vs eager |" in table
    assert f"{npu.step_cpu_ms:.3f}" in table


def test_prime_runs_a_training_step_with_a_compiled_optimizer_step() -> None:
    """``prime`` hands the backend a module and then the optimizer's ``step`` (so Dynamo's
    optimizer imports land outside the timed compile) after a backward."""
    from npu_inductor.benchmarks.runner import prime

    wrapped: list = []

    def wrap(fn):
        wrapped.append(fn)
        return fn

    prime([Backend("eager", wrap)])
    module, step = wrapped
    assert isinstance(module, torch.nn.Linear) and module.weight.grad is not None
    assert isinstance(step.__self__, torch.optim.SGD) and step.__func__.__name__ == "step"
    wrapped.clear()
    prime([Backend("eager", wrap)], train=False)  # inference runs: the forward alone
    assert len(wrapped) == 1 and wrapped[0].weight.grad is None
