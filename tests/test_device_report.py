"""``npu_inductor.device_report`` and explain's device section on the zoo models: LLaMA
(prefill and decode, benchmark-zoo CI sizes) and BERT inference hold fused attention and no
AI CPU op in fp16/bf16 on Ascend910B1, match eager, and hold no fused attention in fp32."""

from __future__ import annotations

import pytest
import torch

import npu_inductor
from npu_inductor.benchmarks.zoo import ZOO
from npu_inductor.compile_fx import record_reports
from npu_inductor.device_rules_report import from_reports

# fp16/bf16 vs eager: fused attention and the eager ops round at different points
TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.float32: 1e-5}
FUSED = {"llama_prefill": "PromptFlashAttention", "llama_decode": "IncreFlashAttention",
         "bert": "PromptFlashAttention"}


def _zoo(name: str, dtype: torch.dtype):
    model, inputs = ZOO[name].build(2, 0)
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    return model.to(dtype).eval(), inputs


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _compile(name: str, dtype: torch.dtype):
    model, inputs = _zoo(name, dtype)
    torch._dynamo.reset()
    with torch.no_grad(), record_reports() as reports:
        got = torch.compile(model, backend="npu", options={"fallback": "error"})(*inputs)
        want = model(*inputs)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(_first(got).float(), _first(want).float(), rtol=tol, atol=tol)
    assert reports and all(r.fallbacks == [] for r in reports)
    ops = {}
    for r in reports:
        for g in r.ge_graphs:
            for t, n in g.lowered.graph.op_counts().items():
                ops[t] = ops.get(t, 0) + n
    return from_reports(reports, "Ascend910B1"), ops


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["llama_prefill", "llama_decode", "bert"])
def test_low_precision_inference_fuses_attention_with_no_ai_cpu_op(name, dtype):
    report, ops = _compile(name, dtype)
    layers = 4 if name.startswith("llama") else 2
    assert ops.get(FUSED[name], 0) == layers, ops
    assert "SoftmaxV2" not in ops
    assert report.total("aicpu") == 0, str(report)
    assert report.total("aicore") > 0


@pytest.mark.parametrize("name", ["llama_prefill", "llama_decode"])
def test_fp32_inference_holds_no_fused_attention_and_says_why(name):
    report, ops = _compile(name, torch.float32)
    assert "PromptFlashAttention" not in ops and "IncreFlashAttention" not in ops
    assert ops["SoftmaxV2"] == 4 and ops["BatchMatMulV2"] >= 8
    reasons = [d for d in report.decisions if d.rule == "dtype-gate"]
    assert len(reasons) == 4 and all(FUSED[name] in d.detail for d in reasons)


def test_device_report_and_explain_list_kernel_kinds_and_rules():
    model, inputs = _zoo("llama_decode", torch.float32)
    with torch.no_grad():  # inference graphs
        report = npu_inductor.device_report(model, *inputs)
    assert report.soc == "Ascend910B1" and len(report.graphs) == 1
    g = report.graphs[0]
    assert g.counts["aicore"] > 0 and g.counts["aicpu"] == 0
    assert g.unproven_ops and sum(g.unproven_ops.values()) == g.counts["unproven"]
    text = str(report)
    for needle in ("Device report for Ascend910B1", "AI Core", "0 AI CPU", "unproven:",
                   "rule [dtype-gate]", "IncreFlashAttention has no float32 kernel"):
        assert needle in text, f"{needle!r} missing from:\n{text}"
    with torch.no_grad():
        explained = str(npu_inductor.explain(model, *inputs))
    assert "Device report for Ascend910B1" in explained and "rule [dtype-gate]" in explained
