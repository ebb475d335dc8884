"""Host-device memory: "device" addresses that map to ranges in host slabs.

Addresses live in a private range (``DEVICE_BASE`` upward) so they never collide with
real host pointers. ``DevicePtr`` is an ``int`` address that may also carry a host
tensor registered zero-copy (the host device's equivalent of ``aclrtHostRegister``).

Besides plain slabs (``malloc``/``free``, like ``aclrtMalloc``/``aclrtFree``) the host
memory offers virtual reservations (``reserve``/``map``/``unmap``, like
``aclrtReserveMemAddress``/``aclrtMapMem``), which the caching allocator's expandable
segments grow into. A reservation is an anonymous ``MAP_NORESERVE`` mmap: its pages
cost nothing until touched, and ``unmap`` gives them back to the OS (``MADV_DONTNEED``).
"""

from __future__ import annotations

import bisect
import mmap
import warnings

import torch

DEVICE_BASE = 1 << 44
ALIGNMENT = 512
_MAP_NORESERVE = 0x4000  # Linux; the mmap module does not export it


class DevicePtr(int):
    """A device address; ``tensor`` is set when it names a registered host tensor.

    A ``deferred`` pointer is an output buffer the model fills in: the host device hands
    the op's result tensor over in it instead of copying the result into a buffer.
    """

    tensor: torch.Tensor | None = None
    deferred: bool = False

    @classmethod
    def of(cls, address: int, tensor: torch.Tensor | None = None, *,
           deferred: bool = False) -> DevicePtr:
        p = cls(address)
        p.tensor = tensor
        p.deferred = deferred
        return p


class DeviceMemoryError(RuntimeError):
    """Bad device address or size."""


def _round(size: int) -> int:
    return (max(size, 1) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


class _Reservation:
    """A virtual address range; only ``[0, mapped)`` may be touched."""

    def __init__(self, size: int) -> None:
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
        self.mm = mmap.mmap(-1, size, flags=flags)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # frombuffer warns about non-writable buffers
            self.tensor = torch.frombuffer(self.mm, dtype=torch.uint8)
        self.mapped = 0


class SlabMemory:
    """Device memory made of host slabs; ``malloc`` returns a ``DevicePtr`` into one."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._slabs: dict[int, torch.Tensor] = {}
        self._reservations: dict[int, _Reservation] = {}
        self._next = DEVICE_BASE

    def _claim(self, size: int, slab: torch.Tensor) -> int:
        start = self._next
        self._next += _round(size)
        self._slabs[start] = slab
        bisect.insort(self._starts, start)
        return start

    def malloc(self, size: int) -> DevicePtr:
        size = max(size, 1)
        return DevicePtr.of(self._claim(size, torch.empty(size, dtype=torch.uint8)))

    def free(self, ptr: int) -> None:
        if int(ptr) not in self._slabs or int(ptr) in self._reservations:
            raise DeviceMemoryError(f"free of unknown device address {int(ptr):#x}")
        del self._slabs[int(ptr)]
        self._starts.remove(int(ptr))

    # ---- virtual reservations (expandable segments) ---------------------------------------
    def reserve(self, size: int) -> DevicePtr:
        """Reserve ``size`` bytes of address space; nothing is mapped yet."""
        res = _Reservation(_round(size))
        start = self._claim(size, res.tensor)
        self._reservations[start] = res
        return DevicePtr.of(start)

    def map(self, base: int, offset: int, size: int) -> None:
        """Map ``[base + offset, +size)``; mappings grow a reservation from its start."""
        res = self._reservation(base)
        if offset != res.mapped or offset + size > res.tensor.numel():
            raise DeviceMemoryError(f"map [{offset}, +{size}) of reservation {base:#x} must "
                                    f"extend its mapped prefix ({res.mapped} bytes)")
        res.mapped += size

    def unmap(self, base: int, offset: int, size: int) -> None:
        """Unmap the tail ``[base + offset, +size)`` and return its pages to the OS."""
        res = self._reservation(base)
        if offset + size != res.mapped or offset < 0:
            raise DeviceMemoryError(f"unmap [{offset}, +{size}) of reservation {base:#x} must "
                                    f"end at its mapped size ({res.mapped} bytes)")
        res.mm.madvise(mmap.MADV_DONTNEED, offset, size)
        res.mapped = offset

    def release(self, base: int) -> None:
        """Drop a whole reservation (its mapping must be empty)."""
        res = self._reservation(base)
        if res.mapped:
            raise DeviceMemoryError(f"release of reservation {base:#x} with {res.mapped} "
                                    f"bytes still mapped")
        del self._reservations[base], self._slabs[base]
        self._starts.remove(base)

    def _reservation(self, base: int) -> _Reservation:
        res = self._reservations.get(int(base))
        if res is None:
            raise DeviceMemoryError(f"{int(base):#x} is not a reservation")
        return res

    # ---- access --------------------------------------------------------------------------
    def resolve(self, ptr: int, nbytes: int) -> torch.Tensor:
        """The uint8 host view of ``[ptr, ptr + nbytes)``."""
        i = bisect.bisect_right(self._starts, int(ptr)) - 1
        if i < 0:
            raise DeviceMemoryError(f"device address {int(ptr):#x} is not allocated")
        start = self._starts[i]
        slab = self._slabs[start]
        res = self._reservations.get(start)
        limit = res.mapped if res is not None else slab.numel()
        offset = int(ptr) - start
        if offset + nbytes > limit:
            raise DeviceMemoryError(f"[{int(ptr):#x}, +{nbytes}) runs past its allocation")
        return slab[offset:offset + nbytes]

    @property
    def reserved_bytes(self) -> int:
        """Bytes backed by memory: plain slabs plus the mapped part of reservations."""
        plain = sum(s.numel() for a, s in self._slabs.items() if a not in self._reservations)
        return plain + sum(r.mapped for r in self._reservations.values())


def view_as(raw: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Reinterpret a uint8 range as a contiguous tensor of ``dtype`` and ``shape``."""
    return raw.view(dtype).view(shape)
