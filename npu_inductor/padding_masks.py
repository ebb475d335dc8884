"""Per-dim constants in the padded tail: how the padding-safety analysis proves masked
attention exact (BERT-style encoders bucketed over the sequence).

[Note: masked padding]
``padding_safety`` knows, per tensor, whether its whole padded tail is zero. An attention
mask needs more: the mask built from a zero-padded ``attention_mask`` is *masked* where the
**key** index is in the padded tail, whatever the query index. So each tensor also gets
``known``: ``{dim: constant}`` meaning "wherever the index along ``dim`` is in the padded
tail, the value is this constant", with three constants:

* ``"0"``: zero / ``False`` (zero-padded inputs, ``x * 0``, ``a & False``);
* ``"1"``: one / ``True`` (``1 - 0``, ``~False``);
* ``"neg"``: a large negative number (``<= -1e30``: ``torch.finfo(dtype).min`` or ``-inf``),
  what additive masks hold where a key is masked.

The rules follow the ops transformers uses to build masks: ``_to_copy`` to bool, advanced
indexing of the padding mask by ``arange`` (``padding_mask[batch_idx, kv_idx]``),
``&``/``|``/``~``, ``where(mask, 0, min)``, ``(1 - mask) * min``, ``masked_fill``,
comparisons with a scalar, views and broadcasting. Then attention over padded keys is exact
when the mask is ``"neg"`` (additive) or ``"0"`` (boolean) along the key dim: padded keys
get weight exactly 0 (``exp(min - max)`` underflows to 0). The same holds for softmax over a
``"neg"`` dim followed by a matmul contracting that dim (eager attention code).

Assumption (the analysis makes it everywhere a zero tail contracts with another operand):
values in padded tails are finite, so ``0 * x == 0`` and ``neg + x`` stays ``"neg"``. A mask
that would mask a padded *query* row entirely (so its softmax is NaN and NaN reaches later
layers' padded keys) is refused.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import sympy
import torch

aten = torch.ops.aten
prims = torch.ops.prims

ZERO, ONE, NEG = "0", "1", "neg"
NEG_LIMIT = -1e30  # "a large negative constant": finfo(float32/16/bf16).min and -inf qualify
Known = dict[int, str]

_IDENTITY = {
    aten.clone.default, aten.alias.default, aten.contiguous.default, aten.detach.default,
    aten.slice.Tensor,
}
_CASTS = {aten._to_copy.default, prims.convert_element_type.default}
_NOT = {aten.logical_not.default, aten.bitwise_not.default}
_AND = {aten.bitwise_and.Tensor, aten.logical_and.default, aten.mul.Tensor, aten.mul.Scalar}
_OR = {aten.bitwise_or.Tensor, aten.logical_or.default}
_ADD = {aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar}
_COMPARE = {aten.eq.Scalar: operator.eq, aten.ne.Scalar: operator.ne,
            aten.ge.Scalar: operator.ge, aten.gt.Scalar: operator.gt,
            aten.le.Scalar: operator.le, aten.lt.Scalar: operator.lt}
_VALUE = {ZERO: 0.0, ONE: 1.0, NEG: -math.inf}


def const_of(value: Any) -> str | None:
    """The tail constant a Python scalar is, or None."""
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, (int, float)):
        return None
    if value == 0:
        return ZERO
    if value == 1:
        return ONE
    return NEG if value <= NEG_LIMIT else None


def _scalar_node_value(node: Any) -> Any:
    """The value of a 0-d constant tensor node (``scalar_tensor(-inf)``, ``full([], min)``)."""
    if not isinstance(node, torch.fx.Node):
        return node
    if node.target is aten.scalar_tensor.default:
        return node.args[0]
    if node.target is aten.full.default and not list(node.args[0]):
        return node.args[1]
    if node.target in (aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default):
        return 0
    return None


def rank(node: Any) -> int:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val.dim() if isinstance(val, torch.Tensor) else 0


class KnownTails:
    """``known`` for every node of a graph, given the padded dims (``padded(node)``) and
    whole-tail zero facts (``zero_tail(node)``) of the main analysis."""

    def __init__(self, padded: Any, zero_tail: Any) -> None:
        self.padded, self.zero_tail = padded, zero_tail
        self.known: dict[torch.fx.Node, Known] = {}

    def of(self, node: Any) -> Known:
        if not isinstance(node, torch.fx.Node):
            return {}
        if node in self.known:
            return self.known[node]
        return {d: ZERO for d in self.padded(node)} if self.zero_tail(node) else {}

    def at(self, operand: Any, out_dim: int, out_rank: int) -> str | None:
        """The constant ``operand`` holds where the output's ``out_dim`` index is padded
        (broadcasting aligns dims from the right), or None."""
        scalar = _scalar_node_value(operand)
        if scalar is not None:
            return const_of(scalar)
        d = out_dim - (out_rank - rank(operand))
        return self.of(operand).get(d) if d >= 0 else None

    def visit(self, node: torch.fx.Node) -> Known:
        t = node.target
        out = self.of(node)  # what the whole-tail analysis already proved
        if t in _IDENTITY or t in _CASTS or t in _NOT or t in _COMPARE or t in _AND or \
                t in _OR or t in _ADD or t in (aten.where.self, aten.masked_fill.Scalar,
                                               aten.rsub.Scalar):
            out = {**self._pointwise(node), **out}
        elif t in (aten.unsqueeze.default, aten.expand.default, aten.permute.default,
                   aten.transpose.int, aten.view.default, aten._unsafe_view.default,
                   aten.reshape.default, aten.squeeze.dim):
            out = {**self._view(node), **out}
        elif t is aten.index.Tensor:
            out = {**self._index(node), **out}
        elif t is aten._softmax.default:  # weights exactly 0 where the input is masked
            dim = node.args[1] % rank(node)
            out = {dim: ZERO} if self.of(node.args[0]).get(dim) == NEG else out
        out = {d: c for d, c in out.items() if d in self.padded(node)}
        self.known[node] = out
        return out

    # ---- pointwise ---------------------------------------------------------------------
    def _pointwise(self, node: torch.fx.Node) -> Known:
        r = rank(node)
        return {d: c for d in self.padded(node)
                if (c := self._point(node, d, r)) is not None}

    def _point(self, node: torch.fx.Node, d: int, r: int) -> str | None:
        t, args = node.target, node.args
        if t in _IDENTITY:
            return self.at(args[0], d, r) if t is not aten.slice.Tensor or \
                self._slice_keeps_prefix(node) else None
        if t in _CASTS:
            return self._cast(self.at(args[0], d, r), node)
        if t in _NOT:
            return {ZERO: ONE, ONE: ZERO}.get(self.at(args[0], d, r))
        if t in _COMPARE:
            c = self.at(args[0], d, r)
            return None if c is None else (ONE if _COMPARE[t](_VALUE[c], args[1]) else ZERO)
        ops = [self.at(a, d, r) for a in args[:2]]
        if t in _AND:
            return self._and(ops)
        if t in _OR:
            return ONE if ONE in ops else (ZERO if ops == [ZERO, ZERO] else None)
        if t in _ADD:
            return self._add(node, ops)
        if t is aten.rsub.Scalar:  # other - self
            c = self.at(args[0], d, r)
            return const_of(args[1] - _VALUE[c]) if c in (ZERO, ONE) else None
        if t is aten.where.self:
            cond = self.at(args[0], d, r)
            return {ZERO: self.at(args[2], d, r), ONE: self.at(args[1], d, r)}.get(cond)
        if t is aten.masked_fill.Scalar:
            m = self.at(args[1], d, r)
            return {ZERO: self.at(args[0], d, r), ONE: const_of(args[2])}.get(m)
        return None

    @staticmethod
    def _cast(c: str | None, node: torch.fx.Node) -> str | None:
        dtype = node.meta["val"].dtype
        if c == NEG and not dtype.is_floating_point:
            return ONE if dtype == torch.bool else None
        return c

    @staticmethod
    def _and(ops: list) -> str | None:
        if ZERO in ops:
            return None if NEG in ops else ZERO  # 0 * -inf is NaN
        if ops[0] == ONE:
            return ops[1]
        if ops[1] == ONE:
            return ops[0]
        return None

    @staticmethod
    def _add(node: torch.fx.Node, ops: list) -> str | None:
        """``a + alpha * b`` (``-alpha`` for sub): a large negative stays one when the
        other operand is finite (assumed) or large negative with the same sign."""
        sign = node.kwargs.get("alpha", 1) * (
            -1 if node.target in (aten.sub.Tensor, aten.sub.Scalar) else 1)
        a, b = ops
        if a == ZERO and b == ZERO:
            return ZERO
        if (a == NEG and (b != NEG or sign > 0)) or (b == NEG and sign > 0):
            return NEG
        return None

    def _slice_keeps_prefix(self, node: torch.fx.Node) -> bool:
        start = node.args[2] if len(node.args) > 2 else 0
        step = node.args[4] if len(node.args) > 4 else 1
        return start == 0 and step == 1

    # ---- views -------------------------------------------------------------------------
    def _view(self, node: torch.fx.Node) -> Known:
        src = self.of(node.args[0])
        if not src:
            return {}
        t, r_in, r_out = node.target, rank(node.args[0]), rank(node)
        if t is aten.unsqueeze.default:
            u = node.args[1] % r_out
            return {d + (d >= u): c for d, c in src.items()}
        if t is aten.squeeze.dim:
            s = node.args[1] % max(r_in, 1)
            return {d - (d > s): c for d, c in src.items() if d != s}
        if t is aten.expand.default:
            return {d + r_out - r_in: c for d, c in src.items()}
        if t is aten.permute.default:
            perm = [p % r_in for p in node.args[1]]
            return {perm.index(d): c for d, c in src.items()}
        if t is aten.transpose.int:
            a, b = node.args[1] % r_in, node.args[2] % r_in
            swap = {a: b, b: a}
            return {swap.get(d, d): c for d, c in src.items()}
        return self._reshape(node, src)

    def _reshape(self, node: torch.fx.Node, src: Known) -> Known:
        """A view keeps the dims of the longest common suffix of the two shapes."""
        a, b = list(node.args[0].meta["val"].shape), list(node.meta["val"].shape)
        k = 0
        while k < min(len(a), len(b)) and _same(a[-1 - k], b[-1 - k]):
            k += 1
        return {d + len(b) - len(a): c for d, c in src.items() if d >= len(a) - k}

    # ---- indexing ----------------------------------------------------------------------
    def _index(self, node: torch.fx.Node) -> Known:
        """``src[i0, i1, ...]`` (consecutive indices from dim 0): where an index is an
        ``arange`` over a padded dim's size, the output's tail along that arange's dim reads
        ``src``'s tail along the indexed dim."""
        src, indices = node.args[0], node.args[1]
        if any(i is None for i in indices):
            return {}
        out_rank, src_known = rank(node), self.of(src)
        bshape = rank(node) - (rank(src) - len(indices))
        out: Known = {}
        for sd, idx in enumerate(indices):
            iota = iota_dim(idx)
            if iota is not None and sd in src_known:
                out[iota + bshape - rank(idx)] = src_known[sd]
        return {d: c for d, c in out.items() if 0 <= d < out_rank}


