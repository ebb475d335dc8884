"""View and layout converters: view/reshape, permute/transpose, expand, (un)squeeze, cat/stack,
split/unbind, slice/select, as_strided, diagonal, flip/roll/repeat, pads, tril/triu, unfold.

AOT graphs are functional, so a view converter produces a new GE tensor (Reshape,
Transpose, StridedSliceV2...); that is the right semantics here. ``*_copy`` overloads share
their view's converter. Data-movement ops whose prototype lacks a dtype (Transpose has no
bool, ReverseV2 no bf16...) run in a wider dtype that holds every value exactly (``move``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.ge.ir import DYNAMIC_DIM, Value
from npu_inductor.ge.op_specs import OpSpecError, get_spec
from npu_inductor.ge.soc import DeviceDtypeError, has_kernel
from npu_inductor.lowering.helpers import cast, int_list, norm_axis
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.symbolic import DynamicShapeError, is_symbolic, shape_value

aten = torch.ops.aten

# Dtypes that hold every value of the key exactly, preferred first.
_WIDER: dict[torch.dtype, tuple[torch.dtype, ...]] = {
    torch.bool: (torch.int8, torch.uint8, torch.int32, torch.float16, torch.float32),
    torch.bfloat16: (torch.float32,),
    torch.float16: (torch.float32,),
    torch.int8: (torch.int16, torch.int32, torch.int64),
    torch.uint8: (torch.int16, torch.int32, torch.int64),
    torch.int16: (torch.int32, torch.int64),
    torch.int32: (torch.int64,),
    torch.float32: (torch.float64,),
}


# ---- shared building blocks ------------------------------------------------------------------
def carrier(ge_type: str, port: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype in which ``ge_type``'s input ``port`` can carry ``dtype`` values exactly."""
    allowed = get_spec(ge_type).input(port).dtypes
    if allowed is None or dtype in allowed:
        return dtype
    for wider in _WIDER.get(dtype, ()):
        if wider in allowed:
            return wider
    raise OpSpecError(f"{ge_type}: input {port!r} accepts no dtype that holds {dtype} exactly")


def _as_list(out: Any) -> list:
    return [out] if len(out) == 2 and isinstance(out[0], torch.dtype) else list(out)


def move(ctx, ge_type: str, inputs: list, attrs: dict | None = None, out: Any = None,
         data: Sequence[int] = (0,), suffix: str = "") -> Any:
    """A data-movement op; the inputs at positions ``data`` (all one dtype) and the outputs of
    that dtype are carried in a wider dtype when the prototype lacks it, and cast back."""
    outs = ctx.out_specs() if out is None else _as_list(out)
    first = inputs[data[0]]
    dtype = (first[0] if isinstance(first, list) else first).dtype
    if dtype == torch.complex64 and _no_kernel(ctx, ge_type, inputs, outs):
        return _by_parts(ctx, ge_type, inputs, attrs, outs, data, suffix)
    wide = carrier(ge_type, get_spec(ge_type).inputs[data[0]].name, dtype)
    if wide == dtype:
        return ctx.op(ge_type, inputs, attrs, out=outs, suffix=suffix)
    inputs = list(inputs)
    for i in data:
        v = inputs[i]
        inputs[i] = [cast(ctx, x, wide) for x in v] if isinstance(v, list) else cast(ctx, v, wide)
    ys = ctx.op(ge_type, inputs, attrs, out=[(wide if d == dtype else d, s) for d, s in outs],
                suffix=suffix)
    many = isinstance(ys, tuple)
    back = tuple(cast(ctx, y, dtype) if d == dtype else y
                 for y, (d, _) in zip(ys if many else (ys,), outs))
    return back if many else back[0]


def _no_kernel(ctx, ge_type: str, inputs: list, outs: list) -> bool:
    """Whether the target SoC has no kernel for ``ge_type`` at these dtypes."""
    try:
        ctx.builder.kernel_kind(ge_type, inputs, outs)
    except DeviceDtypeError:
        return True
    except OpSpecError:
        return False
    return False


