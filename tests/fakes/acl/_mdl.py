"""``acl.mdl`` of the fake pyACL: model load, description, datasets, execute, gears."""

from __future__ import annotations

import ctypes
import types
from typing import Any

import torch

import acl as A


def _nbytes(dtype: int, shape: list[int]) -> int:
    return torch.Size(shape).numel() * A._CPP_DTYPES[dtype].itemsize


def _size(entry: dict, gears: list[list[int]], dims_of: Any) -> int:
    """Bytes of an input/output: static, the largest gear, or 0 (unknown range)."""
    if -1 not in entry["shape"]:
        return _nbytes(entry["dtype"], entry["shape"])
    if gears:
        return max(_nbytes(entry["dtype"], dims_of(g)) for g in gears)
    return 0


def load_from_mem(ptr: int, size: int) -> tuple[int, int]:
    A._log("mdl.load_from_mem", size)
    ret = A._ready()
    if ret != A.ACL_SUCCESS:
        return 0, ret
    if A.S.find(ptr, size) is not None:
        return 0, A.ACL_ERROR_INVALID_PARAM  # the model must be in host memory
    try:
        header, air = A.fake_om.unpack(ctypes.string_at(ptr, size))
    except ValueError:
        return 0, A.ACL_ERROR_PARSE_MODEL
    if header["soc_version"] != A.SOC_NAME:
        print(f"fake acl: model built for {header['soc_version']}, device is {A.SOC_NAME}")
        return 0, A.ACL_ERROR_PARSE_MODEL
    from npu_inductor.ge.serialize import from_air
    from npu_inductor.runtime.host_model import HostModel

    gear_index = len(header["inputs"]) if header["gears"] else None
    host = HostModel(from_air(air), memory_plan=False)
    # ATC's --precision_mode chose each kernel's dtype when it built the model
    host.set_precision_mode(header.get("precision_mode", "force_fp16"), header["soc_version"])
    model = A._Model(header, host, gear_index)
    model_id = A.S.next_model
    A.S.next_model += 1
    A.S.models[model_id] = model
    return model_id, A.ACL_SUCCESS


def unload(model_id: int) -> int:
    return A.ACL_SUCCESS if A.S.models.pop(model_id, None) else A.ACL_ERROR_INVALID_MODEL_ID


def create_desc() -> int:
    return A.S.handle(["model_desc", None])


def _model_desc(desc: int) -> A._Model | None:
    d = A.S.get(desc, list)
    return d[1] if d is not None and d[0] == "model_desc" else None


def get_desc(desc: int, model_id: int) -> int:
    d = A.S.get(desc, list)
    if d is None or model_id not in A.S.models:
        return A.ACL_ERROR_INVALID_PARAM
    d[1] = A.S.models[model_id]
    return A.ACL_SUCCESS


def destroy_desc(desc: int) -> int:
    return A.ACL_SUCCESS if A.S.handles.pop(desc, None) is not None else A.ACL_ERROR_INVALID_PARAM


def get_num_inputs(desc: int) -> int:
    m = _model_desc(desc)
    return 0 if m is None else len(m.header["inputs"]) + (m.gear_index is not None)


def get_num_outputs(desc: int) -> int:
    m = _model_desc(desc)
    return 0 if m is None else len(m.header["outputs"])


def _gear_shapes(m: A._Model, gear: list[int]) -> dict[int, list[int]]:
    """Each listed input's shape in ``gear`` (the concatenated dims)."""
    out, at = {}, 0
    for i in m.header["gear_inputs"]:
        rank = len(m.header["inputs"][i]["shape"])
        out[i] = gear[at:at + rank]
        at += rank
    return out


def get_input_size_by_index(desc: int, i: int) -> int:
    m = _model_desc(desc)
    if m is None:
        return 0
    if i == m.gear_index:
        return 8 * len(m.header["gears"][0])  # int64 per gear dim
    if not 0 <= i < len(m.header["inputs"]):
        return 0
    return _size(m.header["inputs"][i], m.header["gears"],
                 lambda g: _gear_shapes(m, g)[i])


