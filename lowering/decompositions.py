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
    table.update(foreach_decompositions())
    from torch._inductor import inductor_prims  # registers prims.fma (Dynamo emits it)

    table[inductor_prims.fma] = _fma
    return table


# ---- foreach ops (clip_grad_norm_, foreach optimizers): one plain op per list element ------
_FOREACH = ("add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "sqrt", "neg", "abs",
            "exp", "reciprocal", "sign", "maximum", "minimum", "clamp_min", "clamp_max", "pow",
            "norm", "zero")


def _pick(arg, i: int, n: int):
    """The i-th element of a per-tensor list (or of a 1-D scalars tensor); else ``arg``."""
    if isinstance(arg, (list, tuple)) and len(arg) == n:
        return arg[i]
    return arg


def _foreach_decomposition(name: str, overload: str):
    def decompose(*args, **kwargs):
        lists = [a for a in args if isinstance(a, (list, tuple))]
        n = len(lists[0])
        outs = []
        for i in range(n):
            a = [_pick(x, i, n) for x in args]
            k = {key: _pick(v, i, n) for key, v in kwargs.items()}
            outs.append(_foreach_element(name, overload, a, k, i))
        return outs

    return decompose


def _foreach_element(name: str, overload: str, a: list, k: dict, i: int):
    if name == "norm":  # _foreach_norm(tensors, ord=2, dtype=None)
        ord_ = a[1] if len(a) > 1 else k.get("ord", 2)
        dtype = a[2] if len(a) > 2 else k.get("dtype")
        return aten.linalg_vector_norm.default(a[0], ord_, dtype=dtype)
    if name in ("addcmul", "addcdiv"):  # value is keyword-only on the plain op
        value = a[3] if len(a) > 3 else k.get("value", 1)
        if isinstance(value, torch.Tensor) and overload == "Tensor":
            value = value[i]
        return getattr(aten, name)(a[0], a[1], a[2], value=value)
    if name == "zero":
        return aten.zeros_like.default(a[0])
    return getattr(aten, name)(*a, **k)


def foreach_decompositions() -> dict:
    table = {}
    for name in _FOREACH:
        packet = getattr(aten, f"_foreach_{name}", None)
        for overload in packet.overloads() if packet is not None else ():
            op = getattr(packet, overload)
            if overload.endswith("out"):
                continue
            table[op] = _foreach_decomposition(name, overload)
    return table


def _fma(a, b, c):
    """prims.fma (Dynamo's form of ``addcdiv_``/``addcmul_``/``add_`` with a tensor
    ``value``/``alpha``): a * b + c."""
    return aten.add.Tensor(aten.mul.Tensor(a, b), c)
