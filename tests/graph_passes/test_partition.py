"""graph_passes/partition.py: GE partitions by eager depth, acyclic and ordered."""

import torch
from test_fallback import softclip
from torch.fx.experimental.proxy_tensor import make_fx

from npu_inductor.graph_passes.partition import eager_depths, split


def _trace(fn):
    return make_fx(fn)(torch.randn(4))


def _calls(top):
    """Top-level call sequence: submodule names and eager op names."""
    return [n.target if n.op == "call_module" else n.name for n in top.graph.nodes
            if n.op in ("call_module", "call_function") and n.name.split("_")[0] != "getitem"]


def test_chain_splits_around_the_eager_node():
    gm = _trace(lambda x: torch.relu(softclip(torch.relu(x) * 2)) + 1)
    top, parts = split(gm, {"softclip"})
    assert parts == ["ge_0", "ge_1"]
    assert _calls(top) == ["ge_0", "softclip", "ge_1"]
    x = torch.randn(4)
    torch.testing.assert_close(top(x), gm(x))


def test_branch_around_an_island_joins_the_earlier_partition():
    def fn(x):
        a = torch.relu(x)
        b = a * 2  # independent of the eager node: same depth as a
        return softclip(a) + b

    gm = _trace(fn)
    depth = {n.name: d for n, d in eager_depths(gm, {"softclip"}).items()}
    assert depth["relu"] == depth["mul"] == 0 and depth["add"] == 1
    top, parts = split(gm, {"softclip"})
    assert len(parts) == 2
    first = getattr(top, parts[0])
    assert {n.name for n in first.graph.nodes if n.op == "call_function"} == {"relu", "mul"}


def test_parallel_islands_share_partitions():
    def fn(x):
        return softclip(x + 1) * softclip(x - 1)

    top, parts = split(_trace(fn), {"softclip", "softclip_1"})
    assert len(parts) == 2  # {add, sub} before both islands, {mul} after
    x = torch.randn(4)
    torch.testing.assert_close(top(x), fn(x))


def test_leaves_the_input_graph_untouched():
    gm = _trace(lambda x: softclip(x) + 1)
    before = gm.print_readable(print_output=False)
    split(gm, {"softclip"})
    assert gm.print_readable(print_output=False) == before
