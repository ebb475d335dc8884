"""npu_inductor.explain: graph breaks, GE graphs with op counts, fallbacks with reasons."""

import torch
from models import make
from test_fallback import softclip

import npu_inductor


def test_llama_is_one_ge_graph_without_fallbacks():
    model, inputs = make("llama")
    report = npu_inductor.explain(model, *inputs)
    assert report.graph_breaks == []
    assert len(report.ge_graphs) == 1, str(report)
    assert report.fallbacks == [], str(report)
    assert report.ge_graphs[0].num_ops > 0


def test_reports_breaks_op_counts_and_fallbacks():
    def fn(x):
        y = torch.relu(x) * 2
        print("graph break")
        return softclip(y + 1) - 1

    report = npu_inductor.explain(fn, torch.randn(4))
    assert report.dynamo_graph_count == 2 and len(report.graph_breaks) == 1
    assert "print" in report.graph_breaks[0].reason
    assert report.fallback_counts == {"npu_fallback_test.softclip.default": 1}
    ge_types = {t for g in report.ge_graphs for t in g.op_counts}
    assert {"Relu", "Mul"} <= ge_types, ge_types
    text = str(report)
    for needle in ("Graph breaks: 1", "GE graphs:", "Relu x1", "Fallback ops: 1 node(s)",
                   "npu_fallback_test.softclip.default x1", "no GE converter",
                   "test_explain.py"):
        assert needle in text, f"{needle!r} missing from:\n{text}"


def test_import_is_lazy():
    import subprocess
    import sys

    code = ("import sys, npu_inductor; assert 'torch._dynamo' not in sys.modules; "
            "assert callable(npu_inductor.explain)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reports_fallbacks_even_when_configured_to_raise():
    from npu_inductor import config

    with config.patch(fallback="error"):
        report = npu_inductor.explain(lambda x: softclip(x) + 1, torch.randn(3))
    assert report.fallback_counts == {"npu_fallback_test.softclip.default": 1}
