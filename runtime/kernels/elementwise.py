"""Elementwise GE ops."""

from __future__ import annotations

import torch

from npu_inductor.ge.dtypes import from_cpp
from npu_inductor.runtime.kernels import kernel

kernel("Add")(torch.add)
kernel("Sub")(torch.sub)
kernel("Mul")(torch.mul)
kernel("RealDiv")(torch.div)
kernel("Relu")(torch.relu)


@kernel("Cast")
def cast(x, dst_type):
    return x.to(from_cpp(dst_type))


@kernel("Identity")
def identity(x):
    return x
