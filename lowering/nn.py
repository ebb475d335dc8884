"""Softmax, embedding and distance converters.

softmax / log_softmax and their backwards map 1:1 onto ``SoftmaxV2`` / ``SoftmaxGrad`` /
``LogSoftmaxV2`` / ``LogSoftmaxGrad`` (GE's grads take the forward *output*, as aten's do).
embedding is ``GatherV2`` on axis 0 and its backward ``EmbeddingDenseGrad``; cdist is
``Cdist`` / ``CdistGrad``.
"""

from __future__ import annotations

import operator

import torch

from npu_inductor.ge.soc import has_kernel
from npu_inductor.lowering.helpers import cast, int_list, norm_axis
from npu_inductor.lowering.lower import LoweringError
from npu_inductor.lowering.precision import op_in_float32
from npu_inductor.lowering.registry import register

aten = torch.ops.aten


# ---- softmax --------------------------------------------------------------------------
@register(aten._softmax.default)
def softmax(ctx, self, dim, half_to_float):
    """_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return ctx.op("SoftmaxV2", [self], {"axes": [norm_axis(dim, self.rank)],
                                        "half_to_float": bool(half_to_float)})


@register(aten._softmax_backward_data.default)
def softmax_backward(ctx, grad_output, output, dim, input_dtype):
    """_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor"""  # noqa: E501
    grad = ctx.op("SoftmaxGrad", [output, cast(ctx, grad_output, output.dtype)],
                  {"axes": [norm_axis(dim, output.rank)]}, out=(output.dtype, output.shape),
                  suffix="grad")
    return cast(ctx, grad, ctx.out_dtype)


@register(aten._log_softmax.default)
def log_softmax(ctx, self, dim, half_to_float):
    """_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return ctx.op("LogSoftmaxV2", [cast(ctx, self, ctx.out_dtype)],
                  {"axes": [norm_axis(dim, self.rank)]})


@register(aten._log_softmax_backward_data.default)
def log_softmax_backward(ctx, grad_output, output, dim, input_dtype):
    """_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor"""  # noqa: E501
    grad = ctx.op("LogSoftmaxGrad", [cast(ctx, grad_output, output.dtype), output],
                  {"axis": [norm_axis(dim, output.rank)]}, out=(output.dtype, output.shape),
                  suffix="grad")
    return cast(ctx, grad, ctx.out_dtype)


# ---- embedding ------------------------------------------------------------------------
@register(aten.embedding.default)
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor"""  # noqa: E501
    return ctx.op("GatherV2", [weight, indices, ctx.const(0, torch.int64, "axis")])


@register(aten.embedding_dense_backward.default)
def embedding_dense_backward(ctx, grad_output, indices, num_weights, padding_idx,
                             scale_grad_by_freq):
    """embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, bool scale_grad_by_freq) -> Tensor"""  # noqa: E501
    return ctx.op("EmbeddingDenseGrad", [grad_output, indices],
                  {"num_weights": int(num_weights), "padding_idx": int(padding_idx),
                   "scale_grad_by_freq": bool(scale_grad_by_freq)})


# ---- distances ------------------------------------------------------------------------
@register(aten._cdist_forward.default)
def cdist_forward(ctx, x1, x2, p, compute_mode):
    """_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor"""
    return ctx.op("Cdist", [x1, x2], {"p": float(p)})


@register(aten._cdist_backward.default)
def cdist_backward(ctx, grad, x1, x2, p, cdist):
    """_cdist_backward(Tensor grad, Tensor x1, Tensor x2, float p, Tensor cdist) -> Tensor"""
    return ctx.op("CdistGrad", [grad, x1, x2, cdist], {"p": float(p)})


@register(aten._pdist_forward.default)
def pdist_forward(ctx, self, p=2.0):
    """_pdist_forward(Tensor self, float p=2.) -> Tensor"""
    return ctx.op("Pdist", [self], {"p": float(p)})


EMBEDDING_BAG_MODES = ("sum", "mean", "max")


@register(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def embedding_bag(ctx, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)"""  # noqa: E501
    attrs = {"mode": EMBEDDING_BAG_MODES[mode], "scale_grad_by_freq": bool(scale_grad_by_freq),
             "sparse": bool(sparse), "include_last_offset": bool(include_last_offset),
             "padding_idx": int(padding_idx)}
    specs = ctx.out_specs()
    if _fast_path_moves_offset2bag(weight, mode, per_sample_weights, padding_idx, specs):
        # Computed in float32, aten's sum fast path returns an empty offset2bag where the
        # bf16 call declares one per index: only an unread offset2bag can be left out
        if _output_read(ctx.node, 1):
            raise LoweringError(f"EmbeddingBag ({ctx.node.name}): {weight.dtype} weight is "
                                "computed in float32, whose offset2bag output is empty, and "
                                "this graph reads it")
        specs = [specs[0], (specs[1][0], (0,)), *specs[2:]]
    soc = ctx.builder.soc
    if soc is None or has_kernel(soc, "EmbeddingBag", indices=indices.dtype):
        return _offset2bag_as_declared(ctx, op_in_float32(
            ctx, "EmbeddingBag", [weight, indices, offsets, per_sample_weights], attrs, specs))
    # The 910B's EmbeddingBag takes and gives int32 only: indices address rows of ``weight``
    # and offsets / bag sizes / positions count elements of ``indices``, so below 2^31 rows
    # and elements every valid value is exact in int32 (an out-of-range index is undefined
    # on the device either way)
    if max(weight.shape[0], indices.shape[0] if indices.rank else 1) >= 2 ** 31:
        raise ValueError(f"EmbeddingBag on {soc}: int32 indices cannot address "
                         f"{weight.shape[0]} rows / {indices.shape} indices")
    ctx.note("dtype-gate", f"EmbeddingBag has int32 indices/outputs only on {soc}: int64 "
             "indices, offsets and outputs moved through int32 (exact below 2^31)")
    ints = [cast(ctx, v, torch.int32) for v in (indices, offsets)]
    outs = [(torch.int32 if dt == torch.int64 else dt, shape) for dt, shape in specs]
    ys = op_in_float32(ctx, "EmbeddingBag", [weight, *ints, per_sample_weights], attrs, outs)
    return _offset2bag_as_declared(ctx, tuple(cast(ctx, y, dt) for y, (dt, _) in zip(ys, specs)))


def _fast_path_moves_offset2bag(weight, mode, per_sample_weights, padding_idx, specs) -> bool:
    """Whether the float32 form takes aten's sum fast path (empty offset2bag) where the
    traced dtype did not (torch/_meta_registrations.py: meta_embedding_bag)."""
    fast_dtypes = (torch.float32, torch.float16)
    return (mode == 0 and padding_idx < 0 and weight.dtype not in fast_dtypes
            and weight.dtype.is_floating_point and specs[1][1] != (0,))


def _output_read(node, index: int) -> bool:
    return any(u.target is operator.getitem and u.args[1] == index and u.users
               for u in node.users)


def _offset2bag_as_declared(ctx, ys):
    """The unread offset2bag at the shape the FX graph declares (zeros: nothing reads it)."""
    declared = ctx.out_specs()
    if tuple(declared[1][1]) == tuple(ys[1].shape):
        return ys
    dtype, shape = declared[1]
    dims = int_list(ctx, shape, "dims")
    zero = ctx.op("Fill", [dims, ctx.const(0, dtype, "value")], out=[(dtype, shape)])
    return (ys[0], zero, *ys[2:])
