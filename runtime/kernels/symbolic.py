"""Shape queries on the host device (dynamic shapes)."""

from __future__ import annotations

import torch

from npu_inductor.ge.dtypes import from_cpp
from npu_inductor.runtime.kernels import kernel


@kernel("Shape")
def shape(x, dtype=3):
    return torch.tensor(x.shape, dtype=from_cpp(dtype))
