"""Devices behind one interface: ``host`` (CPU simulator, the default here) and ``acl``.

The generated executor calls the pyACL API through ``device.acl`` and moves tensors with
``bind_input`` / ``alloc_output`` / ``fetch_output``; only these differ between devices.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
import os
from pathlib import Path
from typing import Any

import torch

from npu_inductor.config import target_soc
from npu_inductor.runtime.allocator import AclBackend, CachingAllocator
from npu_inductor.runtime.host_acl import HostAcl
from npu_inductor.runtime.memory import DevicePtr

ACL_SUCCESS = 0
ACL_ERROR_REPEAT_INITIALIZE = 100002  # acl.init after torch_npu initialised ACL (acl_base_rt.h)
# Deferred host output buffers get addresses here (never dereferenced as device memory).
_OUTPUT_BASE = 1 << 46


class DeviceError(RuntimeError):
    """An ACL call failed or a device is unavailable."""


class GraphInputError(TypeError):
    """A compiled GE graph was called with an input unlike the one it was compiled for."""


def _spec(dtype: torch.dtype, shape: Any, device: str = "cpu") -> str:
    dims = ", ".join("?" if d == -1 else str(d) for d in shape)
    return f"{str(dtype).removeprefix('torch.')}[{dims}] on {device}"


def check_input(graph: str, index: int, name: str, t: Any, dtype: torch.dtype,
                shape: tuple[int, ...]) -> None:
    """Raise ``GraphInputError`` unless ``t`` is a host tensor of ``dtype`` whose shape
    matches ``shape`` (-1: any size). Layout does not matter: inputs bind contiguously."""
    if isinstance(t, torch.Tensor) and t.dtype == dtype and t.is_cpu:
        if t.shape == shape or (t.dim() == len(shape) and all(
                d in (-1, n) for d, n in zip(shape, t.shape))):
            return  # (the static case costs one torch.Size == tuple comparison)
    got = (_spec(t.dtype, t.shape, str(t.device)) if isinstance(t, torch.Tensor)
           else type(t).__name__)
    raise GraphInputError(f"GE graph {graph!r} input {index} ({name!r}): compiled for "
                          f"{_spec(dtype, shape)}, called with {got}. Dynamo's guards "
                          f"normally recompile for such an input; it reached the compiled "
                          f"graph without a guard (a guard-free call path).")


def check(ret: int, call: str) -> None:
    if ret != 0:
        raise DeviceError(f"{call} failed with ACL error {ret}")


class HostDevice:
    """The host device: zero-copy binding of CPU tensors, models run by ``HostModel``."""

    kind = "host"
    check_input = staticmethod(check_input)

    def __init__(self) -> None:
        self.acl = HostAcl()
        self._next_output = itertools.count(_OUTPUT_BASE, 512)

    @property
    def allocator(self) -> CachingAllocator:
        return self.acl.allocator

    def bind_input(self, t: torch.Tensor) -> tuple[DevicePtr, int]:
        if not t.is_contiguous():
            t = t.contiguous()
        ptr = DevicePtr(t.data_ptr())
        ptr.tensor = t
        return ptr, t.nbytes

    def alloc_output(self, dtype: torch.dtype, shape: tuple[int, ...]) -> tuple[DevicePtr, int]:
        """A deferred buffer: the model hands its result tensor over in it (no copy)."""
        size = torch.Size(shape).numel() * dtype.itemsize
        return DevicePtr.of(next(self._next_output), deferred=True), size

    def fetch_output(self, ptr: DevicePtr, dtype: torch.dtype, shape: tuple[int, ...]) -> Any:
        return ptr.tensor

    def release(self, ptr: DevicePtr) -> None:
        """Host-registered buffers need no release."""

    def configure_model(self, model_id: int, config: Any) -> None:
        """Apply per-compile options (``memory_plan``, ``memory_limit``) to a loaded model."""
        model = self.acl.models[model_id]
        model.set_precision_mode(config.precision_mode, target_soc(config))  # ATC's choice
        model.set_memory_plan(config.memory_plan)
        if config.memory_limit is not None:
            self.allocator.set_memory_limit(config.memory_limit)

    def memory_plan(self, model_id: int) -> dict[str, Any]:
        """The model's static memory plan as JSON-able data (``memory_plan.json``)."""
        return self.acl.models[model_id].plan_json()

    def write_memory_plan(self, model_id: int, path: Path) -> None:
        path.write_text(json.dumps(self.memory_plan(model_id), indent=1))


