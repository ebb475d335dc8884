"""The FX graph verifier run after every pass when ``verify`` (``NPU_INDUCTOR_VERIFY=1``) is on.

Checks: ``graph.lint()`` (topological order, dangling uses), every tensor-producing node
carries ``meta['val']``, and — where all values are static — a fake re-propagation of
every node agrees with the recorded ``meta['val']`` shapes and dtypes.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from npu_inductor.graph_passes.common import fake_mode_of


class GraphVerificationError(AssertionError):
    """A pass left the FX graph inconsistent."""


def verify(gm: GraphModule, after: str = "") -> None:
    """Raise ``GraphVerificationError`` naming the pass ``after`` which the graph broke."""
    where = f" after pass {after}" if after else ""
    try:
        gm.graph.lint()
    except Exception as e:
        raise GraphVerificationError(f"graph lint failed{where}: {e}") from e
    for node in gm.graph.nodes:
        if node.op in ("call_function", "placeholder", "get_attr") and "val" not in node.meta:
            raise GraphVerificationError(f"node {node.name} has no meta['val']{where}")
    _recheck_vals(gm, where)


def _static(v: object) -> bool:
    if isinstance(v, torch.Tensor):
        return all(isinstance(d, int) for d in v.shape)
    if isinstance(v, (tuple, list)):
        return all(_static(x) for x in v if x is not None)
    return not isinstance(v, torch.SymInt)


def _recheck_vals(gm: GraphModule, where: str) -> None:
    """Re-run each call on its inputs' fake values and compare with its recorded val."""
    if not all(_static(n.meta.get("val")) for n in gm.graph.nodes):
        return  # symbolic graphs: re-propagation needs the shape env; lint + presence only
    mode = fake_mode_of(gm)
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta["val"])
        with mode:
            fresh = node.target(*args, **kwargs)
        _compare(node, fresh, node.meta["val"], where)


def _compare(node: Node, fresh: object, recorded: object, where: str) -> None:
    if isinstance(fresh, torch.Tensor) and isinstance(recorded, torch.Tensor):
        if fresh.shape != recorded.shape or fresh.dtype != recorded.dtype:
            raise GraphVerificationError(
                f"node {node.name} ({node.target}): meta['val'] is {recorded.dtype}"
                f"{list(recorded.shape)} but its inputs give {fresh.dtype}{list(fresh.shape)}"
                f"{where}")
    elif isinstance(fresh, (tuple, list)) and isinstance(recorded, (tuple, list)):
        for f, r in zip(fresh, recorded):
            _compare(node, f, r, where)
