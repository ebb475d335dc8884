"""Padding-safety analysis: does padding the bucketed dims leave the valid region exact?

[Note: padding safety]
Bucketing pads a dynamic dim from its real size n up to a bucket size b and slices the
outputs back to n. That is exact only if no value in the valid region ever reads the
padded tail. The analysis walks the symbolic aten graph (the one AOTAutograd produces for
the Dynamo graph, with sizes as sympy expressions) and tracks, for every tensor:

* its *padded dims*: dims whose size expression contains a bucketed symbol;
* what its padded tail holds: ZERO (inputs are zero-padded, and zero-preserving ops keep
  it so) or ANY (anything, possibly inf/nan).

Elementwise ops, views, row-wise norms, matmuls over unpadded contraction dims, causal
attention over a padded sequence, and reductions over other dims keep the valid region
exact. Sums and matmuls that contract a padded dim are exact only when the tail is ZERO.
Softmax, max, mean, sort... over a padded dim, and any op the analysis does not know that
touches a padded dim, are *not proven*: the caller compiles that size exactly and reports
the reason (``UnsafePadding``). Output dims must be ``bucketed size + constant`` so that slicing
``[:n + c]`` recovers the valid region.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, statically_known_true

from npu_inductor.lowering.registry import bind
from npu_inductor.padding_masks import NEG, KnownTails, iota_dim
from npu_inductor.padding_masks import ZERO as KNOWN_ZERO

aten = torch.ops.aten
prims = torch.ops.prims

ZERO, ANY = "zero", "any"


@dataclass(frozen=True)
class TailSlice:
    """``x[..., -k:]`` along a padded dim by an int input ``k`` (transformers'
    ``logits_to_keep``), or by a constant ``k >= 1`` (``x[:, -1:]``; Dynamo specializes an
    int input of 1): proven exact once rewritten per call (``bucket_tails``)."""

    node: str  # the slice node of the symbolic graph
    dim: int
    keep: sympy.Symbol | int  # k's symbol (an int input of the graph), or k itself
    size: sympy.Symbol | int  # the slice's (unbacked) size symbol, or k (static)
    padded: sympy.Symbol  # the bucketed symbol of the sliced dim


@dataclass(frozen=True)
class SafetyReport:
    safe: bool
    reason: str = ""
    node: str = ""
    tail_slices: tuple[TailSlice, ...] = ()

    def __str__(self) -> str:
        return "padding is exact" if self.safe else f"not proven at {self.node}: {self.reason}"


class UnsafePadding(Exception):
    def __init__(self, node: torch.fx.Node, reason: str) -> None:
        super().__init__(reason)
        self.node_name = node.name
        self.reason = f"{node.target}: {reason}"


# f(0) == 0: a zero tail stays zero.
_ZERO_PRESERVING_UNARY = {
    aten.neg.default, aten.relu.default, aten.abs.default, aten.sin.default, aten.tan.default,
    aten.tanh.default, aten.sqrt.default, aten.sign.default, aten.silu.default,
    aten.gelu.default, aten.erf.default, aten.asin.default, aten.atan.default,
    aten.sinh.default, aten.expm1.default, aten.log1p.default, aten.trunc.default,
    aten.floor.default, aten.ceil.default, aten.round.default, aten.clone.default,
    aten.alias.default, aten._to_copy.default, prims.convert_element_type.default,
    aten.leaky_relu.default, aten.hardtanh.default, aten.hardswish.default,
}
_VIEWS = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default,
    aten.transpose.int, aten.t.default, aten.expand.default, aten.unsqueeze.default,
    aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.clone.default,
    aten.alias.default, aten.contiguous.default, aten.detach.default,
}
# new tensors shaped like their (padded) input: what their tail holds
_LIKE = {
    aten.zeros_like.default: ZERO, aten.new_zeros.default: ZERO, aten.ones_like.default: ANY,
    aten.full_like.default: ANY, aten.empty_like.default: ANY, aten.new_ones.default: ANY,
    aten.new_full.default: ANY, aten.new_empty.default: ANY, aten.rand_like.default: ANY,
    aten.randn_like.default: ANY,
}
ATTENTION_OPS = {
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_flash_attention.default,
    aten.scaled_dot_product_attention.default,
}
# reductions: (dims argument index or None for "all dims", exact over a ZERO tail?)
_REDUCTIONS = {
    aten.sum.dim_IntList: (1, True), aten.sum.default: (None, True),
    aten.mean.dim: (1, False), aten.mean.default: (None, False),
    aten.amax.default: (1, False), aten.amin.default: (1, False),
    aten.max.dim: (1, False), aten.min.dim: (1, False), aten.prod.dim_int: (1, False),
    aten.var.correction: (1, False), aten.std.correction: (1, False),
    aten.argmax.default: (1, False), aten.argmin.default: (1, False),
    aten.any.dim: (1, False), aten.any.dims: (1, False), aten.all.dim: (1, False),
    aten.logsumexp.default: (1, False), aten._softmax.default: (1, False),
    aten._log_softmax.default: (1, False), aten.sort.default: (1, False),
    aten.topk.default: (2, False), aten.cumsum.default: (1, True),
}


def _free(expr: Any) -> set:
    if isinstance(expr, torch.SymInt):
        return set(expr.node.expr.free_symbols)
    if isinstance(expr, sympy.Expr):
        return set(expr.free_symbols)
    return set()


def padded_dims(val: Any, symbols: set) -> set[int]:
    if not isinstance(val, torch.Tensor):
        return set()
    return {d for d, s in enumerate(val.shape) if _free(s) & symbols}


class _Analysis:
    def __init__(self, symbols: set, zero_inputs: bool = True) -> None:
        self.symbols = symbols
        self.tail: dict[torch.fx.Node, str] = {}
        self.zero_inputs = zero_inputs
        self.tail_slices: list[TailSlice] = []
        # per-dim constants of the tails (attention masks): padding_masks.py
        self.known = KnownTails(self.padded, lambda n: self.tail_of(n) == ZERO)

    def padded(self, node: Any) -> set[int]:
        return padded_dims(node.meta.get("val"), self.symbols) if isinstance(
            node, torch.fx.Node) else set()

    def tail_of(self, node: Any) -> str | None:
        """ZERO/ANY for a tensor with padded dims, None for an unpadded value."""
        if not isinstance(node, torch.fx.Node) or not self.padded(node):
            return None
        return self.tail.get(node, ANY)

    def run(self, gm: torch.fx.GraphModule) -> None:
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                self.tail[node] = ZERO if self.zero_inputs else ANY
            elif node.op == "call_function":
                self.tail[node] = self.visit(node)
                self.known.visit(node)

    # ---- rules -------------------------------------------------------------------------
    def visit(self, node: torch.fx.Node) -> str:
        t = node.target
        inputs = [a for a in node.all_input_nodes]
        tails = [self.tail_of(a) for a in inputs]
        if not any(self.padded(a) for a in inputs):
            return ANY  # created here (e.g. arange(n), slicing a buffer to n): tail is data
        if isinstance(node.meta.get("val"), (int, float, bool, torch.SymInt, torch.SymFloat,
                                             torch.SymBool)):
            return ANY  # a size or scalar (sym_size.int, ...): no tensor data
        if t is operator.getitem:
            return self.tail.get(node.args[0], ANY)
        if t in _LIKE:
            return _LIKE[t]
        if t in _ZERO_PRESERVING_UNARY or t in _VIEWS:
            return tails[0] or ANY
        if t in (aten.mul.Tensor, aten.mul.Scalar, aten.div.Scalar):
            return self._mul(node, tails)
        if t in (aten.add.Tensor, aten.sub.Tensor, aten.add.Scalar, aten.sub.Scalar):
            return ZERO if all(x == ZERO for x in tails) and self._no_scalar(node) else ANY
        if isinstance(t, torch._ops.OpOverload) and torch.Tag.pointwise in t.tags:
            return ANY
        if t is aten._softmax.default and self._masked_softmax(node):
            return ANY
        if t in _REDUCTIONS:
            return self._reduction(node, tails)
        if t in (aten.mm.default, aten.bmm.default, aten.addmm.default):
            return self._matmul(node)
        if t in ATTENTION_OPS:
            return self._attention(node)
        if t in (aten.slice.Tensor, aten.select.int, aten.narrow.default):
            return self._slice(node, tails)
        if t is aten.stack.default:  # a new (unpadded) dim: valid rows stack valid rows
            return ZERO if all(x == ZERO for x in tails) else ANY
        if t in (aten.cat.default, aten.split_with_sizes.default, aten.split.Tensor):
            return self._along_unpadded(node, tails)
        if t is aten.native_layer_norm.default:
            return self._last_dims(node, len(node.args[1]), "layer_norm normalizes")
        if t is aten.index.Tensor:
            return self._index(node)
        if t is aten.gather.default:
            return ANY if node.args[1] % max(node.args[0].meta["val"].dim(), 1) not in \
                self.padded(node.args[0]) else self._fail(node, "gathers along a padded dim")
        if t is aten.embedding.default:
            return ANY if 0 not in self.padded(node.args[0]) else self._fail(
                node, "embedding table rows are padded")
        if t is aten._native_batch_norm_legit_no_training.default:
            return ANY if 1 not in self.padded(node.args[0]) else self._fail(
                node, "channels are padded")
        if t is aten.convolution.default:
            return ANY if self.padded(node.args[0]) <= {0} else self._fail(
                node, "convolution over a padded channel/spatial dim")
        return self._fail(node, "op not known to the padding-safety analysis")

    def _fail(self, node: torch.fx.Node, why: str) -> str:
        raise UnsafePadding(node, why)

    @staticmethod
    def _no_scalar(node: torch.fx.Node) -> bool:
        return all(isinstance(a, torch.fx.Node) or a == 0 for a in node.args[:2])

    def _mul(self, node: torch.fx.Node, tails: list) -> str:
        others = [a for a in node.args[:2] if isinstance(a, torch.fx.Node)]
        if any(x == ZERO for x in tails) and all(self.tail_of(a) in (ZERO, None)
                                                 for a in others):
            return ZERO
        return ANY

    def _reduction(self, node: torch.fx.Node, tails: list) -> str:
        src = node.args[0]
        index, zero_ok = _REDUCTIONS[node.target]
        rank = src.meta["val"].dim()
        dims = node.args[index] if index is not None and len(node.args) > index else None
        if isinstance(dims, int):
            dims = [dims]
        dims = set(range(rank)) if not dims else {d % max(rank, 1) for d in dims}
        if dims & self.padded(src):
            if zero_ok and self.tail_of(src) == ZERO:
                return ZERO
            return self._fail(node, f"reduces over padded dim(s) {sorted(dims & self.padded(src))}"
                              + (" whose tail is not known zero" if zero_ok else ""))
        return ZERO if zero_ok and tails[0] == ZERO else ANY

    def _matmul(self, node: torch.fx.Node) -> str:
        a, b = node.args[-2], node.args[-1]
        ka, kb = a.meta["val"].dim() - 1, b.meta["val"].dim() - 2
        if ka in self.padded(a) or kb in self.padded(b):
            if self.known.of(a).get(ka) == KNOWN_ZERO or self.known.of(b).get(kb) == KNOWN_ZERO:
                return ANY
            return self._fail(node, "contracts a padded dim whose tail is not known zero")
        bias = node.args[0] if node.target is aten.addmm.default else None
        zero_rows = self.tail_of(a) == ZERO and self.tail_of(b) is None and bias is None
        return ZERO if zero_rows else ANY

    def _attention(self, node: torch.fx.Node) -> str:
        args = bind(node.target, node.args, node.kwargs)
        k = args["key"]
        mask = args.get("attn_mask", args.get("attn_bias"))
        key_padded = (k.meta["val"].dim() - 2) in self.padded(k)
        if not key_padded or (args.get("is_causal") and mask is None):
            return ANY
        if mask is None:
            return self._fail(node, "attends over padded keys without a causal mask")
        masked = NEG if mask.meta["val"].dtype.is_floating_point else KNOWN_ZERO
        known, r = self.known.of(mask), mask.meta["val"].dim()
        if known.get(r - 1) != masked:
            return self._fail(node, "attends over padded keys that its mask does not mask")
        if known.get(r - 2) == masked:
            return self._fail(node, "its mask masks whole padded query rows (NaN rows)")
        return ANY

    def _masked_softmax(self, node: torch.fx.Node) -> bool:
        """Softmax over a padded dim whose tail is a large negative constant (an additive
        attention mask): padded entries get weight exactly 0. Refused when whole padded
        rows would be masked (NaN)."""
        src = node.args[0]
        rank = src.meta["val"].dim()
        dim = node.args[1] % rank
        known = self.known.of(src)
        if dim not in self.padded(src) or known.get(dim) != NEG:
            return False
        if any(c == NEG for d, c in known.items() if d != dim):
            self._fail(node, "softmax rows of the padded tail are fully masked (NaN rows)")
        return True

    def _index(self, node: torch.fx.Node) -> str:
        """``src[i0, i1, ...]``: a padded dim of ``src`` may be indexed only by an
        ``arange`` over a padded size (valid positions then read valid positions)."""
        src, indices = node.args[0], node.args[1]
        padded = self.padded(src)
        if any(i is None for i in indices) and padded:
            return self._fail(node, "indexing with None slices over a padded tensor")
        for d, idx in enumerate(indices):
            if d in padded and (iota_dim(idx) is None or iota_dim(idx) not in self.padded(idx)):
                return self._fail(node, f"indexes padded dim {d} by values not known in range")
        return ANY

    def _slice(self, node: torch.fx.Node, tails: list) -> str:
        src = node.args[0]
        dim = node.args[1] % src.meta["val"].dim() if len(node.args) > 1 else 0
        if dim not in self.padded(src):
            return tails[0] or ANY
        start = _value(node.args[2]) if len(node.args) > 2 else 0
        if not prefix_dim(_expr(src.meta["val"].shape[dim]), self.symbols):
            return self._fail(node, "slices a dim that merges a padded dim with others")
        if node.target is aten.select.int and start == 0:  # the first row: valid (n >= 1)
            return ANY
        if _free(start) & self.symbols or (node.target is aten.select.int):
            return self._fail(node, "indexes a padded dim relative to its size")
        if not _nonnegative(start):  # x[:, -1:], x[:, -k:]: the padded tail's last rows
            return self._tail_slice(node, dim, start) or self._fail(
                node, "slices a padded dim from its end")
        end = _value(node.args[3]) if len(node.args) > 3 else None
        if node.target is aten.slice.Tensor and not self._prefix_end(end):
            return self._fail(node, f"slices a padded dim up to {end}, not its valid end")
        if node.target is aten.slice.Tensor and len(node.args) > 4 and node.args[4] != 1:
            return self._fail(node, "strided slice along a padded dim")
        return tails[0] or ANY

    def _tail_slice(self, node: torch.fx.Node, dim: int, start: Any) -> str | None:
        """``x[:, -k:]`` with ``k`` an int input or a constant >= 1: each call rewrites it
        (``bucket_tails``):
        k = 0 keeps the whole dim (a padded dim, sliced back to n), 1 <= k <= n gathers rows
        n-k .. n-1 (all valid) by an index input; other k compile exactly. The slice's size
        symbol becomes a padded symbol here (conservative for the gather: its k rows are
        all valid), and an output dim ``size + c`` is sliced back."""
        end = _value(node.args[3]) if len(node.args) > 3 else None
        size = node.meta["val"].shape[dim]
        if node.target is not aten.slice.Tensor or (len(node.args) > 4 and node.args[4] != 1):
            return None
        if not (end is None or (isinstance(end, int) and end >= 2 ** 62)):
            return None
        src_size = _expr(node.args[0].meta["val"].shape[dim])
        padded = next(x for x in self.symbols if x in src_size.free_symbols)
        if src_size != padded:
            return None  # the rewrite gathers rows n-k .. n-1 of a dim of size exactly n
        if isinstance(start, int):  # x[:, -k:] with a constant k: its size k is static
            if _expr(size) != -start:
                return None
            self.tail_slices.append(TailSlice(node.name, dim, -start, -start, padded))
            return ANY
        keep = -_expr(start) if isinstance(start, torch.SymInt) else None
        if keep is None or not keep.is_Symbol or keep in self.symbols:
            return None
        if not (isinstance(size, torch.SymInt) and free_unbacked_symbols(size)
                and _expr(size).is_Symbol):
            return None
        self.tail_slices.append(TailSlice(node.name, dim, keep, _expr(size), padded))
        self.symbols.add(_expr(size))
        return ANY

    def _prefix_end(self, end: Any) -> bool:
        """The end of a slice that keeps a prefix of the valid region: the whole dim
        (None or a huge int), or ``s + c`` with ``c <= 0``."""
        if end is None or (isinstance(end, int) and end >= 2 ** 62):
            return True
        expr = _expr(end) if isinstance(end, torch.SymInt) else None
        offset = None if expr is None else prefix_offset(expr, self.symbols)
        return offset is not None and offset.is_Integer and int(offset) <= 0

    def _along_unpadded(self, node: torch.fx.Node, tails: list) -> str:
        first = node.args[0][0] if node.target is aten.cat.default else node.args[0]
        rank = first.meta["val"].dim()
        dim = (node.args[-1] if len(node.args) > 1 else 0) % max(rank, 1)
        operands = node.args[0] if node.target is aten.cat.default else [node.args[0]]
        if any(dim in self.padded(o) for o in operands):
            return self._fail(node, f"concatenates or splits along padded dim {dim}")
        return ZERO if all(x == ZERO for x in tails) else ANY

    def _last_dims(self, node: torch.fx.Node, count: int, what: str) -> str:
        src = node.args[0]
        rank = src.meta["val"].dim()
        if set(range(rank - count, rank)) & self.padded(src):
            return self._fail(node, f"{what} over a padded dim")
        return ANY


def _value(arg: Any) -> Any:
    """A slice bound: an FX node computing a size stands for its (symbolic) value."""
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


def _nonnegative(start: Any) -> bool:
    """Counts from the start of the dim (a negative start counts from its padded end). A
    symbolic start counts when the graph's guards prove it ``>= 0``: ``x[:, -k:]`` traced
    with ``k = 0`` (not size-oblivious: the first compile after ``torch._dynamo.reset()``)
    guards ``-k >= 0``, so its graph serves only ``k <= 0``, i.e. ``x[:, |k|:]``."""
    if isinstance(start, int):
        return start >= 0
    return isinstance(start, torch.SymInt) and (
        bool(_expr(start).is_nonnegative) or statically_known_true(start >= 0))


def check_outputs(gm: torch.fx.GraphModule, symbols: set, tails: set = frozenset()) -> None:
    """Each padded output dim must be ``s + c`` (sliceable back to the valid region), and
    no output size may depend on data (an unbacked size: slicing back cannot compute it)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    for node in _flatten(out.args[0]):
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            continue
        for size in val.shape:
            if free_unbacked_symbols(size) - tails:
                raise UnsafePadding(node, f"output size {size} depends on data, so slicing "
                                          "cannot recover it")
            if _free(size) & symbols and not prefix_dim(_expr(size), symbols):
                raise UnsafePadding(node, f"output size {size} is not `bucketed size + "
                                          "constant`, so slicing cannot recover it")


