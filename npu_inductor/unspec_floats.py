"""Module attributes that are Python floats (an ``eps``) become constants of the graph.

Under ``dynamic=True`` (and automatic dynamic shapes) Dynamo does not specialize Python
floats (``torch._dynamo.config.specialize_float`` is off): a module's ``eps`` reaches the
graph as an ``f64[]`` input read by ``.item()``, which AOTAutograd turns into tensor ops
(``Cast`` + ``Add``). GE's fused ops take such values as attributes (``RmsNorm``'s
``epsilon``), so no fusion fires: an RMSNorm stays 7 GE ops plus a ``Cast`` per call.

For a float read from a module attribute (``self.eps``, not a function argument), the
backend asks Dynamo to specialize it the way torch's own float pass does
(``torch.fx.passes._tensorify_python_scalars``): it marks the float's symbol in
``TensorifyState`` and raises ``TensorifyScalarRestartAnalysis``; Dynamo re-traces the
frame with the value as a constant and guards on it (``self.eps == 1e-06``), so a changed
value recompiles, as with ``specialize_float=True``. Floats passed as arguments stay
symbolic: a temperature or a scale that changes per call must not recompile.
"""

from __future__ import annotations

import logging

import torch
from torch._dynamo.exc import TensorifyScalarRestartAnalysis
from torch._dynamo.source import AttrSource
from torch._dynamo.symbolic_convert import TensorifyState

log = logging.getLogger("npu_inductor")


def _only_item_reads(node: torch.fx.Node) -> bool:
    return bool(node.users) and all(
        u.op == "call_method" and u.target == "item" and len(u.args) == 1 and not u.kwargs
        for u in node.users)


def module_float_symbols(gm: torch.fx.GraphModule) -> list[str]:
    """The float symbols of the graph's inputs that Dynamo passes as tensors, read from a
    module attribute and only through ``.item()``, not yet marked for specialization."""
    names = []
    for node in gm.graph.find_nodes(op="placeholder"):
        arg = node.meta.get("grapharg")
        if arg is None or not getattr(arg, "pass_arg_as_tensor", False) \
                or not isinstance(arg.source, AttrSource) or not _only_item_reads(node):
            continue
        memo = getattr(node.meta.get("example_value"), "item_memo", None)
        name = getattr(getattr(memo, "node", None), "_expr", None)
        name = getattr(name, "name", None)
        if name is not None and not TensorifyState.should_specialize(name):
            names.append(name)
    return names


def specialize_module_floats(gm: torch.fx.GraphModule) -> None:
    """Restart Dynamo's analysis with the module-attribute floats as constants (if any)."""
    names = module_float_symbols(gm)
    if not names:
        return
    for name in names:
        TensorifyState.specialize(name)
    log.debug("specializing module float attributes %s (fusions take them as attributes)",
              names)
    raise TensorifyScalarRestartAnalysis
