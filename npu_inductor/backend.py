"""The ``npu`` / ``npu_inductor`` torch.compile backend.

settings -> AOTAutograd (decompose, forward/backward split) -> passes -> lower -> compile
-> wrap; each FX graph AOTAutograd produces goes through ``compile_fx_graph``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import warnings
from typing import Any

import torch
from torch._dynamo.backends.common import aot_autograd

from npu_inductor import aot_cache, bucket_frames, guard_profile, trace_headers, unspec_floats
from npu_inductor.buckets import (
    BucketedDim,
    BucketedGraph,
    EagerFirstCall,
    _call_without_dynamo,
    find_bucketed_dims,
    is_symbolic,
    new_report,
    static_bucketed_dims,
)
from npu_inductor.compile_fx import compile_fx_graph
from npu_inductor.config import DEFAULT_SOC_VERSION, NpuConfig, resolve
from npu_inductor.graph_passes import real_inputs, saved_views
from npu_inductor.graph_passes.training_fusions import fuse_for_training
from npu_inductor.lowering.decompositions import decomposition_table

log = logging.getLogger("npu_inductor")
# Dynamo traces a frame before it calls the backend, so the header cut is in place from the
# import torch.compile's backend lookup does (trace_headers.py)
trace_headers.install()
CLASH_MESSAGE = (
    "torch_npu (torchair) has registered the torch.compile backend name 'npu', so "
    "backend='npu' runs torchair, not npu_inductor. Use backend='npu_inductor' for this "
    "compiler.")


def npu_backend(gm: torch.fx.GraphModule, example_inputs: list[Any],
                options: dict[str, Any] | None = None, mode: str | None = None) -> Any:
    """``torch.compile(model, backend="npu", options={...})`` lands here."""
    if guard_profile.install():  # no guard-latency timing for this frame (guard_profile.py)
        guard_profile.mark_frame()
    try:
        config = with_device_soc(resolve(options))
        warn_if_name_clash()
        check_devices(gm, example_inputs)
        unspec_floats.specialize_module_floats(gm)  # a module's eps: a constant (restarts)
        dims = find_bucketed_dims(gm, example_inputs, config)
        static = [] if dims else static_bucketed_dims(gm, example_inputs, config)
        training = _training(example_inputs)
        if static and not training:
            return _eager_first_call(gm, example_inputs, config, static)
        if dims and not training:
            return _compile_bucketed(gm, example_inputs, config, dims)
        return _compile(gm, example_inputs, config, dims)
    except user_errors() as e:
        if torch._dynamo.config.verbose:  # TORCHDYNAMO_VERBOSE=1: every frame
            raise
        # The message names the option / op / source line; AOTAutograd's and our frames
        # under this one would only bury it (Dynamo already drops the frames above).
        raise e.with_traceback(None)  # noqa: B904 (the same exception, shorter traceback)


def _compile(gm: torch.fx.GraphModule, example_inputs: list[Any], config: NpuConfig,
             dims: list[BucketedDim], refuse: str | None = None,
             eager_first: bool = False) -> Any:
    cached = aot_cache.usable(config, bool(dims) or eager_first)
    # training: RMSNorm/rotary/SwiGLU fused with their GE backward ops, as AOTAutograd's
    # pre-grad pass (see fuse_in_place)
    fuse = None if dims or eager_first else functools.partial(fuse_in_place, config=config)
    # freeze_parameters reads the real weights
    with real_inputs(example_inputs), aot_cache.scope(config, cached):
        return make_aot_backend(config, dims, cached, fuse, refuse, eager_first)(
            gm, example_inputs)


def _eager_first_call(gm: torch.fx.GraphModule, example_inputs: list[Any], config: NpuConfig,
                      labels: list[str]) -> Any:
    """Configured bucket dims that Dynamo made static: the first call runs in eager (the next
    size recompiles a general, bucketed graph). A fully static graph compiles on its second
    call; a partly dynamic one (size 1 under ``dynamic=True``) goes through AOTAutograd now
    (its symbols need Dynamo's context) and compiles lazily, keeping its symbols."""
    if not any(is_symbolic(x) for x in example_inputs):
        return EagerFirstCall(gm, functools.partial(
            _compile, gm, example_inputs, config, []), labels)
    reason = (f"first call of {', '.join(labels)} ran in eager: Dynamo specialized size 1 "
              "(the next size recompiles the general graph)")
    return _compile(gm, example_inputs, config, [], refuse=reason, eager_first=True)


def fuse_in_place(gm: torch.fx.GraphModule, example_inputs: list[Any],
                  config: NpuConfig) -> torch.fx.GraphModule:
    """``fuse_for_training`` as AOTAutograd's ``pre_grad_passes``. torch 2.13 runs those
    after its cache lookup (``pre_grad_pass_timing`` "late", the default), so the
    AOTAutograd cache is keyed by Dynamo's graph and a warm start skips the fusions'
    forward-only trace. AOTAutograd has built its functional call around ``gm`` by then,
    so the fused graph (and the constants it holds) replaces ``gm``'s own."""
    fused = fuse_for_training(gm, example_inputs, config)
    if fused is not gm:
        for node in fused.graph.find_nodes(op="get_attr"):
            name = f"_npu_fused_{node.target.replace('.', '_')}"
            while hasattr(gm, name):
                name += "_"
            setattr(gm, name, torch.fx.graph_module._get_attr(fused, node.target))
            node.target = name
        gm.graph = fused.graph  # recompiles gm
    return gm


def _compile_bucketed(gm: torch.fx.GraphModule, example_inputs: list[Any], config: NpuConfig,
                      dims: list[BucketedDim]) -> Any:
    """A frame's size-1 graph runs its general bucketed graph (``bucket_frames``)."""
    key = bucket_frames.frame_key(gm, config)
    if key is not None and bucket_frames.pinned_by_torch(dims):
        return bucket_frames.SizeOneGraph(key, dims, functools.partial(
            _call_without_dynamo, lambda _: _compile(gm, example_inputs, config, dims), ()),
            gm)
    if bucket_frames.pinned_to_one(dims):  # a graph valid at size 1 only: not padded
        return _compile(gm, example_inputs, config, dims, refuse=bucket_frames.PINNED)
    return bucket_frames.register_general(key, _compile(gm, example_inputs, config, dims))


def _training(example_inputs: list[Any]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)


def check_devices(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> None:
    """Graph inputs are host tensors (the acl device copies them in): name any that is not."""
    from npu_inductor.runtime.device import GraphInputError

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, x in zip(placeholders, example_inputs):
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            grapharg = node.meta.get("grapharg")
            name = grapharg.source.name if grapharg is not None else node.name
            raise GraphInputError(f"input {name} is a tensor on {x.device}; npu_inductor "
                                  f"compiles for host (cpu) tensors, which the device binds "
                                  f"or copies in. Move it with .cpu() before the call.")


def with_device_soc(config: NpuConfig) -> NpuConfig:
    """Without ``soc_version``, the acl device's own SoC (``aclrtGetSocName``) is the target
    of the dtype gate and of ATC; the host device simulates ``DEFAULT_SOC_VERSION``."""
    if config.soc_version is not None:
        return config
    from npu_inductor.runtime.device import get_device

    device = get_device(config.device, config.device_id)
    return dataclasses.replace(config, soc_version=getattr(device, "soc_name", None)
                               or DEFAULT_SOC_VERSION)


def user_errors() -> tuple[type[Exception], ...]:
    """Errors about the user's program or settings, whose messages are self-contained."""
    from npu_inductor.atc import AtcError
    from npu_inductor.buckets import BucketError
    from npu_inductor.compile_fx import FallbackError
    from npu_inductor.config import ConfigError
    from npu_inductor.runtime.device import DeviceError, GraphInputError

    return (ConfigError, FallbackError, BucketError, AtcError, DeviceError, GraphInputError)


def make_aot_backend(config: NpuConfig, dims: list[BucketedDim] | None = None,
                     aot_cached: bool = False, pre_grad: Any = None,
                     refuse: str | None = None, eager_first: bool = False) -> Any:
    """AOTAutograd with our compilers; with bucketed ``dims`` inference graphs go through
    ``BucketedGraph`` (training graphs compile as they are: they are not bucketed).
    ``aot_cached``: the compilers return ``NpuOutputCode`` for AOTAutograd's cache;
    ``pre_grad``: AOTAutograd's ``pre_grad_passes``."""
    compile_fn = functools.partial(compile_fx_graph, config=config)
    common = {"decompositions": decomposition_table(), "partition_fn": saved_views.partition,
              "keep_inference_input_mutations": True}  # copy_ into inputs lowers to Assign
    if pre_grad is not None:
        common["pre_grad_passes"] = pre_grad
    if aot_cached:
        kinds = ("inference", "forward", "backward")
        fns = [aot_cache.serializable(functools.partial(compile_fn, kind=k), k, config)
               for k in kinds]
        return aot_autograd(fw_compiler=fns[1], bw_compiler=fns[2], inference_compiler=fns[0],
                            **common)
    inference = functools.partial(compile_fn, kind="inference")
    forward = functools.partial(compile_fn, kind="forward")
    if dims or eager_first:
        static = inference

        def inference(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            return BucketedGraph(gm, config, dims, compile_static=static, refuse=refuse,
                                 eager_first=eager_first)

        forward = _not_bucketed(forward, dims)
    return aot_autograd(
        fw_compiler=forward,
        bw_compiler=functools.partial(compile_fn, kind="backward"),
        inference_compiler=inference,
        **common,
    )


def _not_bucketed(compile_fn: Any, dims: list[BucketedDim]) -> Any:
    def forward(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        new_report(dims, "training graphs are not bucketed")
        return compile_fn(gm, example_inputs)

    return forward


def npu_name_owner() -> Any:
    """The compiler function registered under ``npu`` (None when not resolved yet)."""
    from torch._dynamo.backends.registry import _COMPILER_FNS

    return _COMPILER_FNS.get("npu")


@functools.cache
def _warn_clash() -> None:
    warnings.warn(CLASH_MESSAGE, stacklevel=3)
    log.warning(CLASH_MESSAGE)


def warn_if_name_clash() -> bool:
    owner = npu_name_owner()
    if owner is not None and owner is not npu_backend:
        _warn_clash()
        return True
    return False
