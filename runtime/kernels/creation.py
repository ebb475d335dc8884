"""Creation GE ops: Fill, Range, LinSpace, Eye, TensorMove."""

from __future__ import annotations

import torch

from npu_inductor.ge.dtypes import from_cpp
from npu_inductor.runtime.kernels import kernel


@kernel("Fill", out=True)
def fill(dims, value, out=None):
    if out is not None:  # (its shape is the GE output's, i.e. ``dims``)
        return out.copy_(value.reshape(()))
    return value.reshape(()).expand(dims.tolist()).contiguous()


@kernel("Range")
def range_(start, limit, delta):
    return torch.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)


@kernel("LinSpace")
def lin_space(start, stop, num):
    return torch.linspace(start.item(), stop.item(), int(num), dtype=start.dtype)


@kernel("Eye")
def eye(num_rows, num_columns=0, batch_shape=(), dtype=0):
    y = torch.eye(num_rows, num_columns or num_rows, dtype=from_cpp(dtype))
    return y.expand(*batch_shape, *y.shape).contiguous() if batch_shape else y


@kernel("TensorMove")
def tensor_move(x):
    return x.clone()
