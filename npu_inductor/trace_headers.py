"""No source-tokenizing log headers while Dynamo traces a frame for npu_inductor.

[Note: trace headers]
For every ``call_function``/``call_method``/``call_module`` node Dynamo records at a new
source position, torch 2.13's ``SubgraphTracer._create_proxy`` computes
``tx.get_line_of_code_header(lineno)`` *eagerly*, only to put it in a lazily formatted
``trace_call`` log line (``TRACE FX call ... from <header>``). The header names the
enclosing function via ``funcname_cache.get_funcname``, which tokenizes the whole source
file of every frame it meets the first time (the model's file, ``torch/nn/functional.py``,
...): ~0.03 s of CPU per fresh process on bert, cold and warm alike, ~8% of a warm start.
The two other callers (``trace_call``'s inline line and ``trace_source``'s starts-line
line) already compute it only when their log is on.

``install()`` wraps torch's method once; while Dynamo traces a frame whose backend is
npu_inductor's (the ``OutputGraph``'s compiler function unwraps to ``npu_backend``) and
neither the ``trace_call`` nor the ``trace_source`` artifact log is enabled at DEBUG (the
only consumers of the header), the wrapper returns the header without the function name
(no tokenizing). With ``TORCH_LOGS=trace_call`` or ``trace_source`` the full header is
built as before, and frames traced for any other backend always call torch's method. The
graph, its node metadata, guards and outputs do not depend on the header.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

_ORIGINAL: Any = None


def install() -> bool:
    """Wrap ``InstructionTranslatorBase.get_line_of_code_header`` (once); False when this
    torch has no such method (nothing to skip)."""
    global _ORIGINAL
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase

    from npu_inductor.torch_patch import wrap_once

    _ORIGINAL = wrap_once(InstructionTranslatorBase, "get_line_of_code_header",
                          _get_line_of_code_header, _ORIGINAL)
    return _ORIGINAL is not None


def headers_logged() -> bool:
    """Is a log that prints the header on (``TORCH_LOGS=trace_call`` / ``trace_source``)?"""
    from torch._dynamo.symbolic_convert import trace_call_log, trace_source_log

    return (trace_call_log.isEnabledFor(logging.DEBUG)
            or trace_source_log.isEnabledFor(logging.DEBUG))


def is_npu_compile(compiler_fn: Any) -> bool:
    """Does Dynamo's compiler function (``WrapBackendDebug`` around torch.compile's
    ``_TorchCompileWrapper``, a partial, ...) call npu_inductor's backend?"""
    from npu_inductor.backend import npu_backend

    for _ in range(8):  # a few known wrapper layers; never loops on a cycle
        if compiler_fn is npu_backend:
            return True
        if isinstance(compiler_fn, functools.partial):
            compiler_fn = compiler_fn.func
            continue
        inner = (getattr(compiler_fn, "_torchdynamo_orig_backend", None)
                 or getattr(compiler_fn, "compiler_fn", None))
        if inner is None or inner is compiler_fn:
            return False
        compiler_fn = inner
    return False


def _get_line_of_code_header(self: Any, lineno: int | None = None) -> str:
    output = getattr(self, "output", None)
    if (output is not None and not headers_logged()
            and is_npu_compile(getattr(output, "compiler_fn", None))):
        if lineno is None:
            lineno = self.lineno
        depth = f" (inline depth: {self.inline_depth})" if self.inline_depth > 0 else ""
        return f"{self.f_code.co_filename}:{lineno} in {self.f_code.co_name}{depth}"
    return _ORIGINAL(self, lineno)
