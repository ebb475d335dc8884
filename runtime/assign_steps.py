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

The whole update, ``Mul(g_i, c)`` then ``p_i.add_(...)`` for every parameter, then runs as
one step (``foreach_updates``): the products written to a scratch buffer the step keeps (as
the Mul's workspace slot was; one call at a time, under a lock), then one
``torch._foreach_add_`` per batch of at most ``FOREACH_BYTES`` of products (eager SGD's
foreach path): the same products and sums, each rounded once as op by op (bitwise). Only
pairs nothing else touches are batched: ``g_i`` a graph input no step writes, ``c`` a 0-d
Const, the product read by the add alone, ``p_i`` read by no other step and the Assign's
result by none.
"""

from __future__ import annotations

import math
import threading
from dataclasses import replace
from typing import Any

import torch

from npu_inductor.runtime.kernels.elementwise import axpy_v2
from npu_inductor.runtime.step_graph import producers, read_counts


def fuse_assign_adds(steps: list, graph_outputs: set[int], refs: set[int]) -> list:
    """``steps`` with each ``Assign(ref, Add(ref, x))`` (``ref`` a graph input in
    ``refs``, the sum read only by the Assign, same dtype and shape) as one step."""
    producer, reads = producers(steps), read_counts(steps)
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
        if add.compute is not None or add.sigs != st.sigs:
            continue
        if add.op.type == "AxpyV2" and len(add.args) == 3 and add.args[0] == ref \
                and ref not in add.args[1:]:
            gone.add(i)
            fused[j] = replace(st, fn=axpy_into, args=(ref, *add.args[1:]), attrs={},
                               chain=(add, st))
            continue
        if add.op.type != "Add" or len(add.args) != 2 or ref not in add.args \
                or add.args[0] == add.args[1]:
            continue
        x = add.args[1] if add.args[0] == ref else add.args[0]
        gone.add(i)
        fused[j] = replace(st, fn=add_into, args=(ref, x), attrs={}, chain=(add, st))
    if not fused:
        return steps
    return [fused.get(i, st) for i, st in enumerate(steps) if i not in gone]


def _check_into(what: str, ref: torch.Tensor, x: torch.Tensor) -> None:
    """``x`` can be added into ``ref`` in place: the same dtype, and x broadcasts into it."""
    if x.dtype != ref.dtype or (x.shape != ref.shape  # (fast path: the same shape)
                                and torch.broadcast_shapes(ref.shape, x.shape) != ref.shape):
        raise ValueError(f"Assign({what}): {x.dtype} {tuple(x.shape)} added into "
                         f"{ref.dtype} {tuple(ref.shape)}")


def add_into(ref: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``Assign(ref, Add(ref, x))``: ``x`` added into ``ref`` (same dtype; x broadcasts)."""
    _check_into("Add", ref, x)
    return ref.add_(x)


def axpy_into(ref: torch.Tensor, x: torch.Tensor, alpha: Any) -> torch.Tensor:
    """``Assign(ref, AxpyV2(ref, x, alpha))``: ``alpha * x`` added into ``ref`` (one
    rounding, as the op)."""
    _check_into("AxpyV2", ref, x)
    return axpy_v2(ref, x, alpha, out=ref)


def _check_compiled(what: str, refs: Any, grads: Any, sigs: list) -> None:
    """Every ``ref``/``grad`` pair has the dtype and shape the update was compiled for."""
    for ref, g, (dtype, shape) in zip(refs, grads, sigs):
        if g.dtype != dtype or ref.dtype != dtype or g.shape != shape or ref.shape != shape:
            raise ValueError(f"Assign({what}): {g.dtype} {tuple(g.shape)} added into "
                             f"{ref.dtype} {tuple(ref.shape)}, compiled for {dtype} {shape}")


class ForeachAxpy:
    """``p_i.add_(g_i, alpha=c)`` for every i as one ``torch._foreach_add_`` (eager SGD's
    foreach path; each element rounded once, as ``axpy_into``)."""

    def __init__(self, sigs: list[tuple[torch.dtype, tuple[int, ...]]]) -> None:
        self.sigs = sigs

    def __call__(self, refs: tuple, grads: tuple, c: torch.Tensor) -> tuple:
        _check_compiled("AxpyV2", refs, grads, self.sigs)
        torch._foreach_add_(list(refs), list(grads), alpha=c.item())
        return tuple(refs)


FOREACH_BYTES = 256 << 10  # products per foreach batch, cache-sized (a larger tensor: alone)
_ALIGN = 64


class ForeachUpdate:
    """``p_i.add_(g_i * c)`` for every i as two foreach calls per batch (see the note); the
    products go to one scratch buffer the step keeps (its largest batch), so no call
    allocates (or page-faults) fresh memory for them."""

    def __init__(self, sigs: list[tuple[torch.dtype, tuple[int, ...]]]) -> None:
        self.sigs = sigs
        self.batches = _batches([_nbytes(sig) for sig in sigs])
        self._outs: list[list[torch.Tensor]] | None = None
        self._lock = threading.Lock()

    def _scratch(self) -> list[list[torch.Tensor]]:
        """Per batch, the views of the scratch buffer its products are written to."""
        if self._outs is None:
            layouts, size = [], 0
            for lo, hi in self.batches:
                offs, off = [], 0
                for sig in self.sigs[lo:hi]:
                    offs.append(off)
                    off += -(-_nbytes(sig) // _ALIGN) * _ALIGN
                layouts.append(offs)
                size = max(size, off)
            buf = torch.empty(size, dtype=torch.uint8)
            self._outs = [[buf[o:o + _nbytes(sig)].view(sig[0]).view(sig[1])
                           for o, sig in zip(offs, self.sigs[lo:hi])]
                          for offs, (lo, hi) in zip(layouts, self.batches)]
        return self._outs

    def __call__(self, refs: list, grads: list, c: torch.Tensor) -> tuple:
        _check_compiled("Add(Mul)", refs, grads, self.sigs)
        with self._lock:
            for (lo, hi), outs in zip(self.batches, self._scratch()):
                for g, out in zip(grads[lo:hi], outs):  # (foreach_mul's out= form allocates)
                    torch.mul(g, c, out=out)
                torch._foreach_add_(refs[lo:hi], outs)
        return tuple(refs)


def _nbytes(sig: tuple) -> int:
    return math.prod(sig[1]) * sig[0].itemsize


def _batches(sizes: list[int]) -> list[tuple[int, int]]:
    out, lo, total = [], 0, 0
    for i, n in enumerate(sizes):
        if total and total + n > FOREACH_BYTES:
            out.append((lo, i))
            lo, total = i, 0
        total += n
    return out + [(lo, len(sizes))]


def foreach_updates(steps: list, graph_outputs: set[int], inputs: set[int],
                    consts: dict[int, torch.Tensor]) -> list:
    """``steps`` with the ``add_into(p, Mul(g, c))`` pairs of one ``c`` (at least two) as one
    ``ForeachUpdate`` step where the last of them was (the note's conditions)."""
    written = {st.args[0] for st in steps
               if st.fn in (add_into, axpy_into) or st.op.type == "Assign"}
    steps = _foreach_axpys(steps, graph_outputs, inputs, consts, read_counts(steps), written)
    producer, reads = producers(steps), read_counts(steps)
    groups: dict[int, list[tuple[int, int]]] = {}
    for j, st in enumerate(steps):
        if st.fn is not add_into or any(reads.get(s) or s in graph_outputs for s in st.outs):
            continue
        ref, x = st.args
        i = producer.get(x)
        mul = steps[i] if i is not None else None
        if mul is None or mul.op.type != "Mul" or mul.compute is not None or mul.chain \
                or len(mul.args) != 2 or reads.get(x) != 1 or x in graph_outputs \
                or reads.get(ref) != 1 or mul.sigs != st.sigs:
            continue
        g, c = mul.args
        if st.sigs[0][0] is None or g not in inputs or g in written or c not in consts \
                or consts[c].dim() != 0:
            continue
        groups.setdefault(c, []).append((i, j))
    fused: dict[int, Any] = {}
    gone: set[int] = set()
    for c, pairs in groups.items():
        if len(pairs) < 2:
            continue
        last = max(j for _, j in pairs)
        refs = tuple(steps[j].args[0] for _, j in pairs)
        grads = tuple(steps[i].args[0] for i, _ in pairs)
        members = [k for pair in pairs for k in pair]
        fused[last] = replace(steps[last], fn=ForeachUpdate([steps[j].sigs[0] for _, j in pairs]),
                              args=(refs, grads, c), attrs={},
                              outs=tuple(o for _, j in pairs for o in steps[j].outs),
                              sigs=tuple(g for _, j in pairs for g in steps[j].sigs),
                              chain=tuple(st for k in sorted(members) for st in
                                          (steps[k].chain or (steps[k],))))
        gone.update(k for k in members if k != last)
    if not fused:
        return steps
    return [fused.get(i, st) for i, st in enumerate(steps) if i not in gone]


def _foreach_axpys(steps: list, graph_outputs: set[int], inputs: set[int],
                   consts: dict[int, torch.Tensor], reads: dict, written: set[int]) -> list:
    """``steps`` with the ``axpy_into(p, g, c)`` steps of one ``c`` (at least two; ``g`` a
    graph input no step writes, ``c`` a 0-d Const, ``p`` and the result read by nothing
    else) as one ``ForeachAxpy`` step where the last of them was."""
    groups: dict[int, list[int]] = {}
    for j, st in enumerate(steps):
        if st.fn is not axpy_into or any(reads.get(s) or s in graph_outputs for s in st.outs):
            continue
        ref, g, c = st.args
        if st.sigs[0][0] is None or g not in inputs or g in written or c not in consts \
                or consts[c].dim() != 0 or reads.get(ref) != 1:
            continue
        groups.setdefault(c, []).append(j)
    fused: dict[int, Any] = {}
    gone: set[int] = set()
    for c, members in groups.items():
        if len(members) < 2:
            continue
        last = members[-1]
        fused[last] = replace(steps[last], fn=ForeachAxpy([steps[j].sigs[0] for j in members]),
                              args=(tuple(steps[j].args[0] for j in members),
                                    tuple(steps[j].args[1] for j in members), c), attrs={},
                              outs=tuple(o for j in members for o in steps[j].outs),
                              sigs=tuple(g for j in members for g in steps[j].sigs),
                              chain=tuple(st for j in members for st in steps[j].chain
                                          or (steps[j],)))
        gone.update(j for j in members if j != last)
    if not fused:
        return steps
    return [fused.get(i, st) for i, st in enumerate(steps) if i not in gone]
