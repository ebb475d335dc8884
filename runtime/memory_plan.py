"""Static memory plan: every intermediate tensor of a GE graph gets an offset in one workspace.

[Note: static memory plan]
Time runs in two phases per step ``i``: ``2i`` (the op reads its inputs) and ``2i+1`` (it
writes its outputs). A tensor lives from its definition to the read phase of its last
reader. An op that writes while it reads (an ``out=`` kernel writing into the workspace)
defines its outputs at ``2i``, so they conflict with every input; an op whose result is
computed into fresh memory and then copied into place defines them at ``2i+1``, so they may
reuse the memory of inputs that die at step ``i``.

Tensors are grouped into *buffers* before placement:

* **views**: the output of a view op (``Reshape``, ``Squeeze``, ...) shares its input's
  buffer (same bytes, no copy), which stays alive as long as any view of it;
* **aliases**: results of ``ALIAS_OPS`` (``Transpose``, ``SplitV``, ``BroadcastTo``...) stay
  the kernel's strided view of input 0; they have no bytes of their own, and reading them
  counts as reading the viewed buffer;
* **in place**: an elementwise ``out=`` op whose same-shape, same-dtype input dies at this
  step writes its output over that input (``torch.add(x, y, out=x)``).

Graph inputs, constants and graph outputs are not planned: inputs are bound zero-copy,
outputs are written straight into the buffers handed back to the user (they must never
alias the reusable workspace).

Placement is greedy by size with best fit (Pisarchyk & Lee, "Efficient Memory Management
for Deep Neural Net Inference", 2020): buffers in decreasing size order take the smallest
gap, among buffers whose lifetimes overlap theirs, that fits. A second ordering (by
lifetime breadth) is also tried and the smaller workspace kept. The lower bound is the
maximum over time of the bytes alive; the naive size is the sum of all tensors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ALIGN = 64  # bytes: a cache line, enough for every dtype and for vectorised kernels

# Ops whose output is its first input's bytes under another shape (GE: no-task ops).
VIEW_OPS = frozenset({"Reshape", "Squeeze", "SqueezeV2", "SqueezeV3", "Unsqueeze",
                      "UnsqueezeV2", "UnsqueezeV3", "ExpandDims", "Flatten", "FlattenV2",
                      "Identity"})
# Ops whose results the host keeps as (strided) views of input 0 rather than copying them
# into bytes of their own; reads of such a result count as reads of the viewed buffer.
ALIAS_OPS = frozenset({"SplitV", "Split", "SplitD", "SplitVD", "BroadcastTo", "Transpose",
                       "TransposeD", "StridedSlice", "StridedSliceV2", "Slice", "SliceD"})
# Elementwise ops: an out= kernel may write over a same-shaped, same-dtype input.
INPLACE_OPS = frozenset({"Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Neg", "Relu",
                         "Exp", "Log", "Sqrt", "Rsqrt", "Tanh", "Sigmoid", "Maximum",
                         "Minimum", "Pow", "Abs", "Square", "Adds", "Muls", "Axpy", "AxpyV2",
                         "Gelu", "Silu", "Swish", "Erf", "Reciprocal", "ZerosLike",
                         "OnesLike", "LeakyRelu", "Sin", "Cos"})


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class PlanStep:
    """What the planner needs to know about one executed op."""

    op_type: str
    ins: tuple[int, ...]                 # slots read (flattened, in order)
    outs: tuple[int, ...]                # slots written
    out_nbytes: tuple[int | None, ...]   # None: unknown size (dynamic shape)
    out_sigs: tuple[Any, ...] = ()       # (dtype, shape) per output, for in-place checks
    in_sigs: tuple[Any, ...] = ()        # (dtype, shape) per entry of ``ins``
    writes_early: bool = False           # out= kernel: writes while reading
    alias_roots: tuple[int, ...] = ()    # buffers read through an ALIAS_OPS view (derived)


@dataclass(frozen=True)
class Buffer:
    slots: tuple[int, ...]  # tensors sharing this memory (root first)
    size: int               # aligned bytes
    start: int
    end: int
    offset: int = -1


@dataclass
class MemoryPlan:
    """Offsets per planned slot, plus the numbers the issue asks to report."""

    offsets: dict[int, int]
    nbytes: dict[int, int]
    buffers: list[Buffer]
    workspace_bytes: int
    lower_bound: int
    naive_bytes: int
    algorithm: str
    views: dict[int, int] = field(default_factory=dict)    # view slot -> root slot
    aliases: dict[int, int] = field(default_factory=dict)  # ALIAS_OPS result -> slot viewed
    inplace: dict[int, int] = field(default_factory=dict)  # output slot -> input slot reused

    @property
    def ratio(self) -> float:
        return self.workspace_bytes / self.lower_bound if self.lower_bound else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace_bytes": self.workspace_bytes, "lower_bound_bytes": self.lower_bound,
            "naive_bytes": self.naive_bytes, "ratio_to_lower_bound": round(self.ratio, 4),
            "algorithm": self.algorithm, "alignment": ALIGN,
            "views": {str(k): v for k, v in self.views.items()},
            "aliases": {str(k): v for k, v in self.aliases.items()},
            "inplace": {str(k): v for k, v in self.inplace.items()},
            "buffers": [{"slots": list(b.slots), "offset": b.offset, "size": b.size,
                         "live": [b.start, b.end]} for b in self.buffers],
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1))


class PlanError(ValueError):
    """The graph cannot be planned statically (e.g. a dynamic shape)."""


# ---- lifetimes and buffers -----------------------------------------------------------------
class _Groups:
    """Union of slots that share one buffer; the root is the first slot of the group."""

    def __init__(self) -> None:
        self.root: dict[int, int] = {}

    def find(self, s: int) -> int:
        while self.root.get(s, s) != s:
            s = self.root[s]
        return s

    def join(self, member: int, root: int) -> None:
        self.root[member] = self.find(root)


def resolve_aliases(steps: list[PlanStep], planned: set[int]) -> tuple[list[PlanStep], dict]:
    """Rewrite reads of ALIAS_OPS results (not planned themselves) into reads of the
    planned slot they view, so that slot outlives them."""
    root: dict[int, int] = {}
    out = []
    for st in steps:
        ins = tuple(root.get(s, s) for s in st.ins)
        touched = tuple(root[s] for s in st.ins if s in root)
        if touched:
            st = replace(st, ins=ins, alias_roots=touched)
        # a view of a view stays an alias (e.g. Reshape of a Transpose result)
        if st.op_type in ALIAS_OPS | VIEW_OPS and ins and ins[0] in planned:
            root.update((s, ins[0]) for s in st.outs if s not in planned)
        out.append(st)
    return out, root


def _last_reads(steps: list[PlanStep]) -> dict[int, int]:
    last: dict[int, int] = {}
    for i, st in enumerate(steps):
        for s in st.ins:
            last[s] = i
    return last


def _group_slots(steps: list[PlanStep], planned: set[int]) -> tuple[_Groups, dict, dict]:
    """Join views to their roots and in-place outputs to the input they overwrite."""
    groups, views, inplace = _Groups(), {}, {}
    last_of_group: dict[int, int] = {}
    last = _last_reads(steps)
    for i, st in enumerate(steps):
        for s in st.ins:
            if s in planned:
                r = groups.find(s)
                last_of_group[r] = max(last_of_group.get(r, -1), last[s])
        out = st.outs[0] if st.outs else None
        if out not in planned:
            continue
        src = st.ins[0] if st.ins else None
        if st.op_type in VIEW_OPS and src in planned and st.out_nbytes[0] is not None:
            views[out] = src
            groups.join(out, src)
        elif st.writes_early and st.op_type in INPLACE_OPS and len(st.outs) == 1:
            src = _inplace_source(st, planned, groups, last_of_group, i)
            if src is not None:
                inplace[out] = src
                groups.join(out, src)
        r = groups.find(out)
        last_of_group[r] = max(last_of_group.get(r, -1), last.get(out, i))
    return groups, views, inplace


def _inplace_source(st: PlanStep, planned: set[int], groups: _Groups,
                    last_of_group: dict[int, int], i: int) -> int | None:
    """An input this elementwise op may overwrite: dies here, same dtype and shape."""
    for s, sig in zip(st.ins, st.in_sigs):
        if s not in planned or sig != st.out_sigs[0]:
            continue
        r = groups.find(s)
        if any(groups.find(a) == r for a in st.alias_roots):
            continue  # read through a strided view too: elements would be overwritten
        # another input viewing the same bytes under another shape would be overwritten
        if last_of_group.get(r) == i and all(o == s or o not in planned or groups.find(o) != r
                                             for o in st.ins):
            return s
    return None


def _buffers(steps: list[PlanStep], planned: set[int], groups: _Groups,
             nbytes: dict[int, int]) -> list[Buffer]:
    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    for i, st in enumerate(steps):
        t = 2 * i if st.writes_early else 2 * i + 1
        for s in st.outs:
            if s in planned:
                r = groups.find(s)
                starts.setdefault(r, t)
                ends[r] = max(ends.get(r, t), t)
        for s in st.ins:
            if s in planned:
                r = groups.find(s)
                ends[r] = max(ends[r], 2 * i)
    members: dict[int, list[int]] = {}
    for s in sorted(planned):
        members.setdefault(groups.find(s), []).append(s)
    return [Buffer(tuple(m), align(max(nbytes[s] for s in m)), starts[r], ends[r])
            for r, m in members.items()]


# ---- placement -----------------------------------------------------------------------------
def _overlap(a: Buffer, b: Buffer) -> bool:
    return a.start <= b.end and b.start <= a.end


def _place(order: list[Buffer]) -> list[Buffer]:
    """Greedy best fit: each buffer takes the smallest gap among live-overlapping ones."""
    placed: list[Buffer] = []
    for b in order:
        busy = sorted((p.offset, p.offset + p.size) for p in placed if _overlap(p, b))
        best, best_gap, cursor = None, None, 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= b.size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        placed.append(Buffer(b.slots, b.size, b.start, b.end,
                             cursor if best is None else best))
    return placed


def _breadth(buffers: list[Buffer]) -> list[Buffer]:
    """Order by the busiest time point each buffer is alive at (greedy by breadth)."""
    points = sorted({b.start for b in buffers})
    load = {t: sum(b.size for b in buffers if b.start <= t <= b.end) for t in points}
    def key(b: Buffer) -> tuple:
        return (-max(load[t] for t in points if b.start <= t <= b.end), -b.size, b.start)
    return sorted(buffers, key=key)


def lower_bound(buffers: list[Buffer]) -> int:
    """Maximum over time of the bytes alive (no placement can use less)."""
    points = {b.start for b in buffers}
    return max((sum(b.size for b in buffers if b.start <= t <= b.end) for t in points),
               default=0)


def _span(placed: list[Buffer]) -> int:
    return max((b.offset + b.size for b in placed), default=0)


def plan_memory(steps: list[PlanStep], planned: set[int]) -> MemoryPlan:
    """Plan the ``planned`` slots (intermediates) of ``steps`` into one workspace."""
    steps, aliases = resolve_aliases(steps, planned)
    nbytes: dict[int, int] = {}
    for st in steps:
        for s, n in zip(st.outs, st.out_nbytes):
            if s in planned:
                if n is None:
                    raise PlanError(f"output of {st.op_type} has a dynamic shape")
                nbytes[s] = n
    groups, views, inplace = _group_slots(steps, planned)
    buffers = _buffers(steps, planned, groups, nbytes)
    by_size = sorted(buffers, key=lambda b: (-b.size, b.start, -b.end))
    candidates = [("greedy_by_size", _place(by_size)), ("greedy_by_breadth",
                                                         _place(_breadth(buffers)))]
    algorithm, placed = min(candidates, key=lambda c: _span(c[1]))
    offsets = {s: b.offset for b in placed for s in b.slots}
    naive = sum(align(nbytes[s]) for s in planned if s not in views and s not in inplace)
    return MemoryPlan(offsets, nbytes, placed, _span(placed), lower_bound(buffers), naive,
                      algorithm, views=views, inplace=inplace, aliases=aliases)


# ---- validation (independent of the buffer grouping above) ---------------------------------
def _slot_lives(steps: list[PlanStep], plan: MemoryPlan) -> dict[int, list[int]]:
    """[first, last] time each planned slot's bytes must stay intact (views extend roots)."""
    life: dict[int, list[int]] = {}
    for i, st in enumerate(steps):
        for s in st.outs:
            if s in plan.offsets:
                t = 2 * i if st.writes_early else 2 * i + 1
                life[s] = [t, t]
        for s in st.ins:
            if s in life:
                life[s][1] = max(life[s][1], 2 * i)
    for s in sorted(plan.views, reverse=True):  # a view's bytes are its root's bytes
        root = plan.views[s]
        life[root][1] = max(life[root][1], life[s][1])
    return life


