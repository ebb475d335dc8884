"""The host device runs an fp32 attention chain of a GE graph as one CPU attention kernel.

[Note: host attention chains]
On the 910B, ``PromptFlashAttention`` / ``FlashAttentionScore`` have fp16/bf16 kernels only,
so fp32 attention reaches the device as plain ops (``lowering/attention.py``,
``graph_passes/fuse_attention.py``)::

    s = BatchMatMulV2(q, k, adj_x2)        [*b, M, S]
    s = Reshape(s, [*b, G, Sq, S])          (optional; G * Sq == M: grouped-query heads)
    s = Add(s, mask_i) ...                  (zero or more additive masks)
    p = SoftmaxV2(s, axes=[-1])
    p = Reshape(p, [*b, M, S])              (optional; back to the scores' shape)
    o = BatchMatMulV2(p, v)                 [*b, M, Dv]

In a training forward the softmax's input has a second reader, the logsumexp AOTAutograd
saves for the backward (``lse = ReduceLogSumExp(s, axes=[-1])``); the chain then fuses
with it, and the fused step has two outputs: flash attention returns that logsumexp too.

The graph stays exactly these ops (what the 910B accepts). How the host device executes
them is its own business, as GE's fusion engine fuses ops of an accepted graph: when the
intermediates (scores, probabilities) are read by nothing but the next op of the chain and
are no graph outputs, ``fuse_chains`` replaces the chain's steps by one step that calls
torch's CPU flash-attention kernel (``_scaled_dot_product_flash_attention_for_cpu``, scale
1: ``q`` is already scaled), which never materialises the ``M x S`` scores and, when the
summed mask is the causal band (0 on and below the diagonal, ``-inf`` or the dtype's lowest
value above), runs ``is_causal`` and skips the masked blocks. Grouped query heads run as
the kernel's own grouped-query attention (``G`` query heads per key head).

Only float32 chains fuse (fp16/bf16 attention is the fused GE op already, and a host
kernel accumulating in fp32 would be more precise than the device's op-by-op rounding).
At run time the fused step checks what the load-time match could not: shapes (the
Reshapes' targets really split / restore ``M``, masks broadcast into the scores without
growing them) and masks with a row masked entirely (op by op: NaN; flash: 0). When a check
fails it runs the original kernels one after the other, so results never depend on the
fast path being taken. Results agree with the op-by-op kernels within fp32 rounding (the
online softmax sums in another order). ``NPU_INDUCTOR_HOST_FUSE_ATTENTION=0`` turns it off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from npu_inductor.config import env_bool
from npu_inductor.runtime.step_graph import producers, read_counts, readers, slots

ENV_FLAG = "NPU_INDUCTOR_HOST_FUSE_ATTENTION"
_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_STATS = {"fast": 0, "fallback": 0}  # calls of fused steps by path (tests, benchmarks)


def enabled() -> bool:
    """Whether loaded host models fuse attention chains (``NPU_INDUCTOR_HOST_FUSE_ATTENTION``)."""
    return env_bool(ENV_FLAG, True)


def stats() -> dict[str, int]:
    """Calls of fused attention steps so far: ``fast`` (one kernel) and ``fallback``."""
    return dict(_STATS)


@dataclass(frozen=True)
class ChainMatch:
    """Step indices of one chain, in order; the fused step takes ``bmm2``'s place."""

    bmm1: int
    reshape1: int | None
    scale: int | None       # Mul / RealDiv by a scalar Const
    adds: tuple[int, ...]
    softmax: int
    reshape2: int | None
    bmm2: int
    factor: float = 1.0     # the scale step's factor (1: no scale step)
    lse: int | None = None  # ReduceLogSumExp of the softmax's input (a training forward)

    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(i for i in (self.bmm1, self.reshape1, self.scale, *self.adds,
                                 self.softmax, self.reshape2, self.bmm2, self.lse)
                     if i is not None)


