"""Host-device memory: "device" addresses that map to ranges in host slabs.

Addresses live in a private range (``DEVICE_BASE`` upward) so they never collide with
real host pointers. ``DevicePtr`` is an ``int`` address that may also carry a host
tensor registered zero-copy (the host device's equivalent of ``aclrtHostRegister``).
"""

from __future__ import annotations

import bisect

import torch

DEVICE_BASE = 1 << 44
ALIGNMENT = 512


class DevicePtr(int):
    """A device address; ``tensor`` is set when it names a registered host tensor."""

    tensor: torch.Tensor | None = None

    @classmethod
    def of(cls, address: int, tensor: torch.Tensor | None = None) -> "DevicePtr":
        p = cls(address)
        p.tensor = tensor
        return p


class DeviceMemoryError(RuntimeError):
    """Bad device address or size."""


class SlabMemory:
    """Device memory made of host slabs; ``malloc`` returns a ``DevicePtr`` into one."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._slabs: dict[int, torch.Tensor] = {}
        self._next = DEVICE_BASE

    def malloc(self, size: int) -> DevicePtr:
        size = max(size, 1)
        start = self._next
        self._next += (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        self._slabs[start] = torch.empty(size, dtype=torch.uint8)
        bisect.insort(self._starts, start)
        return DevicePtr.of(start)

    def free(self, ptr: int) -> None:
        if int(ptr) not in self._slabs:
            raise DeviceMemoryError(f"free of unknown device address {int(ptr):#x}")
        del self._slabs[int(ptr)]
        self._starts.remove(int(ptr))

    def resolve(self, ptr: int, nbytes: int) -> torch.Tensor:
        """The uint8 host view of ``[ptr, ptr + nbytes)``."""
        i = bisect.bisect_right(self._starts, int(ptr)) - 1
        if i < 0:
            raise DeviceMemoryError(f"device address {int(ptr):#x} is not allocated")
        start = self._starts[i]
        slab = self._slabs[start]
        offset = int(ptr) - start
        if offset + nbytes > slab.numel():
            raise DeviceMemoryError(f"[{int(ptr):#x}, +{nbytes}) runs past its allocation")
        return slab[offset:offset + nbytes]

    @property
    def reserved_bytes(self) -> int:
        return sum(s.numel() for s in self._slabs.values())


def view_as(raw: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Reinterpret a uint8 range as a contiguous tensor of ``dtype`` and ``shape``."""
    return raw.view(dtype).view(shape)
