"""Partition: a view of a forward input saved for the backward is recomputed there.

    forward:  t = t(primals_6); return (..., t)          (saved: the transposed weight)
    backward: mm(tangent, t)
    ==>
    forward:  return (..., primals_6)                    (saved: the weight itself)
    backward: t = t(primals_6); mm(tangent, t)

AOTAutograd's ``default_partition`` saves every forward value the backward reads, views
of parameters included. Eager autograd and ``aot_eager`` save such a view as a view; a GE
graph cannot: its outputs and inputs are dense buffers of their own, so each saved
transpose of a weight was a copy of the weight out of the forward graph (or, returned as a
view, a copy into the backward graph's contiguous input), a copy of the model per step.
Saving the input instead costs nothing (a graph input is returned as it is) and the view
becomes a ``Transpose``/``Reshape`` inside the backward graph, which the host device runs
as a strided view and the matmul reads directly.

Only chains of view ops with static arguments over a placeholder the forward does not
write are moved (``lowering/output_views.py`` decides what a replayable view is).
"""

from __future__ import annotations

from typing import Any

import torch

from npu_inductor.graph_passes.common import counters
from npu_inductor.lowering.output_views import split_view

COUNTER = "saved_input_views"


def _chain_nodes(node: torch.fx.Node, base: torch.fx.Node) -> list[torch.fx.Node]:
    """The view nodes from just above ``base`` to ``node``, base side first."""
    chain = []
    while node is not base:
        chain.append(node)
        node = node.args[0]
    return chain[::-1]


def _replay_in_backward(bw: torch.fx.Graph, holder: torch.fx.Node,
                        chain: list[torch.fx.Node]) -> torch.fx.Node:
    """The forward's view chain rebuilt over ``holder`` right after the placeholders."""
    first = next(n for n in bw.nodes if n.op != "placeholder")
    value = holder
    with bw.inserting_before(first):
        for node in chain:
            value = bw.call_function(node.target, (value, *node.args[1:]))
            value.meta = {k: v for k, v in node.meta.items() if k in ("val", "tensor_meta")}
    return value


def save_inputs_not_views(fw: torch.fx.GraphModule, bw: torch.fx.GraphModule,
                          num_fwd_outputs: int) -> int:
    """Rewrite the partition in place (see the module docstring); returns how many saved
    values were moved."""
    output = fw.graph.output_node()
    outs = list(output.args[0])
    holders = {n.name: n for n in bw.graph.find_nodes(op="placeholder")}
    kept: list[Any] = []
    moved = 0
    for value in outs[num_fwd_outputs:]:
        ph = holders.get(value.name) if isinstance(value, torch.fx.Node) else None
        base, chain = split_view(value) if ph is not None else (value, ())
        if not chain or base.op != "placeholder":
            kept.append(value)
            continue
        holder = holders.get(base.name)
        if holder is None:  # the input is not saved yet: this slot now carries it
            holder = holders[base.name] = ph
            ph.meta = {k: v for k, v in base.meta.items() if k in ("val", "tensor_meta")}
            kept.append(base)
        view = _replay_in_backward(bw.graph, holder, _chain_nodes(value, base))
        ph.replace_all_uses_with(view, delete_user_cb=lambda u, v=view: not _in_chain(u, v))
        if holder is not ph:
            bw.graph.erase_node(ph)
        moved += 1
    if moved:
        output.args = (tuple(outs[:num_fwd_outputs] + kept),)
        fw.graph.eliminate_dead_code()
        for gm in (fw, bw):
            gm.graph.lint()
            gm.recompile()
        counters[COUNTER] += moved
    return moved


def _in_chain(user: torch.fx.Node, view: torch.fx.Node) -> bool:
    """Whether ``user`` is one of the replayed view nodes ending at ``view``."""
    node = view
    while node.op == "call_function":
        if node is user:
            return True
        node = node.args[0]
    return False


def partition(joint_module: torch.fx.GraphModule, joint_inputs: Any, *, num_fwd_outputs: int,
              **kwargs: Any) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    """AOTAutograd's ``default_partition``, then ``save_inputs_not_views``."""
    from torch._functorch.partitioners import default_partition

    fw, bw = default_partition(joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs,
                               **kwargs)
    save_inputs_not_views(fw, bw, num_fwd_outputs)
    return fw, bw