def fuse_chains(steps: list, graph_outputs: set[int], consts: dict[int, torch.Tensor]) -> list:
    """``steps`` with each fusable attention chain replaced by one step (see the note)."""
    matches = find_chains(steps, graph_outputs, consts)
    if not matches:
        return steps
    fused, gone = {}, set()
    graph = (producers(steps), read_counts(steps), graph_outputs)  # built once for all chains
    for m in matches:
        mask = _causal_program(steps, m, graph, consts)
        fused[m.bmm2] = _fused_step(steps, m, consts, mask)
        gone |= set(m.indices) | set(mask[0] if mask else ())
    return [fused.get(i, st) for i, st in enumerate(steps) if i in fused or i not in gone]


def find_chains(steps: list, graph_outputs: set[int],
                consts: dict[int, torch.Tensor]) -> list[ChainMatch]:
    """Chains found by walking forward from each fp32 ``BatchMatMulV2``."""
    users_of = readers(steps)

    def next_step(i: int) -> int | None:
        """The one step reading step ``i``'s only output (an intermediate of the chain);
        of a softmax input also read by its logsumexp (see ``_lse_reader``), the softmax."""
        st = steps[i]
        if len(st.outs) != 1 or st.outs[0] in graph_outputs or st.compute is not None \
                or st.sigs[0][0] != torch.float32:
            return None
        users = users_of.get(st.outs[0], [])
        if len(users) == 2 and _lse_reader(steps, st.outs[0], users, consts) is not None:
            users = [u for u in users if steps[u].op.type == "SoftmaxV2"]
        return users[0] if len(users) == 1 and steps[users[0]].compute is None else None

    matches = []
    for i, st in enumerate(steps):
        if st.op.type == "BatchMatMulV2" and _plain_bmm(st) and not st.attrs.get("adj_x1"):
            m = _match_forward(steps, i, next_step, consts)
            if m is None:
                continue
            scores = users_of[steps[m.softmax].args[0]]
            if len(scores) == 1:
                matches.append(m)
                continue
            # the logsumexp: a second output of the fused step
            lse = _lse_reader(steps, steps[m.softmax].args[0], scores, consts)
            if lse is not None and _lse_in_time(steps, users_of, m.bmm2, lse):
                matches.append(replace(m, lse=lse))
    return matches


def _lse_reader(steps: list, val: int, users: list[int], consts: dict) -> int | None:
    """Of a value read by a last-axis ``SoftmaxV2`` and a ``ReduceLogSumExp`` over its
    last axis (fp32, a Const axis), the ReduceLogSumExp's step index."""
    kinds = {steps[u].op.type: u for u in users}
    if set(kinds) != {"SoftmaxV2", "ReduceLogSumExp"}:
        return None
    r = steps[kinds["ReduceLogSumExp"]]
    rank = len(r.sigs[0][1]) + (0 if r.attrs.get("keep_dims") else 1)
    axes = consts[r.args[1]].tolist() if len(r.args) == 2 and r.args[1] in consts else None
    if r.compute is not None or r.args[0] != val or r.sigs[0][0] != torch.float32 \
            or len(r.outs) != 1 or axes not in ([-1], [rank - 1]):
        return None
    return kinds["ReduceLogSumExp"]


def _lse_in_time(steps: list, readers: dict, bmm2: int, lse: int) -> bool:
    """The fused step runs at ``bmm2``: nothing may read the logsumexp before that."""
    return all(u > bmm2 for u in readers.get(steps[lse].outs[0], []))


def _match_forward(steps: list, b1: int, next_step: Any, consts: dict) -> ChainMatch | None:
    i, r1, sc, r2, adds, factor = next_step(b1), None, None, None, [], 1.0
    val = steps[b1].outs[0]
    if i is not None and steps[i].op.type == "Reshape" and _plain_reshape(steps[i], val):
        r1, val, i = i, steps[i].outs[0], next_step(i)
    if i is not None and (f := _scale_of(steps[i], val, consts)) is not None:
        sc, val, i, factor = i, steps[i].outs[0], next_step(i), f
    while i is not None and steps[i].op.type == "Add" and len(steps[i].args) == 2 \
            and val in steps[i].args and steps[i].args[0] != steps[i].args[1]:
        adds.append(i)
        val, i = steps[i].outs[0], next_step(i)
    if i is None or steps[i].op.type != "SoftmaxV2" or not _last_axis_softmax(steps[i]):
        return None
    sm, val, i = i, steps[i].outs[0], next_step(i)
    if i is not None and steps[i].op.type == "Reshape" and _plain_reshape(steps[i], val):
        r2, val, i = i, steps[i].outs[0], next_step(i)
    if i is None or steps[i].op.type != "BatchMatMulV2" or not _plain_bmm(steps[i]) \
            or steps[i].args[0] != val or steps[i].args[1] == val \
            or steps[i].attrs.get("adj_x1") or steps[i].sigs[0][0] != torch.float32:
        return None
    return ChainMatch(b1, r1, sc, tuple(adds), sm, r2, i, factor)


