"""Matrix-multiply and reduction GE ops."""

from __future__ import annotations

import torch

from npu_inductor.runtime.kernels import kernel


def _t(x, flag):
    return x.mT if flag else x


@kernel("MatMulV2", "MatMul", out=True)
def matmul(x1, x2, bias=None, offset_w=None, transpose_x1=False, transpose_x2=False, offset_x=0,
           out=None):
    a, b = _t(x1, transpose_x1), _t(x2, transpose_x2)
    if bias is not None:
        return torch.addmm(bias, a, b, out=out)
    return torch.mm(a, b, out=out)


@kernel("BatchMatMulV2", "BatchMatMul", out=True)
def batch_matmul(x1, x2, bias=None, offset_w=None, adj_x1=False, adj_x2=False, offset_x=0,
                 out=None):
    y = torch.matmul(_t(x1, adj_x1), _t(x2, adj_x2), out=out)
    if bias is None:
        return y
    return y.add_(bias) if out is not None else y + bias
