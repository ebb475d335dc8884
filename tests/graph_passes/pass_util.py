"""Hand-built aten graphs for pass tests: trace a small function the way AOTAutograd would
(fake tensors from one fake mode, our decomposition table), then run one pass on it."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes import counters
from npu_inductor.lowering.decompositions import decomposition_table


def trace(fn: Callable, *inputs: torch.Tensor) -> torch.fx.GraphModule:
    """An aten FX graph of ``fn`` with ``meta['val']`` on every node."""
    with torch.no_grad():
        return make_fx(fn, tracing_mode="fake", decomposition_table=decomposition_table())(*inputs)


def run(pass_fn: Callable, gm: torch.fx.GraphModule,
        **options: Any) -> tuple[torch.fx.GraphModule, dict[str, int]]:
    """Apply one pass; returns the graph and the counters it bumped."""
    before = collections.Counter(counters)
    gm = pass_fn(gm, NpuConfig(**options))
    gm.graph.lint()
    return gm, dict(collections.Counter(counters) - before)


def targets(gm: torch.fx.GraphModule) -> list[Any]:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def has(gm: torch.fx.GraphModule, target: Any) -> bool:
    return target in targets(gm)


def same_result(gm: torch.fx.GraphModule, fn: Callable, *inputs: torch.Tensor,
                rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """The rewritten graph, run eagerly (npu::* ops through their CPU impls), equals ``fn``."""
    with torch.no_grad():
        got = gm(*inputs)
        want = fn(*inputs)
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol)
