"""Estimated compute of a graph as a function of one bucketed size (for ``"auto"`` buckets).

[Note: bucket cost]
A bucket's cost is not linear in its size: attention over a padded sequence does work
quadratic in it (a ``[b, h, s, d] x [b, h, d, s]`` product), the projections and the MLP
linear work. The ``"auto"`` policy therefore chooses buckets that minimise the *estimated
compute* of the recorded sizes padded to their buckets, not the padded element count:
``graph_cost`` sums, over the symbolic aten graph, ``2*M*N*K`` per matmul, ``2*B*H*L*S*(E+Ev)``
per attention and the elements every other (non-view) op reads and writes, as a
sympy expression in the bucketed symbol (other symbols at the sizes they were traced with).
The estimate only ranks buckets; its unit does not matter.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import sympy
import torch

from npu_inductor.padding_safety import _VIEWS, ATTENTION_OPS

aten = torch.ops.aten
_MATMULS = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default}


def _sizes(val: Any) -> list[sympy.Expr] | None:
    if not isinstance(val, torch.Tensor):
        return None
    return [s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(int(s))
            for s in val.shape]


def _numel(shape: list[sympy.Expr]) -> sympy.Expr:
    return sympy.Mul(*shape) if shape else sympy.Integer(1)


def _node_cost(node: torch.fx.Node) -> sympy.Expr:
    t = node.target
    if t in _MATMULS:
        a, b = (_sizes(x.meta.get("val")) for x in node.args[-2:])
        return 2 * _numel(a) * b[-1]  # (batch *) M * K, times N
    if t in ATTENTION_OPS:
        q, k, v = (_sizes(x.meta.get("val")) for x in node.args[:3])
        return 2 * _numel(q[:-1]) * k[-2] * (q[-1] + v[-1])
    if t in _VIEWS or t is operator.getitem:
        return sympy.Integer(0)
    tensors = [_sizes(x.meta.get("val")) for x in [node, *node.all_input_nodes]]
    return sympy.Add(*[_numel(s) for s in tensors if s is not None])


def graph_cost(gm: torch.fx.GraphModule, symbol: sympy.Symbol) -> Callable[[int], float] | None:
    """``n -> estimated compute of gm at symbol = n`` (None when it cannot be stated: the
    caller then minimises padded elements)."""
    hints = _hints(gm)
    hints.pop(symbol, None)
    terms = [_node_cost(n) for n in gm.graph.nodes if n.op == "call_function"]
    total = sympy.Add(*terms).xreplace(hints)
    if total.free_symbols - {symbol}:
        return None
    return lambda n: float(total.xreplace({symbol: sympy.Integer(n)}))


def _hints(gm: torch.fx.GraphModule) -> dict[sympy.Symbol, sympy.Integer]:
    """The traced size of every symbol of the placeholders (``SymInt`` hints)."""
    out: dict = {}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        sizes = val.shape if isinstance(val, torch.Tensor) else [val]
        for s in sizes:
            if isinstance(s, torch.SymInt) and s.node.expr.is_Symbol and s.node.hint is not None:
                out[s.node.expr] = sympy.Integer(s.node.hint)
    return out
