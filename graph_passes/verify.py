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

_CHECKED = "_npu_verified"  # node.meta key: the signature of the last successful recheck


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


def _signature(node: Node) -> tuple | None:
    """What a recheck of ``node`` depends on: its target, its arguments (nodes by the identity
    of their recorded val) and its own val. None when an argument is a tensor constant."""
    leaves: list = []

    def leaf(a: object) -> object:
        if isinstance(a, torch.Tensor):
            leaves.append(a)
        return a

    args = torch.fx.node.map_aggregate(
        torch.fx.node.map_arg((node.args, node.kwargs), lambda n: ("node", id(n.meta["val"]))),
        leaf)
    return None if leaves else (node.target, args, id(node.meta["val"]))


def _kept(node: Node) -> list:
    """The vals a signature names by id, kept alive with it so that no id is reused."""
    return [node.meta["val"], *(n.meta["val"] for n in node.all_input_nodes)]


def _recheck_vals(gm: GraphModule, where: str) -> None:
    """Re-run each call on its inputs' fake values and compare with its recorded val. A node
    whose signature is unchanged since its last successful recheck is skipped (the passes
    leave most nodes alone, and the verifier runs after each of them)."""
    if not all(_static(n.meta.get("val")) for n in gm.graph.nodes):
        return  # symbolic graphs: re-propagation needs the shape env; lint + presence only
    mode = fake_mode_of(gm)
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        sig = _signature(node)
        if sig is not None and node.meta.get(_CHECKED, (None,))[0] == sig:
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta["val"])
        with mode:
            fresh = node.target(*args, **kwargs)
        _compare(node, fresh, node.meta["val"], where)
        node.meta[_CHECKED] = (sig, _kept(node))


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
