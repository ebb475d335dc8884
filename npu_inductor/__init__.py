"""npu_inductor: a torch.compile backend for Ascend NPUs in graph mode (``backend="npu"``).

``explain`` is imported on first use, so ``import npu_inductor`` stays cheap. (It lives in
``explainer.py``: a submodule named ``explain`` would shadow the function once imported;
``export`` likewise lives in ``exporter.py``.)
"""

from __future__ import annotations

from typing import Any

__all__ = ["device_report", "export",
           "empty_cache", "explain", "memory_stats", "memory_summary", "reset_peak_memory_stats",
           "set_buckets", "set_memory_limit", "precompile"]
# device-memory API, defined in runtime/device.py
_MEMORY_API = ("empty_cache", "memory_stats", "memory_summary", "reset_peak_memory_stats",
               "set_memory_limit")


def __getattr__(name: str) -> Any:
    if name == "set_buckets":
        from npu_inductor.buckets import set_buckets

        return set_buckets
    if name == "device_report":
        from npu_inductor.device_rules_report import device_report

        return device_report
    if name == "export":  # offline export (exporter.py: a submodule would shadow it)
        from npu_inductor.exporter import export

        return export
    if name == "precompile":  # a warm start without Dynamo's trace (cache_precompile.py)
        from npu_inductor.cache_precompile import precompile

        return precompile
    if name == "explain":
        from npu_inductor.explainer import explain

        return explain
    if name == "debug":  # npu_inductor.debug.compare (the accuracy bisector)
        import importlib

        return importlib.import_module("npu_inductor.debug")
    if name in _MEMORY_API:
        from npu_inductor.runtime import device

        return getattr(device, name)
    raise AttributeError(f"module 'npu_inductor' has no attribute {name!r}")