def _by_parts(ctx, ge_type: str, inputs: list, attrs: dict | None, outs: list,
              data: Sequence[int], suffix: str) -> Any:
    """A data-movement op on complex64 data the SoC has no kernel for: moved as its real
    and imaginary float32 parts (``Real``/``Imag``), recombined with ``Complex``."""
    ctx.note("dtype-gate", f"{ge_type} has no complex64 kernel on {ctx.builder.soc}: "
             "moved as float32 real and imaginary parts", suffix)
    f32, c64 = torch.float32, torch.complex64
    part_outs = [(f32 if d == c64 else d, sh) for d, sh in outs]
    parts = []
    for part in ("Real", "Imag"):
        def split(v, part=part):
            return ctx.op(part, [v], {"Tout": f32}, out=(f32, v.shape), suffix=part.lower())
        ins = list(inputs)
        for i in data:
            v = ins[i]
            ins[i] = [split(x) for x in v] if isinstance(v, list) else split(v)
        ys = ctx.op(ge_type, ins, attrs, out=part_outs, suffix=f"{suffix}_{part.lower()}")
        parts.append(ys if isinstance(ys, tuple) else (ys,))
    back = tuple(ctx.op("Complex", [re, im], {"Tout": c64}, out=(c64, sh), suffix="complex")
                 if d == c64 else re for re, im, (d, sh) in zip(*parts, outs))
    return back if len(back) > 1 else back[0]


def reshape(ctx, x: Value, shape: Sequence[int], suffix: str = "reshape") -> Value:
    """``Reshape`` to a static ``shape`` (no op when already there)."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    return ctx.op("Reshape", [x, int_list(ctx, shape)], out=(x.dtype, shape), suffix=suffix)


def transpose(ctx, x: Value, perm: Sequence[int], suffix: str = "transpose") -> Value:
    """``Transpose`` by ``perm`` (no op for the identity permutation)."""
    perm = [norm_axis(p, x.rank) for p in perm]
    if perm == list(range(x.rank)):
        return x
    shape = tuple(x.shape[p] for p in perm)
    return move(ctx, "Transpose", [x, int_list(ctx, perm, "perm")], out=(x.dtype, shape),
                suffix=suffix)


def broadcast_to(ctx, x: Value, shape: Sequence[int], suffix: str = "broadcast") -> Value:
    shape = tuple(shape)
    if x.shape == shape:
        return x
    return ctx.op("BroadcastTo", [x, int_list(ctx, shape)], out=(x.dtype, shape), suffix=suffix)


def clamp_slice(n: int, start: int | None, end: int | None) -> tuple[int, int]:
    """torch's slice bounds: negatives wrap once, then both clamp into ``[0, n]``."""
    start = 0 if start is None else start
    end = n if end is None else end
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    start = min(max(start, 0), n)
    return start, min(max(end, start), n)


def _ints(ctx, values: Sequence[int], suffix: str) -> Value:
    """An int64 1-D Const of literal values (``-1`` here is an index, never a dynamic dim)."""
    return ctx.const(torch.tensor(list(values), dtype=torch.int64), torch.int64, suffix)


def strided_slice(ctx, x: Value, axes: Sequence[int], begins: Sequence[int],
                  ends: Sequence[int], steps: Sequence[int], suffix: str = "slice",
                  shape: Sequence[int] | None = None) -> Value:
    """``StridedSliceV2`` over ``axes``; ``shape`` (else computed from the already-clamped
    bounds) is the result's."""
    if shape is None:
        shape = list(x.shape)
        for a, b, e, s in zip(axes, begins, ends, steps):
            shape[a] = max(0, math.ceil((e - b) / s))
    return move(ctx, "StridedSliceV2", [x, _bounds(ctx, begins, "begin"),
                                        _bounds(ctx, ends, "end"), _ints(ctx, axes, "axes"),
                                        _ints(ctx, steps, "strides")],
                out=(x.dtype, tuple(shape)), suffix=suffix)