def _scale_of(st: Any, val: int, consts: dict) -> float | None:
    """The factor of ``Mul(val, c)`` / ``Mul(c, val)`` / ``RealDiv(val, c)`` for a scalar
    fp32 Const ``c`` (the scores' scale), else None."""
    if st.op.type not in ("Mul", "RealDiv") or len(st.args) != 2 or val not in st.args:
        return None
    other = st.args[1] if st.args[0] == val else st.args[0]
    if st.op.type == "RealDiv" and st.args[0] != val:
        return None
    c = consts.get(other)
    if c is None or c.numel() != 1 or c.dtype != torch.float32:
        return None
    f = float(c.reshape(()))
    if st.op.type == "RealDiv":
        return 1.0 / f if f != 0 and math.isfinite(f) else None
    return f if math.isfinite(f) else None


def _plain_bmm(st: Any) -> bool:
    """No bias / offsets (inputs beyond x1, x2 unfed)."""
    return len(st.args) == 2 and all(isinstance(a, int) for a in st.args)


def _plain_reshape(st: Any, val: int) -> bool:
    return st.args[0] == val and len(st.args) == 2 and st.args[1] != val \
        and st.attrs.get("axis", 0) == 0 and st.attrs.get("num_axes", -1) == -1


def _last_axis_softmax(st: Any) -> bool:
    axes = list(st.attrs.get("axes", [-1]))
    rank = len(st.sigs[0][1])
    return len(st.args) == 1 and not st.attrs.get("half_to_float") and axes in ([-1],
                                                                                 [rank - 1])


def _causal_program(steps: list, m: ChainMatch, graph: tuple,
                    consts: dict) -> tuple[tuple[int, ...], int, int] | None:
    """A mask of the chain built only for it as the causal band of a dynamic graph
    (``lowering/symbolic.upper_mask``)::

        SelectV2(Greater(Unsqueeze(Range(0, cols, 1), [0]), Unsqueeze(Range(0, rows, 1), [1])),
                 -inf, 0)

    -> (its steps, the ``rows`` and ``cols`` slots): the fused step need not build it.
    ``graph``: (producer of each slot, read count of each slot, graph output slots)."""
    producer, reads, graph_outputs = graph

    def made_by(slot: Any, op_type: str, nargs: int) -> int | None:
        i = producer.get(slot) if isinstance(slot, int) else None
        ok = i is not None and steps[i].op.type == op_type and len(steps[i].args) == nargs \
            and reads.get(slot) == 1 and slot not in graph_outputs and len(steps[i].outs) == 1
        return i if ok else None

    masks = [x for a in m.adds for x in steps[a].args if x not in _outs(steps, m.indices)]
    if len(masks) != 1 or (sel := made_by(masks[0], "SelectV2", 3)) is None:
        return None
    cond, neg, zero = steps[sel].args
    if _scalar(consts, zero) != 0 or not _scalar(consts, neg) <= torch.finfo(
            torch.float32).min or (gt := made_by(cond, "Greater", 2)) is None:
        return None
    found = []
    for slot, axis in zip(steps[gt].args, (0, 1)):  # Greater(col index, row index)
        u = made_by(slot, "Unsqueeze", 1)
        if u is None or list(steps[u].attrs.get("axes", ())) != [axis]:
            return None
        r = made_by(steps[u].args[0], "Range", 3)
        if r is None or _scalar(consts, steps[r].args[0]) != 0 \
                or _scalar(consts, steps[r].args[2]) != 1:
            return None
        found.append((r, u, steps[r].args[1]))
    (rc, uc, cols), (rr, ur, rows) = found
    return (rc, uc, rr, ur, gt, sel), rows, cols