def get_output_size_by_index(desc: int, i: int) -> int:
    m = _model_desc(desc)
    if m is None or not 0 <= i < len(m.header["outputs"]):
        return 0
    out = m.header["outputs"][i]
    return 0 if -1 in out["shape"] else _nbytes(out["dtype"], out["shape"])


def get_input_index_by_name(desc: int, name: str) -> tuple[int, int]:
    m = _model_desc(desc)
    if m is None:
        return 0, A.ACL_ERROR_INVALID_PARAM
    if name == A.ACL_DYNAMIC_TENSOR_NAME and m.gear_index is not None:
        return m.gear_index, A.ACL_SUCCESS
    names = [e["name"] for e in m.header["inputs"]]
    return (names.index(name), A.ACL_SUCCESS) if name in names else (0, A.ACL_ERROR_INVALID_PARAM)


def get_cur_output_dims(desc: int, i: int) -> tuple[dict, int]:
    m = _model_desc(desc)
    if m is None or not 0 <= i < len(m.header["outputs"]):
        return {}, A.ACL_ERROR_INVALID_PARAM
    dims = m.cur_output_dims[i] if m.cur_output_dims else m.header["outputs"][i]["shape"]
    return {"name": f"output_{i}", "dimCount": len(dims), "dims": list(dims)}, A.ACL_SUCCESS


def create_dataset() -> int:
    return A.S.handle(A._Dataset())


def destroy_dataset(ds: int) -> int:
    return A.ACL_SUCCESS if A.S.handles.pop(ds, None) is not None else A.ACL_ERROR_INVALID_PARAM


def add_dataset_buffer(ds: int, buf: int) -> tuple[int, int]:
    d = A.S.get(ds, A._Dataset)
    if d is None or A._buffer(buf) is None:
        return ds, A.ACL_ERROR_INVALID_PARAM
    d.buffers.append(buf)
    return ds, A.ACL_SUCCESS


def get_dataset_num_buffers(ds: int) -> int:
    d = A.S.get(ds, A._Dataset)
    return len(d.buffers) if d else 0


def get_dataset_buffer(ds: int, i: int) -> int:
    d = A.S.get(ds, A._Dataset)
    return d.buffers[i] if d and 0 <= i < len(d.buffers) else 0


def set_dataset_tensor_desc(ds: int, desc: int, i: int) -> tuple[int, int]:
    d = A.S.get(ds, A._Dataset)
    if d is None or A._desc(desc) is None or not 0 <= i < len(d.buffers):
        return ds, A.ACL_ERROR_INVALID_PARAM
    d.descs[i] = desc
    return ds, A.ACL_SUCCESS


def get_dataset_tensor_desc(ds: int, i: int) -> int:
    d = A.S.get(ds, A._Dataset)
    return d.descs.get(i, 0) if d else 0


def set_input_dynamic_dims(model_id: int, ds: int, index: int, dims: dict) -> int:
    A._log("mdl.set_input_dynamic_dims", model_id, index, dict(dims))
    m, d = A.S.models.get(model_id), A.S.get(ds, A._Dataset)
    if m is None or d is None:
        return A.ACL_ERROR_INVALID_PARAM
    if m.gear_index is None:
        return A.ACL_ERROR_MODEL_NOT_DYNAMIC
    values = list(dims.get("dims", []))
    if index != m.gear_index or dims.get("dimCount") != len(values) or \
            values not in m.header["gears"]:
        return A.ACL_ERROR_INVALID_PARAM
    d.gear = values
    return A.ACL_SUCCESS


from acl._execute import execute  # noqa: E402, F401

mdl = types.SimpleNamespace(**{k: v for k, v in dict(globals()).items() if k in {
    "load_from_mem", "unload", "create_desc", "get_desc", "destroy_desc", "get_num_inputs",
    "get_num_outputs", "get_input_size_by_index", "get_output_size_by_index",
    "get_input_index_by_name", "get_cur_output_dims", "create_dataset", "destroy_dataset",
    "add_dataset_buffer", "get_dataset_num_buffers", "get_dataset_buffer",
    "set_dataset_tensor_desc", "get_dataset_tensor_desc", "set_input_dynamic_dims",
    "execute"}})
