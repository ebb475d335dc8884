"""The host device runs a dynamic graph's ``Reshape(x, Pack(sizes...))`` as one step.

[Note: host shape steps]
A graph with dynamic dims computes each Reshape's target at run time: ``Pack`` stacks 0-d
sizes (``Shape`` / ``GatherV2`` / ``Mul`` results, Consts) into a 1-D int tensor that only the
Reshape reads (``lowering/symbolic.reshape_to``). The host device executes such a pair as
one step, ``x.reshape([int(s) for s in sizes])``: the same result without building the
shape tensor (a LLaMA layer has ~15 of these pairs, each a ``torch.stack`` and a ``tolist``
in Python). The graph is unchanged; ``npu_inductor.debug.compare`` still runs op by op, and
``NPU_INDUCTOR_HOST_FUSE_ATTENTION=0`` (the switch for host-side step fusion) keeps both ops.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from npu_inductor.runtime.step_graph import producers, read_counts

_INTS = (torch.int32, torch.int64)


def fuse_reshape_packs(steps: list, graph_outputs: set[int]) -> list:
    """``steps`` with each ``Reshape(x, Pack(scalars))`` (Pack read by nothing else) as one
    step."""
    producer, reads = producers(steps), read_counts(steps)
    fused: dict[int, Any] = {}
    gone: set[int] = set()
    for i, st in enumerate(steps):
        if st.op.type != "Reshape" or len(st.args) != 2 or st.compute is not None \
                or st.attrs.get("axis", 0) != 0 or st.attrs.get("num_axes", -1) != -1:
            continue
        p = producer.get(st.args[1])
        if p is None or not _scalar_pack(steps[p]) or reads.get(st.args[1]) != 1 \
                or st.args[1] in graph_outputs:
            continue
        gone.add(p)
        fused[i] = replace(st, fn=packed_reshape, args=(st.args[0], steps[p].args[0]),
                           attrs={}, chain=(steps[p], st))
    if not fused:
        return steps
    return [fused.get(i, st) for i, st in enumerate(steps) if i not in gone]


def _scalar_pack(st: Any) -> bool:
    """A Pack of 0-d int sizes along axis 0 (a 1-D shape tensor)."""
    return (st.op.type == "Pack" and len(st.args) == 1 and isinstance(st.args[0], tuple)
            and st.attrs.get("axis", 0) == 0 and st.compute is None
            and st.sigs[0][0] in _INTS and len(st.sigs[0][1]) == 1
            and all(d in (-1, len(st.args[0])) for d in st.sigs[0][1]))


def packed_reshape(x: torch.Tensor, sizes: list) -> torch.Tensor:
    """``Reshape(x, Pack(sizes))``: each size a 0-d int tensor (or a Python int)."""
    return x.reshape([scalar_size(s) for s in sizes])


def scalar_size(s: torch.Tensor | int) -> int:
    """A Pack input of a shape: a 0-d int tensor (or a Python int) as an int."""
    if isinstance(s, torch.Tensor) and (s.dim() != 0 or s.dtype not in _INTS):
        raise ValueError(f"Pack input of {s.dtype} shape {tuple(s.shape)}: "
                         "expected 0-d int sizes")
    return int(s)
