"""A dynamic graph's size arithmetic, computed once per input-size signature.

[Note: host size prelude]
A graph with dynamic dims takes its sizes as 0-d int ``Data`` inputs (SymInt placeholders)
and computes from them, on every call, the shapes its Reshapes, slices and fused
attention read: ``Pack`` of sizes into 1-D shape tensors, ``Mul`` of sizes (``b * s``), ...
On the host device each of those is a torch call on a 0-d tensor, and each reader turns
the result back into Python ints (``int``, ``tolist``): ~60 such calls a LLaMA prefill.

These steps are pure functions of the size inputs' values (and Consts). The generated
executor (``host_codegen.py``) runs them in a ``prelude`` function whose results it keeps
in a small cache keyed by the size inputs' values and dtypes: a call whose sizes were seen
before reads them from the cache. The prelude also converts what the readers convert
(0-d sizes to ints, a fused attention's size arguments, a StridedSliceV2's index), so the
run does no size arithmetic at all on a hit. A ``GatherV2(Shape(x), i)`` size
(``shape_steps.DimSize``) read only as a Reshape's size is written as ``x.shape[i]``.

The steps are the graph's own ops run by the same kernels (on a miss) on the same values,
so results are bitwise those of the op-by-op run; the graph is unchanged. The cached
values are never handed to the caller (graph outputs are not prelude steps) nor written:
only ``SIZE_OPS`` steps with fresh results are prelude steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from npu_inductor.runtime.attention_edges import EdgeAttentionKernel
from npu_inductor.runtime.host_model import HostExecutionError
from npu_inductor.runtime.kernels import SPECIALIZERS
from npu_inductor.runtime.shape_steps import DimSize, packed_reshape, scalar_size
from npu_inductor.runtime.step_graph import producers, slots

SIZE_OPS = frozenset({"Pack", "Mul", "Add", "Sub", "ConcatV2", "Maximum", "Minimum"})
CACHE_ENTRIES = 64  # sizes seen; the cache is emptied when full
_INTS = (torch.int32, torch.int64)
# EdgeAttentionKernel: shape1, shape2, limits, q_sizes, out_sizes, k_sizes, v_sizes
_EDGE_SIZES = (3, 4, 6, 8, 9, 10, 11)
_SLICE_OPS = frozenset({"StridedSliceV2"})


@dataclass
class SizePlan:
    keys: list[tuple[int, str]]  # 0-d int Data slots and op names: the cache key
    steps: list[int] = field(default_factory=list)  # bound indices run in the prelude
    returned: list[int] = field(default_factory=list)  # prelude slots read by the run
    ints: list[int] = field(default_factory=list)  # 0-d prelude slots read as sizes (i<slot>)
    attention: dict[int, tuple] = field(default_factory=dict)  # step -> its size args
    slices: dict[int, tuple] = field(default_factory=dict)  # step -> its Const/size args
    dims: dict[int, tuple[int, int]] = field(default_factory=dict)  # DimSize step -> (x, i)

    @property
    def pure(self) -> set[int]:
        return set(self.steps)


def plan(model: Any) -> SizePlan | None:
    """The prelude of ``model``'s bound steps, or None when it has no 0-d int inputs."""
    keys = _size_inputs(model)
    p = SizePlan(keys)
    known = set(model.consts) | {s for s, _ in keys}  # values the prelude can compute
    steps = [b.step for b in model.bound]
    for k, b in enumerate(model.bound):
        st = b.step
        if keys and st.op.type in SIZE_OPS and st.compute is None and not b.use_out \
                and not b.detach and not b.notask and all(d[0] in ("keep", "drop")
                                                          for d in b.dests) \
                and all(s in known for s in slots(st.args)) \
                and all(g[0] in _INTS and len(g[1]) <= 1 for g in st.sigs):
            p.steps.append(k)
            known.update(st.outs)
    pure = set(p.steps)
    pure_outs = {s for k in pure for s in steps[k].outs}
    size_reads = _reshape_size_reads(model)
    for k, b in enumerate(model.bound):
        st = b.step
        if k in pure:
            continue
        if isinstance(st.fn, EdgeAttentionKernel) and len(st.args) == 12 \
                and all(s in known for i in _EDGE_SIZES for s in slots((st.args[i],))):
            p.attention[k] = tuple(st.args[i] for i in _EDGE_SIZES)
        elif st.op.type in _SLICE_OPS and st.op.type in SPECIALIZERS and st.compute is None \
                and not b.use_out and len(st.args) > 2 \
                and any(a in pure_outs for a in st.args[1:]) \
                and all(a is None or a in known for a in st.args[1:]):
            p.slices[k] = st.args[1:]
        elif isinstance(st.fn, DimSize) and not b.use_out and len(st.outs) == 1 \
                and b.dests[0][0] == "keep" and size_reads.get(st.outs[0]) is True:
            p.dims[k] = (st.args[0], st.fn.index)
    if not p.steps and not p.dims:
        return None
    read_outside = {s for k, b in enumerate(model.bound) if k not in pure
                    and k not in p.attention and k not in p.slices for s in slots(b.step.args)}
    for k in p.attention:  # the tensors too: the chain's own kernels read them on a refusal
        read_outside.update(slots(model.bound[k].step.args))
    p.returned = sorted(s for s in pure_outs if s in read_outside)
    producer = producers(steps)
    p.ints = sorted(s for s in pure_outs if size_reads.get(s) is not None
                    and steps[producer[s]].sigs[0][1] == ())
    return p


