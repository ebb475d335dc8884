"""Matrix-multiply and reduction GE ops."""

from __future__ import annotations

import torch

from npu_inductor.runtime.kernels import kernel


def _t(x, flag):
    return x.transpose(-1, -2) if flag else x


@kernel("MatMulV2", "MatMul")
def matmul(x1, x2, bias=None, offset_w=None, transpose_x1=False, transpose_x2=False, offset_x=0):
    a, b = _t(x1, transpose_x1), _t(x2, transpose_x2)
    if bias is not None:
        return torch.addmm(bias, a, b)
    return torch.mm(a, b)


@kernel("BatchMatMulV2", "BatchMatMul")
def batch_matmul(x1, x2, bias=None, offset_w=None, adj_x1=False, adj_x2=False, offset_x=0):
    out = torch.matmul(_t(x1, adj_x1), _t(x2, adj_x2))
    return out if bias is None else out + bias
