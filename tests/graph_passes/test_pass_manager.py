"""The pass runner: order, logging, per-pass dumps, the verifier, fusions on/off."""

from __future__ import annotations

import logging
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from pass_util import run, trace

from npu_inductor import graph_passes
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes import GraphVerificationError, run_passes, verify

aten = torch.ops.aten


def _fn(x, w):
    return torch.relu(x @ w.t()) + 0.0


def test_runner_logs_every_pass_with_node_counts(caplog):
    gm = trace(_fn, torch.randn(4, 8), torch.randn(3, 8))
    with caplog.at_level(logging.INFO, logger="npu_inductor.passes"):
        run_passes(gm, NpuConfig())
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pass ")]
    assert len(logged) == len(graph_passes.PASSES)
    assert "fuse_matmul" in " ".join(logged) and "->" in logged[0]


def test_fusions_off_skips_fusion_passes(caplog):
    gm = trace(_fn, torch.randn(4, 8), torch.randn(3, 8))
    with caplog.at_level(logging.INFO, logger="npu_inductor.passes"):
        gm = run_passes(gm, NpuConfig(fusions=False))
    assert "fuse_" not in " ".join(r.getMessage() for r in caplog.records)
    assert aten.mm.default in [n.target for n in gm.graph.nodes]


def test_dump_dir_gets_the_graph_before_and_after_each_pass(tmp_path):
    gm = trace(_fn, torch.randn(4, 8), torch.randn(3, 8))
    run_passes(gm, NpuConfig(dump_dir=str(tmp_path)), name="inference_7")
    folder = tmp_path / "inference_7" / "passes"
    files = sorted(p.name for p in folder.iterdir())
    assert files[0] == "00_input.py" and len(files) == len(graph_passes.PASSES) + 1
    assert "npu.matmul" in (folder / files[-1]).read_text()
    assert "aten.mm" in (folder / "00_input.py").read_text()


def test_verifier_accepts_every_pass_output():
    gm = trace(_fn, torch.randn(4, 8), torch.randn(3, 8))
    run_passes(gm, NpuConfig(verify=True))


def _break_meta(gm, config):
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    node.meta["val"] = torch.empty(1, 2, 3, device="meta")  # wrong shape
    return gm


def _drop_meta(gm, config):
    next(n for n in gm.graph.nodes if n.op == "call_function").meta.pop("val")
    return gm


@pytest.mark.parametrize("bad_pass, message", [(_break_meta, "meta\\['val'\\] is"),
                                               (_drop_meta, "has no meta")])
def test_verifier_names_the_pass_that_broke_the_graph(monkeypatch, bad_pass, message):
    gm = trace(_fn, torch.randn(4, 8), torch.randn(3, 8))
    monkeypatch.setattr(graph_passes, "PASSES", [bad_pass])
    with pytest.raises(GraphVerificationError, match=message):
        run_passes(gm, NpuConfig(verify=True))
    run_passes(trace(_fn, torch.randn(4, 8), torch.randn(3, 8)), NpuConfig(verify=False))


def test_verifier_catches_use_before_definition():
    gm = trace(_fn, torch.randn(4, 8), torch.randn(3, 8))
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    nodes[0].prepend(nodes[-1])  # last op moved before its inputs
    with pytest.raises(GraphVerificationError, match="lint"):
        verify(gm)


def test_env_var_turns_the_verifier_on(monkeypatch):
    monkeypatch.setenv("NPU_INDUCTOR_VERIFY", "1")
    from npu_inductor.config import resolve

    assert resolve().verify


def test_counters_are_bumped_by_name():
    gm = trace(_fn, torch.randn(4, 8), torch.randn(3, 8))
    _, fired = run(graph_passes.fuse_matmul, gm)
    assert fired == {"fuse_matmul": 1}