class AclDevice:
    """A real Ascend device through pyACL (CANN).

    One device per process: ``device_id`` (the ``device_id`` option), else ``LOCAL_RANK``
    (torchrun), else ``DEVICE_ID``, else 0. ``acl.init`` returning
    ``ACL_ERROR_REPEAT_INITIALIZE`` means torch_npu initialised ACL already (not an error).
    CPU tensors are copied H2D / D2H; tensors already on an NPU (torch_npu) are bound in
    place and outputs are allocated on the device as NPU tensors.
    """

    kind = "acl"
    check_input = staticmethod(check_input)
    MALLOC_HUGE_FIRST = 0
    MEMCPY_H2D = 1
    MEMCPY_D2H = 2
    MEMCPY_D2D = 3

    def __init__(self, device_id: int | None = None) -> None:
        import acl  # only present where CANN is installed

        self.acl = acl
        self.device_id = resolve_device_id(device_id)
        ret = acl.init()
        if ret not in (ACL_SUCCESS, ACL_ERROR_REPEAT_INITIALIZE):
            check(ret, "acl.init")
        check(acl.rt.set_device(self.device_id), f"acl.rt.set_device({self.device_id})")
        self.context, ret = acl.rt.create_context(self.device_id)
        check(ret, "acl.rt.create_context")
        self.soc_name = acl.get_soc_name()  # aclrtGetSocName: ATC's --soc_version default
        self.allocator = CachingAllocator(AclBackend(acl))
        self._owned: set[int] = set()  # blocks bind_input / alloc_output took
        self.npu_io = False  # set per call by ``begin``: inputs on the NPU, outputs too

    def begin(self, inputs: list[torch.Tensor]) -> None:
        """Start one call: NPU-resident inputs make the outputs NPU tensors too."""
        self.npu_io = any(t.device.type == "npu" for t in inputs)

    def bind_input(self, t: torch.Tensor) -> tuple[int, int]:
        t = t.contiguous()
        size = t.numel() * t.element_size()
        if t.device.type == "npu":  # already device memory: bind in place
            return t.data_ptr(), size
        if size == 0:  # aclrtMalloc refuses size 0; an empty tensor needs no memory
            return 0, 0
        ptr = self.allocator.malloc(size)
        self._owned.add(ptr)
        check(self.acl.rt.memcpy(ptr, size, t.data_ptr(), size, self.MEMCPY_H2D),
              "acl.rt.memcpy(H2D)")
        return ptr, size

    def alloc_output(self, dtype: torch.dtype, shape: tuple[int, ...],
                     size: int | None = None) -> tuple[Any, int]:
        """Device memory for an output: ``size`` bytes (the model's output size) or the
        bytes of ``shape``."""
        size = torch.Size(shape).numel() * dtype.itemsize if size is None else size
        if self.npu_io:
            out = torch.empty(size // dtype.itemsize, dtype=dtype, device="npu")
            return _NpuOutput(out.data_ptr(), out), size
        if size == 0:
            return 0, 0
        ptr = self.allocator.malloc(size)
        self._owned.add(ptr)
        return ptr, size

    def fetch_output(self, ptr: Any, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        tensor = getattr(ptr, "tensor", None)
        if tensor is not None:  # an NPU tensor the model wrote into
            return tensor[:torch.Size(shape).numel()].view(shape)
        device = "npu" if self.npu_io else "cpu"
        out = torch.empty(shape, dtype=dtype, device=device)
        size = out.numel() * out.element_size()
        if size:
            kind = self.MEMCPY_D2D if self.npu_io else self.MEMCPY_D2H
            check(self.acl.rt.memcpy(out.data_ptr(), size, int(ptr), size, kind),
                  "acl.rt.memcpy(D2H)")
        return out

    def release(self, ptr: Any) -> None:
        if ptr in self._owned:
            self._owned.discard(ptr)
            self.allocator.free(ptr)

    def configure_model(self, model_id: int, config: Any) -> None:
        """ATC plans the .om's memory itself; only the allocator limit applies here."""
        if config.memory_limit is not None:
            self.allocator.set_memory_limit(config.memory_limit)

    def memory_plan(self, model_id: int) -> dict[str, Any]:
        return {"planned": False, "reason": "the acl device's memory is planned by ATC/GE"}

    def write_memory_plan(self, model_id: int, path: Path) -> None:
        path.write_text(json.dumps(self.memory_plan(model_id), indent=1))


class _NpuOutput(int):
    """An output buffer address that is an NPU tensor's memory (kept alive here)."""

    tensor: torch.Tensor

    def __new__(cls, addr: int, tensor: torch.Tensor) -> _NpuOutput:
        obj = super().__new__(cls, addr)
        obj.tensor = tensor
        return obj


def resolve_device_id(device_id: int | None = None) -> int:
    """The acl device of this process: the option, else ``LOCAL_RANK`` (torchrun), else
    ``DEVICE_ID``, else 0."""
    if device_id is not None:
        return int(device_id)
    for var in ("LOCAL_RANK", "DEVICE_ID"):
        raw = os.environ.get(var, "").strip()
        if raw:
            if not raw.isdigit():
                raise DeviceError(f"{var}={raw!r} is not a device id (a non-negative integer)")
            return int(raw)
    return 0


def acl_available() -> bool:
    return importlib.util.find_spec("acl") is not None


def get_device(kind: str = "auto", device_id: int | None = None) -> HostDevice | AclDevice:
    """The process-wide device of ``kind`` (``auto`` picks acl where pyACL exists; it is
    the same object as the device it picks, so ``memory_stats()`` sees every model);
    ``device_id`` selects the acl device (default: ``resolve_device_id``)."""
    if kind == "auto":
        kind = "acl" if acl_available() else "host"
    return _device(kind, device_id if kind == "acl" else None)


@functools.cache
def _device(kind: str, device_id: int | None) -> HostDevice | AclDevice:
    if kind == "host":
        return HostDevice()
    if kind == "acl":
        if not acl_available():
            raise DeviceError("device='acl' needs CANN's pyACL (`import acl`); it is not "
                              "installed here. Use device='host' or 'auto'.")
        return AclDevice(device_id)
    raise DeviceError(f"unknown device {kind!r}")


get_device.cache_clear = _device.cache_clear  # type: ignore[attr-defined]  (tests' fakes)


# ---- public memory API (``npu_inductor.memory_stats()`` etc.) --------------------------------
def memory_stats(device: str = "auto") -> dict[str, Any]:
    """The device caching allocator's stats: bytes allocated / reserved (current and
    peak), block and segment counts, OOMs, largest free block, fragmentation."""
    return get_device(device).allocator.memory_stats()


def empty_cache(device: str = "auto") -> None:
    """Release every cached, unused device-memory segment back to the device."""
    get_device(device).allocator.empty_cache()


def reset_peak_memory_stats(device: str = "auto") -> None:
    """Restart peak tracking from the current allocated / reserved bytes."""
    get_device(device).allocator.reset_peak_memory_stats()


def set_memory_limit(limit: int | str | None, device: str = "auto") -> None:
    """Cap the device memory the allocator may reserve (bytes or a size string such as
    ``"512MiB"``; None: unlimited)."""
    get_device(device).allocator.set_memory_limit(limit)


def memory_summary(device: str = "auto") -> str:
    """``memory_stats`` as a readable two-column table."""
    from npu_inductor.runtime.allocator import format_bytes

    stats = memory_stats(device)
    rows = [(k, format_bytes(v) if k.endswith("bytes") or k in ("limit", "largest_free_block")
             else f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in stats.items()]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
