"""No guard-latency profiling for frames npu_inductor compiles (a fixed ~28 ms per frame).

[Note: guard profiling]
After building a frame's guards, Dynamo (torch 2.13 ``CheckFunctionManager.__init__``)
first checks that they pass on the frame's own inputs, then calls
``profile_guard_manager(root, f_locals, 1)``: it flushes the CPU caches and times one guard
evaluation, only to log ``Guard eval latency`` at DEBUG level and add the figure to the
``guard_latency_us`` compile metric. The cache flush costs ~28 ms of CPU per frame, paid on
every compile, cold or warm: ~5% of a warm bert start and ~3 x 28 ms of a cold mlp
training step (model frame, optimizer frame, ...), where npu_inductor's own work is less.

``install()`` wraps torch's function once; the wrapper returns 0.0 (no flush, no
measurement) for a frame whose graph went through npu_inductor's backend (marked by its
Dynamo ``CompileContext`` in ``mark_frame``) unless Dynamo's guards log is at DEBUG
(``TORCH_LOGS=guards``: the figure is wanted). Every other frame, and every other backend
in the process, calls torch's function as before. The guards themselves and Dynamo's
check that they pass are untouched: only the timing is skipped.

``npu_inductor.precompile`` builds its guards in torch's ``aot_compile``, after the
capture's ``CompileContext`` has closed, so ``mark_frame`` cannot name that frame; the
cold precompile runs inside ``skipped()`` instead, which skips the timing of every guard
set built in it (one frame: ``aot_compile`` is fullgraph).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

_STATE = threading.local()  # the CompileContext of the frame npu_inductor compiles
_ORIGINAL: Any = None


def install() -> bool:
    """Wrap ``torch._dynamo.guards.profile_guard_manager`` (once); False when this torch
    has no such function (nothing to skip)."""
    global _ORIGINAL
    from torch._dynamo import guards

    from npu_inductor.torch_patch import wrap_once

    _ORIGINAL = wrap_once(guards, "profile_guard_manager", _profile_guard_manager, _ORIGINAL)
    return _ORIGINAL is not None


def mark_frame() -> None:
    """The frame Dynamo is compiling now has a graph compiled by npu_inductor."""
    from torch._guards import CompileContext

    _STATE.context = CompileContext.try_get()  # this frame's own (ids repeat after reset)


@contextlib.contextmanager
def skipped() -> Iterator[None]:
    """No guard-latency timing for guards built inside (this thread; see the note)."""
    install()
    previous, _STATE.skip = getattr(_STATE, "skip", False), True
    try:
        yield
    finally:
        _STATE.skip = previous


def _profile_guard_manager(root: Any, scope: Any, n_iters: int) -> float:
    from torch._dynamo.guards import guards_log
    from torch._guards import CompileContext

    ours, _STATE.context = getattr(_STATE, "context", None), None
    if ((getattr(_STATE, "skip", False) or
         (ours is not None and ours is CompileContext.try_get()))
            and not guards_log.isEnabledFor(logging.DEBUG)):
        return 0.0
    return _ORIGINAL(root, scope, n_iters)
