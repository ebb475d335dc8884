"""The host device's ACL: pyACL's call forms (``acl.rt``, ``acl.mdl``, data buffers)
implemented on the CPU, so the generated executor runs unchanged on host and acl.

Return conventions follow pyACL: calls return ``ret`` or ``(value, ret)`` with
``ret == ACL_SUCCESS`` (0). ``mdl.load_from_mem`` takes the serialized GE ``ModelDef``
(``.air`` bytes) where a real device takes the ATC-compiled ``.om``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from npu_inductor.ge.serialize import from_air
from npu_inductor.runtime.allocator import CachingAllocator, HostBackend
from npu_inductor.runtime.host_model import HostModel
from npu_inductor.runtime.memory import DevicePtr, SlabMemory, view_as

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2


@dataclass
class DataBuffer:
    ptr: int
    size: int


@dataclass
class Dataset:
    buffers: list[DataBuffer] = field(default_factory=list)


class HostAcl:
    """pyACL-shaped API over ``SlabMemory`` and ``HostModel``.

    ``allocator`` is the device's caching allocator; loaded models take their planned
    workspaces from it (a real device's runtime does the same with its memory pool).
    """

    def __init__(self, memory: SlabMemory | None = None) -> None:
        self.memory = memory or SlabMemory()
        self.allocator = CachingAllocator(HostBackend(self.memory))
        self.models: dict[int, HostModel] = {}
        self._next_model = 1
        self._rules_checked = False  # see rules_checked()
        self.rt = SimpleNamespace(malloc=self._malloc, free=self._free, memcpy=self._memcpy)
        self.mdl = SimpleNamespace(
            load_from_mem=self._load_from_mem, unload=self._unload,
            create_dataset=Dataset, destroy_dataset=lambda ds: ACL_SUCCESS,
            add_dataset_buffer=self._add_dataset_buffer,
            get_dataset_buffer=lambda ds, i: ds.buffers[i],
            get_dataset_num_buffers=lambda ds: len(ds.buffers),
            execute=self._execute)

    # ---- memory -------------------------------------------------------------------------
    def _malloc(self, size: int, policy: int = 0) -> tuple[DevicePtr, int]:
        return self.memory.malloc(size), ACL_SUCCESS

    def _free(self, ptr: int) -> int:
        self.memory.free(ptr)
        return ACL_SUCCESS

    def _memcpy(self, dst: int, dst_max: int, src: int, count: int, kind: int) -> int:
        if count > dst_max:
            return ACL_ERROR_INVALID_PARAM
        self.resolve(dst, count).copy_(self.resolve(src, count))
        return ACL_SUCCESS

    def resolve(self, ptr: int, nbytes: int) -> torch.Tensor:
        t = getattr(ptr, "tensor", None)
        if t is not None:
            return t.reshape(-1).view(torch.uint8)[:nbytes]
        return self.memory.resolve(ptr, nbytes)

    # ---- data buffers -------------------------------------------------------------------
    @staticmethod
    def create_data_buffer(ptr: int, size: int) -> DataBuffer:
        return DataBuffer(ptr, size)

    @staticmethod
    def update_data_buffer(buf: DataBuffer, ptr: int, size: int) -> int:
        buf.ptr, buf.size = ptr, size
        return ACL_SUCCESS

    @staticmethod
    def destroy_data_buffer(buf: DataBuffer) -> int:
        return ACL_SUCCESS

    @staticmethod
    def get_data_buffer_addr(buf: DataBuffer) -> int:
        return buf.ptr

    @staticmethod
    def get_data_buffer_size_v2(buf: DataBuffer) -> int:
        return buf.size

    @staticmethod
    def _add_dataset_buffer(ds: Dataset, buf: DataBuffer) -> tuple[Dataset, int]:
        ds.buffers.append(buf)
        return ds, ACL_SUCCESS

    # ---- models -------------------------------------------------------------------------
    def _load_from_mem(self, model: bytes, size: int) -> tuple[int, int]:
        model_id = self._next_model
        self._next_model += 1
        self.models[model_id] = HostModel(from_air(bytes(model[:size])), self.allocator,
                                          rules_checked=self._rules_checked)
        return model_id, ACL_SUCCESS

    @contextlib.contextmanager
    def rules_checked(self) -> Iterator[None]:
        """Models loaded inside were checked against the device rules already: built by this
        process's lowering (``GraphBuilder.build`` checks) or read from a compile-cache
        entry whose checksum and key (which holds the digest of this source, rules
        included) match. A real device does not re-check an ``.om`` either: ATC did, once.
        Any other model (a planted ``.air``, a test's hand-made graph) is checked."""
        saved, self._rules_checked = self._rules_checked, True
        try:
            yield
        finally:
            self._rules_checked = saved

    def _unload(self, model_id: int) -> int:
        self.models.pop(model_id, None)
        return ACL_SUCCESS

    def run_tensors(self, model_id: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """The host executor's direct call (no pyACL counterpart): contiguous host tensors
        of the model's dtypes and shapes are its inputs as they are, as zero-copy
        data buffers would bind them, and the results come back as the deferred output
        buffers would hand them over."""
        return self.models[model_id].execute(inputs)

    def _tensor_of(self, buf: DataBuffer, desc: Any) -> torch.Tensor:
        t = getattr(buf.ptr, "tensor", None)
        if t is not None:
            return t
        return view_as(self.memory.resolve(buf.ptr, buf.size), desc.dtype, desc.shape)

    def _execute(self, model_id: int, inputs: Dataset, outputs: Dataset) -> int:
        model = self.models[model_id]
        # zero-copy bound host tensors; device memory (rt.malloc + memcpy) is resolved
        args = [getattr(b.ptr, "tensor", None) for b in inputs.buffers]
        if any(a is None for a in args):
            args = [self._tensor_of(b, op.output_descs[0])
                    for b, op in zip(inputs.buffers, model.inputs)]
        results = model.execute(args)
        for buf, value in zip(outputs.buffers, results):
            if getattr(buf.ptr, "deferred", False):
                buf.ptr.tensor = value  # zero copy: the result becomes the output buffer
                continue
            out = getattr(buf.ptr, "tensor", None)
            if out is None:
                out = view_as(self.memory.resolve(buf.ptr, buf.size), value.dtype, value.shape)
            if out.shape != value.shape:
                out.resize_(value.shape)
            out.copy_(value)
        return ACL_SUCCESS
