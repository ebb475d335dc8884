"""Shape and layout GE ops (const-input forms: shapes/perms/axes arrive as tensors)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from npu_inductor.runtime.kernels import RUNTIME, as_list, kernel


@kernel("Reshape", const_inputs=(1,))
def reshape(x, shape, axis=0, num_axes=-1):
    return x.reshape(as_list(shape))


@kernel("Transpose", const_inputs=(1,))
def transpose(x, perm):
    return x.permute(as_list(perm))


@kernel("BroadcastTo", const_inputs=(1,))
def broadcast_to(x, shape):
    return x.expand(as_list(shape))


@kernel("Unsqueeze")
def unsqueeze(x, axes=()):
    rank = x.dim() + len(axes)
    for a in sorted(a % rank for a in axes):
        x = x.unsqueeze(a)
    return x


@kernel("Squeeze")
def squeeze(x, axis=()):
    return x.squeeze(tuple(axis)) if axis else x.squeeze()


@kernel("Bitcast")
def bitcast(x, type, keep_dim=False):
    return x.view(type)


def _outputs(ys: tuple) -> torch.Tensor | tuple:
    """A dynamic-output op with one output returns it bare, like any single-output op."""
    return ys[0] if len(ys) == 1 else tuple(ys)


def _specialize_concat_v2(consts, attrs):
    """A Const axis: read once here, per call only ``torch.cat``."""
    dim = consts[1]
    if dim is RUNTIME or dim is None or isinstance(dim, list) and len(dim) != 1:
        return None
    dim = int(dim if not isinstance(dim, list) else dim[0])

    def concat(x, *_, out=None, **__):
        return torch.cat(x, dim, out=out)
    return concat


@kernel("ConcatV2", out=True, specialize=_specialize_concat_v2)
def concat_v2(x, concat_dim, N=1, out=None):
    return torch.cat(x, int(concat_dim), out=out)


@kernel("Pack", out=True)
def pack(x, axis=0, N=1, out=None):
    return torch.stack(x, axis, out=out)


def _split_sizes(sizes: list[int], n: int) -> list[int]:
    if -1 in sizes:  # one size may be inferred from the rest
        sizes = list(sizes)
        sizes[sizes.index(-1)] = n - (sum(sizes) + 1)
    return sizes


def _specialize_split_v(consts, attrs):
    """Constant sizes and axis: per call only ``torch.split``."""
    sizes, dim = consts[1], consts[2]
    if RUNTIME in (sizes, dim) or sizes is None or dim is None:
        return None
    dim = int(dim if not isinstance(dim, list) else dim[0])

    def split(x, *_, **__):
        return _outputs(torch.split(x, _split_sizes(sizes, x.shape[dim]), dim))
    return split


@kernel("SplitV", specialize=_specialize_split_v)
def split_v(x, size_splits, split_dim, num_split):
    dim = int(split_dim)
    return _outputs(torch.split(x, _split_sizes(size_splits.tolist(), x.shape[dim]), dim))


@kernel("Unpack")
def unpack(x, num, axis=0):
    return _outputs(torch.unbind(x, axis))


def _slice_index(rank, begin, end, axes, strides, begin_mask, end_mask, ellipsis_mask,
                 new_axis_mask, shrink_axis_mask) -> tuple:
    if ellipsis_mask or new_axis_mask or shrink_axis_mask:
        raise ValueError("StridedSliceV2: ellipsis/new_axis/shrink_axis masks are not supported "
                         "on the host device")
    axes = axes if axes is not None else list(range(len(begin)))
    steps = strides if strides is not None else [1] * len(begin)
    index = [slice(None)] * rank
    for i, (a, lo, hi, s) in enumerate(zip(axes, begin, end, steps)):
        if s <= 0:
            raise ValueError("StridedSliceV2: non-positive strides are not supported on the host")
        index[a % rank] = slice(None if begin_mask >> i & 1 else lo,
                                None if end_mask >> i & 1 else hi, s)
    return tuple(index)


def _specialize_strided_slice(consts, attrs):
    """Constant begin/end/axes/strides: the index tuple is built once, per call only ``x[i]``
    (the output rank is fixed by the graph, so the input's rank is too)."""
    begin, end, axes, strides = (list(consts[1:5]) + [None] * 4)[:4]
    if RUNTIME in (begin, end, axes, strides):
        return None
    masks = [attrs.get(k, 0) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                       "new_axis_mask", "shrink_axis_mask")]
    cache: dict[int, tuple] = {}

    def strided_slice(x, *_, **__):
        index = cache.get(x.dim())
        if index is None:
            index = cache[x.dim()] = _slice_index(x.dim(), begin, end, axes, strides, *masks)
        return x[index]
    return strided_slice


