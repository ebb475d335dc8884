"""Attention  ==>  ``npu::flash_attention`` (GE ``PromptFlashAttention``, or
``IncreFlashAttention`` for a query of length 1).

``_scaled_dot_product_flash_attention_for_cpu`` (what ``F.scaled_dot_product_attention``
becomes on CPU when it is not decomposed) maps over directly. Both the explicit form
(BERT) and AOTAutograd's decomposition of ``scaled_dot_product_attention`` (scale split
over q and k^T, GQA expand, causal mask built from ``arange`` and folded to a constant,
safe-softmax fix-up) reduce to

    s = view(bmm(view(q * c1), view(permute(k, ..swap last two..) * c2)), [B, N, Sq, Skv])
    p = softmax(s / c3 + mask, -1)            (either scaling, mask optional)
    p = where(all(s + mask == -inf), 0, p)    (optional safe-softmax fix-up)
    o = view(bmm(view(p), view(v)), [B, N, Sq, D])
      ==>  o = flash_attention(q, k, v, mask, scale=c1*c2/c3, causal)

A folded mask equal to the causal mask (0 on and below the diagonal, -inf above) becomes
``causal=True``. GQA's ``view(expand(unsqueeze(kv, 2)))`` is stripped: the fused op takes
the key/value heads as they are (``num_key_value_heads``). When q, k and v are all
``permute(x, [0, 2, 1, 3])`` the op takes x in BSND layout and the transposes go away.

Dtypes follow the target SoC's kernels (``npu_inductor/ge/soc.py``): on 910B
PromptFlashAttention and IncreFlashAttention have fp16/bf16 kernels only, so fp16/bf16
attention fuses and fp32 attention stays BatchMatMulV2 + SoftmaxV2, unless
``precision_mode`` lets fp32 be computed in lower precision (``allow_fp32_to_fp16``,
``allow_mix_precision*``, ``force_fp16``, ``allow_fp32_to_bf16``): then the fused op runs in
fp16 (bf16 for the ``*bf16`` modes) with casts around it. Both choices are recorded as
device decisions (``npu_inductor.device_report``). Training graphs would need
FlashAttentionScore, whose backward AOTAutograd has already decomposed, so the fusion does
not fire there (logged). Fully masked rows give 0 (torch's SDPA), where the explicit
pattern would give NaN.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch
from torch.fx import GraphModule, Node
from torch.fx.experimental.symbolic_shapes import statically_known_true

from npu_inductor import ops  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.config import NpuConfig, target_soc
from npu_inductor.ge import soc as soc_kernels
from npu_inductor.graph_passes.common import (
    aten,
    bump,
    call,
    const_value,
    dtype,
    finish,
    is_op,
    is_training,
    log,
    only_used_by,
    permutation,
    shape,
    skip,
)

npu = torch.ops.npu
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
_BSND = [0, 2, 1, 3]
_IDENTITY = [0, 1, 2, 3]
_SDPA = aten._scaled_dot_product_flash_attention_for_cpu.default


@dataclass
class Operand:
    """A BNSD operand: ``permute(node, perm)`` (perm identity: ``node`` itself)."""

    node: Node
    perm: list[int]


class _Match:
    def __init__(self) -> None:
        self.inner: list[Node] = []
        self.scale = 1.0

    def take(self, node: Node) -> Node:
        self.inner.append(node)
        return node.args[0]

    def strip_scale(self, node: Node) -> Node:
        """x * c  ->  x (c folded into the scale)."""
        if is_op(node, aten.mul.Scalar, aten.mul.Tensor) and isinstance(node.args[1],
                                                                        (int, float)):
            self.scale *= float(node.args[1])
            return self.take(node)
        return node

    def strip_view(self, node: Node) -> Node | None:
        return self.take(node) if is_op(node, *_VIEWS) else None


def _operand(node: Node) -> Operand:
    perm = permutation(node)
    if perm is not None and len(perm[1]) == 4:
        return Operand(*perm)
    return Operand(node, list(_IDENTITY))


def _strip_gqa(m: _Match, node: Node) -> Node:
    """view(expand(unsqueeze(kv, 2), [B, Hkv, R, S, D]), [B, Hkv*R, S, D])  ->  kv."""
    if not is_op(node, *_VIEWS):
        return node
    exp = node.args[0]
    copy = None
    if is_op(exp, aten.clone.default):  # transformers' repeat_kv reshapes a contiguous copy
        copy, exp = exp, exp.args[0]
    if not is_op(exp, aten.expand.default) or not is_op(exp.args[0], aten.unsqueeze.default):
        return node
    uns = exp.args[0]
    kv = uns.args[0]
    if uns.args[1] != 2 or len(shape(kv)) != 4:
        return node
    b, h, s, d = shape(kv)
    if list(exp.args[1])[:2] != [b, h] or list(exp.args[1])[3:] != [s, d]:
        return node
    if list(shape(node)) != [b, h * list(exp.args[1])[2], s, d]:
        return node
    m.inner += [node, exp, uns] + ([copy] if copy is not None else [])
    return kv


def _key_operand(m: _Match, kt: Node) -> Operand | None:
    """k^T as a permute of something  ->  k as an Operand (GQA stripped)."""
    perm = permutation(kt)
    if perm is None or len(perm[1]) != 4:
        return None
    m.inner.append(kt)
    base, p = perm
    pk = p[:2] + [p[3], p[2]]
    if pk == _IDENTITY:
        return _operand(_strip_gqa(m, base))
    return Operand(base, pk)


def _merges_heads(flat: tuple, full: tuple) -> bool:
    """``flat`` is ``full`` [B, N, S, D] with B and N merged: [B*N, S, D]."""
    return len(full) == 4 and list(flat) == [full[0] * full[1], *full[2:]]


def _gqa_copy(m: _Match, copy: Node, flat: tuple) -> Node | None:
    """clone(expand(unsqueeze(kv, 2), [B, Hkv, R, S, D])) viewed as [B*Hkv*R, S, D] (the
    eager repeat_kv of transformers)  ->  kv [B, Hkv, S, D]."""
    exp = copy.args[0]
    if not is_op(exp, aten.expand.default) or not is_op(exp.args[0], aten.unsqueeze.default):
        return None
    kv = exp.args[0].args[0]
    if exp.args[0].args[1] != 2 or len(shape(kv)) != 4 or len(shape(exp)) != 5:
        return None
    b, h, r, s, d = shape(exp)
    if list(flat) != [b * h * r, s, d] or shape(kv) != (b, h, s, d):
        return None
    m.inner += [copy, exp, exp.args[0]]
    return kv


def _bmm_operand(m: _Match, node: Node) -> Node | None:
    """view(x, [B*N, S, D]) -> x (4-D)."""
    x = m.strip_view(node)
    if is_op(x, aten.clone.default):  # the contiguous copy a strided x needs to be viewed
        if len(shape(x)) == 5:
            return _gqa_copy(m, x, shape(node))
        x = m.take(x)
    return x if x is not None and _merges_heads(shape(node), shape(x)) else None


def _cast_of(node: object, to: torch.dtype | None = None) -> Node | None:
    """_to_copy(x, dtype) (to ``to`` when given) -> x."""
    if is_op(node, aten._to_copy.default, torch.ops.prims.convert_element_type.default) and \
            set(node.kwargs) <= {"dtype", "layout", "device"}:
        want = node.kwargs.get("dtype", node.args[1] if len(node.args) > 1 else None)
        if to is None or want == to:
            return node.args[0]
    return None


def _logits(m: _Match, logits: Node) -> tuple[Node, Node | None] | None:
    """softmax input -> (the [B, N, Sq, Skv] bmm view, additive mask or None)."""
    mask = None
    if is_op(logits, aten.add.Tensor) and logits.kwargs.get("alpha", 1) == 1:
        a, b = logits.args[:2]
        scores, mask = (a, b) if _is_scores(a) else (b, a)
        if not isinstance(mask, Node) or not _is_scores(scores):
            return None
        m.inner.append(logits)
        logits = scores
    if is_op(logits, aten.div.Tensor) and isinstance(logits.args[1], (int, float)):
        m.scale /= float(logits.args[1])
        logits = m.take(logits)
    logits = m.strip_scale(logits)
    return (logits, mask) if is_op(logits, *_VIEWS) else None


def _is_scores(node: object) -> bool:
    while is_op(node, aten.div.Tensor, aten.mul.Tensor, aten.mul.Scalar):
        if not isinstance(node.args[1], (int, float)):
            return False
        node = node.args[0]
    return is_op(node, *_VIEWS) and is_op(node.args[0], aten.bmm.default)


def _safe_softmax_source(m: _Match, p: Node) -> Node:
    """where(cond, 0, softmax) -> softmax (the fix-up SDPA's decomposition adds)."""
    if not is_op(p, aten.where.self) or not is_op(p.args[2], aten._softmax.default):
        return p
    cond, zero = p.args[:2]
    if not is_op(zero, aten.full_like.default) or zero.args[1] != 0:
        return p
    chain, node = [p, zero], cond
    while is_op(node, aten.logical_not.default, aten.any.dim, aten.eq.Scalar):
        chain.append(node)
        node = node.args[0]
    if node is not p.args[2].args[0]:
        return p
    m.inner += chain
    return p.args[2]


def match_attention(out: Node) -> dict | None:
    """The attention pattern ending in ``out = view(bmm(p, v), [B, N, Sq, D])`` or None."""
    m = _Match()
    if not is_op(out, *_VIEWS) or len(shape(out)) != 4 or not is_op(out.args[0],
                                                                   aten.bmm.default):
        return None
    bmm2 = out.args[0]
    if not _merges_heads(shape(bmm2), shape(out)):
        return None
    m.inner.append(bmm2)
    p, v4 = _bmm_operand(m, bmm2.args[0]), _bmm_operand(m, bmm2.args[1])
    if p is None or v4 is None:
        return None
    soft = _safe_softmax_source(m, p)
    back = _cast_of(soft, dtype(out))  # softmax in fp32 and back (transformers' eager code)
    if back is not None and is_op(back, aten._softmax.default):
        m.inner.append(soft)
        soft = back
    if not is_op(soft, aten._softmax.default) or soft.args[1] not in (-1, 3) or soft.args[2]:
        return None
    logits = m.take(soft)
    up = _cast_of(logits, torch.float32)
    if up is not None and dtype(up) == dtype(out):
        m.inner.append(logits)
        logits = up
    found = _logits(m, logits)
    if found is None:
        return None
    s4, mask = found
    bmm1 = m.take(s4)
    if not is_op(bmm1, aten.bmm.default) or not _merges_heads(shape(bmm1), shape(s4)):
        return None
    m.inner.append(bmm1)
    q4, kt4 = _bmm_operand(m, bmm1.args[0]), _bmm_operand(m, bmm1.args[1])
    if q4 is None or kt4 is None:
        return None
    q = _operand(m.strip_scale(q4))
    k = _key_operand(m, m.strip_scale(kt4))
    v = _operand(_strip_gqa(m, v4))
    if k is None or not only_used_by(m.inner, set(m.inner) | {out}):
        return None
    return {"q": q, "k": k, "v": v, "mask": mask, "scale": m.scale, "out": out}


def _is_causal_mask(gm: GraphModule, mask: Node | None, sq: int, skv: int) -> bool:
    """A constant additive mask that is the causal band in every batch/head slice: 0 on and
    below the diagonal, -inf or the dtype's lowest value above (transformers' masks), which
    give the same softmax since no row is fully masked."""
    t = const_value(gm, mask)
    if t is None or tuple(t.shape[-2:]) != (sq, skv) or not t.is_floating_point():
        return False
    if t.dim() > 4 or t.dim() == 3:
        return False
    upper = torch.ones(sq, skv, dtype=torch.bool).triu(1).expand(t.shape)
    return bool((t[upper] <= torch.finfo(t.dtype).min).all() and (t[~upper] == 0).all())


# precision_mode -> the dtype fp32 attention may be computed in (absent: keep fp32)
_LOWER_FP32 = {"allow_fp32_to_fp16": torch.float16, "allow_mix_precision": torch.float16,
               "allow_mix_precision_fp16": torch.float16, "force_fp16": torch.float16,
               "allow_fp32_to_bf16": torch.bfloat16,
               "allow_mix_precision_bf16": torch.bfloat16}


def _ge_op(sq: int, mask: Node | None, causal: bool) -> str:
    """The GE op ``npu::flash_attention`` lowers to (lowering/fused.py). A symbolic ``sq`` is
    not compared with 1: that would guard the graph against a later query of length 1."""
    one = statically_known_true(sq == 1)
    return "IncreFlashAttention" if one and mask is None and not causal else \
        "PromptFlashAttention"


def _compute_dtype(dt: torch.dtype, op: str, config: NpuConfig) -> tuple[torch.dtype | None,
                                                                       str]:
    """The dtype the fused op runs in on the target SoC (None: leave unfused) and why."""
    soc = target_soc(config)
    if soc_kernels.has_kernel(soc, op, query=dt):
        return dt, ""
    lower = _LOWER_FP32.get(config.precision_mode) if dt == torch.float32 else None
    if lower is not None and soc_kernels.has_kernel(soc, op, query=lower):
        return lower, (f"{op} has no {_short(dt)} kernel on {soc}; precision_mode="
                       f"{config.precision_mode} allows computing it in {_short(lower)} with casts")
    return None, (f"{op} has no {_short(dt)} kernel on {soc} (precision_mode="
                  f"{config.precision_mode}): kept as BatchMatMulV2 + SoftmaxV2")


def match_sdpa(out: Node) -> dict | None:
    """``_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=,
    scale=)[0]`` (logsumexp unused) or None."""
    if out.target is not operator.getitem or out.args[1] != 0:
        return None
    sdpa = out.args[0]
    if not is_op(sdpa, _SDPA) or any(u.args[1] != 0 for u in sdpa.users):
        return None
    q, k, v = sdpa.args[:3]
    dropout = sdpa.args[3] if len(sdpa.args) > 3 else sdpa.kwargs.get("dropout_p", 0.0)
    causal = sdpa.args[4] if len(sdpa.args) > 4 else sdpa.kwargs.get("is_causal", False)
    if dropout != 0.0 or len(shape(q)) != 4:
        return None
    scale = sdpa.kwargs.get("scale")
    scale = 1.0 / math.sqrt(shape(q)[-1]) if scale is None else scale
    gqa = _Match()  # repeat_kv's expanded key/value heads: the fused op takes them as they are
    k, v = _strip_gqa(gqa, k), _strip_gqa(gqa, v)
    if not only_used_by(gqa.inner, set(gqa.inner) | {sdpa}):
        k, v = sdpa.args[1:3]
    return {"q": _operand(q), "k": _operand(k), "v": _operand(v), "causal": causal,
            "mask": sdpa.kwargs.get("attn_mask"), "scale": scale, "out": out}


def fuse_attention(gm: GraphModule, config: NpuConfig) -> GraphModule:
    if is_training(gm):
        skip("fuse_attention", gm, "FlashAttentionScore takes fp16/bf16 only and the backward"
             " is already decomposed by AOTAutograd")
        return gm
    for out in list(gm.graph.nodes):
        if out.op != "call_function":
            continue
        m = match_sdpa(out) or match_attention(out)
        if m is not None:
            _rewrite(gm, m, config)
    return finish(gm)


def _materialize(gm: GraphModule, op: Operand, layout: str) -> Node:
    want = _BSND if layout == "BSND" else _IDENTITY
    if op.perm == want:
        return op.node
    return call(gm, aten.permute.default, (op.node, [op.perm[i] for i in want]))


def _rewrite(gm: GraphModule, m: dict, config: NpuConfig) -> None:
    out: Node = m["out"]
    sq = shape(out)[2]
    skv = shape(m["v"].node)[1 if m["v"].perm == _BSND else 2]
    causal = m.get("causal") or _is_causal_mask(gm, m["mask"], sq, skv)
    mask = None if causal and not m.get("causal") else m["mask"]
    if mask is not None and dtype(mask) != dtype(out):
        log.info("fuse_attention: %s left unfused: mask dtype differs", out.name)
        return
    op = _ge_op(sq, mask, causal)
    run_in, why = _compute_dtype(dtype(out), op, config)
    if why:
        soc_kernels.note(gm, "dtype-gate", out.name, why)
    if run_in is None:
        log.info("fuse_attention: %s left unfused: %s", out.name, why)
        return
    operands = (m["q"], m["k"], m["v"])
    layout = "BSND" if all(o.perm == _BSND for o in operands) else "BNSD"
    with gm.graph.inserting_before(out):
        q, k, v = (_to(gm, _materialize(gm, o, layout), run_in) for o in operands)
        fused = call(gm, npu.flash_attention.default,
                     (q, k, v, _to(gm, mask, run_in), m["scale"], causal, layout), like=out)
        fused = _to(gm, fused, dtype(out))
        result = fused if layout == "BNSD" else call(gm, aten.permute.default, (fused, _BSND))
    out.replace_all_uses_with(result)
    bump("fuse_attention")


def _to(gm: GraphModule, node: Node | None, dt: torch.dtype) -> Node | None:
    if node is None or dtype(node) == dt:
        return node
    return call(gm, torch.ops.prims.convert_element_type.default, (node, dt))


def _short(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")
