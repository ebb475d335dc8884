"""The on-disk compile cache (npu_inductor/cache.py): hits in a fresh process, misses on
change, damaged entries rebuilt, concurrent writers, nothing executed from planted files,
LRU eviction, the ``npu-inductor cache`` command, and ATC skipped on a hit."""

import json
import logging
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from fakes.fixtures import env_for_workers

from npu_inductor import cache
from npu_inductor.compile_fx import record_reports
from npu_inductor.lowering.lower import OutputSlot

# Compiles, in one process: an MLP training step (forward + backward graphs), a
# dynamic=True function and a shape-bucketed function on the device argv[2]; prints the
# outputs, how many graphs were lowered and the caches' counters.
WORKLOAD = """
import json, sys, torch
from npu_inductor.lowering import lower
calls = []
real = lower._lower_graph
lower._lower_graph = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
opts = {"cache_dir": sys.argv[1], "fallback": "error", "device": sys.argv[2]}
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
x = torch.randn(4, 6)
loss = torch.compile(mlp, backend="npu", options=opts)(x).square().sum()
loss.backward()
def scaled(a, b):
    return torch.relu(a) * 2 + b.sum(-1, keepdim=True)
dyn = torch.compile(scaled, backend="npu", dynamic=True, options=opts)
d = [dyn(torch.ones(n, 5) * n, torch.ones(n, 3)) for n in (3, 7)]
bucket_opts = {**opts, "shape_buckets": {"a": {0: [4, 8]}}}
buck = torch.compile(scaled, backend="npu", dynamic=True, options=bucket_opts)
b = buck(torch.arange(15.0).view(3, 5), torch.ones(3, 3))
from npu_inductor.cache import COUNTERS
from torch._dynamo.utils import counters
print(json.dumps({"loss": loss.item(), "grad": mlp[0].weight.grad.sum().item(),
                  "dyn": [t.sum().item() for t in d], "bucket": b.tolist(),
                  "lowerings": len(calls), "counters": dict(COUNTERS),
                  "aot_hits": counters["aot_autograd"]["autograd_cache_hit"]}))
"""


@pytest.fixture(autouse=True)
def _own_torch_cache(tmp_path, monkeypatch):
    """AOTAutograd's cache (npu_inductor/aot_cache.py) in a folder of this test's own."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch_cache"))


def _python(code: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    env = {**os.environ, **(env or {}), "NPU_INDUCTOR_CACHE_DIR": "off"}  # options name it
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _entries(root: Path) -> list[Path]:
    return sorted((root / "entries").glob("*.npuc"))


@pytest.mark.slow  # two interpreters
def test_fresh_process_loads_every_graph_without_lowering_or_atc(tmp_path):
    """On the acl device (the shared fakes of acl and atc, tests/fakes/)."""
    env = env_for_workers(tmp_path)
    root = tmp_path / "cache"
    cold = _result(_python(WORKLOAD, str(root), "acl", env=env))
    atc_runs = len((tmp_path / "atc_runs.jsonl").read_text().splitlines())
    warm = _result(_python(WORKLOAD, str(root), "acl", env=env))
    assert len((tmp_path / "atc_runs.jsonl").read_text().splitlines()) == atc_runs > 0
    assert cold["lowerings"] > 0 and cold["counters"].get("hit", 0) == 0
    assert warm["lowerings"] == 0, warm
    assert cold["aot_hits"] == 0 and warm["aot_hits"] >= 2  # training step, dynamic=True
    assert warm["counters"]["hit"] == cold["counters"]["miss"] and "miss" not in warm["counters"]
    for name in ("loss", "grad", "dyn", "bucket"):
        assert warm[name] == cold[name], name
    assert cold["bucket"][2] == [23.0, 25.0, 27.0, 29.0, 31.0]  # relu(a)*2 + 3, unpadded
    info = cache.info(root)
    assert info["entries"] == len(_entries(root)) >= 4  # fw, bw, dynamic, bucket(s)
    assert all(g.om for p in _entries(root) for g in cache.decode(p.read_bytes(), p.stem).graphs)
    assert info["hits"] == warm["counters"]["hit"]


SMALL = """
import json, sys, torch
from npu_inductor.cache import COUNTERS
fn = torch.compile(lambda x: torch.tanh(x) * 3, backend="npu",
                   options={"cache_dir": sys.argv[1], "fallback": "error"})