def _related(a: int, b: int, plan: MemoryPlan) -> bool:
    def chain(s: int) -> set[int]:
        seen = {s}
        while s in plan.views or s in plan.inplace:
            s = plan.views.get(s, plan.inplace.get(s))
            seen.add(s)
        return seen
    return bool(chain(a) & chain(b))


def validate(steps: list[PlanStep], plan: MemoryPlan) -> None:
    """Raise PlanError if two tensors alive at the same time share workspace bytes, or a
    tensor lies outside the workspace."""
    steps, _ = resolve_aliases(steps, set(plan.offsets))
    life = _slot_lives(steps, plan)
    spans = {s: (off, off + plan.nbytes[s]) for s, off in plan.offsets.items()}
    for s, (lo, hi) in spans.items():
        if lo < 0 or hi > plan.workspace_bytes or lo % ALIGN:
            raise PlanError(f"slot {s} at [{lo}, {hi}) is outside or misaligned in the "
                            f"{plan.workspace_bytes}-byte workspace")
    slots = sorted(spans)
    for i, a in enumerate(slots):
        for b in slots[i + 1:]:
            (alo, ahi), (blo, bhi) = spans[a], spans[b]
            if alo < bhi and blo < ahi and life[a][0] <= life[b][1] \
                    and life[b][0] <= life[a][1] and not _related(a, b, plan):
                raise PlanError(f"slots {a} {life[a]} and {b} {life[b]} overlap in memory "
                                f"([{alo}, {ahi}) vs [{blo}, {bhi})) while both alive")
    for out, src in plan.inplace.items():
        if life[src][1] > life[out][0]:
            raise PlanError(f"slot {out} overwrites slot {src}, which is still read later")