def _scalar(consts: dict, slot: Any) -> float | None:
    c = consts.get(slot) if isinstance(slot, int) else None
    return float(c.reshape(())) if c is not None and c.numel() == 1 else None


def _outs(steps: list, indices: Any) -> set[int]:
    return {s for i in indices for s in steps[i].outs}


def _fused_step(steps: list, m: ChainMatch, consts: dict, causal: tuple | None) -> Any:
    """One step in ``bmm2``'s place. Args: q, k, v, the Reshapes' shapes, the masks, the
    causal band's (rows, cols) when its mask program is fused too, then every other input
    the op-by-op path needs."""
    b1, b2 = steps[m.bmm1], steps[m.bmm2]
    program = tuple(sorted(m.indices + (causal[0] if causal else ())))
    inside = _outs(steps, program)
    masks = tuple(x for a in m.adds for x in steps[a].args if x not in inside)
    shape1 = steps[m.reshape1].args[1] if m.reshape1 is not None else None
    shape2 = steps[m.reshape2].args[1] if m.reshape2 is not None else None
    limits = causal[1:] if causal else ()
    named = (b1.args[0], b1.args[1], b2.args[1], shape1, shape2, masks, limits)
    listed = set(slots(named))
    extras = tuple(dict.fromkeys(s for i in program for s in slots(steps[i].args)
                                 if s not in inside and s not in listed))
    args = (*named, extras)
    const = consts.get(masks[0]) if len(masks) == 1 else None
    const_causal = const is not None and const.dim() == 2 and const.is_floating_point() \
        and _is_causal(const)
    lse = steps[m.lse] if m.lse is not None else None
    kernel = AttentionChainKernel(tuple(steps[i] for i in program), args, m.factor,
                                  bool(b1.attrs.get("adj_x2")), bool(b2.attrs.get("adj_x2")),
                                  const_causal, b2.outs + (lse.outs if lse else ()),
                                  bool(lse.attrs.get("keep_dims")) if lse else None)
    if lse is None:
        return replace(b2, fn=kernel, args=args, attrs={}, chain=kernel.chain)
    return replace(b2, fn=kernel, args=args, attrs={}, chain=kernel.chain,
                   outs=b2.outs + lse.outs, sigs=b2.sigs + lse.sigs)


