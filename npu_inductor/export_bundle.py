"""The export folder: write it (``write``) and smoke-test it on the host device (``run``).

    model.air          the GE graph (binary ModelDef), parameters as Const
    model.onnx         the same graph in standard ONNX ops (export_onnx.py)
    atc.sh             builds model.om (``./atc.sh``; ``./atc.sh onnx`` from model.onnx)
    manifest.json      inputs/outputs (names, dtypes, shapes), gears, SoC, versions
    runner/            main.cpp + CMakeLists.txt: the C++ ACL runner
    inputs/*.bin       sample inputs (raw little-endian, C order)
    outputs/*.bin      eager's outputs for them

Gears (bucketed dims): ``pad_to_gear`` / ``slice_outputs`` are what the C++ runner does,
here in Python, so ``run`` exercises the same selection, padding and slicing.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import torch

from npu_inductor import codegen
from npu_inductor.atc import dynamic_dims_arg, input_shape_arg
from npu_inductor.config import resolve
from npu_inductor.exporter import Affine, ExportError, Traced, sanitize
from npu_inductor.ge import Graph, from_air, to_air

MANIFEST_FORMAT = "npu_inductor.export/1"
DYNAMIC_TENSOR_NAME = "ascend_mbatch_shape_data"  # ACL_DYNAMIC_TENSOR_NAME (acl_mdl.h)
LOW_PRECISION = (torch.float16, torch.bfloat16)
TOLERANCE = {"float32": (1e-5, 1e-5), "low": (1e-2, 1e-2)}  # (rtol, atol)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_of(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ExportError(f"manifest names an unknown dtype {name!r}")
    return dtype


def _dim_json(d: Any) -> Any:
    if isinstance(d, Affine):
        return {"symbol": d.symbol, "scale": d.scale, "offset": d.offset}
    return d


def _shape_json(dims: tuple) -> list[int]:
    return [d if isinstance(d, int) else -1 for d in dims]


# ---- write ------------------------------------------------------------------------------

GRAPH_NAME = "model"  # the exported GE graph's name (the .om's, whatever compile named it)


def export_graph(traced: Traced) -> Graph:
    return dataclasses.replace(traced.compiled.lowered.graph, name=GRAPH_NAME)


def manifest(traced: Traced, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
             formats: tuple[str, ...], precision_mode: str) -> dict[str, Any]:
    graph = export_graph(traced)
    data_ops = graph.data_ops()
    return {
        "format": MANIFEST_FORMAT,
        "graph": graph.name,
        "files": {"air": "model.air" if "air" in formats else None,
                  "onnx": "model.onnx" if "onnx" in formats else None,
                  "om": "model.om", "atc": "atc.sh"},
        "soc_version": traced.soc_version,
        "precision_mode": precision_mode,
        "inputs": [{"name": s.name, "dtype": dtype_name(s.dtype), "shape": _shape_json(s.dims),
                    "dims": list(s.dims), "data": s.data, "file": f"inputs/{s.name}.bin",
                    "sample_shape": list(x.shape)} for s, x in zip(traced.inputs, inputs)],
        "outputs": [{"name": s.name, "dtype": dtype_name(s.dtype), "shape": _shape_json(s.dims),
                     "dims": [_dim_json(d) for d in s.dims], "file": f"outputs/{s.name}.bin",
                     "sample_shape": list(y.shape)} for s, y in zip(traced.outputs, outputs)],
        # what feeds each GE Data op (= model input index of the .om, in order)
        "model_inputs": [{"index": i, "data": op.name, "feed": kind,
                          ("input" if kind == "input" else "symbol"):
                              traced.inputs[ref].name if kind == "input" else ref}
                         for i, (op, (kind, ref)) in enumerate(zip(data_ops, traced.feeds))],
        "symbols": [{"name": s.name, "input": s.input, "dim": s.dim, "buckets": list(s.buckets)}
                    for s in traced.symbols],
        "gears": None if traced.gears is None else {
            "input_shape": input_shape_arg(graph, traced.gears),
            "dynamic_dims": dynamic_dims_arg(traced.gears),
            "dynamic_tensor": DYNAMIC_TENSOR_NAME,
            "inputs": [data_ops[i].name for i, _ in traced.gears.shapes],
            "dims": traced.gears.full_dims()},
        "versions": versions(),
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from npu_inductor.export_onnx import OPSET
    from npu_inductor.ge.serialize import MODEL_VERSION

    try:
        ours = version("npu_inductor")
    except PackageNotFoundError:
        ours = "unknown"
    return {"npu_inductor": ours, "torch": torch.__version__,
            "ge_model_def": str(MODEL_VERSION), "onnx_opset": str(OPSET)}


def write_bin(path: Path, t: torch.Tensor) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.detach().reshape(-1))
    path.write_bytes(flat.view(torch.uint8).numpy().tobytes() if t.numel() else b"")


def read_bin(path: Path, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    data = bytearray(path.read_bytes())
    want = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if len(data) != want:
        raise ExportError(f"{path}: {len(data)} bytes, expected {want} for "
                          f"{dtype_name(dtype)}{list(shape)}")
    if not data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(shape).clone()


def write(traced: Traced, inputs: list[torch.Tensor], outputs: list[torch.Tensor],
          out_dir: Path, formats: tuple[str, ...], precision_mode: str | None) -> Path:
    """Write the export folder (see the module docstring); returns it."""
    if len(outputs) != len(traced.outputs):
        raise ExportError(f"eager returns {len(outputs)} tensors, the GE graph "
                          f"{len(traced.outputs)}")
    precision = precision_mode or resolve().precision_mode
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = export_graph(traced)
    info = manifest(traced, inputs, outputs, formats, precision)
    if "air" in formats:
        (out_dir / "model.air").write_bytes(to_air(graph))
    (out_dir / "atc.sh").write_text(atc_script(info))
    (out_dir / "atc.sh").chmod(0o755)
    write_runner(info, out_dir / "runner")
    if "onnx" in formats:
        from npu_inductor.export_onnx import to_onnx

        (out_dir / "model.onnx").write_bytes(to_onnx(traced).SerializeToString())
    for spec, x in zip(info["inputs"], inputs):
        write_bin(out_dir / spec["file"], x)
    for spec, y in zip(info["outputs"], outputs):
        write_bin(out_dir / spec["file"], y)
    (out_dir / "manifest.json").write_text(json.dumps(info, indent=1) + "\n")
    return out_dir


def atc_script(info: dict[str, Any]) -> str:
    gears = info["gears"] or {}
    return codegen.render("export_atc.sh.jinja", graph_name=info["graph"],
                          default_source="air" if info["files"]["air"] else "onnx",
                          soc_version=info["soc_version"],
                          precision_mode=info["precision_mode"],
                          input_shape=gears.get("input_shape", ""),
                          dynamic_dims=gears.get("dynamic_dims", ""))


def write_runner(info: dict[str, Any], folder: Path) -> None:
    """``runner/main.cpp`` and ``runner/CMakeLists.txt`` from codegen_templates."""
    folder.mkdir(parents=True, exist_ok=True)
    context = runner_context(info)
    (folder / "main.cpp").write_text(codegen.render("export_runner.cpp.jinja", **context))
    (folder / "CMakeLists.txt").write_text(codegen.render("export_runner_cmake.txt.jinja",
                                                          graph_name=info["graph"]))


def _cpp_str(s: str) -> str:
    """A C++ string literal (names come from the user's model)."""
    return json.dumps(s, ensure_ascii=True)


def runner_context(info: dict[str, Any]) -> dict[str, Any]:
    syms = [s["name"] for s in info["symbols"]]
    names = [x["name"] for x in info["inputs"]]

    def dims(spec_dims: list) -> list[tuple[int, int, int]]:  # (symbol or -1, scale, value)
        out = []
        for d in spec_dims:
            if isinstance(d, int):
                out.append((-1, 0, d))
            elif isinstance(d, str):
                out.append((syms.index(d), 1, 0))
            else:
                out.append((syms.index(d["symbol"]), d["scale"], d["offset"]))
        return out

    def elem(dtype: str) -> int:
        return torch.empty((), dtype=dtype_of(dtype)).element_size()

    gears = info["gears"]
    data_names = [m["data"] for m in info["model_inputs"]]
    return {
        "graph_name": info["graph"], "cpp_str": _cpp_str,
        "inputs": [(x["name"], x["file"], elem(x["dtype"]), dims(x["dims"]))
                   for x in info["inputs"]],
        "outputs": [(y["name"], y["file"].replace("outputs/", ""), elem(y["dtype"]),
                     dims(y["dims"])) for y in info["outputs"]],
        "feeds": [(names.index(m["input"]), -1) if m["feed"] == "input"
                  else (-1, syms.index(m["symbol"])) for m in info["model_inputs"]],
        "symbols": [(s["name"], names.index(s["input"]), s["dim"], s["buckets"])
                    for s in info["symbols"]],
        "gear_inputs": [data_names.index(n) for n in gears["inputs"]] if gears else [],
        "dynamic_tensor": DYNAMIC_TENSOR_NAME,
    }


# ---- gears: the runner's selection, padding and slicing -----------------------------------

def symbol_values(info: dict[str, Any], inputs: dict[str, torch.Tensor]) -> dict[str, int]:
    return {s["name"]: int(inputs[s["input"]].shape[s["dim"]]) for s in info["symbols"]}


def select_gear(info: dict[str, Any], values: dict[str, int]) -> dict[str, int]:
    """Per symbol, the smallest bucket that fits (the gear the runner selects)."""
    out = {}
    for s in info["symbols"]:
        sizes, n = s["buckets"], values[s["name"]]
        i = bisect.bisect_left(sizes, n)
        if i == len(sizes):
            raise ExportError(f"input {s['input']} dim {s['dim']} has size {n}, above the "
                              f"largest gear {sizes[-1]} (gears {sizes})")
        out[s["name"]] = sizes[i]
    return out


def _size(d: Any, values: dict[str, int]) -> int:
    if isinstance(d, int):
        return d
    if isinstance(d, str):
        return values[d]
    return d["scale"] * values[d["symbol"]] + d["offset"]


def pad_to_gear(x: torch.Tensor, dims: list, padded: dict[str, int]) -> torch.Tensor:
    """Zero-pad ``x`` up to its dims at the selected gear."""
    target = [_size(d, padded) for d in dims]
    if list(x.shape) == target:
        return x
    out = x.new_zeros(target)
    out[tuple(slice(0, n) for n in x.shape)] = x
    return out


def slice_output(y: torch.Tensor, dims: list, values: dict[str, int]) -> torch.Tensor:
    """The valid region of a gear's output ``y`` for the real sizes ``values``."""
    return y[tuple(slice(0, _size(d, values)) for d in dims)].contiguous()


# ---- run-export: the .air on the host device ----------------------------------------------

def load_inputs(folder: Path, info: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {x["name"]: read_bin(folder / x["file"], dtype_of(x["dtype"]), x["sample_shape"])
            for x in info["inputs"]}


def run_air(folder: Path, info: dict[str, Any],
            inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Run ``model.air`` on the host device as the runner runs ``model.om``: select the
    gear, pad, feed every Data op, execute, slice the outputs back."""
    from npu_inductor.runtime import get_device

    air = (folder / info["files"]["air"]).read_bytes()
    graph = from_air(air)
    values = symbol_values(info, inputs)
    padded = select_gear(info, values) if info["gears"] else values
    by_name = {x["name"]: x for x in info["inputs"]}
    feeds = []
    for m in info["model_inputs"]:
        if m["feed"] == "input":
            x = inputs[m["input"]]
            feeds.append(pad_to_gear(x, by_name[m["input"]]["dims"], padded))
        else:
            feeds.append(torch.tensor(padded[m["symbol"]], dtype=torch.int64))
    device = get_device("host")
    module = codegen.load_executor(codegen.executor_source(graph, "host"), sanitize(graph.name))
    executor = module.Executor(device, air)
    device.configure_model(executor.model_id, resolve({"device": "host"}))
    try:
        outs = executor.run(feeds)
    finally:
        executor.close()
    return [slice_output(y, spec["dims"], values) for y, spec in zip(outs, info["outputs"])]


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return TOLERANCE["low"] if dtype in LOW_PRECISION else TOLERANCE["float32"]


def compare(actual: list[torch.Tensor], info: dict[str, Any], folder: Path,
            rtol: float | None = None, atol: float | None = None) -> list[dict[str, Any]]:
    """Per output: max abs / rel error against the bundled eager output, and a verdict."""
    rows = []
    for y, spec in zip(actual, info["outputs"]):
        dtype = dtype_of(spec["dtype"])
        want = read_bin(folder / spec["file"], dtype, spec["sample_shape"])
        r, a = tolerance(dtype)
        r, a = rtol if rtol is not None else r, atol if atol is not None else a
        row = {"name": spec["name"], "shape": list(y.shape), "ok": False,
               "max_abs": math.inf, "max_rel": math.inf}
        if y.shape == want.shape and y.dtype == want.dtype:
            yd, wd = y.double(), want.double()
            err = (yd - wd).abs()
            row["max_abs"] = float(err.max()) if err.numel() else 0.0
            rel = err / wd.abs().clamp_min(1e-12)
            row["max_rel"] = float(rel.max()) if rel.numel() else 0.0
            row["ok"] = bool(torch.allclose(yd, wd, rtol=r, atol=a, equal_nan=True))
        rows.append(row)
    return rows


def run(folder: str | Path, rtol: float | None = None, atol: float | None = None,
        ) -> list[dict[str, Any]]:
    """``npu-inductor run-export DIR``: the ``.air`` on the host device from the bundled
    inputs, compared with the bundled eager outputs."""
    folder = Path(folder)
    info = json.loads((folder / "manifest.json").read_text())
    if info.get("format") != MANIFEST_FORMAT:
        raise ExportError(f"{folder}/manifest.json is not an npu_inductor export "
                          f"(format {info.get('format')!r})")
    if not info["files"]["air"]:
        raise ExportError(f"{folder} has no model.air (exported with formats without 'air')")
    outs = run_air(folder, info, load_inputs(folder, info))
    return compare(outs, info, folder, rtol, atol)

