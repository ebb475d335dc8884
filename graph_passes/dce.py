"""Dead-code elimination: a node whose value nobody uses (and that has no side effect) is
removed, and so are ``get_attr`` constants no node reads any more."""

from __future__ import annotations

from torch.fx import GraphModule

from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import bump, eliminate_dead_code


def dce(gm: GraphModule, config: NpuConfig) -> GraphModule:
    before = len(gm.graph.nodes)
    eliminate_dead_code(gm)
    for node in list(gm.graph.find_nodes(op="get_attr")):
        if not node.users:
            gm.graph.erase_node(node)
    _drop_unused_constants(gm)
    bump("dce", before - len(gm.graph.nodes))
    gm.recompile()
    return gm


def _drop_unused_constants(gm: GraphModule) -> None:
    used = {n.target for n in gm.graph.find_nodes(op="get_attr")}
    for name in [b for b in dict(gm.named_buffers()) if b.startswith("_npu_") and b not in used]:
        delattr(gm, name)
