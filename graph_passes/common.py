"""Helpers shared by the passes: counters, graph kind, node matching, meta['val'] upkeep."""

from __future__ import annotations

import collections
import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._guards import detect_fake_mode
from torch.fx import GraphModule, Node

aten = torch.ops.aten
log = logging.getLogger("npu_inductor.passes")

# Replacements made by every pass, by name; tests read these (``counters["fuse_rms_norm"]``).
counters: collections.Counter[str] = collections.Counter()

# The real (non-fake) example inputs Dynamo handed the backend, for freeze_parameters.
_REAL_INPUTS: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "npu_real_inputs", default=None)


@contextlib.contextmanager
def real_inputs(example_inputs: list) -> Iterator[None]:
    """Make Dynamo's real example inputs visible to the passes while compiling."""
    token = _REAL_INPUTS.set(list(example_inputs))
    try:
        yield
    finally:
        _REAL_INPUTS.reset(token)


def current_real_inputs() -> list | None:
    return _REAL_INPUTS.get()


def bump(name: str, n: int = 1) -> None:
    counters[name] += n


def graph_kind(gm: GraphModule) -> str:
    """``forward``/``backward`` for AOTAutograd training graphs (``primals_*`` and
    ``tangents_*`` placeholders), ``inference`` otherwise."""
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    if any(n.startswith("tangents_") for n in names):
        return "backward"
    if any(n.startswith("primals_") for n in names):
        return "forward"
    return "inference"


def is_training(gm: GraphModule) -> bool:
    return graph_kind(gm) != "inference"


def skip(pass_name: str, gm: GraphModule, why: str) -> None:
    """Log why a fusion does not fire on this graph."""
    log.info("%s: not fired on this %s graph: %s", pass_name, graph_kind(gm), why)


# ---- matching ---------------------------------------------------------------------------
def is_op(node: Any, *targets: Any) -> bool:
    """``node`` is a call of one of ``targets`` (OpOverloads)."""
    return isinstance(node, Node) and node.op == "call_function" and node.target in targets


def val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, Node) else None


def shape(node: Node) -> tuple:
    return tuple(val(node).shape)


def dtype(node: Node) -> torch.dtype:
    return val(node).dtype


def only_used_by(nodes: Iterable[Node], allowed: set[Node]) -> bool:
    """True when every user of every node in ``nodes`` is in ``allowed``."""
    return all(u in allowed for n in nodes for u in n.users)


def scalar_arg(node: Node, index: int) -> float | None:
    """A Python number argument at ``index`` (None when it is a node)."""
    a = node.args[index] if index < len(node.args) else None
    return a if isinstance(a, (int, float)) and not isinstance(a, bool) else None


def permutation(node: Any) -> tuple[Node, list[int]] | None:
    """``permute(x, p)`` / ``transpose(x, a, b)`` / ``t(x)``  ->  (x, the permutation)."""
    if is_op(node, aten.permute.default):
        return node.args[0], list(node.args[1])
    if is_op(node, aten.transpose.int, aten.t.default):
        rank = len(node.meta["val"].shape)
        if rank < 2:
            return None
        a, b = node.args[1:3] if node.target is aten.transpose.int else (0, 1)
        a, b = a % rank, b % rank
        perm = list(range(rank))
        perm[a], perm[b] = b, a
        return node.args[0], perm
    return None


def static(shape_: Sequence[Any]) -> bool:
    return all(isinstance(d, int) for d in shape_)


# ---- building -----------------------------------------------------------------------------
def fake_mode_of(gm: GraphModule) -> Any:
    """The fake mode of ``gm``'s values: the tracing context's or active one, else that of
    the first node whose val has one (``detect_fake_mode``'s order, without collecting every
    node's val on each call: passes call this once per inserted node)."""
    mode = detect_fake_mode()
    if mode is not None:
        return mode
    for node in gm.graph.nodes:
        v = node.meta.get("val")
        if v is not None and (mode := detect_fake_mode([v])) is not None:
            return mode
    return torch._subclasses.FakeTensorMode(allow_non_fake_inputs=True)


def _fake_arg(a: Any) -> Any:
    return a.meta["val"] if isinstance(a, Node) else a


def set_val(gm: GraphModule, node: Node) -> Any:
    """Fill ``node.meta['val']`` by running its target on fake inputs."""
    if node.op == "get_attr":
        real = getattr(gm, node.target)
        node.meta["val"] = fake_mode_of(gm).from_tensor(real, static_shapes=True)
        return node.meta["val"]
    mode = fake_mode_of(gm)
    args = torch.fx.node.map_aggregate(node.args, _fake_arg)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, _fake_arg)
    fake = _fake_impl(node.target)
    with mode:
        if node.target.__module__ == "_operator":  # getitem on a tuple val
            node.meta["val"] = node.target(*args)
        elif fake is not None:
            node.meta["val"] = _direct_fake(fake, node.target, args, kwargs)
        else:
            node.meta["val"] = node.target(*args, **kwargs)
    return node.meta["val"]


