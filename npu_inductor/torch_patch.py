"""Replacing one torch function with npu_inductor's wrapper, once (the small cuts of
``guard_profile.py`` and ``trace_headers.py``)."""

from __future__ import annotations

from typing import Any


def wrap_once(owner: Any, name: str, wrapper: Any, original: Any) -> Any:
    """Put ``wrapper`` at ``owner.name``; return the function the wrapper must call: the one
    it replaced, or ``original`` when it is already installed. None when torch has no
    ``owner.name`` (nothing to wrap)."""
    current = getattr(owner, name, None)
    if current is None:
        return None
    if current is wrapper:
        return original
    setattr(owner, name, wrapper)
    return current
