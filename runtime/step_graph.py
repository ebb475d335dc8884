"""Dataflow over a host model's steps (``host_model.Step``): which slots a step reads,
who produces a slot, how often each slot is read. Shared by the loader, the memory
binding and the host-side step fusions (``attention_chain.py``, ``shape_steps.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def slots(args: tuple) -> list[int]:
    """The value slots a step's args read, flattened (a tuple arg is a list input)."""
    out: list[int] = []
    for a in args:
        if isinstance(a, tuple):
            out.extend(a)
        elif a is not None:
            out.append(a)
    return out


def producers(steps: Sequence[Any]) -> dict[int, int]:
    """Slot -> index of the step that writes it."""
    return {s: i for i, st in enumerate(steps) for s in st.outs}


def read_counts(steps: Sequence[Any]) -> dict[int, int]:
    """Slot -> how many step arguments read it."""
    counts: dict[int, int] = {}
    for st in steps:
        for s in slots(st.args):
            counts[s] = counts.get(s, 0) + 1
    return counts


def readers(steps: Sequence[Any]) -> dict[int, list[int]]:
    """Slot -> indices of the steps reading it, in order."""
    out: dict[int, list[int]] = {}
    for i, st in enumerate(steps):
        for s in slots(st.args):
            out.setdefault(s, []).append(i)
    return out