def _bounds(ctx, values: Sequence[Any], suffix: str) -> Value:
    """Slice bounds: literal ints, or a packed tensor when some are symbolic (``Value``)."""
    return shape_value(ctx, values, suffix) if is_symbolic(values) else _ints(ctx, values, suffix)


def static_dims(ctx, *values: Value, dim: int | None = None) -> None:
    """Converters that compute with sizes (all, or only ``dim``'s) need them static: a
    dynamic dim sends the node to eager instead of building a wrong graph."""
    if any(d < 0 for v in values for d in (v.shape if dim is None else v.shape[dim:dim + 1])):
        raise DynamicShapeError(f"{ctx.node.target}: needs static sizes, got "
                                f"{[list(v.shape) for v in values]}")


def dim_const(ctx, dim: int, dtype: torch.dtype = torch.int64, suffix: str = "dim") -> Value:
    """A 0-d axis ``Const`` (ConcatV2.concat_dim, SplitV.split_dim, GatherV2.axis...)."""
    return ctx.const(torch.tensor(dim, dtype=dtype), dtype, suffix)


def _meta_contiguous(node: torch.fx.Node) -> str | None:
    val = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if val is None or not val.is_contiguous() or val.storage_offset() != 0:
        return "as_strided on a non-contiguous or offset input depends on its storage layout"
    return None


# ---- views -----------------------------------------------------------------------------------
@register(aten.view.default, aten._unsafe_view.default,
          aten.view_copy.default, aten._reshape_copy.default, aten._reshape_alias.default,
          aten._reshape_alias_copy.default)
def view(ctx, self, size, stride=None):
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    _, shape = ctx.out_specs()[0]
    target = shape_value(ctx, size) if is_symbolic(size) else int_list(ctx, shape)
    return ctx.op("Reshape", [self, target])


@register(aten.reshape.default)
def reshape_default(ctx, self, shape):
    """reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)"""
    return view(ctx, self, shape)


def _moves_only_unit_axes(x: Value, perm: Sequence[int]) -> bool:
    """The permutation keeps the order of every axis longer than 1 (static shape): the
    bytes do not move, so the result is a ``Reshape`` (a [B, 1, N, D] <-> [B, N, 1, D]
    decode-step query, key or value)."""
    if DYNAMIC_DIM in x.shape or not all(isinstance(d, int) for d in x.shape):
        return False
    kept = [p for p in perm if x.shape[p] != 1]
    return kept == sorted(kept)


def _permuted(ctx, x: Value, perm: list[int]) -> Value:
    if perm != list(range(x.rank)) and _moves_only_unit_axes(x, perm):
        return reshape(ctx, x, [x.shape[p] for p in perm], suffix="")
    return move(ctx, "Transpose", [x, int_list(ctx, perm, "perm")])


@register(aten.permute.default, aten.permute_copy.default)
def permute(ctx, self, dims):
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    return _permuted(ctx, self, [norm_axis(d, self.rank) for d in dims])


@register(aten.t.default, aten.t_copy.default)
def t(ctx, self):
    """t(Tensor(a) self) -> Tensor(a)"""
    if self.rank < 2:
        return self
    return move(ctx, "Transpose", [self, int_list(ctx, [1, 0], "perm")])


@register(aten.transpose.int, aten.transpose_copy.int)
def transpose_int(ctx, self, dim0, dim1):
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    perm = list(range(self.rank))
    if self.rank:
        a, b = norm_axis(dim0, self.rank), norm_axis(dim1, self.rank)
        perm[a], perm[b] = perm[b], perm[a]
    return _permuted(ctx, self, perm)


