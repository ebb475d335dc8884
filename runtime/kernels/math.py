"""Matrix-multiply and reduction GE ops."""

from __future__ import annotations

import math

import torch

from npu_inductor.runtime.kernels import kernel


def _specialize_matmul(consts, attrs):
    """Transpose flags fixed at load time."""
    t1, t2 = attrs.get("transpose_x1", False), attrs.get("transpose_x2", False)

    def matmul_2d(x1, x2, bias=None, *_, out=None, **__):
        a = x1.mT if t1 else x1
        b = x2.mT if t2 else x2
        if bias is not None:
            return torch.addmm(bias, a, b, out=out)
        return torch.mm(a, b, out=out)
    return matmul_2d


@kernel("MatMulV2", out=True, specialize=_specialize_matmul)
def matmul(x1, x2, bias=None, offset_w=None, transpose_x1=False, transpose_x2=False, offset_x=0,
           out=None):
    flags = {"transpose_x1": transpose_x1, "transpose_x2": transpose_x2}
    return _specialize_matmul((), flags)(x1, x2, bias, out=out)


def _specialize_batch_matmul(consts, attrs):
    """Flags fixed at load time; a 2-D right operand with a bias runs as one ``addmm`` over
    the flattened rows (what eager's ``linear`` calls) instead of ``matmul`` then ``add_``."""
    adj1, adj2 = attrs.get("adj_x1", False), attrs.get("adj_x2", False)

    def batch_matmul_2d(x1, x2, bias=None, *_, out=None, **__):
        a = x1.mT if adj1 else x1
        b = x2.mT if adj2 else x2
        if bias is None:
            return torch.matmul(a, b, out=out)
        if b.dim() == 2 and bias.dim() <= 1 and out is not None and a.dim() >= 2:
            rows = math.prod(a.shape[:-1])  # explicit: -1 is ambiguous for 0-size dims
            torch.addmm(bias, a.reshape(rows, a.shape[-1]), b,
                        out=out.view(rows, b.shape[-1]))
            return out
        y = torch.matmul(a, b, out=out)
        return y.add_(bias) if out is not None else y + bias
    return batch_matmul_2d


@kernel("BatchMatMulV2", out=True, specialize=_specialize_batch_matmul)
def batch_matmul(x1, x2, bias=None, offset_w=None, adj_x1=False, adj_x2=False, offset_x=0,
                 out=None):
    flags = {"adj_x1": adj_x1, "adj_x2": adj_x2}
    return _specialize_batch_matmul((), flags)(x1, x2, bias, out=out)