class AttentionChainKernel:
    """The fused step's kernel: one flash-attention call, or the chain's own kernels.
    ``outs``: the slots it gives, the second matmul's and the logsumexp's if it has one
    (then ``lse_keep`` is that ReduceLogSumExp's ``keep_dims``)."""

    def __init__(self, chain: tuple, args: tuple, scale: float, k_adj: bool, v_adj: bool,
                 const_causal: bool = False, outs: tuple[int, ...] = (),
                 lse_keep: bool | None = None) -> None:
        self.chain, self.slots, self.scale = chain, args, scale
        self.k_adj, self.v_adj, self.const_causal = k_adj, v_adj, const_causal
        self.outs = outs or (chain[-1].outs[0],)
        self.lse_keep = lse_keep
        self.names = " -> ".join(f"{st.op.name} ({st.op.type})" for st in chain)

    def __call__(self, q, k, v, shape1=None, shape2=None, masks=(), limits=(), extras=()):
        return fast_or_op_by_op(self, "fused attention chain", _STATS,
                                (q, k, v, shape1, shape2, list(masks), limits),
                                (q, k, v, shape1, shape2, masks, limits, extras))

    def fast(self, q, k, v, shape1, shape2, masks, limits=(), q_shape=None, q_scale=1.0,
             out_shape=None, k_shape=None, v_shape=None) -> Any:
        """One flash-attention call, or None when a run-time check fails. ``q_shape``:
        ``q`` is to be read as reshaped to it, ``q_scale`` times (``attention_edges.py``);
        ``out_shape``: the result reshaped to it; ``k_shape``/``v_shape``: ``k``/``v`` read
        as reshaped to them, which keeps their last two dims."""
        if not self.k_adj:  # BatchMatMulV2(q, k, adj_x2) takes k as [S, D], else k^T
            k = k.mT
        if self.v_adj:
            v = v.mT
        qs = tuple(q.shape) if q_shape is None else tuple(q_shape)
        ks = tuple(k.shape) if k_shape is None else (*k_shape[:-2], *k.shape[-2:])
        vs = tuple(v.shape) if v_shape is None else (*v_shape[:-2], *v.shape[-2:])
        if not _same_batch(q, qs, k, v, ks, vs) or any(m.dtype != q.dtype for m in masks):
            return None
        *b, mq, d = qs
        s, dv = ks[-2], vs[-1]
        scores = (*b, mq, s)
        if ks[-1] != d or vs[-2] != s or 0 in (mq, s, d) or (
                shape2 is not None and _sizes(shape2) != list(scores)):
            return None
        view = scores if shape1 is None else tuple(_sizes(shape1))
        if len(view) < 2 or view[-1] != s or view[-2] < 1 or mq % view[-2] \
                or math.prod(view) != math.prod(scores):
            return None  # rows of the view must be query rows of one key batch
        lq = view[-2]
        g, bk = mq // lq, math.prod(b)
        if limits:  # the causal band's mask program, fused: its sizes must be the scores'
            if [int(n) for n in limits] != [lq, s] or masks:
                return None
            mask = CAUSAL
        elif self.const_causal and masks[0].shape == (lq, s):
            mask = CAUSAL
        else:
            mask = _combined(masks, view)
        if mask is False:
            return None
        # [batch, heads] of flash: the key heads (b[-1]) stay a dim of their own, so that
        # strided k and v (a Transpose of a projection) need no copy; q's G heads per
        # key head become kernel heads (its grouped-query attention)
        if len(b) > 1:
            nb, nh = math.prod(b[:-1]), b[-1]
        elif g == 1 and len(view) >= 4:  # [batch * heads] matmuls, [batch, heads] Adds:
            nb, nh = math.prod(view[:-3]), view[-3]  # a mask broadcast over heads stays a view
        else:
            nb, nh = bk, 1
        # the CPU flash kernel misreads operands whose last dim is strided (k^T.mT)
        q4, k4, v4 = (_unit_last(x.reshape(nb, nh * n, rows, x.shape[-1]))
                      for x, n, rows in ((q, g, lq), (k, 1, s), (v, 1, s)))
        if isinstance(mask, torch.Tensor) and mask.dim() > 2:
            # a view where the broadcast dims allow it (the CPU kernel reads a mask through
            # its strides, 0 included), else a copy
            mask = _unit_last(mask.reshape(nb, nh * g, lq, s))
        if mask is CAUSAL or mask is None:
            out, lse = _FLASH(q4, k4, v4, 0.0, mask is CAUSAL, scale=self.scale * q_scale)
        else:
            out, lse = _FLASH(q4, k4, v4, 0.0, False, attn_mask=mask,
                              scale=self.scale * q_scale)
        out = out.reshape(*b, mq, dv) if out_shape is None else out.reshape(out_shape)
        if self.lse_keep is None:
            return out
        # flash's logsumexp [bk, g, Lq] is over the scale * q k^T + mask rows, as the
        # chain's ReduceLogSumExp of the softmax's input (shape ``view``) is
        return out, lse.reshape(*view[:-1], *((1,) if self.lse_keep else ()))

    def op_by_op(self, *values) -> torch.Tensor:
        """The chain's own kernels, one after the other (what an unfused graph runs)."""
        vals = run_chain(self.slots, self.chain, values)
        if self.lse_keep is None:
            return vals[self.outs[0]]
        return vals[self.outs[0]], vals[self.outs[1]]


