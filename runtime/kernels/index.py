"""Indexing GE ops: gathers, scatters, masks, sort/topk (TF/ONNX semantics)."""

from __future__ import annotations

import torch

from npu_inductor.runtime.kernels import kernel


def _nd(indices: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """GE ``*Nd`` index tensor ``B + [k]`` -> torch advanced-index tuple over the first k dims."""
    return tuple(indices.long().unbind(-1))


@kernel("GatherNd")
def gather_nd(x, indices, negative_index_support=False):
    return x[_nd(indices)]


@kernel("GatherElements")
def gather_elements(x, index, dim=0):
    return torch.gather(x, dim, index.long())


@kernel("TensorScatterUpdate")
def tensor_scatter_update(x, indices, updates):
    return x.index_put(_nd(indices), updates)


@kernel("ScatterNonAliasingAdd")
def scatter_non_aliasing_add(x, indices, updates):
    return x.index_put(_nd(indices), updates, accumulate=True)


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@kernel("ScatterElements")
def scatter_elements(data, indices, updates, axis=0, reduction="none"):
    if reduction == "none":
        return data.scatter(axis, indices.long(), updates)
    return data.scatter_reduce(axis, indices.long(), updates, _SCATTER_REDUCE[reduction])


@kernel("MaskedFill")
def masked_fill(x, mask, value):
    return torch.masked_fill(x, mask, value.reshape(()))


@kernel("MaskedScatter")
def masked_scatter(x, mask, updates):
    return torch.masked_scatter(x, mask, updates)


@kernel("Sort")
def sort(x, axis=-1, descending=False, stable=False):
    values, indices = torch.sort(x, dim=axis, descending=descending, stable=stable)
    return values, indices.int()


@kernel("TopKV2")
def top_k_v2(x, k, sorted=True, dim=-1, largest=True):
    values, indices = torch.topk(x, int(k), dim, largest, sorted)
    return values, indices.int()


@kernel("SearchSorted")
def search_sorted(sorted_sequence, values, sorter=None, dtype=torch.int64, right=False):
    return torch.searchsorted(sorted_sequence, values, out_int32=dtype == torch.int32,
                              right=right, sorter=sorter)


def _tensor_scatter_reduce(x, indices, updates, reduce):
    """TF ``TensorScatterMax/Min``: ``x`` with each ``*Nd``-indexed slice reduced with its
    update (duplicates reduce together)."""
    k = indices.shape[-1]
    rows = x.reshape((-1,) + tuple(x.shape[k:]))
    strides = torch.tensor(x.shape[:k]).flip(0).cumprod(0).flip(0).tolist()[1:] + [1]
    flat = (indices.long() * torch.tensor(strides)).sum(-1).reshape(-1)
    src = updates.reshape((-1,) + tuple(x.shape[k:]))
    target = flat.reshape((-1,) + (1,) * (src.dim() - 1)).expand_as(src)
    return rows.scatter_reduce(0, target, src, reduce).reshape(x.shape)


@kernel("TensorScatterMax")
def tensor_scatter_max(x, indices, updates):
    return _tensor_scatter_reduce(x, indices, updates, "amax")


@kernel("TensorScatterMin")
def tensor_scatter_min(x, indices, updates):
    return _tensor_scatter_reduce(x, indices, updates, "amin")
