"""Offline export (npu_inductor.export): the four test models and the LLaMA prefill zoo entry,
static and with buckets (ATC gears). Each case is exported once (module-scoped) and checked:
the .air re-serializes identically; the ONNX passes the checker with strict shape inference
and onnxruntime gives eager's outputs; run-export matches eager; the C++ runner compiles
against CANN's headers; the fake atc accepts atc.sh."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from cann_headers import acl_headers
from fakes.fixtures import install_atc
from harness import FP32_ATOL, FP32_RTOL, assert_close
from models import make

import npu_inductor
from npu_inductor import cli, config
from npu_inductor.benchmarks.zoo import ZOO
from npu_inductor.export_bundle import dtype_of, load_inputs, read_bin, run_air
from npu_inductor.exporter import ExportError
from npu_inductor.ge import from_air, to_air


def _llama_prefill(prompt: int):
    model, _ = ZOO["llama_prefill"].build(1, 0)  # the zoo's small config, batch 1
    vocab = model.llama.embed.num_embeddings
    g = torch.Generator().manual_seed(1)
    return model, (torch.randint(0, vocab, (1, prompt), generator=g),)


def _case(name: str):
    """(model, inputs, buckets, pad). Bucketed inputs are not at a gear size, so the runner's
    padding and slicing are exercised (sizes avoid other dims: Dynamo's duck sizing)."""
    if name == "llama_prefill":
        return (*_llama_prefill(32), None, "safe")
    if name == "llama_prefill_buckets":
        # pad="trust" as in test_acl_models: the analysis does not know aten.stack (KV caches)
        return (*_llama_prefill(9), {"ids": {1: [12, 16]}}, "trust")
    base = name.removesuffix("_buckets")
    model, inputs = make(base)
    if name == base:
        return model, inputs, None, "safe"
    if base == "llama":
        return model, (torch.randint(0, 128, (2, 9)),), {"ids": {1: [12, 16]}}, "trust"
    grown = tuple(torch.cat([x] * 3)[:5] for x in inputs)  # batch 5: between no gears
    if base == "bert":
        return model, grown, {"ids": {0: [6, 8]}, "attention_mask": {0: [6, 8]}}, "safe"
    # cnn: the analysis does not know max_pool2d; padding an eval CNN's batch is exact
    return model, grown, {"x": {0: [6, 8]}}, "trust" if base == "cnn" else "safe"


FAKE_ACL_C = Path(__file__).resolve().parent / "fakes" / "acl_c"
CASES = ["mlp", "cnn", "bert", "llama", "llama_prefill", "mlp_buckets", "cnn_buckets",
         "bert_buckets", "llama_buckets", "llama_prefill_buckets"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name -> (folder, eager outputs, inputs); each case exported once, lazily."""
    root = tmp_path_factory.mktemp("exports")
    done: dict[str, tuple[Path, list[torch.Tensor], tuple]] = {}

    def get(name: str):
        if name not in done:
            model, inputs, buckets, pad = _case(name)
            # the FX verifier checks the passes in the model tests (test_models, test_acl_models
            # compile the same graphs); here it would double the cost of each export
            with config.patch(verify=False):
                folder = npu_inductor.export(model, inputs, root / name, buckets=buckets,
                                             pad=pad)
            with torch.no_grad():
                eager = torch.utils._pytree.tree_leaves(model.eval()(*inputs))
            done[name] = (folder, eager, inputs)
        return done[name]

    return get


@pytest.mark.parametrize("name", CASES)
def test_export_matches_eager(exported, name):
    folder, eager, inputs = exported(name)
    info = json.loads((folder / "manifest.json").read_text())
    listing = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert {"model.air", "model.onnx", "atc.sh", "manifest.json", "runner/main.cpp",
            "runner/CMakeLists.txt"} <= listing
    assert {x["file"] for x in info["inputs"] + info["outputs"]} <= listing
    # one GE graph, parameters as Const: only model inputs (and bucketed sizes) are Data ops
    air = (folder / "model.air").read_bytes()
    graph = from_air(air)
    assert to_air(graph) == air
    assert [op.name for op in graph.data_ops()] == [m["data"] for m in info["model_inputs"]]
    assert all(m["feed"] in ("input", "size") for m in info["model_inputs"])
    assert sum(op.type == "Const" for op in graph.ops) > 0
    assert (info["gears"] is not None) == name.endswith("_buckets")
    # run-export's path: the .air on the host device, gear selected, padded, sliced
    outs = run_air(folder, info, load_inputs(folder, info))
    assert_close(outs, eager, FP32_RTOL, FP32_ATOL, f"{name} .air on the host device")
    _check_onnx(folder, info, eager, inputs)


def _check_onnx(folder: Path, info: dict, eager: list[torch.Tensor], inputs: tuple) -> None:
    model = onnx.load(str(folder / "model.onnx"))
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    names = [x["name"] for x in info["inputs"]]
    feeds = {}
    for m in info["model_inputs"]:
        if m["feed"] == "input":
            feeds[m["data"]] = inputs[names.index(m["input"])].numpy()
        else:  # the ONNX graph is dynamic at the bucketed dims: the real size, unpadded
            sym = next(s for s in info["symbols"] if s["name"] == m["symbol"])
            size = inputs[names.index(sym["input"])].shape[sym["dim"]]
            feeds[m["data"]] = np.array(size, dtype=np.int64)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    outs = [torch.from_numpy(y) for y in session.run(None, feeds)]
    assert_close(outs, eager, FP32_RTOL, FP32_ATOL, "onnxruntime")


def test_gears_in_manifest_and_atc_script(exported, tmp_path):
    folder, _, _ = exported("llama_buckets")
    info = json.loads((folder / "manifest.json").read_text())
    assert info["symbols"] == [{"name": "s0", "input": "ids", "dim": 1, "buckets": [12, 16]}]
    assert info["gears"]["dynamic_dims"] == "12;16"
    assert info["gears"]["dims"] == [[2, 12], [2, 16]]
    assert info["outputs"][0]["dims"] == [2, {"symbol": "s0", "scale": 1, "offset": 0}, 128]
    script = (folder / "atc.sh").read_text()
    for flag in ("--framework=\"$framework\"", "--soc_version=", "--input_shape=",
                 "--dynamic_dims='12;16'", "--input_format=ND",
                 "--precision_mode=must_keep_origin_dtype"):
        assert flag in script, flag


@pytest.mark.parametrize("name", ["mlp", "bert_buckets", "llama_buckets"])
def test_fake_atc_accepts_atc_sh(exported, tmp_path, name):
    folder, _, _ = exported(name)
    bundle = shutil.copytree(folder, tmp_path / name)
    install_atc(tmp_path / "bin")
    log = tmp_path / "atc.jsonl"
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "FAKE_ATC_LOG": str(log)}
    done = subprocess.run(["bash", str(bundle / "atc.sh")], env=env, capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (bundle / "model.om").stat().st_size > 0
    run = json.loads(log.read_text().splitlines()[-1])
    assert "--framework=1" in run["argv"] and "--model=model.air" in run["argv"]
    assert len(run["gears"]) == (2 if name.endswith("_buckets") else 0)


@pytest.mark.parametrize("name", ["mlp", "bert_buckets", "llama_buckets"])
def test_runner_compiles_against_cann_headers(exported, name):
    folder, _, _ = exported(name)
    include = Path(acl_headers()).parent
    done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                           f"-I{include}", str(folder / "runner" / "main.cpp")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    source = (folder / "runner" / "main.cpp").read_text()
    for call in ("aclmdlLoadFromFile", "aclmdlExecute", "aclmdlGetOutputSizeByIndex"):
        assert call in source
    # the Data ops listed in --input_shape (a bucketed graph also takes its sizes as Data)
    gear_inputs = {"mlp": "{}", "bert_buckets": "{1, 3}", "llama_buckets": "{1}"}[name]
    assert f"kGearInputs = {gear_inputs};" in source


@pytest.mark.parametrize("name", ["bert_buckets"])  # two gear inputs, size inputs, slicing
def test_runner_runs_the_om_with_a_fake_acl(exported, tmp_path, name):
    """The C++ runner built against CANN's headers and linked with a fake libascendcl
    (tests/fakes/acl_c) that runs the fake atc's .om on the host device: the runner's size
    inference, gear selection, padding and slicing give eager's outputs."""
    folder, eager, _ = exported(name)
    bundle = shutil.copytree(folder, tmp_path / name)
    install_atc(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(bundle / "atc.sh")], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    runner = tmp_path / "npu_runner"
    done = subprocess.run(["g++", "-std=c++17", f"-I{Path(acl_headers()).parent}",
                           str(bundle / "runner" / "main.cpp"), str(FAKE_ACL_C / "acl_stub.cpp"),
                           "-o", str(runner)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    env["FAKE_ACL_EXEC"] = f"{sys.executable} {FAKE_ACL_C / 'fake_acl_exec.py'}"
    done = subprocess.run([str(runner), str(bundle), str(tmp_path / "results")], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    info = json.loads((bundle / "manifest.json").read_text())
    results = [read_bin(tmp_path / "results" / f"{y['name']}.bin", dtype_of(y["dtype"]),
                        list(e.shape)) for y, e in zip(info["outputs"], eager)]
    assert_close(results, eager, FP32_RTOL, FP32_ATOL, f"{name} C++ runner")


def test_run_export_cli_passes_and_detects_a_mismatch(exported, tmp_path, capsys):
    folder, _, _ = exported("mlp_buckets")
    assert cli.main(["run-export", str(folder)]) == 0
    assert "1/1 outputs match eager" in capsys.readouterr().out
    broken = shutil.copytree(folder, tmp_path / "broken")
    out = broken / "outputs" / "output0.bin"
    data = bytearray(out.read_bytes())
    data[0:4] = np.float32(1e3).tobytes()
    out.write_bytes(bytes(data))
    assert cli.main(["run-export", str(broken)]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def small_mlp():
    """A factory for the CLI test (``test_export:small_mlp``)."""
    torch.manual_seed(0)
    return make("mlp")[0]


def test_cli_export(tmp_path, capsys):
    out = tmp_path / "cli"
    code = cli.main(["export", "test_export:small_mlp", "--input", "x:float32:5,16",
                     "--bucket", "x:0:6,8", "--out", str(out), "--formats", "air"])
    assert code == 0, capsys.readouterr().err
    listing = capsys.readouterr().out.split()
    assert "model.air" in listing and "inputs/x.bin" in listing and "model.onnx" not in listing
    info = json.loads((out / "manifest.json").read_text())
    assert info["inputs"][0]["shape"] == [-1, 16] and info["gears"]["dynamic_dims"] == "6;8"
    assert cli.main(["run-export", str(out)]) == 0


class Noisy(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)  # random ops run in eager: no GE lowering


def test_export_refuses_an_op_without_lowering(tmp_path):
    with pytest.raises(ExportError, match=r"rand.*test_export\.py:\d+"):
        npu_inductor.export(Noisy(), (torch.randn(2, 3),), tmp_path / "noisy")
    assert not (tmp_path / "noisy").exists()


class TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 + y


@pytest.mark.parametrize("buckets, match", [
    ({"z": {0: [4, 8]}}, r"buckets name input 'z'; the inputs are \['x', 'y'\]"),
    ({"x": {0: [2, 3]}}, r"the example x has size 5 at dim 0, above its largest bucket 3"),
    ({1: {0: [1, 8]}}, r"buckets of y dim 0: sizes must be integers >= 2"),
    ({"x": {0: list(range(2, 200))}, "y": {0: list(range(2, 200))}},
     r"198 gear combinations; ATC --dynamic_dims takes 2 to 100"),
    ({"x": {0: [6, 8]}}, r"buckets of x dims \[0\]: the model fixes their size"),
])
def test_export_refuses_bad_buckets(tmp_path, buckets, match):
    with pytest.raises(ExportError, match=match):
        npu_inductor.export(TwoInputs(), (torch.randn(5, 3), torch.randn(5, 3)), tmp_path / "b",
                            buckets=buckets, formats=("air",))
