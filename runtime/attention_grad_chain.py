"""The host device runs an fp32 attention backward chain of a GE graph as CPU flash calls.

[Note: host attention backward chains]
In fp32 the 910B has no fused attention gradient (``FlashAttentionScoreGrad`` is
fp16/bf16 only), so a training backward graph keeps attention's backward as plain ops,
recomputing the probabilities from q, k and the masks (AOTAutograd's decomposition)::

    qs = Mul(q, c)                         (optional: the scale, a scalar Const)
    s  = BatchMatMulV2(qs, k, adj_x2)      [*b, M, S]
    s  = Reshape(s, [*b, G, Sq, S])        (optional; grouped-query heads)
    s  = Add(s, mask_i) ...                (zero or more additive masks)
    p  = SoftmaxV2(s, axes=[-1])
    p  = Reshape(p, [*b, M, S])            (optional)
    dv = BatchMatMulV2(p, do, adj_x1)      [*b, S, Dv]
    dp = BatchMatMulV2(do, v, adj_x2)      [*b, M, S]
    ds = SoftmaxGrad(p, dp, axes=[-1])
    ds = Mul(ds, c)                        (the same scale, when q was scaled)
    dq = BatchMatMulV2(ds, k)              [*b, M, D]
    dk = BatchMatMulV2(ds, q, adj_x1)      [*b, S, D]

The graph stays these ops (what the 910B accepts). As for the forward chains
(``attention_chain.py``), when every intermediate is read by nothing but the chain and is
no graph output, ``fuse_grad_chains`` replaces the chain by one step with three outputs
(dv, dq, dk), run in the chain's last step's place. Its kernel runs the chain's math as
direct torch calls: the very calls of the op kernels (bitwise their results; a ``RealDiv``
scale becomes a multiplication by its reciprocal), without the executor's per-step work
and with the scores updated in place. From ``FLASH_MIN_KEYS`` keys on, with the causal
band or no mask, it calls torch's CPU flash attention forward (the output and logsumexp
its backward needs) and backward instead, scale ``c`` and ``is_causal`` (the masked blocks
skipped); grouped query heads run as the kernels' grouped-query attention (dk and dv
summed over a key head's G query heads, as the matmuls sum them); results agree with the
op-by-op kernels within fp32 rounding (the online softmax sums in another order).
The fused step checks at run time what the load-time match could not (shapes, masks that
broadcast into the scores without growing them) and otherwise runs the chain's own kernels
one after the other. ``NPU_INDUCTOR_HOST_FUSE_ATTENTION=0`` turns it off with the forward
fusion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from npu_inductor.runtime.attention_chain import (
    _FLASH,
    _broadcasts_into,
    _causal_program,
    _is_causal,
    _last_axis_softmax,
    _outs,
    _plain_bmm,
    _plain_reshape,
    _same_batch,
    _scale_of,
    _sizes,
    _unit_last,
    causal_band,
    fast_or_op_by_op,
    run_chain,
)
from npu_inductor.runtime.step_graph import producers, read_counts, readers, slots

_FLASH_BWD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
_SOFTMAX_BWD = torch.ops.aten._softmax_backward_data.default
_STATS = {"fast": 0, "fallback": 0}  # calls of fused backward steps by path
# from this many keys on the flash kernels (online softmax, causal blocks skipped) beat the
# direct calls on this CPU (1 thread; 32 keys: 233 against 264 us, 256: 9.9 against 9.4 ms)
FLASH_MIN_KEYS = 256
# chains with fewer (static) keys stay op by op: there the executor's steps, writing into
# the workspace with out=, cost no more than the fused step (llama_prefill's backward, 32
# keys, hot replays: 13.1 ms op by op against 13.7 ms fused); dynamic key counts fuse
FUSE_MIN_KEYS = 256


def stats() -> dict[str, int]:
    """Calls of fused attention backward steps so far: ``fast`` and ``fallback``."""
    return dict(_STATS)


@dataclass(frozen=True)
class GradMatch:
    """Step indices of one backward chain (see the note)."""

    qscale: int | None
    bmm1: int
    reshape1: int | None
    adds: tuple[int, ...]
    softmax: int
    reshape2: int | None
    dv: int
    dp: int
    sgrad: int
    dscale: int | None
    dq: int
    dk: int
    factor: float = 1.0

    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(i for i in (self.qscale, self.bmm1, self.reshape1, *self.adds,
                                 self.softmax, self.reshape2, self.dv, self.dp, self.sgrad,
                                 self.dscale, self.dq, self.dk) if i is not None)


def fuse_grad_chains(steps: list, graph_outputs: set[int],
                     consts: dict[int, torch.Tensor]) -> list:
    """``steps`` with each fusable attention backward chain replaced by one step."""
    matches = find_grad_chains(steps, graph_outputs, consts)
    if not matches:
        return steps
    fused, gone = {}, set()
    graph = (producers(steps), read_counts(steps), graph_outputs)
    for m in matches:
        mask = _causal_program(steps, m, graph, consts)
        last = max(m.indices)
        fused[last] = _fused_step(steps, m, consts, mask, last)
        gone |= set(m.indices) | set(mask[0] if mask else ())
    return [fused.get(i, st) for i, st in enumerate(steps) if i in fused or i not in gone]


def find_grad_chains(steps: list, graph_outputs: set[int],
                     consts: dict[int, torch.Tensor]) -> list[GradMatch]:
    """Chains found from each fp32 ``SoftmaxGrad`` whose probabilities are recomputed."""
    users_of, producer = readers(steps), producers(steps)

    def inner(slot: Any, n: int = 1) -> bool:
        """An intermediate of the chain: read ``n`` times, no graph output."""
        return isinstance(slot, int) and slot not in graph_outputs \
            and len(users_of.get(slot, ())) == n

    out = []
    for i, st in enumerate(steps):
        if st.op.type == "SoftmaxGrad" and st.compute is None \
                and st.sigs[0][0] == torch.float32:
            m = _match(steps, i, users_of, producer, inner, consts)
            # every op of the chain in its own dtype (precision_mode moved none of them)
            keys = steps[m.bmm1].sigs[0][1][-1] if m is not None else 0
            if m is not None and _in_time(steps, users_of, m) \
                    and (keys < 0 or keys >= FUSE_MIN_KEYS) \
                    and all(steps[j].compute is None for j in m.indices):
                out.append(m)
    return out


def _match(steps: list, sg: int, users_of: dict, producer: dict, inner: Any,
           consts: dict) -> GradMatch | None:
    st = steps[sg]
    if len(st.args) != 2 or len(st.outs) != 1 or not _last_axis_softmax(
            replace(st, args=st.args[:1])):
        return None
    p2, dp_slot = st.args
    fwd = _match_probs(steps, p2, producer, inner, consts)
    bp = producer.get(dp_slot)
    if fwd is None or bp is None or not inner(dp_slot) or not inner(p2, 2):
        return None
    qscale, b1, r1, adds, sm, r2, q, factor = fwd
    k = steps[b1].args[1]
    dv = next((u for u in users_of[p2] if u != sg), None)
    if dv is None or not _bmm(steps[dv], (p2, None), adj_x1=True):
        return None
    do = steps[dv].args[1]
    if not _bmm(steps[bp], (do, None), adj_x2=True) or steps[bp].args[1] in (do, p2):
        return None
    ds, dscale = st.outs[0], None
    if factor != 1.0:
        users = users_of.get(ds, [])
        if len(users) != 1 or not inner(ds) or _scale_of(steps[users[0]], ds, consts) != factor:
            return None
        dscale, ds = users[0], steps[users[0]].outs[0]
    users = users_of.get(ds, [])
    if not inner(ds, 2):
        return None
    dq = next((u for u in users if _bmm(steps[u], (ds, k))), None)
    dk = next((u for u in users if u != dq and _bmm(steps[u], (ds, q), adj_x1=True)), None)
    if dq is None or dk is None:
        return None
    return GradMatch(qscale, b1, r1, adds, sm, r2, dv, bp, sg, dscale, dq, dk, factor)


def _match_probs(steps: list, p2: int, producer: dict, inner: Any, consts: dict) -> Any:
    """Walk back from the probabilities to the scores' matmul: (qscale, bmm1, reshape1,
    adds, softmax, reshape2, q, factor), or None."""
    i = producer.get(p2)
    r2 = None
    if i is not None and steps[i].op.type == "Reshape":
        r2, i = i, producer.get(steps[i].args[0])
        if i is None or not _plain_reshape(steps[r2], steps[i].outs[0]) \
                or not inner(steps[i].outs[0]):
            return None
    if i is None or steps[i].op.type != "SoftmaxV2" or not _last_axis_softmax(steps[i]) \
            or len(steps[i].outs) != 1:
        return None
    sm, val = i, steps[i].args[0]
    adds: list[int] = []
    while True:
        j = producer.get(val)
        if j is None or not inner(val):
            return None
        st = steps[j]
        if st.op.type != "Add" or len(st.args) != 2 or st.args[0] == st.args[1]:
            break
        a, b = st.args
        nxt = [x for x in (a, b) if _chain_value(steps, producer, x)]
        if len(nxt) != 1:
            return None
        adds.insert(0, j)
        val = nxt[0]
    r1 = None
    if steps[j].op.type == "Reshape":
        r1, val = j, steps[j].args[0]
        j = producer.get(val)
        if j is None or not inner(val) or not _plain_reshape(steps[r1], val):
            return None
    if not _bmm(steps[j], (None, None), adj_x2=True):
        return None
    qs = steps[j].args[0]
    q, qscale, factor = qs, None, 1.0
    pq = producer.get(qs)
    if pq is not None and inner(qs):
        st = steps[pq]
        other = [a for a in st.args if a not in consts]
        f = _scale_of(st, other[0], consts) if len(other) == 1 else None
        if f is not None:
            q, qscale, factor = other[0], pq, f
    return qscale, j, r1, tuple(adds), sm, r2, q, factor


def _chain_value(steps: list, producer: dict, slot: Any) -> bool:
    """Whether ``slot`` is the scores: a matmul, a Reshape of one, or a chain Add (a mask
    may be a Reshape too, of something else)."""
    i = producer.get(slot) if isinstance(slot, int) else None
    if i is not None and steps[i].op.type == "Reshape":
        i = producer.get(steps[i].args[0])
    return i is not None and steps[i].op.type in ("BatchMatMulV2", "Add")


def _bmm(st: Any, args: tuple, adj_x1: bool = False, adj_x2: bool = False) -> bool:
    """An fp32 plain ``BatchMatMulV2`` with these adjoint flags whose inputs are ``args``
    (None: any)."""
    return st.op.type == "BatchMatMulV2" and _plain_bmm(st) and st.compute is None \
        and st.sigs[0][0] == torch.float32 and len(st.outs) == 1 \
        and bool(st.attrs.get("adj_x1")) == adj_x1 and bool(st.attrs.get("adj_x2")) == adj_x2 \
        and all(a is None or a == x for a, x in zip(args, st.args))


def _in_time(steps: list, users_of: dict, m: GradMatch) -> bool:
    """The fused step runs at the chain's last step: nothing outside the chain may read
    its outputs (dv, dq, dk) before that."""
    last = max(m.indices)
    return all(u > last for i in (m.dv, m.dq, m.dk) for u in users_of.get(steps[i].outs[0], []))


def _fused_step(steps: list, m: GradMatch, consts: dict, causal: tuple | None,
                last: int) -> Any:
    """One step in the last chain step's place, outputs (dv, dq, dk). Args: q, k, v, do,
    the Reshapes' shapes, the masks, the causal band's (rows, cols), then every other input
    the op-by-op path needs."""
    program = tuple(sorted(m.indices + (causal[0] if causal else ())))
    inside = _outs(steps, program)
    b1, q = steps[m.bmm1], steps[m.dk].args[1]
    masks = tuple(x for a in m.adds for x in steps[a].args if x not in inside)
    shape1 = steps[m.reshape1].args[1] if m.reshape1 is not None else None
    shape2 = steps[m.reshape2].args[1] if m.reshape2 is not None else None
    named = (q, b1.args[1], steps[m.dp].args[1], steps[m.dv].args[1], shape1, shape2, masks,
             causal[1:] if causal else ())
    listed = set(slots(named))
    extras = tuple(dict.fromkeys(s for i in program for s in slots(steps[i].args)
                                 if s not in inside and s not in listed))
    const = consts.get(masks[0]) if len(masks) == 1 else None
    const_causal = const is not None and const.dim() == 2 and const.is_floating_point() \
        and _is_causal(const)
    outs = tuple(steps[i].outs[0] for i in (m.dv, m.dq, m.dk))
    kernel = AttentionGradKernel(tuple(steps[i] for i in program), (*named, extras), m.factor,
                                 const_causal, outs)
    return replace(steps[last], fn=kernel, args=(*named, extras), attrs={},
                   chain=kernel.chain, outs=outs,
                   sigs=tuple(steps[i].sigs[0] for i in (m.dv, m.dq, m.dk)))


class AttentionGradKernel:
    """The fused backward step's kernel: flash forward + backward, or the chain's kernels."""

    def __init__(self, chain: tuple, args: tuple, scale: float, const_causal: bool,
                 outs: tuple[int, ...]) -> None:
        self.chain, self.slots, self.scale = chain, args, scale
        self.const_causal, self.outs = const_causal, outs
        self.names = " -> ".join(f"{st.op.name} ({st.op.type})" for st in chain)

    def __call__(self, q, k, v, do, shape1=None, shape2=None, masks=(), limits=(), extras=()):
        return fast_or_op_by_op(self, "fused attention backward chain", _STATS,
                                (q, k, v, do, shape1, shape2, list(masks), limits),
                                (q, k, v, do, shape1, shape2, masks, limits, extras))

    def fast(self, q, k, v, do, shape1, shape2, masks, limits=()) -> Any:
        """(dv, dq, dk) from two flash calls (long sequences, causal or no mask) or the
        chain's math as direct torch calls, or None when a run-time check fails."""
        if not _same_batch(q, tuple(q.shape), k, v) or do.dtype != q.dtype or \
                any(x.dtype != q.dtype for x in masks):
            return None
        *b, mq, d = q.shape
        s, dv = k.shape[-2], v.shape[-1]
        scores = (*b, mq, s)
        if k.shape[-1] != d or v.shape[-2] != s or 0 in (mq, s, d) \
                or tuple(do.shape) != (*b, mq, dv) \
                or (shape2 is not None and _sizes(shape2) != list(scores)):
            return None
        view = scores if shape1 is None else tuple(_sizes(shape1))
        if len(view) < 2 or view[-1] != s or view[-2] < 1 or mq % view[-2] \
                or math.prod(view) != math.prod(scores):
            return None
        lq = view[-2]
        if limits and ([int(n) for n in limits] != [lq, s] or masks):
            return None
        if not all(_broadcasts_into(tuple(x.shape), view) for x in masks):
            return None
        causal = bool(limits) or (self.const_causal and masks[0].shape == (lq, s))
        if s < FLASH_MIN_KEYS or not (causal or not masks):
            return self.direct(q, k, v, do, view, masks, bool(limits))
        g, bk = mq // lq, math.prod(b)
        nb, nh = (math.prod(b[:-1]), b[-1]) if len(b) > 1 else (bk, 1)
        q4, k4, v4, do4 = (_unit_last(x.reshape(nb, nh * n, rows, x.shape[-1]))
                           for x, n, rows in ((q, g, lq), (k, 1, s), (v, 1, s), (do, g, lq)))
        out, lse = _FLASH(q4, k4, v4, 0.0, causal, scale=self.scale)
        gq, gk, gv = _FLASH_BWD(do4, q4, k4, v4, out, lse, 0.0, causal, scale=self.scale)
        return gv.reshape(v.shape), gq.reshape(q.shape), gk.reshape(k.shape)

    def direct(self, q, k, v, do, view, masks, band) -> tuple:
        """The chain's ops as the op kernels compute them (the same torch calls, the same
        roundings), without the per-step work of the executor; the scores are updated in
        place. ``band``: add the causal band the fused mask program built."""
        bh = math.prod(q.shape[:-2])
        q3, k3, v3, do3 = (x.reshape(bh, *x.shape[-2:]) for x in (q, k, v, do))
        # torch.matmul of >2-D operands is this bmm on the flattened batch (and the Mul
        # kernel's q * c, the scale's bits as a Python float)
        s = torch.bmm(q3 * self.scale if self.scale != 1.0 else q3, k3.mT)
        sv = s.view(view)
        if band:
            sv.add_(causal_band(view[-2], view[-1]))
        for m in masks:
            sv.add_(m)
        p = torch.softmax(sv, -1).view(s.shape)
        gv = torch.bmm(p.mT, do3)
        ds = _SOFTMAX_BWD(torch.bmm(do3, v3.mT), p, -1, torch.float32)
        if self.scale != 1.0:
            ds.mul_(self.scale)
        return (gv.view(k.shape[:-1] + v.shape[-1:]), torch.bmm(ds, k3).view(q.shape),
                torch.bmm(ds.mT, q3).view(k.shape))

    def op_by_op(self, *values) -> tuple:
        """The chain's own kernels, one after the other (what an unfused graph runs)."""
        vals = run_chain(self.slots, self.chain, values)
        return tuple(vals[s] for s in self.outs)
