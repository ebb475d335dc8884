"""ATC ``--dynamic_dims`` gears: shape buckets compiled as ONE acl model.

The model gets one extra input, ``ascend_mbatch_shape_data``; before each execute the
executor selects the gear whose dims equal the (padded) inputs' shapes with
``acl.mdl.set_input_dynamic_dims`` (``aclmdlIODims``: every listed input's dims
concatenated, in ``--input_shape`` order). Limits: GE ``multi_batch_options.cc``
(at least 2 gears, all as wide as the ``-1`` count, distinct, positive) and at most 100.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

from npu_inductor.ge.ir import DYNAMIC_DIM, Graph

MIN_GEARS, MAX_GEARS = 2, 100  # GE multi_batch_options.cc kMinShapesCount; "max batch num"


class GearError(ValueError):
    """Gears ATC would refuse."""


@dataclass(frozen=True)
class Gears:
    """ATC ``--dynamic_dims`` gears of one graph.

    ``shapes``: (Data index, dims with -1 at the geared dims) in ``--input_shape`` order;
    ``values``: per gear, the values of those ``-1`` dims in the same order."""

    shapes: tuple[tuple[int, tuple[int, ...]], ...]
    values: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        width = sum(d == DYNAMIC_DIM for _, dims in self.shapes for d in dims)
        if not MIN_GEARS <= len(self.values) <= MAX_GEARS:
            raise GearError(f"ATC --dynamic_dims takes {MIN_GEARS} to {MAX_GEARS} gears, "
                            f"got {len(self.values)}")
        bad = [v for v in self.values if len(v) != width or min(v, default=1) < 1]
        if bad or width == 0 or len(set(self.values)) != len(self.values):
            raise GearError(f"--dynamic_dims gears must be distinct, positive and {width} "
                            f"wide (the -1 count of --input_shape), got {list(self.values)}")

    def full_dims(self) -> list[list[int]]:
        """Per gear, every listed input's dims concatenated (what ``aclmdlIODims`` of
        ``set_input_dynamic_dims`` / ``get_input_dynamic_dims`` holds)."""
        out = []
        for gear in self.values:
            it = iter(gear)
            out.append([next(it) if d == DYNAMIC_DIM else d
                        for _, dims in self.shapes for d in dims])
        return out


@dataclass(frozen=True)
class GearPlan:
    """What a bucketed graph asks of its ONE acl compile: per FX placeholder position the
    (padded) shape it is compiled at, which of its dims are geared (dim -> index into a
    combo) and every bucket combination. ``gears_for`` turns it into the ``Gears`` of the
    lowered GE graph."""

    shapes: dict[int, tuple[int, ...]]
    geared: dict[int, dict[int, int]]
    combos: tuple[tuple[int, ...], ...]

    def gears_for(self, graph: Graph, data_inputs: tuple[int, ...]) -> Gears:
        shapes, order = [], []
        for k, op in enumerate(graph.data_ops()):
            dims, pos = op.output_descs[0].shape, data_inputs[k]
            if DYNAMIC_DIM not in dims and pos not in self.geared:
                continue
            listed = list(self.shapes[pos])
            for d, idx in sorted(self.geared.get(pos, {}).items()):
                if dims[d] != DYNAMIC_DIM:
                    raise GearError(f"Data {op.name!r} dim {d} is static in the GE graph; "
                                    f"it cannot be a gear")
                listed[d] = DYNAMIC_DIM
                order.append(idx)
            shapes.append((k, tuple(listed)))
        values = tuple(tuple(combo[i] for i in order) for combo in self.combos)
        return Gears(tuple(shapes), values)


_PLAN: contextvars.ContextVar[GearPlan | None] = contextvars.ContextVar("gear_plan",
                                                                       default=None)


@contextlib.contextmanager
def gear_plan(plan: GearPlan | None) -> Iterator[None]:
    """Compile the graphs of this block as gear models of ``plan`` (None: no gears)."""
    token = _PLAN.set(plan)
    try:
        yield
    finally:
        _PLAN.reset(token)


def current_plan() -> GearPlan | None:
    return _PLAN.get()