def _same(x: Any, y: Any) -> bool:
    ex = x.node.expr if isinstance(x, torch.SymInt) else sympy.Integer(x)
    ey = y.node.expr if isinstance(y, torch.SymInt) else sympy.Integer(y)
    return ex == ey


def iota_dim(node: Any) -> int | None:
    """If ``node`` holds ``i`` at index ``i`` along one dim (an ``arange(n)`` moved through
    ``+ 0``, unsqueeze, prefix slices and expand), that dim; else None."""
    if not isinstance(node, torch.fx.Node):
        return None
    t, args = node.target, node.args
    if t is aten.arange.default or (t is aten.arange.start and args[0] == 0):
        return 0
    if t in (aten.add.Tensor, aten.sub.Tensor) and args[1] == 0:
        return iota_dim(args[0])
    inner = iota_dim(args[0]) if args else None
    if inner is None:
        return None
    if t is aten.unsqueeze.default:
        u = args[1] % rank(node)
        return inner + (inner >= u)
    if t is aten.slice.Tensor and (len(args) < 3 or args[2] == 0) and \
            (len(args) < 5 or args[4] == 1):
        return inner
    if t is aten.expand.default:
        return inner + rank(node) - rank(args[0])
    if t in (aten.clone.default, aten.alias.default, aten._to_copy.default):
        return inner
    return None
