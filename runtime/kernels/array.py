"""Shape and layout GE ops (const-input forms: shapes/perms/axes arrive as tensors)."""

from __future__ import annotations


from npu_inductor.runtime.kernels import kernel


@kernel("Reshape")
def reshape(x, shape, axis=0, num_axes=-1):
    return x.reshape(shape.tolist())


@kernel("Transpose")
def transpose(x, perm):
    return x.permute(perm.tolist())