@register(aten.expand.default, aten.expand_copy.default)
def expand(ctx, self, size, implicit=False):
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)"""
    _, shape = ctx.out_specs()[0]
    return broadcast_to(ctx, self, shape, suffix="")


@register(aten.unsqueeze.default, aten.unsqueeze_copy.default)
def unsqueeze(ctx, self, dim):
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    return ctx.op("Unsqueeze", [self], {"axes": [norm_axis(dim, self.rank + 1)]})


def _squeeze(ctx, self: Value, dims: Sequence[int]) -> Value:
    axes = sorted({norm_axis(d, max(self.rank, 1)) for d in dims})
    axes = [a for a in axes if a < self.rank and self.shape[a] == 1]
    if not axes:
        return self
    return ctx.op("Squeeze", [self], {"axis": axes})


@register(aten.squeeze.default, aten.squeeze_copy.default)
def squeeze(ctx, self):
    """squeeze(Tensor(a) self) -> Tensor(a)"""
    return _squeeze(ctx, self, range(self.rank))


@register(aten.squeeze.dim, aten.squeeze_copy.dim)
def squeeze_dim(ctx, self, dim):
    """squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)"""
    return _squeeze(ctx, self, [dim])


@register(aten.squeeze.dims, aten.squeeze_copy.dims)
def squeeze_dims(ctx, self, dim):
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)"""
    return _squeeze(ctx, self, dim)


@register(aten.alias.default, aten.alias_copy.default, aten.detach.default,
          aten.detach_copy.default, aten.lift_fresh_copy.default, aten.lift_fresh.default)
def alias(ctx, self):
    """alias(Tensor(a) self) -> Tensor(a)"""
    return self  # functional graph: the same GE tensor serves every alias


def _bitcastable(node: torch.fx.Node) -> str | None:
    src, dst = node.args[0].meta["val"].dtype, node.args[1]
    if src.itemsize != dst.itemsize:
        return "view.dtype across item sizes changes the shape"
    allowed = get_spec("Bitcast").input("x").dtypes
    if src not in allowed or dst not in allowed:
        return f"Bitcast has no {src if src not in allowed else dst}"
    return None


@register(aten.view.dtype, aten.view_copy.dtype, capability=_bitcastable)
def view_dtype(ctx, self, dtype):
    """view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)"""
    return ctx.op("Bitcast", [self], {"type": dtype})


# ---- concat / split --------------------------------------------------------------------------
@register(aten.cat.default)
def cat(ctx, tensors, dim=0):
    """cat(Tensor[] tensors, int dim=0) -> Tensor"""
    dtype, shape = ctx.out_specs()[0]
    # torch skips legacy empty 1-D inputs when concatenating higher-rank tensors
    parts = [cast(ctx, v, dtype) for v in tensors if not (v.shape == (0,) and len(shape) != 1)]
    if len(parts) == 1:
        return parts[0]
    return move(ctx, "ConcatV2", [parts, dim_const(ctx, norm_axis(dim, len(shape)))],
                {"N": len(parts)})


@register(aten.stack.default)
def stack(ctx, tensors, dim=0):
    """stack(Tensor[] tensors, int dim=0) -> Tensor"""
    dtype, shape = ctx.out_specs()[0]
    parts = [cast(ctx, v, dtype) for v in tensors]
    return move(ctx, "Pack", [parts], {"axis": norm_axis(dim, len(shape)), "N": len(parts)})


def _split(ctx, self: Value, dim: int) -> tuple:
    specs = ctx.out_specs()
    dim = norm_axis(dim, self.rank)
    sizes = [s[dim] for _, s in specs]
    ys = move(ctx, "SplitV", [self, int_list(ctx, sizes, "sizes"),
                              dim_const(ctx, dim, torch.int32)], {"num_split": len(sizes)})
    return ys if isinstance(ys, tuple) else (ys,)