def _unit_last(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 or x.shape[-1] == 1 else x.contiguous()


def _sizes(shape: Any) -> list[int]:
    return shape if isinstance(shape, list) else shape.tolist()


def fast_or_op_by_op(kernel: Any, what: str, stats: dict, fast_args: tuple,
                     args: tuple) -> Any:
    """``kernel.fast(*fast_args)``, or its chain op by op when a run-time check refuses;
    counts the path taken in ``stats``; an error names the chain."""
    try:
        out = kernel.fast(*fast_args)
    except Exception as e:
        raise RuntimeError(f"{what} {kernel.names}: {e}") from e
    if out is not None:
        stats["fast"] += 1
        return out
    stats["fallback"] += 1
    return kernel.op_by_op(*args)


def run_chain(slots: tuple, chain: Any, values: tuple) -> dict[int, Any]:
    """Every slot's value after running ``chain``'s steps one by one on ``values`` (given
    for ``slots``: a slot, a tuple of slots for a list value, or None)."""
    vals: dict[int, Any] = {}
    for slot, value in zip(slots, values):
        if isinstance(slot, tuple):
            vals.update(zip(slot, value))
        elif slot is not None:
            vals[slot] = value
    for st in chain:
        vals[st.outs[0]] = st.fn(*[vals[a] for a in st.args], **st.attrs)
    return vals


def _same_batch(q: torch.Tensor, qs: tuple, k: torch.Tensor, v: torch.Tensor,
                ks: tuple | None = None, vs: tuple | None = None) -> bool:
    """``qs``, ``ks``, ``vs``: the shapes ``q``, ``k``, ``v`` are read as."""
    ks = tuple(k.shape) if ks is None else ks
    vs = tuple(v.shape) if vs is None else vs
    return (len(qs) >= 3 and len(qs) == len(ks) == len(vs) and q.dtype == torch.float32
            and k.dtype == v.dtype == q.dtype and qs[:-2] == ks[:-2] == vs[:-2])


def _combined(masks: list, view: tuple) -> Any:
    """The masks' sum for flash's scores, from masks that broadcast into the scores as the
    Adds see them (``view``): 2-D when it broadcasts over all leading
    dims, else expanded to ``view`` (a view); ``CAUSAL`` for the causal band, None without
    masks, False when a check fails."""
    if not masks:
        return None
    lq, s = view[-2], view[-1]
    if len(masks) == 1 and masks[0].shape == (lq, s) and _is_causal(masks[0]):
        return CAUSAL
    if not all(_broadcasts_into(tuple(m.shape), view) for m in masks):
        return False
    total = masks[0]
    for m in masks[1:]:
        total = total + m
    # A row of the broadcast scores is a row of ``total`` (or one value repeated when
    # ``total`` broadcasts over the keys), so the checks run on ``total`` as it is: its
    # max over the keys is -inf for a fully masked row (op by op: NaN there; flash: 0),
    # NaN when the row holds a NaN, +inf for an infinite bonus (flash's online softmax
    # would differ): any of them takes the op-by-op path.
    flat = all(n == 1 for n in total.shape[:-2])
    if flat:
        full = total.reshape(total.shape[-2:]).expand(lq, s)
        if _is_causal(full):
            return CAUSAL
    if not bool(torch.isfinite(total.amax(-1)).all()):
        return False
    return full if flat else total.expand(view)  # stride 0 where it broadcasts: no copy


class _Causal:
    def __repr__(self) -> str:
        return "CAUSAL"


CAUSAL = _Causal()
_REFS: dict[tuple, torch.Tensor] = {}  # the last few causal bands, by (Sq, S, dtype, fill)


def _broadcasts_into(shape: tuple, target: tuple) -> bool:
    """``shape`` broadcasts to ``target`` without growing it."""
    return len(shape) <= len(target) and all(
        n in (1, t) for n, t in zip(reversed(shape), reversed(target)))


def _is_causal(mask: torch.Tensor) -> bool:
    """``mask`` (2-D) is 0 on and below the diagonal and -inf (or the dtype's lowest value)
    above: the band ``is_causal`` applies (top-left aligned)."""
    sq, s = mask.shape
    fill = float("-inf")
    if s > 1 and float(mask[0, -1]) == torch.finfo(mask.dtype).min:
        fill = torch.finfo(mask.dtype).min
    return torch.equal(mask, causal_band(sq, s, mask.dtype, fill))


def causal_band(sq: int, s: int, dtype: torch.dtype = torch.float32,
                fill: float = float("-inf")) -> torch.Tensor:
    """The causal band as the lowered mask has it: 0 on and below the diagonal, ``fill``
    above (the last few kept, by shape, dtype and fill)."""
    key = (sq, s, dtype, fill)
    ref = _REFS.get(key)
    if ref is None:
        upper = torch.ones(sq, s, dtype=torch.bool).triu_(1)
        ref = torch.zeros(sq, s, dtype=dtype).masked_fill_(upper, fill)
        if len(_REFS) >= 4:
            _REFS.pop(next(iter(_REFS)))
        _REFS[key] = ref
    return ref
