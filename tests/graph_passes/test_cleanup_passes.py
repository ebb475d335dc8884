"""DCE, CSE, no-op removal, constant folding, freeze_parameters: each fires on a tiny
hand-built graph (node targets asserted) and leaves a near-miss alone."""

from __future__ import annotations

import operator
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from harness import check_model, record_graphs
from pass_util import has, run, same_result, targets, trace

from npu_inductor.graph_passes.constant_fold import MAX_FOLD_ELEMENTS, constant_fold
from npu_inductor.graph_passes.cse import cse
from npu_inductor.graph_passes.dce import dce
from npu_inductor.graph_passes.noop import remove_noops

aten = torch.ops.aten


# ---- DCE ----------------------------------------------------------------------------------
def _dead(x):
    torch.exp(x)  # unused
    return x + 1


def test_dce_removes_unused_nodes():
    gm, fired = run(dce, trace(_dead, torch.randn(3)))
    assert not has(gm, aten.exp.default) and fired["dce"] == 1


def test_dce_keeps_used_nodes():
    gm, fired = run(dce, trace(lambda x: torch.exp(x) + 1, torch.randn(3)))
    assert has(gm, aten.exp.default) and "dce" not in fired


# ---- CSE ----------------------------------------------------------------------------------
def test_cse_merges_identical_calls():
    def fn(x):
        return torch.exp(x) + torch.exp(x)
    gm, fired = run(cse, trace(fn, torch.randn(3)))
    assert targets(gm).count(aten.exp.default) == 1 and fired["cse"] == 1
    same_result(gm, fn, torch.randn(3))


def test_cse_keeps_calls_that_differ_or_are_random():
    def fn(x):
        return torch.exp(x) + torch.exp(x * 2) + torch.rand_like(x) + torch.rand_like(x)
    gm, fired = run(cse, trace(fn, torch.randn(3)))
    assert targets(gm).count(aten.exp.default) == 2 and "cse" not in fired
    assert targets(gm).count(aten.rand_like.default) + targets(gm).count(aten.rand.default) >= 2


def test_cse_keeps_int_and_bool_scalars_apart():
    def fn(x):
        return torch.add(x, True) * torch.add(x, 1)
    _, fired = run(cse, trace(fn, torch.ones(3, dtype=torch.int64)))
    assert "cse" not in fired


# ---- no-op removal ---------------------------------------------------------------------------
def _noops(x):
    y = x.to(torch.float32).clone().view(2, 3).expand(2, 3)
    return (y.permute(1, 0).permute(1, 0) + 1).view(6).view(3, 2)


def test_noop_removal_drops_same_dtype_casts_views_clones_and_permute_pairs():
    x = torch.randn(2, 3)
    gm, fired = run(remove_noops, trace(_noops, x))
    left = targets(gm)
    assert aten.clone.default not in left and aten.expand.default not in left
    assert aten.permute.default not in left and aten._to_copy.default not in left
    assert left.count(aten.view.default) == 1 and fired["remove_noops"] >= 5
    same_result(gm, _noops, x)


def _real_work(x):
    return x.to(torch.float16).view(3, 2).permute(1, 0).expand(4, 2, 3)


def test_noop_removal_keeps_real_casts_views_and_permutes():
    gm, fired = run(remove_noops, trace(_real_work, torch.randn(2, 3)))
    for t in (aten._to_copy.default, aten.view.default, aten.permute.default,
              aten.expand.default):
        assert has(gm, t), t
    assert "remove_noops" not in fired


def _strided_view(x):
    return x.permute(1, 0).contiguous().view(-1) + 1


def test_noop_removal_keeps_the_copy_a_strided_view_needs():
    x = torch.randn(2, 3)
    gm, _ = run(remove_noops, trace(_strided_view, x))
    assert has(gm, aten.clone.default)  # view(permute(x)) would have no eager meaning
    same_result(gm, _strided_view, x)


def test_noop_removal_does_not_return_an_input_as_a_fresh_output():
    gm, _ = run(remove_noops, trace(lambda x: x.clone(), torch.randn(3)))
    assert has(gm, aten.clone.default)


# ---- constant folding ---------------------------------------------------------------------------
def _causal(x):
    n = x.shape[-1]
    i = torch.arange(n)
    mask = torch.where(i[None, :] <= i[:, None], 0.0, float("-inf"))
    return x + mask


def test_constant_folding_turns_the_causal_mask_into_one_constant():
    x = torch.randn(4, 4)
    gm, fired = run(constant_fold, trace(_causal, x))
    assert targets(gm) == [aten.add.Tensor] and fired["constant_fold"] >= 3
    (const,) = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert tuple(getattr(gm, const.target).shape) == (4, 4)
    same_result(gm, _causal, x)


def test_constant_folding_leaves_big_results_and_runtime_inputs_alone():
    side = int(MAX_FOLD_ELEMENTS ** 0.5) + 1
    def fn(x):
        return x + torch.ones(side, side).cumsum(0)
    gm, fired = run(constant_fold, trace(fn, torch.randn(side, side)))
    assert has(gm, aten.cumsum.default) and has(gm, aten.add.Tensor)
    assert "constant_fold" not in fired or not has(gm, operator.getitem)


# ---- freeze_parameters ---------------------------------------------------------------------------
def test_freeze_parameters_makes_weights_ge_constants_and_matches_eager():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with record_graphs() as seen:
        check_model(model, (torch.randn(3, 8),), train=False,
                    options={"freeze_parameters": True})
    ops = seen[-1].lowered.graph.op_counts()
    assert ops["Data"] == 1 and ops["Const"] >= 4  # only x stays an input


def test_freeze_parameters_is_off_by_default_and_in_training():
    model = torch.nn.Linear(8, 4)
    graphs = check_model(model, (torch.randn(3, 8),), train=False)
    assert graphs[-1].lowered.graph.op_counts()["Data"] == 3
    graphs = check_model(model, (torch.randn(3, 8),), train=True,
                         options={"freeze_parameters": True})
    assert graphs[0].lowered.graph.op_counts()["Data"] == 3
