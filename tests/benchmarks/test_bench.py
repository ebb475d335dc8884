"""npu-bench on a tiny configuration: output schema and accuracy, never timings."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from npu_inductor.benchmarks import cli
from npu_inductor.benchmarks.dynamic import pow2_buckets
from npu_inductor.benchmarks.hf import available as hf_available
from npu_inductor.benchmarks.hf import hf_models
from npu_inductor.benchmarks.results import ACCURACY_STATES, COLUMNS
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


def test_hf_models_need_transformers() -> None:
    entries, message = hf_models(["gpt2"])
    if hf_available():
        assert [e.name for e in entries] == ["hf_gpt2"] and message is None
    else:
        assert entries == [] and "transformers is not installed" in message
