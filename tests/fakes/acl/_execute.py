"""``acl.mdl.execute`` of the fake pyACL: check the datasets as the runtime does, read the
inputs from device memory, run the model's ``.air`` on the host device, write the outputs."""

from __future__ import annotations

import torch

import acl as A
from acl import _mdl


class _Refused(Exception):
    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code = code


def _input_shapes(m: A._Model, ds: A._Dataset) -> list[list[int]]:
    inputs = m.header["inputs"]
    if m.gear_index is not None:
        if ds.gear is None:
            raise _Refused(A.ACL_ERROR_INVALID_PARAM, "gear model run without "
                           "set_input_dynamic_dims")
        _, ptr, size = A._buffer(ds.buffers[m.gear_index])
        need = 8 * len(ds.gear)
        if size < need or A.S.find(ptr, need) is None:
            raise _Refused(A.ACL_ERROR_INVALID_PARAM, f"the {A.ACL_DYNAMIC_TENSOR_NAME} "
                           f"input needs a device buffer of {need} bytes")
        geared = _mdl._gear_shapes(m, ds.gear)
        return [geared.get(i, e["shape"]) for i, e in enumerate(inputs)]
    shapes = []
    for i, e in enumerate(inputs):
        if -1 not in e["shape"]:
            shapes.append(e["shape"])
            continue
        desc = A._desc(ds.descs.get(i, 0))
        if desc is None:
            raise _Refused(A.ACL_ERROR_INVALID_PARAM, f"input {i} ({e['name']}) has -1 dims "
                           "and no tensor desc (set_dataset_tensor_desc)")
        dims = list(desc[2])
        if len(dims) != len(e["shape"]) or desc[1] != e["dtype"] or any(
                g not in (-1, d) for g, d in zip(e["shape"], dims)):
            raise _Refused(A.ACL_ERROR_INVALID_PARAM, f"input {i}: tensor desc {dims} does "
                           f"not fit {e['shape']}")
        shapes.append(dims)
    return shapes


def _read_inputs(m: A._Model, ds: A._Dataset) -> list[torch.Tensor]:
    out = []
    for e, shape, buf in zip(m.header["inputs"], _input_shapes(m, ds), ds.buffers):
        _, ptr, size = A._buffer(buf)
        n = _mdl._nbytes(e["dtype"], shape)
        if size < n:
            raise _Refused(A.ACL_ERROR_INVALID_PARAM, f"input {e['name']}: buffer of {size} "
                           f"bytes, {shape} needs {n}")
        raw = A.S.find(ptr, n) if n else torch.empty(0, dtype=torch.uint8)
        if raw is None:
            raise _Refused(A.ACL_ERROR_INVALID_PARAM, f"input {e['name']}: {ptr:#x} is not "
                           "device memory")
        out.append(raw.clone().view(A._CPP_DTYPES[e["dtype"]]).view(shape))
    return out


def _write_outputs(m: A._Model, ds: A._Dataset, results: list[torch.Tensor]) -> None:
    dims = []
    for i, (e, r, buf) in enumerate(zip(m.header["outputs"], results, ds.buffers)):
        r = r.contiguous()
        if A._CPP_DTYPES[e["dtype"]] != r.dtype or any(
                g not in (-1, d) for g, d in zip(e["shape"], r.shape)):
            raise _Refused(A.ACL_ERROR_MODEL_OUTPUT_NOT_MATCH, f"output {i}: {r.dtype} "
                           f"{list(r.shape)} does not fit {e}")
        b = A._buffer(buf)
        n = r.numel() * r.element_size()
        if b[1] == 0 and b[2] == 0 and -1 in e["shape"] and n:  # ACL allocates it
            ptr, ret = A._malloc(n, 0)
            b[1], b[2] = ptr, n
        if b[2] < n:
            raise _Refused(A.ACL_ERROR_INVALID_PARAM, f"output {i}: buffer of {b[2]} bytes, "
                           f"result needs {n}")
        if n:
            dst = A.S.find(b[1], n)
            if dst is None:
                raise _Refused(A.ACL_ERROR_INVALID_PARAM, f"output {i}: not device memory")
            dst.copy_(r.reshape(-1).view(torch.uint8))
        ds.descs[i] = A.create_tensor_desc(e["dtype"], list(r.shape), 2)
        dims.append(list(r.shape))
    m.cur_output_dims = dims


def execute(model_id: int, in_ds: int, out_ds: int) -> int:
    A._log("mdl.execute", model_id)
    ret = A._ready()
    if ret != A.ACL_SUCCESS:
        return ret
    m = A.S.models.get(model_id)
    ins, outs = A.S.get(in_ds, A._Dataset), A.S.get(out_ds, A._Dataset)
    if m is None:
        return A.ACL_ERROR_INVALID_MODEL_ID
    if ins is None or outs is None:
        return A.ACL_ERROR_INVALID_PARAM
    n_in = len(m.header["inputs"]) + (m.gear_index is not None)
    if len(ins.buffers) != n_in:
        return A.ACL_ERROR_MODEL_INPUT_NOT_MATCH
    if len(outs.buffers) != len(m.header["outputs"]):
        return A.ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
    try:
        results = m.host_model.execute(_read_inputs(m, ins))
        _write_outputs(m, outs, results)
    except _Refused as e:
        print(f"fake acl: aclmdlExecute refused: {e}")
        A._log("mdl.execute refused", str(e))
        return e.code
    return A.ACL_SUCCESS
