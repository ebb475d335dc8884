"""Slices from the end of a padded dim by an int input, rewritten per call.

[Note: tail slices]
transformers' causal LMs end with ``hidden[:, -logits_to_keep:]`` (``generate()`` passes
``logits_to_keep=1``; a plain forward 0). On a dim padded from n to a bucket b, the slice
would read the padded tail's last rows. ``padding_safety`` accepts it when ``k`` is an int
input of the graph, or a constant (``x[:, -1:]``: Dynamo specializes an int input of 1, so
``generate()``'s ``logits_to_keep=1`` arrives as a constant) (``TailSlice``); each call's
static graph then has it rewritten from the values of that call:

* ``k == 0``: ``x[:, -0:]`` is the whole dim: ``slice(x, d, 0, END)``, a padded dim whose
  valid prefix is n (the analysis treated the slice's size as a padded symbol, so what
  follows was proven for a padded dim); the output is sliced back to n.
* ``1 <= k <= n``: ``index_select(x, d, idx)`` with ``idx = [n-k, ..., n-1]`` a new int64
  input of the graph: it reads only valid rows (the analysis proved rows < n of ``x`` exact),
  the rows eager's ``x[:, -k:]`` reads on the unpadded ``x``; its size k is static.
* ``k > n`` (eager keeps all n rows): the call runs unpadded (its size compiles exactly).

The static graph of a bucket is keyed by the bucket, k, and which rewrite applies; ``idx``
changes per call without a recompile.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from npu_inductor.padding_safety import TailSlice

aten = torch.ops.aten
WHOLE, GATHER = "whole", "gather"


def keep(t: TailSlice, values: dict) -> int:
    """The slice's ``k`` in this call (a constant k is its own value)."""
    return t.keep if isinstance(t.keep, int) else values[t.keep]


def plan(tails: Sequence[TailSlice], values: dict) -> tuple[str, ...] | None:
    """The rewrite of each tail slice for these valid sizes (None: run unpadded)."""
    out = []
    for t in tails:
        k, n = keep(t, values), values[t.padded]
        if k == 0:
            out.append(WHOLE)
        elif 1 <= k <= n:
            out.append(GATHER)
        else:
            return None
    return tuple(out)


def sizes(tails: Sequence[TailSlice], kinds: Sequence[str], values: dict) -> dict:
    """The valid size of each tail slice's (unbacked) size symbol."""
    return {t.size: values[t.padded] if kind == WHOLE else keep(t, values)
            for t, kind in zip(tails, kinds) if not isinstance(t.size, int)}


def indices(tails: Sequence[TailSlice], kinds: Sequence[str], values: dict) -> list:
    """The extra inputs of the rewritten graph: one ``idx`` per gathered slice."""
    return [torch.arange(values[t.padded] - keep(t, values), values[t.padded])
            for t, kind in zip(tails, kinds) if kind == GATHER]


def rewrite(gm: torch.fx.GraphModule, tails: Sequence[TailSlice],
            kinds: Sequence[str]) -> torch.fx.GraphModule:
    """A copy of the symbolic graph ``gm`` with each tail slice rewritten (see the note);
    gathered slices read their ``idx`` from new placeholders after the others."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    out = graph.graph_copy(gm.graph, env)
    by_name = {old.name: new for old, new in env.items()}
    last = [n for n in graph.nodes if n.op == "placeholder"][-1]
    for t, kind in zip(tails, kinds):
        node = by_name[t.node]
        if kind == WHOLE:
            node.args = (node.args[0], t.dim, 0, *node.args[3:])
            continue
        with graph.inserting_after(last):
            last = graph.placeholder(f"tail_idx_{len(graph.nodes)}")
        with graph.inserting_before(node):
            gathered = graph.call_function(aten.index_select.default,
                                           (node.args[0], t.dim, last))
        node.replace_all_uses_with(gathered)
        graph.erase_node(node)
    graph.output(out)
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(gm, graph)
