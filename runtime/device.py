"""Devices behind one interface: ``host`` (CPU simulator, the default here) and ``acl``.

The generated executor calls the pyACL API through ``device.acl`` and moves tensors with
``bind_input`` / ``alloc_output`` / ``fetch_output``; only these differ between devices.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import torch

from npu_inductor.runtime.host_acl import HostAcl
from npu_inductor.runtime.memory import DevicePtr


class DeviceError(RuntimeError):
    """An ACL call failed or a device is unavailable."""


def check(ret: int, call: str) -> None:
    if ret != 0:
        raise DeviceError(f"{call} failed with ACL error {ret}")


class HostDevice:
    """The host device: zero-copy binding of CPU tensors, models run by ``HostModel``."""

    kind = "host"

    def __init__(self) -> None:
        self.acl = HostAcl()

    def bind_input(self, t: torch.Tensor) -> tuple[DevicePtr, int]:
        t = t if t.is_contiguous() else t.contiguous()
        return DevicePtr.of(t.data_ptr(), t), t.numel() * t.element_size()

    def alloc_output(self, dtype: torch.dtype, shape: tuple[int, ...]) -> tuple[DevicePtr, int]:
        t = torch.empty(shape, dtype=dtype)
        return DevicePtr.of(t.data_ptr(), t), t.numel() * t.element_size()

    def fetch_output(self, ptr: DevicePtr, dtype: torch.dtype, shape: tuple[int, ...]) -> Any:
        return ptr.tensor

    def release(self, ptr: DevicePtr) -> None:
        """Host-registered buffers need no release."""


class AclDevice:
    """A real Ascend device through pyACL (CANN); inputs are copied H2D, outputs D2H."""

    kind = "acl"
    MALLOC_HUGE_FIRST = 0
    MEMCPY_H2D = 1
    MEMCPY_D2H = 2

    def __init__(self, device_id: int = 0) -> None:
        import acl  # only present where CANN is installed

        self.acl = acl
        self.device_id = device_id
        check(acl.init(), "acl.init")
        check(acl.rt.set_device(device_id), "acl.rt.set_device")
        self.context, ret = acl.rt.create_context(device_id)
        check(ret, "acl.rt.create_context")

    def bind_input(self, t: torch.Tensor) -> tuple[int, int]:
        t = t.contiguous()
        size = t.numel() * t.element_size()
        ptr, ret = self.acl.rt.malloc(max(size, 1), self.MALLOC_HUGE_FIRST)
        check(ret, "acl.rt.malloc")
        check(self.acl.rt.memcpy(ptr, size, t.data_ptr(), size, self.MEMCPY_H2D),
              "acl.rt.memcpy")
        return ptr, size

    def alloc_output(self, dtype: torch.dtype, shape: tuple[int, ...]) -> tuple[int, int]:
        size = torch.Size(shape).numel() * dtype.itemsize
        ptr, ret = self.acl.rt.malloc(max(size, 1), self.MALLOC_HUGE_FIRST)
        check(ret, "acl.rt.malloc")
        return ptr, size

    def fetch_output(self, ptr: int, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        out = torch.empty(shape, dtype=dtype)
        size = out.numel() * out.element_size()
        check(self.acl.rt.memcpy(out.data_ptr(), size, ptr, size, self.MEMCPY_D2H),
              "acl.rt.memcpy")
        return out

    def release(self, ptr: int) -> None:
        check(self.acl.rt.free(ptr), "acl.rt.free")


def acl_available() -> bool:
    return importlib.util.find_spec("acl") is not None


@functools.cache
def get_device(kind: str = "auto") -> HostDevice | AclDevice:
    """The process-wide device of ``kind`` (``auto`` picks acl where pyACL exists)."""
    if kind == "auto":
        kind = "acl" if acl_available() else "host"
    if kind == "host":
        return HostDevice()
    if kind == "acl":
        if not acl_available():
            raise DeviceError("device='acl' needs CANN's pyACL (`import acl`); it is not "
                              "installed here. Use device='host' or 'auto'.")
        return AclDevice()
    raise DeviceError(f"unknown device {kind!r}")
