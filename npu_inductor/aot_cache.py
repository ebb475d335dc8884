"""npu_inductor graphs in PyTorch's AOTAutograd cache, so a warm start skips AOT tracing.

[Note: AOTAutograd cache]
torch 2.13 caches AOTAutograd's result (forward/backward graphs' runtime wrappers and the
compiled artifacts) when the compiler is a ``SerializableAOTDispatchCompiler`` returning an
``OutputCode``. A backend other than Inductor has no FX-graph-cache key, so it takes part
through the *bundled* entry (``functorch.config.bundled_autograd_cache``), where the
``OutputCode`` itself is pickled into the entry, as ``AOTEagerOutputCode`` does for
``aot_eager``. Ours, ``NpuOutputCode``, pickles as the key of its npu_inductor cache entry
plus the options and versions it was built with, never the GE graph: on an AOTAutograd hit
``post_compile`` loads the GE graph from npu_inductor's checksummed cache. Any mismatch
(other options, another npu_inductor source, an entry gone or damaged) raises there, and
AOTAutograd treats an exception while loading as a cache bypass: it traces and compiles.

[Note: caching_precompile]
torch's own Dynamo cache (``torch._dynamo.config.caching_precompile``, env
``TORCH_CACHING_PRECOMPILE=1``) would store this bundled entry with Dynamo's bytecode and load
it when a later process calls ``torch.compile``: outside any npu_inductor compile, so
``post_compile`` cannot compare the options (the user's current ones are unknown there) and
raises, which torch 2.13 does not catch (``torch.compile`` fails). With that setting on,
npu_inductor graphs are therefore not serialized: torch marks the frame's Dynamo entry
bypassed ("Backend not found") and a later process traces and compiles as usual, with
npu_inductor's own cache hits. ``npu_inductor.precompile`` (cache_precompile.py) is the
supported way to skip Dynamo's trace.

Used only when npu_inductor's cache is on, nothing is bucketed and parameters are not
frozen (a frozen graph depends on weight values, which AOTAutograd's key does not hold).
Graphs that fall back to eager in part are not cached at this level.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache
from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
from torch._inductor.output_code import OutputCode

from npu_inductor.config import NpuConfig

_STATE = threading.local()  # the NpuConfig of the torch.compile call being compiled


@dataclasses.dataclass
class NpuOutputCode(OutputCode):
    """A compiled npu_inductor graph as AOTAutograd's cache stores it (by reference)."""

    runner: Callable[[list[Any]], Any] | None = None
    kind: str = "inference"
    config: NpuConfig | None = None
    entry: tuple[str, str] | None = None  # (cache folder, entry key) of a whole-graph entry
    versions: str = ""
    _boxed_call: bool = True

    def __call__(self, inputs: Sequence[Any]) -> Any:
        return self.runner(inputs)

    def prepare_for_serialization(self) -> None:
        if self.entry is None:
            raise BypassAOTAutogradCache("npu_inductor graph is not a whole cache entry")
        if torch._dynamo.config.caching_precompile:  # see [Note: caching_precompile]
            raise BypassAOTAutogradCache("npu_inductor graphs are not stored for torch's "
                                         "caching_precompile")
        self.runner = None

    def post_compile(self, example_inputs: Sequence[Any], constants: Any,
                     graph_kwargs: Any) -> None:
        if self.runner is not None:
            return
        from npu_inductor.cache_key import versions_part
        from npu_inductor.compile_fx import runner_from_cache

        current = getattr(_STATE, "config", None)
        if current is None or current != self.config:
            raise BypassAOTAutogradCache("npu_inductor options differ from the cached graph's")
        if self.versions != versions_part(self.device_kind()):
            raise BypassAOTAutogradCache("cached by another npu_inductor/torch/CANN version")
        self.runner = runner_from_cache(self.entry[0], self.entry[1], self.config, self.kind)

    def device_kind(self) -> str:
        return _device_kind(self.config)

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        """No Triton kernels here."""


def _device_kind(config: NpuConfig) -> str:
    from npu_inductor import compile_fx  # the device the compiler loads graphs on

    return compile_fx.get_device(config.device, config.device_id).kind


def usable(config: NpuConfig, bucketed: bool) -> bool:
    from npu_inductor.cache import cache_root

    return cache_root(config) is not None and not bucketed and not config.freeze_parameters


def serializable(compile_fn: Callable[..., Any], kind: str,
                 config: NpuConfig) -> SerializableAOTDispatchCompiler:
    """``compile_fn`` returning ``NpuOutputCode`` (what AOTAutograd's cache requires)."""
    from npu_inductor.cache_key import versions_part

    def compile_output_code(gm: torch.fx.GraphModule, example_inputs: Any) -> NpuOutputCode:
        runner = compile_fn(gm, example_inputs)
        versions = versions_part(_device_kind(config))
        return NpuOutputCode(runner, kind, config, getattr(runner, "cache_entry", None),
                             versions)

    return SerializableAOTDispatchCompiler(NpuOutputCode, compile_output_code)


def _key_tag(config: NpuConfig) -> str:
    """What ``NpuOutputCode.post_compile`` compares, as part of AOTAutograd's key
    (``torch.compiler.config.cache_key_tag`` is hashed into it). Without it, a graph compiled
    with other options or by another npu_inductor source finds the existing entry under the
    same key, bypasses it in ``post_compile``, and torch 2.13 does not store the new one: every
    later start would re-trace."""
    from npu_inductor.cache_key import versions_part

    options = repr([(k, getattr(config, k)) for k in NpuConfig.keys()])
    text = f"{options}\n{versions_part(_device_kind(config))}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@contextlib.contextmanager
def scope(config: NpuConfig, enabled: bool) -> Iterator[None]:
    """Compile one Dynamo graph with AOTAutograd's bundled cache on (when ``enabled``)."""
    if not enabled:
        yield
        return
    saved = getattr(_STATE, "config", None)
    _STATE.config = config
    tag = f"{torch.compiler.config.cache_key_tag}|npu_inductor {_key_tag(config)}"
    try:
        with torch._functorch.config.patch(bundled_autograd_cache=True,
                                           force_non_lazy_backward_lowering=True), \
                torch.compiler.config.patch(cache_key_tag=tag):
            yield
    finally:
        _STATE.config = saved