print(json.dumps({"out": fn(torch.arange(6.0)).tolist(), "counters": dict(COUNTERS)}))
"""


@pytest.mark.slow  # two interpreters
def test_two_processes_compiling_at_once_leave_one_valid_entry(tmp_path):
    procs = [_python(SMALL, str(tmp_path)) for _ in range(2)]
    results = [_result(p) for p in procs]
    assert results[0]["out"] == results[1]["out"] == (torch.arange(6.0).tanh() * 3).tolist()
    keys = {p.stem for p in _entries(tmp_path)}
    for key in keys:
        cache.decode(cache.entry_path(tmp_path, key).read_bytes(), key)  # whole and valid
    assert not list((tmp_path / "entries").glob("*.tmp"))
    assert len(keys) == max(r["counters"].get("miss", 0) + r["counters"].get("hit", 0)
                            for r in results)


def _compile_and_report(fn, *args, **options):
    options = {"fallback": "error", **options}
    torch._dynamo.reset()
    with record_reports() as reports:
        out = torch.compile(fn, backend="npu", options=options)(*args)
    return out, [r.cache for r in reports]


def _double(x):
    return x * 2 + 1


def _triple(x):
    return x * 3 + 1


def test_changed_option_dtype_or_code_misses(tmp_path):
    x = torch.randn(3, 4)
    d = str(tmp_path)
    assert _compile_and_report(_double, x, cache_dir=d)[1] == ["miss"]
    out, states = _compile_and_report(_double, x, cache_dir=d)
    assert states == ["hit"]
    torch.testing.assert_close(out, x * 2 + 1)
    assert _compile_and_report(_double, x, cache_dir=d, precision_mode="force_fp32")[1] == ["miss"]
    assert _compile_and_report(_double, x.double(), cache_dir=d)[1] == ["miss"]
    out, states = _compile_and_report(_triple, x, cache_dir=d)
    assert states == ["miss"]
    torch.testing.assert_close(out, x * 3 + 1)
    assert _compile_and_report(_double, x, cache_dir="off")[1] == ["off"]



def test_other_options_get_their_own_aot_autograd_entry(tmp_path):
    """AOTAutograd's key holds npu_inductor's options and versions (``cache_key_tag``), so a
    graph compiled with other options than an existing entry's is stored beside it and hits
    next time, instead of bypassing that entry on every start and never being stored."""
    from torch._dynamo.utils import counters

    x = torch.randn(3, 4)
    d = str(tmp_path / "npu")
    counters.clear()
    _compile_and_report(_double, x, cache_dir=d)
    _compile_and_report(_double, x, cache_dir=d, precision_mode="force_fp32")
    _compile_and_report(_double, x, cache_dir=d, precision_mode="force_fp32")
    aot = counters["aot_autograd"]
    assert (aot["autograd_cache_miss"], aot["autograd_cache_hit"],
            aot["autograd_cache_bypass"]) == (2, 1, 0)
    before = torch.compiler.config.cache_key_tag
    out, states = _compile_and_report(_double, x, cache_dir=d)  # the first entry still hits
    assert states == ["hit"] and counters["aot_autograd"]["autograd_cache_hit"] == 2
    assert torch.compiler.config.cache_key_tag == before  # restored after the compile
    torch.testing.assert_close(out, x * 2 + 1)

def _flip_bit(data: bytes) -> bytes:
    at = len(data) - 7
    return data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1:]


def _wrong_version(data: bytes) -> bytes:
    import hashlib

    payload = data[len(cache.MAGIC) + 65:]
    size = int.from_bytes(payload[:8], "big")
    header = json.loads(payload[8:8 + size])
    header["format"] = cache.FORMAT_VERSION + 1
    new = json.dumps(header).encode()
    payload = len(new).to_bytes(8, "big") + new + payload[8 + size:]
    return cache.MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


@pytest.mark.parametrize("damage", [lambda d: d[:len(d) // 2], _flip_bit, _wrong_version],
                         ids=["truncated", "bit_flip", "wrong_version"])
def test_damaged_entry_is_rebuilt_with_one_warning(tmp_path, caplog, damage):
    x = torch.randn(5)
    _compile_and_report(_double, x, cache_dir=str(tmp_path))
    (path,) = _entries(tmp_path)
    good = path.read_bytes()
    path.write_bytes(damage(good))
    cache.reset_warnings()
    with caplog.at_level(logging.WARNING, logger="npu_inductor"):
        out, states = _compile_and_report(_double, x, cache_dir=str(tmp_path))
        assert cache.load(tmp_path, path.stem) is not None  # rebuilt: loads again
        path.write_bytes(damage(good))
        assert cache.load(tmp_path, path.stem) is None  # same file again: no second warning
    torch.testing.assert_close(out, x * 2 + 1)
    assert states == ["miss"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and path.name in warnings[0].getMessage()


MARKER_PAYLOAD = "open({marker!r}, 'w').write('pwned')"


def test_planted_files_never_execute(tmp_path):
    import pickle

    marker = tmp_path / "pwned"
    root = tmp_path / "cache"
    x = torch.randn(4)
    _compile_and_report(_double, x, cache_dir=str(root))
    (path,) = _entries(root)
    good = path.read_bytes()

    class Evil:
        def __reduce__(self):
            return (exec, (MARKER_PAYLOAD.format(marker=str(marker)),))

    code = MARKER_PAYLOAD.format(marker=str(marker)).encode()
    tampered = good.replace(b"import torch\n", b"import torch\n" + code + b"\n", 1)
    assert tampered != good  # the executor source, with a payload, under the old checksum
    for planted in (pickle.dumps(Evil()), cache.MAGIC + pickle.dumps(Evil()), tampered):
        path.write_bytes(planted)
        (root / "entries" / "evil.py").write_text(MARKER_PAYLOAD.format(marker=str(marker)))
        out, states = _compile_and_report(_double, x, cache_dir=str(root))
        torch.testing.assert_close(out, x * 2 + 1)
        assert states == ["miss"] and not marker.exists()
    assert cache.load(root, path.stem) is not None


def test_cache_folder_is_owner_only_and_a_shared_one_is_refused(tmp_path):
    root = tmp_path / "new"
    assert cache.prepare_root(root)
    assert stat.S_IMODE(root.stat().st_mode) & 0o077 == 0
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert not cache.prepare_root(shared)


def _entry(size: int) -> cache.Entry:
    graph = cache.CachedGraph(b"a" * size, "# source", None, (0,), (OutputSlot("ge", 0),))
    return cache.Entry((graph,))


def test_least_recently_used_entries_are_evicted_first(tmp_path):
    cache.prepare_root(tmp_path)
    for i, key in enumerate("abc"):
        cache.store(tmp_path, key * 64, _entry(1000), None)
        os.utime(cache.entry_path(tmp_path, key * 64), (1000 + i, 1000 + i))
    assert cache.load(tmp_path, "a" * 64) is not None  # a used last: b is now the oldest
    size = len(cache.encode(_entry(1000), "d" * 64))  # +- a byte: the header has a time
    cache.store(tmp_path, "d" * 64, _entry(1000), 3 * size + size // 2)
    assert {p.stem[0] for p in _entries(tmp_path)} == {"a", "c", "d"}



def test_a_store_does_not_scan_the_folder_until_its_running_total_passes_the_limit(
        tmp_path, monkeypatch):
    cache.prepare_root(tmp_path)
    scans = []
    real = cache._entries
    monkeypatch.setattr(cache, "_entries", lambda root: scans.append(root) or real(root))
    size = len(cache.encode(_entry(1000), "a" * 64))
    for i, key in enumerate("abcdef"):  # the first store counts the folder, the others add
        cache.store(tmp_path, key * 64, _entry(1000), 3 * size + size // 2)
        os.utime(cache.entry_path(tmp_path, key * 64), (1000 + i, 1000 + i))
    # a, b, c fit; d passes the limit (scan, evicts a); e and f pass it again
    assert len(scans) == 4
    assert {p.stem[0] for p in _entries(tmp_path)} == {"d", "e", "f"}
    real_total = sum(p.stat().st_size for p in _entries(tmp_path))
    assert abs(int((tmp_path / cache.USAGE).read_text()) - real_total) <= 6  # header time


def test_cli_cache_info_and_clear(tmp_path, capsys):
    from npu_inductor.cli import main

    cache.prepare_root(tmp_path)
    cache.store(tmp_path, "e" * 64, _entry(10), None)
    cache.count(tmp_path, "hit")
    assert main(["cache", "info", "--dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "entries: 1" in text and "hits: 1" in text and str(tmp_path) in text
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert "removed 1" in capsys.readouterr().out
    assert not _entries(tmp_path) and cache.info(tmp_path)["hits"] == 0


def test_explain_counts_hits_and_a_partitioned_graph_hits_with_its_fallbacks(tmp_path,
                                                                            monkeypatch):
    from test_fallback import softclip

    import npu_inductor

    def fn(x):
        return softclip(torch.relu(x) * 2 + 1) - 1

    monkeypatch.setenv("NPU_INDUCTOR_CACHE_DIR", str(tmp_path))
    x = torch.randn(8)
    first = npu_inductor.explain(fn, x)
    second = npu_inductor.explain(fn, x)
    assert (first.cache_hits, first.cache_misses) == (0, 1)
    assert (second.cache_hits, second.cache_misses) == (1, 0)
    assert "Compile cache: 1 hit(s), 0 miss(es)" in str(second)
    assert second.fallback_counts == first.fallback_counts == {
        "npu_fallback_test.softclip.default": 1}
    assert [g.op_counts for g in second.ge_graphs] == [g.op_counts for g in first.ge_graphs]
    torch._dynamo.reset()
    out = torch.compile(fn, backend="npu", options={"fallback": "eager"})(x)  # from the entry
    torch.testing.assert_close(out, fn(x))


def _attention_and_scatter(q, k, v, t, i, u):
    """fp32 attention (kept unfused: an FX pass's decision) and a bf16 index_put (computed
    in float32: a lowering decision)."""
    att = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return att * 2, torch.index_put(t, (i,), u) * 2


def test_a_hit_reports_the_same_device_rule_decisions(tmp_path, monkeypatch):
    from npu_inductor.device_rules_report import from_reports

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    args = (q, k, v, torch.randn(6, 4).to(torch.bfloat16), torch.tensor([1, 4]),
            torch.randn(2, 4).to(torch.bfloat16))
    reports = []
    for torch_cache in ("a", "a", "b"):  # miss; AOTAutograd hit; npu_inductor-only hit
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / torch_cache))
        torch._dynamo.reset()
        with record_reports() as seen:
            out = torch.compile(_attention_and_scatter, backend="npu", options={
                "fallback": "error", "cache_dir": str(tmp_path / "npu")})(*args)
        for got, want in zip(out, _attention_and_scatter(*args)):
            torch.testing.assert_close(got, want)
        reports.append(seen)
    assert [[r.cache for r in seen] for seen in reports] == [["miss"], ["hit"], ["hit"]]
    texts = [re.sub(r"inference_\d+", "inference_N", str(from_reports(seen, "Ascend910B1")))
             for seen in reports]  # graph names count up
    assert "rule [dtype-gate]" in texts[0] and "no float32 kernel" in texts[0], texts[0]
    assert "TensorScatterUpdate has no kernel for bf16" in texts[0], texts[0]
    assert texts[1] == texts[0] and texts[2] == texts[0]
