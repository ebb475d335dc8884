"""The host device runs the reshapes and the query scale around a fused attention chain, and
the copy before a rotary embedding, as part of the step they feed.

[Note: host attention edges]
A lowered fp32 attention (``lowering/attention.py``) reaches its chain
(``attention_chain.py``) through ``Reshape(q, [B, Hkv, G * S, D])`` (grouped query heads)
and ``Mul(q, scale)``, and leaves it through ``Reshape(o, [B, H, S, D])``. Run op by op
these are three passes over q and o: the grouped Reshape of a transposed query copies, the
scale writes a new tensor, and the output Reshape of flash's result (stored ``[B, S, H, D]``)
copies again, before the ``Transpose`` + ``Reshape`` to ``[B * S, H * D]`` copies back.
Flash attention needs none of it: its query heads are ``H = Hkv * G`` as they are, the
scale is its ``scale`` argument, and its result viewed as ``[B, H, S, D]`` is what the
output Reshape asks for. When the intermediates are read only by the next step (and are
no graph outputs), ``fuse_attention_edges`` folds those steps into the chain's step: it
takes the unreshaped query and both Reshapes' sizes, and gives the output Reshape's slot.
Every Reshape keeps the row-major order of the elements, so reading ``q`` as reshaped to
the grouped shape, and flash's result as reshaped to the output shape, is the same
computation; when a run-time check fails, the folded steps run as before.

Likewise ``TensorMove(x)`` read only by ``ApplyRotaryPosEmb``: on the device the rotary op
writes its query and key in place, so the lowering copies them first (``lowering/fused.py``);
the host kernel returns new tensors and never writes its inputs, so it reads ``x`` itself
(``fuse_rotary_copies``).

The graph is unchanged; ``npu_inductor.debug.compare`` still runs op by op, and
``NPU_INDUCTOR_HOST_FUSE_ATTENTION=0`` keeps every op a step of its own.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from npu_inductor.runtime.attention_chain import _STATS, AttentionChainKernel, _scale_of
from npu_inductor.runtime.shape_steps import packed_reshape, scalar_size
from npu_inductor.runtime.step_graph import producers, readers


def fuse_rotary_copies(steps: list, graph_outputs: set[int]) -> list:
    """``steps`` without each ``TensorMove`` read only by an ``ApplyRotaryPosEmb`` (which
    then reads the copy's source)."""
    producer, users = producers(steps), readers(steps)
    gone: set[int] = set()
    fused: dict[int, Any] = {}
    for i, st in enumerate(steps):
        if st.op.type != "ApplyRotaryPosEmb" or st.compute is not None:
            continue
        args = list(fused.get(i, st).args)
        for pos in (0, 1):
            p = producer.get(args[pos]) if pos < len(args) else None
            if p is None or not _bare_copy(steps[p], users, graph_outputs, i):
                continue
            args[pos] = steps[p].args[0]
            gone.add(p)
        if tuple(args) != st.args:
            fused[i] = replace(st, args=tuple(args), chain=st.chain or (st,))
    if not fused:
        return steps
    return [fused.get(i, st) for i, st in enumerate(steps) if i not in gone]


def _bare_copy(st: Any, users: dict, graph_outputs: set[int], reader: int) -> bool:
    """A same-dtype ``TensorMove`` whose one reader is step ``reader``."""
    return (st.op.type == "TensorMove" and len(st.args) == 1 and isinstance(st.args[0], int)
            and st.compute is None and len(st.outs) == 1 and st.outs[0] not in graph_outputs
            and users.get(st.outs[0]) == [reader])


def fuse_attention_edges(steps: list, graph_outputs: set[int], consts: dict) -> list:
    """``steps`` with the query's Reshape and scale and the output's Reshape of each fused
    fp32 attention chain folded into its step (see the note)."""
    producer, users = producers(steps), readers(steps)
    gone: set[int] = set()
    fused: dict[int, Any] = {}
    for i, st in enumerate(steps):
        if type(st.fn) is not AttentionChainKernel or st.fn.lse_keep is not None \
                or len(st.outs) != 1:
            continue
        q, mul, reshape_q, copy_q = _query_edges(steps, i, producer, users, graph_outputs,
                                                 consts)
        kv = [_operand_edges(steps, i, j, producer, users, graph_outputs) for j in (1, 2)]
        out = _only_reader(steps, st.outs[0], users, graph_outputs)
        if out is not None and not _is_reshape(steps[out]):
            out = None
        edges = [j for j in (copy_q, reshape_q, mul, out) if j is not None]
        edges += [j for _, _, folded in kv for j in folded]
        if not edges:
            continue
        gone.update(j for j in edges if j != out)
        fused[out if out is not None else i] = _edge_step(steps, st, q, mul, reshape_q, out,
                                                          consts, copy_q, kv)
        if out is not None:
            gone.add(i)
    if not fused:
        return steps
    return [fused[i] if i in fused else st for i, st in enumerate(steps)
            if i in fused or i not in gone]


def _query_edges(steps: list, i: int, producer: dict, users: dict, graph_outputs: set[int],
                 consts: dict) -> tuple[int, int | None, int | None, int | None]:
    """(the query slot the fused step reads, the scale Mul's index, the Reshape's index,
    the dense copy's (``Identity``) index)."""
    q = steps[i].args[0]
    mul = _producer_for(steps, q, i, producer, users, graph_outputs)
    if mul is not None and len(steps[mul].outs) == 1 \
            and _scale_of(steps[mul], _other(steps[mul].args, consts), consts) is not None:
        q = _other(steps[mul].args, consts)
    else:
        mul = None
    reader = mul if mul is not None else i
    r = _producer_for(steps, q, reader, producer, users, graph_outputs)
    if r is not None and _is_reshape(steps[r]):
        q, copy = _dense_copy(steps, steps[r].args[0], r, producer, users, graph_outputs)
        return q, mul, r, copy
    q, copy = _dense_copy(steps, q, reader, producer, users, graph_outputs)
    return q, mul, None, copy


def _operand_edges(steps: list, i: int, j: int, producer: dict, users: dict,
                   graph_outputs: set[int]) -> tuple[Any, int | None, tuple[int, ...]]:
    """For the chain step's key (``j`` 1) or value (2): (the slot the fused step reads, the
    Reshape's sizes slot or None, the folded steps' indices): ``Identity`` [+ ``Reshape``]
    of a strided view, i.e. a dense copy the flash kernel does not need."""
    slot = steps[i].args[j]
    r = _producer_for(steps, slot, i, producer, users, graph_outputs)
    if r is not None and _is_reshape(steps[r]):
        x, copy = _dense_copy(steps, steps[r].args[0], r, producer, users, graph_outputs)
        if copy is not None:
            return x, steps[r].args[1], (copy, r)
        return slot, None, ()
    x, copy = _dense_copy(steps, slot, i, producer, users, graph_outputs)
    return (x, None, (copy,)) if copy is not None else (slot, None, ())


def _dense_copy(steps: list, slot: Any, reader: int, producer: dict, users: dict,
                graph_outputs: set[int]) -> tuple[Any, int | None]:
    """(what ``Identity(x)`` at ``slot`` copies, its index) when ``reader`` is its one
    reader, else (``slot``, None): the fused step reads ``x`` as it is (a copy changes no
    value, and neither step writes its inputs)."""
    c = _producer_for(steps, slot, reader, producer, users, graph_outputs)
    if c is not None and steps[c].op.type == "Identity" and len(steps[c].args) == 1 \
            and isinstance(steps[c].args[0], int):
        return steps[c].args[0], c
    return slot, None


def _other(args: tuple, consts: dict) -> Any:
    """Of a binary step's args, the one that is no Const (the first if both are not)."""
    return args[1] if args[0] in consts else args[0]


def _producer_for(steps: list, slot: Any, reader: int, producer: dict, users: dict,
                  graph_outputs: set[int]) -> int | None:
    """The step writing ``slot`` when ``reader`` is its one reader."""
    p = producer.get(slot) if isinstance(slot, int) else None
    if p is None or slot in graph_outputs or users.get(slot) != [reader] \
            or steps[p].compute is not None or len(steps[p].outs) != 1:
        return None
    return p


def _only_reader(steps: list, slot: int, users: dict, graph_outputs: set[int]) -> int | None:
    u = users.get(slot, [])
    return u[0] if len(u) == 1 and slot not in graph_outputs \
        and steps[u[0]].compute is None else None


def _is_reshape(st: Any) -> bool:
    """``Reshape(x, Pack(sizes))`` run as one step, or a plain ``Reshape(x, shape)``."""
    if st.fn is packed_reshape:
        return True
    return st.op.type == "Reshape" and len(st.args) == 2 and isinstance(st.args[1], int) \
        and st.attrs.get("axis", 0) == 0 and st.attrs.get("num_axes", -1) == -1 \
        and st.sigs[0][0] == torch.float32


def _edge_step(steps: list, st: Any, q: int, mul: int | None, reshape_q: int | None,
               out: int | None, consts: dict, copy_q: int | None = None,
               kv: list | None = None) -> Any:
    inner = st.fn
    factor, scale = 1.0, None
    if mul is not None:
        m = steps[mul]
        val = _other(m.args, consts)
        factor = _scale_of(m, val, consts)
        scale = (m.fn, tuple(None if a == val else consts[a] for a in m.args), m.attrs)
    q_sizes = steps[reshape_q].args[1] if reshape_q is not None else None
    out_sizes = steps[out].args[1] if out is not None else None
    (k, k_sizes, k_folded), (v, v_sizes, v_folded) = kv or [(st.args[j], None, ())
                                                             for j in (1, 2)]
    kernel = EdgeAttentionKernel(inner, factor, scale, reshape_q is not None, out is not None,
                                 k_sizes is not None, v_sizes is not None)
    absorbed = tuple(steps[j] for j in (copy_q, reshape_q, mul, *k_folded, *v_folded)
                     if j is not None)
    last = steps[out] if out is not None else st
    return replace(st, fn=kernel, args=(q, k, v, *st.args[3:], q_sizes, out_sizes, k_sizes,
                                        v_sizes),
                   outs=last.outs, sigs=last.sigs,
                   chain=absorbed + inner.chain + ((last,) if out is not None else ()))


class EdgeAttentionKernel(AttentionChainKernel):
    """A fused attention chain with its query Reshape / scale and output Reshape folded in.
    Args: the chain's, then the query Reshape's sizes and the output Reshape's sizes."""

    def __init__(self, inner: AttentionChainKernel, factor: float, scale: Any,
                 reshape_q: bool, reshape_out: bool, reshape_k: bool = False,
                 reshape_v: bool = False) -> None:
        super().__init__(inner.chain, inner.slots, inner.scale, inner.k_adj, inner.v_adj,
                         inner.const_causal, inner.outs, inner.lse_keep)
        self.factor, self.scale_step = factor, scale  # (Mul kernel, args: None = q, attrs)
        self.reshape_q, self.reshape_out = reshape_q, reshape_out
        self.reshape_k, self.reshape_v = reshape_k, reshape_v

    def size_args(self, shape1=None, shape2=None, limits=(), q_sizes=None,
                  out_sizes=None, k_sizes=None, v_sizes=None) -> tuple:
        """The size arguments as Python ints, as ``__call__`` reads them (the host's size
        prelude computes them once per input-size signature: ``runtime/size_prelude.py``)."""
        return (None if shape1 is None else _ints(shape1),
                None if shape2 is None else _ints(shape2), [scalar_size(n) for n in limits],
                _ints(q_sizes) if self.reshape_q else None,
                _ints(out_sizes) if self.reshape_out else None,
                _ints(k_sizes) if self.reshape_k else None,
                _ints(v_sizes) if self.reshape_v else None)

    def __call__(self, q, k, v, shape1=None, shape2=None, masks=(), limits=(), extras=(),
                 q_sizes=None, out_sizes=None, k_sizes=None, v_sizes=None, sizes=None):
        """``sizes``: ``size_args`` of these arguments, computed before (the tensors are
        still given: the chain's own kernels read them when a run-time check refuses)."""
        if sizes is None:
            s1, s2, lims, qs, os, ks, vs = self.size_args(shape1, shape2, limits, q_sizes,
                                                          out_sizes, k_sizes, v_sizes)
        else:
            s1, s2, lims, qs, os, ks, vs = sizes
        # a folded key/value Reshape that only splits or merges leading dims is read
        # through flash's own [batch, heads] view of the tensor (no copy); else it runs
        if (qs is None or math.prod(qs) == q.numel()) and _leading(k, ks) \
                and _leading(v, vs):
            try:
                out = self.fast(q, k, v, s1, s2, list(masks), lims, qs, self.factor, os,
                                ks, vs)
            except Exception as e:
                raise RuntimeError(f"fused attention chain {self.names}: {e}") from e
            if out is not None and (os is None or tuple(out.shape) == tuple(os)):
                _STATS["fast"] += 1
                return out
        # the folded steps as they are, around the chain's own path
        if ks is not None:
            k = k.reshape(ks)
        if vs is not None:
            v = v.reshape(vs)
        if qs is not None:
            q = q.reshape(qs)
        if self.scale_step is not None:
            fn, args, attrs = self.scale_step
            q = fn(*(q if a is None else a for a in args), **attrs)
        out = AttentionChainKernel.__call__(self, q, k, v, shape1, shape2, masks, limits,
                                            extras)
        return out if os is None else out.reshape(os)


def _leading(x: torch.Tensor, sizes: list[int] | None) -> bool:
    """Whether flash can read ``x`` as reshaped to ``sizes`` (None: no Reshape folded)
    without the Reshape: it keeps the last two dims, and the fast path reshapes the leading
    ones again to flash's [batch, heads] (a view of ``x`` where its strides allow)."""
    return sizes is None or (len(sizes) >= 2 and list(x.shape[-2:]) == list(sizes[-2:])
                             and math.prod(sizes) == x.numel())


def _ints(sizes: Any) -> list[int]:
    """A Reshape's target: Pack inputs (0-d ints) or a 1-D shape tensor."""
    if isinstance(sizes, (list, tuple)):
        return [scalar_size(s) for s in sizes]
    return [int(n) for n in sizes.tolist()]
