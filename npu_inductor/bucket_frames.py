"""Size 1 of a bucketed dim without a graph of its own.

[Note: size-1 graphs of bucketed frames]
A frame whose bucketed dim first arrives with size 1 is traced with the symbol's hint 1,
and torch's own decompositions can turn that into a guard ``Eq(s, 1)``: the matmul
decomposition reshapes ``q @ k.transpose(-1, -2)`` with ``q`` transposed, which is a view
only when ``s == 1`` (a size-1 dim's stride is free), so the reshape guards. Dynamo then
bakes ``1`` into that graph, and every other size recompiles a general, bucketed graph of
the same frame: two Dynamo graphs, and the size-1 one would compile a GE graph of its own.

When every guard that pins a bucketed symbol comes from torch's decompositions and meta
functions (not from a branch in the user's code), the size-1 graph computes what the
general graph computes at size 1. It then compiles nothing: it calls the general graph
(same frame, same inputs, same options), which pads size 1 to its smallest bucket. Before
the general graph exists (size 1 came first), its first call runs in eager, as Dynamo's
first static trace does (``EagerFirstCall``); if size 1 comes again before any other size,
it compiles exactly.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import Any

import sympy
import torch

from npu_inductor.buckets import BucketedDim, new_report
from npu_inductor.config import NpuConfig

# frame key -> (the frame's code, the compiled general (bucketed) graph of that frame); the
# code is kept so that its id in the key is not reused; the oldest entries are dropped
_GENERAL: OrderedDict[tuple, tuple[CodeType, Callable]] = OrderedDict()
_MAX_FRAMES = 64
_TORCH = str(Path(torch.__file__).parent)
_DYNAMO = str(Path(torch._dynamo.__file__).parent)


def frame_key(gm: torch.fx.GraphModule, config: NpuConfig) -> tuple | None:
    """Graphs of one frame with the same inputs and options; None when graphs cannot be
    shared (module state baked into the graph, or parameters frozen into it)."""
    code = _frame_code()
    if code is None or config.freeze_parameters:
        return None
    if any(n.op == "get_attr" for n in gm.graph.nodes):
        return None
    sources = tuple(_source(n) for n in gm.graph.nodes if n.op == "placeholder")
    return id(code), repr(config), sources


def _frame_code() -> CodeType | None:
    """The code object Dynamo is compiling (``convert_frame._compile``'s ``code``)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_compile" and "convert_frame" in frame.f_code.co_filename:
            code = frame.f_locals.get("code")
            return code if isinstance(code, CodeType) else None
        frame = frame.f_back
    return None


def _source(node: torch.fx.Node) -> str:
    grapharg = node.meta.get("grapharg")
    return grapharg.source.name if grapharg is not None else node.name


def pinned_by_torch(dims: list[BucketedDim]) -> bool:
    """Does tracing prove a bucketed size equals 1, through torch's own code only?"""
    context = torch._guards.TracingContext.try_get()
    if context is None or context.fake_mode is None or context.fake_mode.shape_env is None:
        return False
    env = context.fake_mode.shape_env
    symbols = {d.symbol for d in dims}
    if not any(env._maybe_evaluate_static(sympy.Eq(s, 1)) == sympy.true for s in symbols):
        return False
    return all(_in_torch(g.sloc.framework_loc) for g in env.guards
               if g.expr.free_symbols & symbols)


def _in_torch(loc: Any) -> bool:
    """A guard raised inside torch's decompositions / meta functions, not by Dynamo
    evaluating a branch of the user's code."""
    filename = getattr(loc, "filename", str(loc))
    return filename.startswith(_TORCH) and not filename.startswith(_DYNAMO)


def register_general(key: tuple | None, compiled: Callable) -> Callable:
    code = _frame_code()
    if key is not None and code is not None and key[0] == id(code):
        _GENERAL[key] = (code, compiled)
        while len(_GENERAL) > _MAX_FRAMES:
            _GENERAL.popitem(last=False)
    return compiled


def _general(key: tuple) -> Callable | None:
    entry = _GENERAL.get(key)
    return entry[1] if entry is not None else None


class SizeOneGraph:
    """Dynamo's graph of a frame for size 1 of its bucketed dims (see the note)."""

    def __init__(self, key: tuple, dims: list[BucketedDim],
                 compile_exact: Callable[[], Callable], eager: Callable) -> None:
        self.key, self.compile_exact, self.eager, self.fn = key, compile_exact, eager, None
        self.report = new_report(dims)
        self.report.notes.append(
            f"size 1 of {', '.join(d.label for d in dims)}: Dynamo traced a graph of its own "
            "(torch's decompositions pinned the size to 1); it compiles nothing and runs the "
            "frame's general bucketed graph, which pads size 1 to the smallest bucket (before "
            "that graph exists, its first call runs in eager)")

    def __call__(self, *args: Any) -> Any:
        self.report.calls += 1
        general = _general(self.key)
        if general is not None:
            return general(*args)
        if self.report.calls == 1:  # no general graph yet: as Dynamo's first static trace
            self.report.eager_calls += 1
            return self.eager(*args)
        if self.fn is None:
            self.fn = self.compile_exact()
            self.report.compiles += 1
            self.report.exact_reasons.append(
                "size 1 came again before any other size: compiled exactly")
        return self.fn(*args)
