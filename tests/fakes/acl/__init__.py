"""A strict fake of CANN's pyACL (``import acl``) for CI without an Ascend device.

Call forms, return tuples and error codes follow shared/reference/acl_api.md §4.2,
device_fidelity.md §4 and the CANN headers (``acl_base_rt.h``, ``rt_error_codes.h``). What
the real runtime refuses, this refuses with its error code: calls before ``acl.init`` /
``acl.rt.set_device``, mallocs of size <= 0, memcpy across the wrong memory kinds or past a
buffer, a model run with the wrong number of dataset buffers, a ``-1`` input without a tensor
desc, a gear model run without ``set_input_dynamic_dims``, an ``.om`` built for another SoC.
Device memory is host memory the fake owns; a loaded ``.om`` (``fake_om``) runs its ``.air``
on the host device's ``HostModel``. ``CALLS`` logs every call for tests to inspect.
"""

from __future__ import annotations

import ctypes
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fake_om  # noqa: E402, F401

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_MODEL_ID = 100011
ACL_ERROR_PARSE_MODEL = 100013
ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017
ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = 100018
ACL_ERROR_MODEL_NOT_DYNAMIC = 100019
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_DYNAMIC_TENSOR_NAME = "ascend_mbatch_shape_data"
MEMCPY_KINDS = {0: (False, False), 1: (False, True), 2: (True, False), 3: (True, True)}
MALLOC_POLICIES = {0, 1, 2, 3, 4, 5, 0x100, 0x1000}
_CPP_DTYPES = {0: torch.float32, 1: torch.float16, 2: torch.int8, 3: torch.int32,
               4: torch.uint8, 6: torch.int16, 7: torch.uint16, 8: torch.uint32,
               9: torch.int64, 10: torch.uint64, 11: torch.float64, 12: torch.bool,
               27: torch.bfloat16}
SOC_NAME = os.environ.get("FAKE_ACL_SOC", "Ascend910B2")
DEVICE_COUNT = int(os.environ.get("FAKE_ACL_DEVICE_COUNT", "8"))
CALLS: list[tuple[str, tuple]] = []


@dataclass
class _Model:
    header: dict
    host_model: Any
    gear_index: int | None
    cur_output_dims: list[list[int]] = field(default_factory=list)


@dataclass
class _Dataset:
    buffers: list[int] = field(default_factory=list)
    descs: dict[int, int] = field(default_factory=dict)  # buffer index -> tensor desc
    gear: list[int] | None = None


class _State:
    def __init__(self) -> None:
        self.initialized = False
        self.device: int | None = None
        self.memory: dict[int, torch.Tensor] = {}  # device allocations: base -> bytes
        self.handles: dict[int, Any] = {}
        self.next_handle = 0x1000
        self.models: dict[int, _Model] = {}
        self.next_model = 1
        self.pinned: dict[int, bytes] = {}

    def handle(self, obj: Any) -> int:
        self.next_handle += 16
        self.handles[self.next_handle] = obj
        return self.next_handle

    def get(self, h: int, kind: type) -> Any:
        obj = self.handles.get(h)
        return obj if isinstance(obj, kind) else None

    def find(self, ptr: int, n: int) -> torch.Tensor | None:
        """The device bytes [ptr, ptr + n), or None if not inside one allocation."""
        for base, buf in self.memory.items():
            if base <= ptr and ptr + n <= base + buf.numel():
                return buf[ptr - base:ptr - base + n]
        return None


S = _State()


def _log(name: str, *args: Any) -> None:
    CALLS.append((name, args))


def _ready() -> int:
    if not S.initialized:
        return ACL_ERROR_UNINITIALIZE
    if S.device is None:
        return ACL_ERROR_RT_CONTEXT_NULL  # no device set: no current context
    return ACL_SUCCESS


def reset() -> None:
    """Forget everything (a fresh process); tests call it between cases."""
    global S
    S = _State()
    CALLS.clear()


# ---- acl ---------------------------------------------------------------------------------
def init(config_path: str | None = None) -> int:
    _log("init")
    if S.initialized:
        return ACL_ERROR_REPEAT_INITIALIZE
    S.initialized = True
    return ACL_SUCCESS


def finalize() -> int:
    S.initialized = False
    return ACL_SUCCESS


def get_soc_name() -> str | None:
    return SOC_NAME if S.initialized else None


def create_data_buffer(ptr: int, size: int) -> int:
    return S.handle(["buffer", int(ptr), int(size)])


def update_data_buffer(buf: int, ptr: int, size: int) -> int:
    b = S.get(buf, list)
    if b is None or b[0] != "buffer":
        return ACL_ERROR_INVALID_PARAM
    b[1], b[2] = int(ptr), int(size)
    return ACL_SUCCESS