def _size_inputs(model: Any) -> list[tuple[int, str]]:
    """(slot, Data op name) of the 0-d int Data inputs (sizes), in input order."""
    out = []
    for op in model.inputs:
        if op.type != "Data" or not op.output_descs:
            continue
        d = op.output_descs[0]
        if d.dtype in _INTS and tuple(d.shape) == ():
            out.append((model.data_slots[op.attr("index")], op.name))
    return out


def _reshape_size_reads(model: Any) -> dict[int, bool]:
    """Slot -> True when every reader reads it as a size of an inline ``packed_reshape``
    (``x.reshape((...))`` in the generated code), False when some other reader reads it."""
    out: dict[int, bool] = {}
    graph_outs = set(model.output_slots)
    for b in model.bound:
        st = b.step
        parts: set[int] = set()
        if st.fn is packed_reshape and not b.use_out and len(st.args) == 2 \
                and isinstance(st.args[1], tuple) \
                and all(_const_int(model.consts[s]) for s in st.args[1] if s in model.consts):
            parts = {s for s in st.args[1] if s not in model.consts}
            if st.args[0] in parts:
                parts.discard(st.args[0])
                out[st.args[0]] = False
        for s in slots(st.args):
            out[s] = out.get(s, True) and s in parts and s not in graph_outs
    for s in graph_outs:
        if s in out:
            out[s] = False
    return out


def size_input(value: Any, name: str) -> int:
    """A size input's value (a key of the prelude's cache); the error names the input."""
    try:
        return scalar_size(value)
    except ValueError as e:
        raise HostExecutionError(f"graph input {name!r} (Data): {e}") from None


def _const_int(t: torch.Tensor) -> bool:
    """A Const size the generated reshape writes as a literal (``host_codegen``)."""
    return t.dim() == 0 and t.dtype in _INTS


def specialized_slice(op_type: str, args: list, attrs: dict) -> Any:
    """A StridedSliceV2 kernel with its begin/end/axes/strides fixed (their values: Consts
    and prelude results), or the generic kernel when the specializer declines."""
    from npu_inductor.runtime.kernels import KERNELS

    consts = [None] + [None if a is None else a.tolist() for a in args]
    fn = SPECIALIZERS[op_type](consts, attrs)
    if fn is not None:
        return fn
    generic = KERNELS[op_type]
    return lambda x: generic(x, *args, **attrs)
