"""A strict fake of CANN's ``atc`` for ``--framework=1`` (``.air``) models.

Every flag is checked against ATC's flag list (``hicann/ge`` ``api/atc/atc_flags.cc``,
shared/reference/acl_api.md §3); ``--input_shape`` names against the graph's ``Data`` ops
and their ranks and static dims; ``--dynamic_dims`` against GE's rules (2..100 gears, each as
wide as the ``-1`` count, distinct, non-negative; exclusive with the other dynamic options;
needs ``--input_shape``). Writes ``<output>.om`` (``fake_om``) and, when ``FAKE_ATC_LOG`` is
set, appends one JSON line per successful run to that file (tests count compiles with it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_om  # noqa: E402

# atc_flags.cc (DEFINE_* names); values are checked below where ATC documents them
FLAGS = {
    "model", "framework", "weight", "output", "soc_version", "input_shape",
    "input_shape_range", "input_hint_shape", "input_format", "dynamic_batch_size",
    "dynamic_image_size", "dynamic_dims", "out_nodes", "precision_mode", "precision_mode_v2",
    "op_select_implmode", "optypelist_for_implmode", "output_type", "keep_dtype",
    "modify_mixlist", "op_precision_mode", "allow_hf32", "log", "mode", "om", "json",
    "insert_op_conf", "external_weight", "jit_compile", "deterministic", "oo_level",
    "op_compiler_cache_dir", "op_compiler_cache_mode", "aicore_num", "core_type",
    "enable_small_channel", "buffer_optimize", "disable_reuse_memory", "display_model_info",
    "status_check", "op_debug_level", "fusion_switch_file", "compression_optimize_conf",
    "enable_single_stream", "virtual_type", "sparsity", "host_env_os", "host_env_cpu",
    "cluster_config", "hccl_sub_comm_config", "raw_ge_options",
}
FRAMEWORKS = {"0", "1", "3", "5"}
SOCS = {"Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910B2C",
        "Ascend910B4-1", "Ascend310P3", "Ascend310", "Ascend310B1"}
PRECISION_MODES = {"force_fp16", "force_fp32", "cube_fp16in_fp32out", "allow_mix_precision",
                   "allow_fp32_to_fp16", "must_keep_origin_dtype", "allow_mix_precision_fp16",
                   "allow_mix_precision_bf16", "allow_fp32_to_bf16"}
LOG_LEVELS = {"debug", "info", "warning", "error", "null"}
INPUT_FORMATS = {"NCHW", "NHWC", "ND", "NCDHW", "NDHWC"}
DYNAMIC_EXCLUSIVE = ("dynamic_batch_size", "dynamic_image_size", "input_shape_range",
                     "insert_op_conf")
MIN_GEARS, MAX_GEARS = 2, 100


class AtcRejected(Exception):
    pass


def parse_flags(argv: list[str]) -> dict[str, str]:
    flags: dict[str, str] = {}
    for arg in argv:
        if not arg.startswith("--") or "=" not in arg:
            raise AtcRejected(f"unexpected argument {arg!r} (expected --flag=value)")
        key, value = arg[2:].split("=", 1)
        if key not in FLAGS:
            raise AtcRejected(f"ERROR: unknown command line flag '{key}'")
        if key in flags:
            raise AtcRejected(f"flag --{key} given twice")
        flags[key] = value
    return flags


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise AtcRejected(msg)


def check_flags(flags: dict[str, str]) -> None:
    for key in ("model", "framework", "output", "soc_version"):
        _require(key in flags, f"--{key} is required")
    _require(flags["framework"] in FRAMEWORKS, f"--framework={flags['framework']} invalid")
    _require(flags["framework"] == "1", "this fake compiles only --framework=1 (.air)")
    _require(flags["soc_version"] in SOCS, f"--soc_version={flags['soc_version']} unknown")
    _require(flags.get("mode", "0") == "0", "only --mode=0 (model -> om) is faked")
    if "precision_mode" in flags:
        _require(flags["precision_mode"] in PRECISION_MODES,
                 f"--precision_mode={flags['precision_mode']} invalid")
        _require("precision_mode_v2" not in flags,
                 "--precision_mode and --precision_mode_v2 are mutually exclusive")
    _require(flags.get("log", "null") in LOG_LEVELS, f"--log={flags.get('log')} invalid")
    for fmt in flags.get("input_format", "ND").split(";"):
        _require(fmt in INPUT_FORMATS, f"--input_format={fmt} invalid")
    if "dynamic_dims" in flags:
        clash = [k for k in DYNAMIC_EXCLUSIVE if k in flags]
        _require(not clash, f"--dynamic_dims is mutually exclusive with {clash}")
        _require("input_shape" in flags, "--dynamic_dims needs --input_shape")
        _require(flags.get("input_format") == "ND", "--dynamic_dims needs --input_format=ND")


def parse_input_shape(text: str, data: dict) -> list[tuple[str, list[int]]]:
    out = []
    for part in text.split(";"):
        name, sep, dims_text = part.rpartition(":")
        _require(bool(sep) and bool(name), f"--input_shape entry {part!r} is not name:dims")
        _require(name in data, f"--input_shape names {name!r}, not a Data op of the graph "
                 f"(Data ops: {sorted(data)})")
        _require(name not in dict(out), f"--input_shape names {name!r} twice")
        dims = [int(d) for d in dims_text.split(",")] if dims_text else []
        graph_dims = data[name]["shape"]
        _require(len(dims) == len(graph_dims), f"--input_shape {name}: rank {len(dims)}, "
                 f"the Data op has rank {len(graph_dims)}")
        for d, g in zip(dims, graph_dims):
            _require(d == -1 or d > 0, f"--input_shape {name}: bad dim {d}")
            _require(g == -1 or d == g, f"--input_shape {name}: dim {d} contradicts the "
                     f"graph's static dim {g}")
        out.append((name, dims))
    return out


def parse_gears(text: str, width: int) -> list[list[int]]:
    gears = [[int(v) for v in g.split(",")] for g in text.split(";")]
    _require(MIN_GEARS <= len(gears) <= MAX_GEARS,
             f"--dynamic_dims: {len(gears)} gears, allowed {MIN_GEARS}..{MAX_GEARS}")
    for g in gears:
        _require(len(g) == width, f"--dynamic_dims gear {g} has {len(g)} values, "
                 f"--input_shape has {width} -1 dims")
        _require(all(v >= 0 for v in g), f"--dynamic_dims gear {g} has a negative dim")
    _require(len({tuple(g) for g in gears}) == len(gears), "--dynamic_dims repeats a gear")
    return gears


# ge.proto.DataType -> C++ ge::DataType / aclDataType (shared/reference/ge_ir_notes.md §1)
PROTO_TO_CPP = {1: 0, 2: 1, 3: 2, 4: 4, 5: 6, 6: 7, 7: 3, 8: 9, 9: 8, 10: 10, 11: 12, 12: 11,
                16: 16, 17: 17, 27: 27}


def _load_pb():
    """``ge_ir_pb2`` without importing npu_inductor (and torch): ATC is its own process."""
    import importlib.util

    import npu_inductor  # noqa: F401  (only to locate the package; light)

    path = Path(importlib.util.find_spec("npu_inductor").submodule_search_locations[0])
    spec = importlib.util.spec_from_file_location("ge_ir_pb2", path / "ge" / "ge_ir_pb2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _desc(d) -> dict:
    _require(d.dtype in PROTO_TO_CPP, f"unsupported dtype {d.dtype}")
    return {"dtype": PROTO_TO_CPP[d.dtype], "shape": list(d.shape.dim)}


def compile_model(flags: dict[str, str]) -> dict:
    air = Path(flags["model"]).read_bytes()
    model = _load_pb().ModelDef()
    try:
        model.ParseFromString(air)  # ge::Model::LoadFromFile: a binary ModelDef
    except Exception as e:  # noqa: BLE001
        raise AtcRejected(f"--model is not a ModelDef: {e}") from e
    _require(len(model.graph) >= 1, "the model has no graph")
    ops = model.graph[0].op
    data_ops = sorted((op for op in ops if op.type == "Data"), key=lambda op: op.attr["index"].i)
    _require([op.attr["index"].i for op in data_ops] == list(range(len(data_ops))),
             "Data indices must be dense 0..n-1")
    data = {op.name: {"name": op.name, **_desc(op.output_desc[0])} for op in data_ops}
    net_out = [op for op in ops if op.type == "NetOutput"]
    _require(len(net_out) == 1, "the graph needs exactly one NetOutput")
    listed = parse_input_shape(flags["input_shape"], data) if "input_shape" in flags else []
    for name, dims in listed:
        data[name]["shape"] = dims
    header = {"soc_version": flags["soc_version"], "inputs": list(data.values()),
              "outputs": [_desc(d) for d in net_out[0].input_desc],
              "gear_inputs": [], "gears": [],
              # ATC's default when the flag is absent: force_fp16 (reference/acl_api.md)
              "precision_mode": flags.get("precision_mode", "force_fp16")}
    if "dynamic_dims" in flags:
        width = sum(d == -1 for _, dims in listed for d in dims)
        values = parse_gears(flags["dynamic_dims"], width)
        unlisted = [n for n, d in data.items() if -1 in d["shape"] and n not in dict(listed)]
        _require(not unlisted, f"--dynamic_dims: dynamic Data ops {unlisted} are not in "
                 "--input_shape")
        names = list(data)
        header["gear_inputs"] = [names.index(n) for n, _ in listed]
        header["gears"] = [_full_dims(listed, g) for g in values]
    return {"header": header, "air": air}


def _full_dims(listed: list, gear: list[int]) -> list[int]:
    it = iter(gear)
    return [next(it) if d == -1 else d for _, dims in listed for d in dims]


def main(argv: list[str]) -> int:
    try:
        flags = parse_flags(argv)
        check_flags(flags)
        model = compile_model(flags)
    except AtcRejected as e:
        print(f"ATC run failed, {e}", file=sys.stderr)
        return 1
    out = Path(flags["output"] + ".om")
    out.write_bytes(fake_om.pack(model["header"], model["air"]))
    log = os.environ.get("FAKE_ATC_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"argv": argv, "gears": model["header"]["gears"]}) + "\n")
    print("ATC run success")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