def _buffer(buf: int) -> list | None:
    b = S.get(buf, list)
    return b if b is not None and b[0] == "buffer" else None


def destroy_data_buffer(buf: int) -> int:
    return ACL_SUCCESS if S.handles.pop(buf, None) is not None else ACL_ERROR_INVALID_PARAM


def get_data_buffer_addr(buf: int) -> int:
    b = _buffer(buf)
    return b[1] if b else 0


def get_data_buffer_size_v2(buf: int) -> int:
    b = _buffer(buf)
    return b[2] if b else 0


def create_tensor_desc(dtype: int, dims: list[int], fmt: int) -> int:
    if dtype not in _CPP_DTYPES or any(not isinstance(d, int) for d in dims):
        return 0
    return S.handle(("desc", dtype, tuple(dims), fmt))


def destroy_tensor_desc(desc: int) -> None:  # aclDestroyTensorDesc returns void
    S.handles.pop(desc, None)


def _desc(h: int) -> tuple | None:
    d = S.get(h, tuple)
    return d if d is not None and d[0] == "desc" else None


def get_tensor_desc_num_dims(desc: int) -> int:
    d = _desc(desc)
    return len(d[2]) if d else 0


def get_tensor_desc_dim_v2(desc: int, i: int) -> tuple[int, int]:
    d = _desc(desc)
    if d is None or not 0 <= i < len(d[2]):
        return 0, ACL_ERROR_INVALID_PARAM
    return d[2][i], ACL_SUCCESS


# ---- acl.rt ------------------------------------------------------------------------------
def _set_device(device_id: int) -> int:
    _log("rt.set_device", device_id)
    if not S.initialized:
        return ACL_ERROR_UNINITIALIZE
    if not 0 <= device_id < DEVICE_COUNT:
        return ACL_ERROR_RT_INVALID_DEVICEID
    S.device = device_id
    return ACL_SUCCESS


def _get_device() -> tuple[int, int]:
    ret = _ready()
    return (S.device if ret == ACL_SUCCESS else -1), ret


def _create_context(device_id: int) -> tuple[int, int]:
    ret = _ready()
    if ret == ACL_SUCCESS and device_id != S.device:
        ret = ACL_ERROR_RT_INVALID_DEVICEID
    return (S.handle(("context", device_id)) if ret == ACL_SUCCESS else 0), ret


def _malloc(size: int, policy: int) -> tuple[int, int]:
    _log("rt.malloc", size, policy)
    ret = _ready()
    if ret != ACL_SUCCESS:
        return 0, ret
    if not isinstance(size, int) or size <= 0 or policy not in MALLOC_POLICIES:
        return 0, ACL_ERROR_INVALID_PARAM
    buf = torch.zeros(size, dtype=torch.uint8)
    S.memory[buf.data_ptr()] = buf
    return buf.data_ptr(), ACL_SUCCESS


def _free(ptr: int) -> int:
    ret = _ready()
    if ret != ACL_SUCCESS:
        return ret
    return ACL_SUCCESS if S.memory.pop(int(ptr), None) is not None else ACL_ERROR_RT_PARAM_INVALID


def _memcpy(dst: int, dst_max: int, src: int, count: int, kind: int) -> int:
    ret = _ready()
    if ret != ACL_SUCCESS:
        return ret
    if kind not in MEMCPY_KINDS or count < 0 or count > dst_max:
        return ACL_ERROR_INVALID_PARAM
    src_dev, dst_dev = MEMCPY_KINDS[kind]
    if (S.find(src, count) is not None) != src_dev or \
            (S.find(dst, dst_max) is not None) != dst_dev:
        return ACL_ERROR_RT_PARAM_INVALID  # an address of the wrong memory kind
    ctypes.memmove(int(dst), int(src), count)
    return ACL_SUCCESS


rt = types.SimpleNamespace(set_device=_set_device, get_device=_get_device,
                           create_context=_create_context, malloc=_malloc, free=_free,
                           memcpy=_memcpy,
                           destroy_context=lambda ctx: ACL_SUCCESS,
                           reset_device=lambda device_id: ACL_SUCCESS)


# ---- acl.util ----------------------------------------------------------------------------
def _bytes_to_ptr(data: bytes) -> int:
    if not isinstance(data, bytes):
        raise TypeError("acl.util.bytes_to_ptr takes bytes")
    ptr = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
    S.pinned[ptr] = data  # keep alive as pyACL's caller must
    return ptr


util = types.SimpleNamespace(bytes_to_ptr=_bytes_to_ptr)

from acl._mdl import mdl  # noqa: E402,F401  (the model API, after the shared state)
