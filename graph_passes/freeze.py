"""``freeze_parameters=True`` (inference graphs only): parameter and buffer placeholders
become ``get_attr`` constants holding the real tensors.

    placeholder arg3_1 (= layer.weight)  ==>  get_attr _npu_param_N

AOTAutograd hands the compiler fake tensors only; the real ones are Dynamo's example
inputs, made visible by ``common.real_inputs`` in the backend. With inlined nn modules
every parameter arrives as a graph input marked static by Dynamo
(``_dynamo_static_input_type``); those are the ones frozen. The placeholder itself stays
(unused) so argument positions keep matching the caller's list. Frozen weights enable
the folds that need real values (Conv+BatchNorm, merged gate/up projections).
"""

from __future__ import annotations

import torch
from torch._dynamo.utils import get_static_address_type
from torch.fx import GraphModule

from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import bump, const_node, current_real_inputs, graph_kind, skip


def _is_param(t: object) -> bool:
    return isinstance(t, torch.nn.Parameter) or (
        isinstance(t, torch.Tensor) and get_static_address_type(t) is not None)


def freeze_parameters(gm: GraphModule, config: NpuConfig) -> GraphModule:
    if not config.freeze_parameters:
        return gm
    if graph_kind(gm) != "inference":
        skip("freeze_parameters", gm, "parameters change during training")
        return gm
    real = current_real_inputs()
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    if real is None or len(real) != len(placeholders):
        skip("freeze_parameters", gm, "the real example inputs are not available")
        return gm
    frozen = 0
    for node, tensor in zip(placeholders, real):
        fake = node.meta.get("val")
        if not _is_param(tensor) or not node.users or not isinstance(fake, torch.Tensor):
            continue
        if tuple(fake.shape) != tuple(tensor.shape) or fake.dtype != tensor.dtype:
            continue
        with gm.graph.inserting_after(placeholders[-1]):
            const = const_node(gm, tensor.detach(), "param")
        node.replace_all_uses_with(const)
        frozen += 1
    bump("freeze_parameters", frozen)
    gm.recompile()
    return gm
