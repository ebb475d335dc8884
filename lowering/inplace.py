"""Writes into graph inputs: ``copy_(input, value)``  ->  ``Assign(ref=RefData, value)``.

AOTAutograd keeps an inference graph's input mutations in the graph (``copy_`` into a
placeholder at the end; ``keep_inference_input_mutations=True``): a compiled optimizer
step updates parameters and state where they live instead of returning new tensors that
the runtime wrapper copies back. The input becomes a ``RefData`` (``lower.py``) and the
``Assign`` is kept alive by a control edge into ``NetOutput``.
"""

from __future__ import annotations

import torch

from npu_inductor.ge.ir import Value
from npu_inductor.lowering.helpers import cast
from npu_inductor.lowering.registry import register

aten = torch.ops.aten
# GE ops whose result is their input's memory (a reader of one reads the other)
_SAME_MEMORY = frozenset({"Reshape", "Identity", "Squeeze", "SqueezeV2", "SqueezeV3",
                          "Unsqueeze", "ExpandDims", "Flatten"})


def writes_input(node: torch.fx.Node) -> bool:
    """``node`` is ``copy_`` into a graph input (a placeholder)."""
    dst = node.args[0] if node.args else None
    return (node.target is aten.copy_.default and isinstance(dst, torch.fx.Node)
            and dst.op == "placeholder")


def _copy_capability(node: torch.fx.Node) -> str | None:
    if not writes_input(node):
        return "copy_ into an intermediate (only graph inputs are written in place)"
    dst, src = node.args[0].meta.get("val"), node.args[1]
    src = src.meta.get("val") if isinstance(src, torch.fx.Node) else None
    if dst is None or src is None or tuple(src.shape) != tuple(dst.shape):
        return "copy_ with broadcasting"
    return None


@register(aten.copy_.default, capability=_copy_capability)
def copy_(ctx, self, src, non_blocking=False):
    """copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)"""
    if not isinstance(self, Value) or ctx.builder.op_type(self.op) != "RefData":
        from npu_inductor.lowering.lower import LoweringError

        raise LoweringError(f"copy_ into {self!r}: not a RefData graph input")
    value = cast(ctx, src, self.dtype)
    # every reader of the old contents runs first (GE orders a ref write by edges only)
    before = ctx.builder.readers(self.edge, _SAME_MEMORY)
    b = ctx.builder
    out = b.op("Assign", ctx.name(), [self, value], {}, [(self.dtype, self.shape)],
               control=before)[0]
    b.side_effects.append(b.last_op)
    return out
