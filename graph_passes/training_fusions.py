"""Training graphs fuse before AOTAutograd, so the backward uses GE's backward ops.

AOTAutograd writes the backward of RMSNorm, rotary embeddings and SwiGLU in plain ops,
and once forward and backward are partitioned a fusion in one cannot change what the
other saves. So, for a Dynamo graph that trains, this pass traces the forward alone to
aten ops (autocast applied, no autograd), rewrites the patterns into ``npu::*`` ops that
carry autograd formulas (``npu_inductor/ops_training.py``), and hands that graph to
AOTAutograd, whose backward then holds ``npu::*_grad`` ops:

    RMSNorm in plain ops                 ==>  rms_norm           (RmsNorm / RmsNormGrad)
    x * cos + rotate_half(x) * sin       ==>  rotary_mul         (RotaryMul /
                                                                  RotaryPositionEmbeddingGrad)
    silu(a) * b  (a, b: gate / up)       ==>  swiglu(cat([a, b], -1), -1)
                                                                 (SwiGlu / SwiGluGrad)

Every fused op keeps the input dtype (fp32, fp16, bf16: RmsNormGrad, SwiGluGrad and
RotaryPositionEmbeddingGrad have 910B AI Core kernels in all three, hicann/ops-nn and
ops-transformer OpDefs). Rotary fuses only when cos/sin need no gradient; a rotary whose
x is narrower than cos/sin (bf16 q times fp32 cos under autocast) runs in the wider
dtype. Graphs with symbolic shapes or non-tensor inputs, or that the forward-only trace
cannot handle, go to AOTAutograd as they are (logged), with the older forward-only
fusions.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch._guards import detect_fake_mode
from torch.fx import GraphModule, Node
from torch.fx.experimental.proxy_tensor import make_fx

from npu_inductor import ops  # noqa: F401  (registers torch.ops.npu.*)
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import aten, bump, call, counters, dtype, finish, shape
from npu_inductor.graph_passes.fuse_rms_norm import fuse_rms_norm
from npu_inductor.graph_passes.fuse_rotary import match_rotary
from npu_inductor.graph_passes.fuse_swiglu import _gated

log = logging.getLogger("npu_inductor.passes")
npu = torch.ops.npu
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def trains(example_inputs: list[Any]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


def fuse_for_training(gm: GraphModule, example_inputs: list[Any],
                      config: NpuConfig) -> GraphModule:
    """The forward-only aten graph with fused differentiable ops, or ``gm`` unchanged."""
    if not (config.fusions and trains(example_inputs)):
        return gm
    if not all(isinstance(t, torch.Tensor) and all(isinstance(d, int) for d in t.shape)
               for t in example_inputs):
        log.info("training fusions: symbolic shapes or non-tensor inputs; not fused early")
        return gm
    if not may_fuse(gm):  # the trace costs about as much as AOTAutograd's own: skip it
        log.info("training fusions: no rsqrt/rms_norm, silu/sigmoid or cat+neg in the graph; "
                 "not traced early")
        return gm
    why = _mutation(gm)
    if why is not None:  # the trace would run it on the graph's real buffers
        log.info("training fusions: the graph mutates state (%s); not fused early", why)
        return gm
    try:
        traced = _trace(gm, example_inputs)
    except Exception as e:  # noqa: BLE001 - the graph still compiles, unfused
        log.info("training fusions: forward-only trace failed (%s: %s); not fused early",
                 type(e).__name__, e)
        return gm
    grads = _needs_grad(traced, example_inputs)
    fired = _fuse_rotary(traced, grads) + _fuse_swiglu(traced)
    norms = counters["fuse_rms_norm"]
    traced = fuse_rms_norm(traced, config)  # a forward-only graph: the inference form
    fired += counters["fuse_rms_norm"] - norms
    if not fired:
        return gm
    _views_as_reshapes(traced)
    return finish(traced)


# Names (substrings) of the Dynamo-graph calls each fusion needs in its aten trace: RMSNorm
# an aten.rsqrt (torch.rsqrt, Tensor.rsqrt, F.rms_norm), SwiGLU an aten.silu or sigmoid,
# rotary an aten.cat (torch.cat; torch.stack decomposes to it) and an aten.neg.
_RMS_NORM = ("rsqrt", "rms_norm")
_SWIGLU = ("silu", "sigmoid", "swish")
_ROTARY_CAT, _ROTARY_NEG = ("cat", "stack"), ("neg",)


def may_fuse(gm: GraphModule) -> bool:
    """False only when no training fusion can fire on ``gm``'s aten trace: none of the calls
    each pattern needs appears in the Dynamo graph (or any graph it holds: higher-order ops'
    bodies). A call whose name is unknown (a module call) counts as a possible match."""
    names = []
    for module in gm.modules():
        if not isinstance(module, GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op == "call_module":
                return True
            if node.op == "call_method":
                names.append(str(node.target).lower())
            elif node.op == "call_function":
                target = node.target
                names.append(str(getattr(target, "__name__", target)).lower())
    text = " ".join(names)

    def has(words: tuple[str, ...]) -> bool:
        return any(w in text for w in words)

    return has(_RMS_NORM) or has(_SWIGLU) or (has(_ROTARY_CAT) and has(_ROTARY_NEG))


def _views_as_reshapes(gm: GraphModule) -> None:
    """The trace recorded ``view`` where eager's strides allowed one; fused ops return
    contiguous results, so strides downstream may differ: ``reshape`` copies when needed."""
    for node in gm.graph.find_nodes(op="call_function", target=aten.view.default):
        node.target = aten.reshape.default


def _mutation(gm: GraphModule) -> str | None:
    """An in-place op in the Dynamo graph (``add_``, ``inplace=True``, batch norm's running
    stats, ``+=``), or None."""
    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function"):
            continue
        name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
        dunder = name.startswith("__") and name.endswith("__")
        if (name.endswith("_") and not dunder) or node.kwargs.get("inplace") is True:
            return f"{name} at {node.name}"
        if "batch_norm" in name or (node.target.__class__.__module__ == "builtins"
                                    and name in _INPLACE_OPERATORS):
            return f"{name} at {node.name}"
    return None


_INPLACE_OPERATORS = frozenset({"iadd", "isub", "imul", "itruediv", "ifloordiv", "imod",
                                "ipow", "iand", "ior", "ixor", "ilshift", "irshift",
                                "imatmul"})


def _trace(gm: GraphModule, example_inputs: list[Any]) -> GraphModule:
    fake_mode = detect_fake_mode(example_inputs)
    if fake_mode is None:
        return make_fx(gm, tracing_mode="real", record_module_stack=True)(*example_inputs)
    saved = fake_mode.allow_non_fake_inputs
    fake_mode.allow_non_fake_inputs = True  # the Dynamo graph's own buffers (cos/sin)
    try:
        with fake_mode:
            return make_fx(gm, tracing_mode="real", record_module_stack=True)(*example_inputs)
    finally:
        fake_mode.allow_non_fake_inputs = saved


def _needs_grad(gm: GraphModule, example_inputs: list[Any]) -> set[Node]:
    """Nodes whose value depends on an input that requires grad."""
    out: set[Node] = set()
    for node, t in zip(gm.graph.find_nodes(op="placeholder"), example_inputs):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            out.add(node)
    for node in gm.graph.nodes:
        if node.op == "call_function" and any(a in out for a in node.all_input_nodes):
            out.add(node)
    return out


def _fuse_rotary(gm: GraphModule, grads: set[Node]) -> int:
    fired = 0
    for add in list(gm.graph.find_nodes(op="call_function", target=aten.add.Tensor)):
        m = match_rotary(add)
        if m is None or m["cos"] in grads or m["sin"] in grads:
            continue
        x, cos, sin, wide = m["x"], m["cos"], m["sin"], dtype(add)
        if wide not in _FLOATS or dtype(cos) != wide or dtype(sin) != wide:
            continue
        with gm.graph.inserting_before(add):
            if dtype(x) != wide:  # autocast: bf16 q times fp32 cos computes in fp32
                x = call(gm, aten._to_copy.default, (x,), {"dtype": wide}, like=add)
            y = call(gm, npu.rotary_mul.default, (x, cos, sin), like=add)
        add.replace_all_uses_with(y)
        bump("fuse_rotary_training")
        fired += 1
    finish(gm)
    return fired


def _fuse_swiglu(gm: GraphModule) -> int:
    fired = 0
    for mul in list(gm.graph.find_nodes(op="call_function", target=aten.mul.Tensor)):
        found = _gated(mul)
        if found is None:
            continue
        a, b, inner = found
        if dtype(a) != dtype(b) or dtype(a) not in _FLOATS or shape(a) != shape(mul):
            continue
        if any(u is not mul for n in inner for u in n.users if n is not mul):
            continue
        with gm.graph.inserting_before(mul):
            x = call(gm, aten.cat.default, ([a, b], -1), like=mul)
            y = call(gm, npu.swiglu.default, (x, -1), like=mul)
        mul.replace_all_uses_with(y)
        bump("fuse_swiglu_training")
        fired += 1
    finish(gm)
    return fired
