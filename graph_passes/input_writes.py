"""Writes into graph inputs move up to where their value is ready.

    v = f(p, ...); ...; copy_(p, v)     (AOTAutograd: every input write at the very end)
      ==>  v = f(p, ...); copy_(p, v); ...

An optimizer step updates each parameter (and its state) from values computed per
parameter; with every ``copy_`` at the end, all new values are live together, a copy of
the whole model in the workspace. Each ``copy_`` (``Assign`` in GE) moves to just after
the last of its value and every reader of the input's old contents (through views too),
so each new value dies where it is written. Inference graphs only (AOTAutograd keeps
input mutations in the graph only there).
"""

from __future__ import annotations

from torch.fx import GraphModule, Node

from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import aten, bump, graph_kind, is_op

_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.t.default,
          aten.permute.default, aten.transpose.int, aten.expand.default, aten.slice.Tensor,
          aten.select.int, aten.alias.default, aten.unsqueeze.default, aten.squeeze.dim,
          aten.squeeze.default, aten.as_strided.default, aten.unfold.default)


def _readers(node: Node) -> set[Node]:
    """Nodes reading ``node``'s memory: its users, and users of its views (transitively)."""
    out: set[Node] = set()
    todo = [node]
    while todo:
        for user in todo.pop().users:
            if user not in out:
                out.add(user)
                if is_op(user, *_VIEWS):
                    todo.append(user)
    return out


def place_input_writes(gm: GraphModule, config: NpuConfig) -> GraphModule:
    if graph_kind(gm) != "inference":
        return gm
    writes = [n for n in gm.graph.find_nodes(op="call_function", target=aten.copy_.default)
              if isinstance(n.args[0], Node) and n.args[0].op == "placeholder"]
    targets = [w.args[0] for w in writes]
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for write in writes:
        dst, src = write.args[0], write.args[1]
        if targets.count(dst) > 1 or not isinstance(src, Node):
            continue
        after = max([src, *(_readers(dst) - {write})], key=order.__getitem__)
        if order[after] + 1 < order[write]:
            after.append(write)
            bump("place_input_writes")
    gm.graph.lint()
    gm.recompile()
    return gm
