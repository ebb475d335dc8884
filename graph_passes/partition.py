"""Split an aten FX graph into GE partitions and eager islands.

[Note: per-op eager fallback]
``compile_fx`` first lowers the whole graph while collecting every node that cannot be
lowered (no converter, capability refusal, or a converter that raised). When none failed,
that lowering is the one GE graph: no partitioner, no wrapper, no overhead. Otherwise the
failed nodes become eager islands:

    a -> b -> X -> c -> d      ==>      ge_0(a, b) -> X (eager) -> ge_1(c, d)

Partitions are the supported nodes grouped by *eager depth*: the most eager nodes on any
path from the graph inputs to the node. An edge between supported nodes never lowers the
depth and a path through an eager node raises it, so a partition can never feed itself
through an eager island: the partitions are acyclic, and P_0, eager(depth 0), P_1, ... is a
valid order. This is linear in the graph size; torch's ``CapabilityBasedPartitioner``
reaches the same kind of grouping with pairwise cycle checks that took 15 s on a
4,000-node graph. ``fuse_by_partitions`` sorts each partition topologically and rewrites
the graph into a top-level module that calls one submodule per partition. compile_fx
swaps each submodule for its loaded GE graph, so the top level is plain FX code: eager ops
and GE calls exchange tensors by reference, nothing is copied. Single-node partitions are
kept: every op that has a converter runs on GE, only the listed fallbacks run eagerly.

Host nodes (SymInt arithmetic, ``sym_size``...) produce Python scalars, not tensors; they
run in the top level too but are not fallbacks: nothing of the device's work moves to eager.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch._ops import OpOverload, OpOverloadPacket
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from npu_inductor.lowering.lower import source_line

aten = torch.ops.aten
PARTITION_PREFIX = "ge_"
_SYM_PACKETS = (aten.sym_size, aten.sym_stride, aten.sym_numel, aten.sym_storage_offset)


@dataclass(frozen=True)
class Fallback:
    """One FX node that runs in eager instead of GE, and why."""

    node: str
    target: str
    reason: str
    source: str


def is_host_node(node: torch.fx.Node) -> bool:
    """A call that computes Python scalars (shape arithmetic), not device tensors."""
    if node.op != "call_function" or node.target is operator.getitem:
        return False
    if isinstance(node.meta.get("val"), torch.Tensor):
        return False
    target = node.target
    if isinstance(target, OpOverload):
        return target.overloadpacket in _SYM_PACKETS
    return getattr(target, "__module__", None) in (operator.__name__, math.__name__, "_operator",
                                                   "torch", "torch.fx.experimental.sym_node")


def target_name(target: Any) -> str:
    """``aten.add.Tensor`` for ops, the qualified name for other callables."""
    if isinstance(target, (OpOverload, OpOverloadPacket)):
        return str(target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', target)}"


def fallbacks(gm: torch.fx.GraphModule, failures: Mapping[str, str]) -> list[Fallback]:
    """The fallback records for the failed nodes of ``gm`` (host nodes excluded)."""
    return [Fallback(n.name, target_name(n.target), failures[n.name], source_line(n))
            for n in gm.graph.nodes if n.name in failures and not is_host_node(n)]


def _on_ge(node: torch.fx.Node, eager: Collection[str]) -> bool:
    """Every call_function node except the eager ones and getitems of eager nodes."""
    if node.op != "call_function" or node.name in eager:
        return False
    if node.target is operator.getitem:
        producer = node.args[0]
        return isinstance(producer, torch.fx.Node) and _on_ge(producer, eager)
    return True


def eager_depths(gm: torch.fx.GraphModule, eager: Collection[str]) -> dict[torch.fx.Node, int]:
    """Per node: the most eager (off-GE) call nodes on a path from the graph inputs."""
    depth: dict[torch.fx.Node, int] = {}
    for node in gm.graph.nodes:
        depth[node] = max((depth[m] + int(m.op == "call_function" and not _on_ge(m, eager))
                           for m in node.all_input_nodes), default=0)
    return depth


def _partitions(gm: torch.fx.GraphModule, eager: Collection[str]) -> list[dict]:
    depth = eager_depths(gm, eager)
    groups: dict[int, dict[torch.fx.Node, None]] = {}
    for node in gm.graph.nodes:
        key = _group(node, depth, eager)
        if key is not None:
            groups.setdefault(key, {})[node] = None
    return [groups[k] for k in sorted(groups)]


def _group(node: torch.fx.Node, depth: dict, eager: Collection[str]) -> int | None:
    if _on_ge(node, eager):
        return depth[node]
    if node.op == "get_attr" and node.users:  # a folded constant: inside its only partition
        user_depths = {depth[u] if _on_ge(u, eager) else None for u in node.users}
        if len(user_depths) == 1 and None not in user_depths:
            return user_depths.pop()
    return None


def copy_module(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A structural copy (node meta shared shallowly) that partitioning may rewrite."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    return torch.fx.GraphModule(gm, graph)


def split(gm: torch.fx.GraphModule,
          eager: Collection[str]) -> tuple[torch.fx.GraphModule, list[str]]:
    """A copy of ``gm`` whose supported nodes are fused into ``ge_<k>`` submodules, each
    returning a tuple; returns it with the submodule names in execution order."""
    top = copy_module(gm)
    for node in top.graph.nodes:  # a constant left in the top level feeds a partition input
        if node.op == "get_attr" and "val" not in node.meta:
            node.meta["val"] = operator.attrgetter(node.target)(top)
    top = fuse_by_partitions(top, _partitions(top, eager), prefix=PARTITION_PREFIX,
                             always_return_tuple=True)
    names = [n.target for n in top.graph.nodes if n.op == "call_module"]
    return top, names