@register(aten.split_with_sizes.default, aten.split_with_sizes_copy.default,
          aten.unsafe_split_with_sizes.default)
def split_with_sizes(ctx, self, split_sizes, dim=0):
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]"""
    return _split(ctx, self, dim)


@register(aten.split.Tensor, aten.split_copy.Tensor, aten.unsafe_split.Tensor)
def split_tensor(ctx, self, split_size, dim=0):
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    return _split(ctx, self, dim)


@register(aten.unbind.int, aten.unbind_copy.int)
def unbind(ctx, self, dim=0):
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    dim = norm_axis(dim, self.rank)
    static_dims(ctx, self, dim=dim)
    ys = move(ctx, "Unpack", [self], {"num": self.shape[dim], "axis": dim})
    return ys if isinstance(ys, tuple) else (ys,)


# ---- slicing ---------------------------------------------------------------------------------
_INT64_MAX = 2**63 - 1


@register(aten.slice.Tensor, aten.slice_copy.Tensor)
def slice_tensor(ctx, self, dim=0, start=None, end=None, step=1):
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None,
    SymInt step=1) -> Tensor(a)"""
    dim = norm_axis(dim, self.rank)
    if self.shape[dim] < 0 or is_symbolic([start, end]):  # dynamic: GE clamps like Python;
        stop = _INT64_MAX if end is None else end  # the meta has the result shape
        return strided_slice(ctx, self, [dim], [start or 0], [stop], [step], suffix="",
                             shape=ctx.out_specs()[0][1])
    begin, stop = clamp_slice(self.shape[dim], start, end)
    if (begin, stop, step) == (0, self.shape[dim], 1):
        return self
    return strided_slice(ctx, self, [dim], [begin], [stop], [step], suffix="")


@register(aten.narrow_copy.default, dynamic=False)
def narrow_copy(ctx, self, dim, start, length):
    """narrow_copy(Tensor self, int dim, SymInt start, SymInt length) -> Tensor"""
    dim = norm_axis(dim, self.rank)
    static_dims(ctx, self, dim=dim)
    begin = start + self.shape[dim] if start < 0 else start
    return strided_slice(ctx, self, [dim], [begin], [begin + length], [1], suffix="")


@register(aten.select.int, aten.select_copy.int)
def select_int(ctx, self, dim, index):
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    dim = norm_axis(dim, self.rank)
    n = self.shape[dim]
    index = index + n if index < 0 and n >= 0 else index
    if 0 <= index < n and all(d >= 0 for d in self.shape):
        # a static one-row StridedSliceV2 + Reshape: the same values as GatherV2, and the
        # host device keeps both as views (selecting a layer of a stacked KV cache is free)
        row = strided_slice(ctx, self, [dim], [index], [index + 1], [1], suffix="row")
        return reshape(ctx, row, self.shape[:dim] + self.shape[dim + 1:], suffix="")
    # a negative index left (dynamic dim) counts from the end, as GatherV2 allows
    attrs = {"negative_index_support": True} if index < 0 else {}
    index = ctx.const(torch.tensor(index), torch.int64, "index")
    return move(ctx, "GatherV2", [self, index, dim_const(ctx, dim)], attrs)


@register(aten.as_strided.default, aten.as_strided_copy.default, capability=_meta_contiguous)
def as_strided(ctx, self, size, stride, storage_offset=None):
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None)
    -> Tensor(a)"""
    offset = ctx.const(torch.tensor(storage_offset or 0), torch.int64, "offset")
    return move(ctx, "AsStrided", [self, int_list(ctx, size, "size"),
                                   int_list(ctx, stride, "stride"), offset])


@register(aten.diagonal.default, aten.diagonal_copy.default)
def diagonal(ctx, self, offset=0, dim1=0, dim2=1):
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)"""
    d1, d2 = norm_axis(dim1, self.rank), norm_axis(dim2, self.rank)
    rest = [d for d in range(self.rank) if d not in (d1, d2)]
    x = transpose(ctx, self, rest + [d1, d2])
    k = ctx.const(torch.tensor(offset, dtype=torch.int32), torch.int32, "k")
    return move(ctx, "MatrixDiagPartV2", [x, k, ctx.const(0, x.dtype, "pad")], data=(0, 2))