def _fake_impl(target: Any) -> Callable[..., Any] | None:
    """The registered fake kernel of an ``npu::*`` custom op (None for other targets)."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "npu":
        return None
    opdef = torch._library.custom_ops._maybe_get_opdef(target)
    return getattr(opdef, "_abstract_fn", None) if opdef is not None else None


def _direct_fake(fake: Callable[..., Any], target: Any, args: tuple, kwargs: dict) -> Any:
    """``target``'s fake kernel called directly: the same value as dispatching the op in the
    fake mode (which runs this kernel), without the custom op's autograd and dispatcher
    layers, which cost ~10 ms per call in a training graph. Falls back to dispatching
    when the kernel needs the dispatcher's context (data-dependent output sizes)."""
    try:
        out = fake(*args, **kwargs)
    except RuntimeError:
        return target(*args, **kwargs)
    inputs = {id(a) for a in torch.utils._pytree.tree_leaves((args, kwargs))}
    if any(id(o) in inputs for o in torch.utils._pytree.tree_leaves(out)):
        return target(*args, **kwargs)  # an input returned as is: let the dispatcher judge
    return out


def call(gm: GraphModule, target: Any, args: tuple, kwargs: dict | None = None,
         like: Node | None = None) -> Node:
    """Insert ``target(*args)`` at the current insertion point and fill its meta."""
    node = gm.graph.call_function(target, args, kwargs or {})
    if like is not None:
        for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
            if key in like.meta:
                node.meta[key] = like.meta[key]
    set_val(gm, node)
    return node


_CONST_IDS = iter(range(1 << 62))


def const_node(gm: GraphModule, tensor: torch.Tensor, hint: str = "const") -> Node:
    """A ``get_attr`` node holding ``tensor`` (registered as a buffer of ``gm``)."""
    name = f"_npu_{hint}_{next(_CONST_IDS)}"
    while hasattr(gm, name):
        name = f"_npu_{hint}_{next(_CONST_IDS)}"
    gm.register_buffer(name, tensor.detach(), persistent=False)
    node = gm.graph.get_attr(name)
    set_val(gm, node)
    return node


def const_value(gm: GraphModule, node: Any) -> torch.Tensor | None:
    """The real tensor behind a ``get_attr`` node (None otherwise)."""
    if isinstance(node, Node) and node.op == "get_attr":
        return getattr(gm, node.target)
    return None


# Inside ``run_passes`` the graph is linted once after the last pass instead of by every
# dead-code sweep (torch's eliminate_dead_code lints first: ~14 lints of the whole graph).
_LINT_DEFERRED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "npu_lint_deferred", default=False)


@contextlib.contextmanager
def lint_once(gm_of: Callable[[], GraphModule]) -> Iterator[None]:
    """Defer the dead-code sweeps' lint to one ``graph.lint()`` of ``gm_of()`` at the end."""
    token = _LINT_DEFERRED.set(True)
    try:
        yield
    finally:
        _LINT_DEFERRED.reset(token)
    gm_of().graph.lint()


def eliminate_dead_code(gm: GraphModule) -> bool:
    """``gm.graph.eliminate_dead_code()``, the same nodes removed, without its purity check
    of nodes that have users (which stay anyway; the check costs ~50 us a node), and
    without its up-front lint inside ``lint_once``."""
    impure_random = True
    if torch._guards.TracingContext.try_get():  # as eliminate_dead_code decides it
        from torch._inductor import config as inductor_config

        impure_random = inductor_config.fallback_random

    def has_side_effect(node: Node) -> bool:
        return len(node.users) > 0 or node.is_impure(impure_random)

    graph = gm.graph
    if not _LINT_DEFERRED.get() or any(
            isinstance(getattr(gm, n.target, None), GraphModule)
            for n in graph.find_nodes(op="get_attr")):  # subgraphs: torch sweeps them too
        return graph.eliminate_dead_code(is_impure_node=has_side_effect)
    removed = [graph.erase_node(n) or n.name for n in reversed(graph.nodes)
               if not has_side_effect(n)]
    if removed:
        log.debug("dead code eliminated: %s", removed)
    return bool(removed)


def finish(gm: GraphModule) -> GraphModule:
    """Drop dead nodes and regenerate code after a rewrite."""
    eliminate_dead_code(gm)
    gm.recompile()
    return gm


# ---- the fusion passes' match-and-replace loop ------------------------------------------
@dataclass(frozen=True)
class Match:
    """One place a fusion pattern matched. The replacement is inserted before ``at`` and
    takes over every use of each node in ``outs``; ``counter`` is bumped when it does."""

    at: Node
    outs: tuple[Node, ...]
    counter: str
    parts: dict[str, Any] = field(default_factory=dict)  # what ``replace`` needs


def fuse_matches(gm: GraphModule, name: str, anchor: Any,
                 match: Callable[[GraphModule, Node], Match | None],
                 replace: Callable[[GraphModule, Match], Node | None], *,
                 inference_only: str | None = None) -> GraphModule:
    """Run one fusion: for each call of ``anchor`` (a snapshot, in graph order) ``match``
    either declines (None) or returns a ``Match``; ``replace`` then builds the fused node at
    ``match.at`` (None: give up here; anything it inserted is dead and removed). With
    ``inference_only`` (the reason), training graphs are skipped and logged."""
    if inference_only is not None and is_training(gm):
        skip(name, gm, inference_only)
        return gm
    for node in list(gm.graph.find_nodes(op="call_function", target=anchor)):
        m = match(gm, node)
        if m is None:
            continue
        with gm.graph.inserting_before(m.at):
            y = replace(gm, m)
        if y is None:
            continue
        for out in m.outs:
            out.replace_all_uses_with(y)
        bump(m.counter)
    return finish(gm)
