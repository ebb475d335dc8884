"""Reduction and scan GE ops. Axes arrive as an int64 tensor; empty axes reduce nothing
(GE/TF semantics), so converters always pass the axes explicitly."""

from __future__ import annotations

import torch

from npu_inductor.runtime.kernels import RUNTIME, kernel


def _axes(axes: torch.Tensor) -> list[int]:
    return [int(a) for a in axes.reshape(-1).tolist()]


def _reduce(fn):
    def run(x, axes, keep_dims=False, **_):
        dims = _axes(axes)
        return fn(x, dims, keep_dims) if dims else x
    return run


def _const_axes(fn):
    """Constant axes: decoded once at load, per call only the torch reduction."""
    def specialize(consts, attrs):
        axes = consts[1] if len(consts) > 1 else None
        if axes is RUNTIME or axes is None:
            return None
        dims = [int(a) for a in torch.tensor(axes).reshape(-1).tolist()]
        if not dims:  # empty axes reduce nothing
            return lambda x, *_, **__: x

        def reduce(x, axes, keep_dims=False, **_):
            return fn(x, dims, keep_dims)
        return reduce
    return specialize


for _name, _fn in (("ReduceSum", lambda x, d, k: torch.sum(x, d, k)),
                   ("ReduceMean", lambda x, d, k: torch.mean(x, d, k)),
                   ("ReduceMax", lambda x, d, k: torch.amax(x, d, k)),
                   ("ReduceMin", lambda x, d, k: torch.amin(x, d, k)),
                   ("ReduceAny", lambda x, d, k: torch.any(x, d, k)),
                   ("ReduceAll", lambda x, d, k: torch.all(x, d, k))):
    kernel(_name, specialize=_const_axes(_fn))(_reduce(_fn))


@kernel("ReduceProd")
def reduce_prod(x, axes, keep_dims=False):
    out = x
    for d in sorted(_axes(axes), reverse=True):  # torch.prod takes one dim at a time
        out = torch.prod(out, d, keepdim=keep_dims)
    return out


@kernel("ArgMaxV2")
def arg_max_v2(x, dimension, dtype=torch.int64):
    return torch.argmax(x, int(dimension.reshape(-1)[0])).to(dtype)


@kernel("ArgMin")
def arg_min(x, dimension, dtype=torch.int64):
    return torch.argmin(x, int(dimension.reshape(-1)[0])).to(dtype)


def _scan(fn, identity, x, axis, exclusive, reverse):
    dim = int(axis.reshape(-1)[0])
    if reverse:
        x = x.flip(dim)
    if exclusive:  # shift right by one along dim, filling with the scan's identity
        head = torch.full_like(x.narrow(dim, 0, 1), identity)
        x = torch.cat([head, x.narrow(dim, 0, x.shape[dim] - 1)], dim)
    y = fn(x, dim)
    return y.flip(dim) if reverse else y


@kernel("Cumsum")
def cumsum(x, axis, exclusive=False, reverse=False):
    return _scan(torch.cumsum, 0, x, axis, exclusive, reverse)


@kernel("Cumprod")
def cumprod(x, axis, exclusive=False, reverse=False):
    return _scan(torch.cumprod, 1, x, axis, exclusive, reverse)


@kernel("LpNormV2")
def lp_norm_v2(x, p=2.0, axes=(), keepdim=False, epsilon=1e-12):
    """max(||x||_p over axes (all when empty), epsilon)."""
    dims = list(axes) or None
    return torch.linalg.vector_norm(x, p, dims, keepdim).clamp_min(epsilon)


@kernel("Cummax")
def cummax(x, dim):
    return tuple(torch.cummax(x, dim))


@kernel("Cummin")
def cummin(x, axis):
    return tuple(torch.cummin(x, axis))


@kernel("CumulativeLogsumexp")
def cumulative_logsumexp(x, axis, exclusive=False, reverse=False):
    return _scan(torch.logcumsumexp, -float("inf"), x, axis, exclusive, reverse)