@register(aten.unfold.default, aten.unfold_copy.default)
def unfold(ctx, self, dimension, size, step):
    """unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)"""
    dim = norm_axis(dimension, max(self.rank, 1))
    static_dims(ctx, self, dim=dim)
    x = reshape(ctx, self, (1,)) if self.rank == 0 else self
    windows = (x.shape[dim] - size) // step + 1
    idx = torch.arange(windows).unsqueeze(1) * step + torch.arange(size)
    shape = x.shape[:dim] + (windows, size) + x.shape[dim + 1:]
    g = move(ctx, "GatherV2", [x, ctx.const(idx, torch.int64, "index"), dim_const(ctx, dim)],
             out=(x.dtype, shape), suffix="gather")
    perm = [d for d in range(len(shape)) if d != dim + 1] + [dim + 1]
    return transpose(ctx, g, perm, suffix="") if self.rank else reshape(ctx, g, (size,), "")


# ---- reorder / repeat / pad ------------------------------------------------------------------
@register(aten.flip.default)
def flip(ctx, self, dims):
    """flip(Tensor self, int[] dims) -> Tensor"""
    axes = sorted({norm_axis(d, self.rank) for d in dims})
    if not axes:
        return self
    return move(ctx, "ReverseV2", [self, int_list(ctx, axes, "axes")])