def _expr(size: Any) -> sympy.Expr:
    return size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(size)


def prefix_dim(expr: sympy.Expr, symbols: Iterable) -> bool:
    """``s + c`` for one bucketed symbol ``s`` and an offset ``c``: the valid region is the
    prefix ``[:n + c]`` (a dim that merged a padded dim with others, e.g. ``b*s``, is not).
    ``c`` is an integer, or an expression of backed unpadded symbols (sizes and int inputs
    the call passes unchanged, e.g. ``s + k`` of ``x[:, -k:]`` under a ``k <= 0`` guard):
    it has the same value padded or not, and slicing back evaluates it per call."""
    return prefix_offset(expr, symbols) is not None


def prefix_offset(expr: sympy.Expr, symbols: Iterable) -> sympy.Expr | None:
    """``c`` of a ``s + c`` dim (see ``prefix_dim``), or None."""
    syms = [s for s in symbols if s in expr.free_symbols]
    if len(syms) != 1:
        return None
    offset = sympy.simplify(expr - syms[0])
    if offset.is_Integer:
        return offset
    if not offset.is_polynomial(*offset.free_symbols) or free_unbacked_symbols(offset) or \
            offset.free_symbols & set(symbols):
        return None
    return offset


def _flatten(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return [y for item in x for y in _flatten(item)]
    return [x]


def analyze(gm: torch.fx.GraphModule, symbols: set) -> SafetyReport:
    """Prove (or not) that zero-padding ``symbols``' dims keeps ``gm``'s valid region exact."""
    analysis = _Analysis(set(symbols))
    try:
        analysis.run(gm)
        check_outputs(gm, analysis.symbols, {t.size for t in analysis.tail_slices})
    except UnsafePadding as e:
        return SafetyReport(False, e.reason, e.node_name)
    return SafetyReport(True, tail_slices=tuple(analysis.tail_slices))