@kernel("StridedSliceV2", specialize=_specialize_strided_slice)
def strided_slice_v2(x, begin, end, axes=None, strides=None, begin_mask=0, end_mask=0,
                     ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0):
    return x[_slice_index(x.dim(), begin.tolist(), end.tolist(),
                          axes.tolist() if axes is not None else None,
                          strides.tolist() if strides is not None else None, begin_mask,
                          end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)]


@kernel("AsStrided")
def as_strided(x, size, stride, storage_offset):
    return torch.as_strided(x.contiguous(), size.tolist(), stride.tolist(), int(storage_offset))


@kernel("MatrixDiagPartV2")
def matrix_diag_part_v2(input, k, padding_value):
    if k.numel() != 1:
        raise ValueError("MatrixDiagPartV2: diagonal bands are not supported on the host")
    return torch.diagonal(input, int(k.reshape(-1)[0]), -2, -1)


@kernel("ReverseV2")
def reverse_v2(x, axis):
    return torch.flip(x, axis.tolist())


@kernel("Roll")
def roll(x, shifts, dims=()):
    return torch.roll(x, list(shifts), list(dims)) if dims else torch.roll(x, list(shifts))


@kernel("Tile")
def tile(x, multiples):
    return x.repeat(multiples.tolist())


def _pad_index(n: int, before: int, after: int, mode: str) -> torch.Tensor:
    idx = torch.arange(-before, n + after)
    if mode == "edge":
        return idx.clamp(0, n - 1)
    idx = idx.abs()  # reflect about the first and last element
    return torch.where(idx >= n, 2 * (n - 1) - idx, idx)


@kernel("PadV3")
def pad_v3(x, paddings, constant_values=None, mode="constant", paddings_contiguous=True):
    flat = paddings.reshape(-1).tolist()
    rank = x.dim()
    pairs = ([(flat[2 * i], flat[2 * i + 1]) for i in range(rank)] if paddings_contiguous
             else list(zip(flat[:rank], flat[rank:])))
    if mode == "constant":
        pads = [p for pair in reversed(pairs) for p in pair]
        value = 0 if constant_values is None else constant_values.item()
        if isinstance(value, complex):  # F.pad takes a real fill value only
            inside = F.pad(torch.ones(x.shape, dtype=torch.bool), pads, value=False)
            return torch.where(inside, F.pad(x, pads), constant_values.reshape(()))
        return F.pad(x, pads, value=value)
    for d, (before, after) in enumerate(pairs):
        if before or after:
            x = x.index_select(d, _pad_index(x.shape[d], before, after, mode))
    return x


@kernel("Tril")
def tril(x, diagonal=0):
    return torch.tril(x, diagonal)


@kernel("Triu")
def triu(x, diagonal=0):
    return torch.triu(x, diagonal)


@kernel("Assign")
def assign(ref, value, validate_shape=True, use_locking=False):
    """Writes ``value`` into ``ref`` (a ``RefData`` input: the caller's own memory)."""
    if validate_shape and tuple(ref.shape) != tuple(value.shape):
        raise ValueError(f"Assign: value shape {tuple(value.shape)} != ref shape "
                         f"{tuple(ref.shape)}")
    return ref.copy_(value)