@register(aten.roll.default)
def roll(ctx, self, shifts, dims=()):
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor"""
    axes = [norm_axis(d, self.rank) for d in dims]
    return move(ctx, "Roll", [self], {"shifts": list(shifts), "dims": axes})


@register(aten.repeat.default)
def repeat(ctx, self, repeats):
    """repeat(Tensor self, SymInt[] repeats) -> Tensor"""
    x = reshape(ctx, self, (1,) * (len(repeats) - self.rank) + self.shape)
    return move(ctx, "Tile", [x, int_list(ctx, repeats, "multiples")])


@register(aten.rot90.default)
def rot90(ctx, self, k=1, dims=(0, 1)):
    """rot90(Tensor self, int k=1, int[] dims=[0,1]) -> Tensor"""
    d0, d1 = (norm_axis(d, self.rank) for d in dims)
    k %= 4
    if k == 0:
        return self
    axes = {1: [d1], 2: [d0, d1], 3: [d0]}[k]
    y = move(ctx, "ReverseV2", [self, int_list(ctx, sorted(axes), "axes")],
             out=(self.dtype, self.shape), suffix="flip")
    if k == 2:
        return y
    perm = list(range(self.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return transpose(ctx, y, perm, suffix="")


def _gather_pad(ctx, x: Value, pairs: list[tuple[int, int]], mode: str) -> Value:
    """Reflect / edge padding with negative amounts (torch reads the original edges then):
    one GatherV2 of the source positions per padded dim."""
    static_dims(ctx, x)
    for d, (before, after) in enumerate(pairs):
        if before or after:
            pos = ctx.const(_pad_positions(x.shape[d], before, after, mode), torch.int64,
                            f"positions{d}")
            shape = x.shape[:d] + (x.shape[d] + before + after,) + x.shape[d + 1:]
            x = move(ctx, "GatherV2", [x, pos, dim_const(ctx, d)], out=(x.dtype, shape),
                     suffix=f"gather{d}")
    return x


def _pad(ctx, x: Value, pad: Sequence[int], mode: str, value: Any = None) -> Value:
    """``PadV3`` with torch's last-dim-first ``pad`` pairs; negative pads crop first."""
    pairs = [(0, 0)] * (x.rank - len(pad) // 2)
    pairs += [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(len(pad) // 2))]
    if mode != "constant" and any(b < 0 or a < 0 for b, a in pairs):
        return _gather_pad(ctx, x, pairs, mode)
    if any(b < 0 or a < 0 for b, a in pairs):
        static_dims(ctx, x)
        axes = [d for d, (b, a) in enumerate(pairs) if b < 0 or a < 0]
        x = strided_slice(ctx, x, axes, [max(-pairs[d][0], 0) for d in axes],
                          [x.shape[d] - max(-pairs[d][1], 0) for d in axes], [1] * len(axes),
                          suffix="crop")
        pairs = [(max(b, 0), max(a, 0)) for b, a in pairs]
    if mode == "constant" and _pad_v3_refuses(ctx, x.dtype):
        return _concat_pad(ctx, x, pairs, value)
    flat = [p for pair in pairs for p in pair]  # paddings_contiguous: before0, after0, ...
    paddings = int_list(ctx, flat, "paddings")
    inputs = [x, paddings] + ([ctx.const(value, x.dtype, "value")] if mode == "constant" else [])
    return move(ctx, "PadV3", inputs, {"mode": mode},
                data=(0, 2) if mode == "constant" else (0,))


def _pad_v3_refuses(ctx, dtype: torch.dtype) -> bool:
    """The target SoC has no PadV3 kernel at ``dtype`` (910B: int64, e.g. the shifted labels
    of transformers' causal-LM loss)."""
    soc = ctx.builder.soc  # (bool and the narrow ints ride in a wider dtype: ``move``)
    return dtype == torch.int64 and soc is not None and not has_kernel(soc, "PadV3", x=dtype)


def _concat_pad(ctx, x: Value, pairs: list[tuple[int, int]], value: Any) -> Value:
    """Constant padding as ConcatV2 of constant blocks around ``x``, one padded dim at a time
    (exact for every dtype ConcatV2 moves)."""
    static_dims(ctx, x)
    for d, (before, after) in enumerate(pairs):
        if not (before or after):
            continue
        parts = []
        for n, where in ((before, "before"), (x, None), (after, "after")):
            if where is None:
                parts.append(x)
            elif n:
                block = torch.full(x.shape[:d] + (n,) + x.shape[d + 1:], value, dtype=x.dtype)
                parts.append(ctx.const(block, x.dtype, f"pad_{where}{d}"))
        shape = x.shape[:d] + (x.shape[d] + before + after,) + x.shape[d + 1:]
        x = move(ctx, "ConcatV2", [parts, dim_const(ctx, d)], {"N": len(parts)},
                 out=(x.dtype, shape), suffix=f"pad{d}")
    return x


@register(aten.constant_pad_nd.default)
def constant_pad_nd(ctx, self, pad, value=0):
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor"""
    return _pad(ctx, self, pad, "constant", value)


def _register_pad(target: torch._ops.OpOverload, mode: str) -> None:
    @register(target)
    def convert(ctx, self, padding):
        return _pad(ctx, self, padding, mode)


for _t, _mode in ((aten.reflection_pad1d.default, "reflect"),
                  (aten.reflection_pad2d.default, "reflect"),
                  (aten.reflection_pad3d.default, "reflect"),
                  (aten.replication_pad1d.default, "edge"),
                  (aten.replication_pad2d.default, "edge"),
                  (aten.replication_pad3d.default, "edge")):
    _register_pad(_t, _mode)


def _pad_positions(n: int, before: int, after: int, mode: str) -> torch.Tensor:
    """The input position each padded output position reads (reflect / edge)."""
    idx = torch.arange(-before, n + after)
    if mode == "edge":
        return idx.clamp(0, n - 1)
    idx = idx.abs()
    return torch.where(idx >= n, 2 * (n - 1) - idx, idx)


def _pad_backward(ctx, grad: Value, self: Value, padding: Sequence[int], mode: str) -> Value:
    """Sums the gradient of every padded position into the input position it read, one
    padded dim at a time (ScatterElements with ``add`` into zeros)."""
    static_dims(ctx, grad, self)
    for i in range(len(padding) // 2):
        d = self.rank - 1 - i
        before, after = padding[2 * i], padding[2 * i + 1]
        if not (before or after):
            continue
        shape = grad.shape[:d] + (self.shape[d],) + grad.shape[d + 1:]
        pos = ctx.const(_pad_positions(self.shape[d], before, after, mode), torch.int64,
                        f"positions{d}")
        lifted = [1] * grad.rank
        lifted[d] = grad.shape[d]
        index = broadcast_to(ctx, reshape(ctx, pos, lifted, f"lift{d}"), grad.shape,
                             f"spread{d}")
        zeros = ctx.op("Fill", [int_list(ctx, shape, "dims"), ctx.const(0, grad.dtype, "zero")],
                       out=(grad.dtype, shape), suffix=f"zeros{d}")
        grad = move(ctx, "ScatterElements", [zeros, index, grad], {"axis": d, "reduction": "add"},
                    out=(grad.dtype, shape), data=(0, 2), suffix=f"sum{d}")
    return grad


def _register_pad_backward(target: torch._ops.OpOverload, mode: str) -> None:
    @register(target)
    def convert(ctx, grad_output, self, padding):
        return _pad_backward(ctx, grad_output, self, padding, mode)


for _t, _mode in ((aten.replication_pad1d_backward.default, "edge"),
                  (aten.replication_pad2d_backward.default, "edge"),
                  (aten.replication_pad3d_backward.default, "edge"),
                  (aten.reflection_pad1d_backward.default, "reflect"),
                  (aten.reflection_pad2d_backward.default, "reflect"),
                  (aten.reflection_pad3d_backward.default, "reflect")):
    _register_pad_backward(_t, _mode)


@register(aten.tril.default)
def tril(ctx, self, diagonal=0):
    """tril(Tensor self, int diagonal=0) -> Tensor"""
    return move(ctx, "Tril", [self], {"diagonal": diagonal})


@register(aten.triu.default)
def triu(ctx, self, diagonal=0):
    """triu(Tensor self, int diagonal=0) -> Tensor"""
    return move(ctx, "Triu", [self], {"diagonal": diagonal})


# ---- channel reshuffles (Reshape + Transpose) ------------------------------------------------
@register(aten.pixel_shuffle.default)
def pixel_shuffle(ctx, self, upscale_factor):
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor"""
    r = upscale_factor
    *batch, c, h, w = self.shape
    n = len(batch)
    x = reshape(ctx, self, (*batch, c // (r * r), r, r, h, w))
    perm = list(range(n)) + [n + d for d in (0, 3, 1, 4, 2)]
    y = transpose(ctx, x, perm)
    return reshape(ctx, y, ctx.out_specs()[0][1], suffix="")


@register(aten.pixel_unshuffle.default)
def pixel_unshuffle(ctx, self, downscale_factor):
    """pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor"""
    r = downscale_factor
    *batch, c, h, w = self.shape
    n = len(batch)
    x = reshape(ctx, self, (*batch, c, h // r, r, w // r, r))
    perm = list(range(n)) + [n + d for d in (0, 2, 4, 1, 3)]
    y = transpose(ctx, x, perm)
    return reshape(ctx, y, ctx.out_specs()[0][1], suffix="")


@register(aten.channel_shuffle.default)
def channel_shuffle(ctx, self, groups):
    """channel_shuffle(Tensor self, SymInt groups) -> Tensor"""
    n, c, *rest = self.shape
    x = reshape(ctx, self, (n, groups, c // groups, *rest))
    y = transpose(ctx, x, [0, 2, 1] + list(range(3, x.rank)))
    return reshape(ctx, y, self.shape, suffix="")
