"""``precision_mode`` on the host device: the dtype each GE op computes in, as ATC picks it.

On the acl device ``precision_mode`` goes to ATC (``--precision_mode``), which chooses each
op's kernel dtype while it compiles the ``.om``. The host device loads the ``.air`` itself,
so it makes the same choice when it loads a model, per op, from the op's dtypes and the
kernels the target SoC has (``ge/soc.py``):

=============================  ===========================================================
``must_keep_origin_dtype``     every op in its graph dtype (the default here)
``force_fp32``                 fp16/bf16 ops that have a float32 kernel compute in float32
``force_fp16``                 fp32 ops that have a float16 kernel compute in float16
``cube_fp16in_fp32out``        cube ops (matmul, conv, attention) read float16-rounded
                               operands and accumulate and write float32; other ops as is
``allow_mix_precision[_fp16]`` fp32 cube ops (ATC's mixed-precision white list) compute in
                               float16; every other op keeps its dtype
``allow_mix_precision_bf16``   the same in bfloat16
``allow_fp32_to_fp16``         fp32 ops keep float32 where the SoC has a float32 kernel,
                               else compute in float16 (``allow_fp32_to_bf16``: bfloat16)
=============================  ===========================================================

An op moved to another dtype gets its floating operands cast in and its floating results
cast back to the graph's dtype, as the Cast pair ATC inserts around it. For the lowering
modes this is exact: a float16 result cast to float32 and back is unchanged, so chains of
lowered ops compute exactly as ATC's fused chains would. Two simplifications, both toward
more precision than a device: ``force_fp32`` rounds each result back to the graph dtype
(ATC keeps float32 between two float32-selected ops), and under mixed precision the gray
list (ops that follow their producer's dtype) stays in float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from npu_inductor.ge.soc import DeviceDtypeError, Ports, classify
from npu_inductor.runtime.memory_plan import ALIAS_OPS, VIEW_OPS

# ATC's cube-unit ops: the mixed-precision white list and cube_fp16in_fp32out's "cube" ops
CUBE_OPS = frozenset({
    "MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
    "Conv3DBackpropInput", "Conv3DBackpropFilter", "Conv2DTranspose", "Conv3DTranspose",
    "GroupedMatmul", "FlashAttentionScore", "FlashAttentionScoreGrad"})
# ops that compute nothing (data movement, casts, writes): ATC's choice does not apply
_PLUMBING = VIEW_OPS | ALIAS_OPS | {"Cast", "Assign", "Identity"}

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
# mode -> (graph dtypes it moves, target dtype, ops it applies to: "all" | "cube")
_RULES: dict[str, tuple[frozenset, torch.dtype, str]] = {
    "force_fp32": (frozenset({F16, BF16}), F32, "all"),
    "force_fp16": (frozenset({F32}), F16, "all"),
    "cube_fp16in_fp32out": (frozenset({F32}), F16, "cube"),
    "allow_mix_precision": (frozenset({F32}), F16, "cube"),
    "allow_mix_precision_fp16": (frozenset({F32}), F16, "cube"),
    "allow_mix_precision_bf16": (frozenset({F32}), BF16, "cube"),
    "allow_fp32_to_fp16": (frozenset({F32}), F16, "fallback"),
    "allow_fp32_to_bf16": (frozenset({F32}), BF16, "fallback"),
}


def _floating(op: Any) -> list[torch.dtype]:
    return [d.dtype for d in op.input_descs if not d.unfed and d.dtype is not None
            and d.dtype.is_floating_point]


def _kernel_at(op: Any, soc: str, old: torch.dtype | None, new: torch.dtype) -> bool:
    """Whether ``soc`` has a kernel for ``op`` with its ``old``-typed ports at ``new``."""
    swap = (lambda d: new if d == old else d) if old is not None else (lambda d: d)
    ins = {d.name: swap(d.dtype) for d in op.input_descs if not d.unfed}
    outs = {d.name: swap(d.dtype) for d in op.output_descs}
    try:
        return classify(op.type, Ports.of(ins, outs), soc, op.name) != "none"
    except DeviceDtypeError:
        return False


def compute_dtype(op: Any, mode: str, soc: str) -> torch.dtype | None:
    """The dtype ``op`` computes in under ``mode`` when it is not the graph's (else None)."""
    rule = _RULES.get(mode)
    floating = _floating(op)
    if rule is None or op.type in _PLUMBING or not floating:
        return None
    moves, target, scope = rule
    dtype = floating[0]
    if dtype not in moves or any(d != dtype for d in floating):
        return None
    if scope == "cube":
        return target if op.type in CUBE_OPS else None
    if scope == "fallback":
        if _kernel_at(op, soc, None, dtype):
            return None
    return target if _kernel_at(op, soc, dtype, target) else None


def _cast(x: Any, dtype: torch.dtype) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    return x


def _cast_back(result: Any, out_dtypes: tuple) -> Any:
    if isinstance(result, (list, tuple)):
        return type(result)(_cast(r, d) if d is not None else r
                            for r, d in zip(result, out_dtypes))
    return _cast(result, out_dtypes[0]) if out_dtypes[0] is not None else result


def wrap(fn: Callable[..., Any], compute: torch.dtype, graph_dtype: torch.dtype,
         out_dtypes: tuple, round_only: bool = False) -> Callable[..., Any]:
    """``fn`` computing in ``compute``: floating operands cast in, results cast back to the
    graph's ``out_dtypes``. ``round_only`` (cube_fp16in_fp32out): operands are rounded to
    ``compute`` and the op runs in ``graph_dtype`` (float32 accumulation and output)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        args = _cast(args, compute)
        if round_only:
            args = _cast(args, graph_dtype)
        return _cast_back(fn(*args, **kwargs), out_dtypes)

    run.compute_dtype = compute  # type: ignore[attr-defined]
    return run


def apply(op: Any, fn: Callable[..., Any], mode: str, soc: str
          ) -> tuple[Callable[..., Any], torch.dtype | None]:
    """``op``'s kernel under ``mode`` and the dtype it now computes in (None: unchanged)."""
    compute = compute_dtype(op, mode, soc)
    if compute is None:
        return fn, None
    graph_dtype = _floating(op)[0]
    outs = tuple(d.dtype for d in op.output_descs)
    return wrap(fn, compute, graph_dtype, outs, mode == "cube_fp16in_fp32out"), compute
