"""The host device runs ``Assign(ref, Add(ref, x))`` as one in-place add.

[Note: host assign steps]
A compiled optimizer step writes each parameter where it lives (``RefData`` + ``Assign``,
``lowering/inplace.py``); SGD's update is ``Assign(p, Add(p, Mul(g, -lr)))``. Op by op
the host computes ``p + x`` into the workspace and then copies it into ``p``: three
passes over every parameter where eager's ``p.add_(g, alpha=-lr)`` makes one. When the
sum is read by nothing but the Assign, the host device executes the pair as
``p.add_(x)`` in the Assign's place: the same additions, rounded once each as before,
written straight into ``p`` (bitwise the op-by-op result). The graph is unchanged (what
the device runs); ``npu_inductor.debug.compare`` still runs op by op, and
``NPU_INDUCTOR_HOST_FUSE_ATTENTION=0`` (the switch for host-side step fusion) keeps both
ops.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from npu_inductor.runtime.step_graph import slots


def fuse_assign_adds(steps: list, graph_outputs: set[int], refs: set[int]) -> list:
    """``steps`` with each ``Assign(ref, Add(ref, x))`` (``ref`` a graph input in
    ``refs``, the sum read only by the Assign, same dtype and shape) as one step."""
    producer = {s: i for i, st in enumerate(steps) for s in st.outs}
    reads: dict[int, int] = {}
    for st in steps:
        for s in slots(st.args):
            reads[s] = reads.get(s, 0) + 1
    fused: dict[int, Any] = {}
    gone: set[int] = set()
    for j, st in enumerate(steps):
        if st.op.type != "Assign" or len(st.args) != 2 or st.compute is not None:
            continue
        ref, total = st.args
        i = producer.get(total)
        if ref not in refs or i is None or reads.get(total) != 1 or total in graph_outputs:
            continue
        add = steps[i]
        if add.op.type != "Add" or add.compute is not None or len(add.args) != 2 \
                or ref not in add.args or add.args[0] == add.args[1] or add.sigs != st.sigs:
            continue
        x = add.args[1] if add.args[0] == ref else add.args[0]
        gone.add(i)
        fused[j] = replace(st, fn=add_into, args=(ref, x), attrs={}, chain=(add, st))
    if not fused:
        return steps
    return [fused.get(i, st) for i, st in enumerate(steps) if i not in gone]


def add_into(ref: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``Assign(ref, Add(ref, x))``: ``x`` added into ``ref`` (same dtype; x broadcasts)."""
    if x.dtype != ref.dtype or (x.shape != ref.shape  # (fast path: the same shape)
                                and torch.broadcast_shapes(ref.shape, x.shape) != ref.shape):
        raise ValueError(f"Assign(Add): {x.dtype} {tuple(x.shape)} added into "
                         f"{ref.dtype} {tuple(ref.shape)}")
    return ref.add_(x)
