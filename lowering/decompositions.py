"""The decomposition table AOTAutograd applies before lowering.

PyTorch's core-ATen decompositions, except for overloads we lower directly to GE (a
direct GE op beats a chain of primitives), plus a few ops that are better decomposed.
"""

from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

from npu_inductor.lowering.registry import CONVERTERS

aten = torch.ops.aten

# Decomposed even though they could be lowered: their parts map to GE ops cleanly.
EXTRA_DECOMPOSITIONS: list = []


def decomposition_table() -> dict:
    return dict(_table(len(CONVERTERS)))


# Building the table costs ~0.5 s (torch materializes every CIA op); converters are only
# ever added, so their count keys the cache.
@functools.lru_cache(maxsize=1)
def _table(_num_converters: int) -> dict:
    table = {op: fn for op, fn in core_aten_decompositions().items() if op not in CONVERTERS}
    table.update(get_decompositions(EXTRA_DECOMPOSITIONS))
    return table
