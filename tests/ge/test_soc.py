"""The dtype gate: the per-SoC kernel table, refusals at build time, the device forms the
lowering chooses instead (and records), and ``soc_version`` validation."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from npu_inductor import config
from npu_inductor.ge import GraphBuilder
from npu_inductor.ge import soc as kernels
from npu_inductor.ge.soc import DeviceDtypeError

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("gen_soc_table",
                                                  ROOT / "tools" / "gen_soc_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_package_table_is_the_reference_reshaped():
    tool = _tool()
    if not tool.REFERENCE.exists():
        pytest.fail(f"reference table missing at {tool.REFERENCE}")
    reference = json.loads(tool.REFERENCE.read_text())
    assert json.loads(tool.TABLE.read_text()) == tool.table(reference)
    assert kernels.table("Ascend910B1")["PromptFlashAttention"]["kind"] == "aicore"


def _builder():
    b = GraphBuilder("g", soc="Ascend910B1")
    return b, b.data(torch.bfloat16, (2, 8), "x")


def test_gate_refuses_a_dtype_combination_without_kernel_naming_op_port_dtype_soc():
    b, x = _builder()
    gamma = b.data(torch.float16, (8,), "gamma")  # the prototype allows it; 910B has no kernel
    with pytest.raises(DeviceDtypeError) as e:
        b.op("RmsNorm", "norm", [x, gamma], {"epsilon": 1e-6},
             [(torch.bfloat16, (2, 8)), (torch.float32, (2, 1))])
    for needle in ("Ascend910B1", "RmsNorm", "'norm'", "input 'gamma'", "FLOAT16",
                   "rms_norm_def.cpp"):
        assert needle in str(e.value), str(e.value)
    assert not any(op.type == "RmsNorm" for op in b.build().ops)  # never emitted


def test_gate_refuses_a_main_input_dtype_and_an_op_without_910b_kernel():
    b, x = _builder()
    d = b.data(torch.float64, (2, 8), "d")  # the prototype takes double, the kernel not
    with pytest.raises(DeviceDtypeError, match=r"ReverseV2 .* input 'x' of dtype DOUBLE"):
        axes = b.const(torch.tensor([0]), "axes")
        b.op("ReverseV2", "flip", [d, axes], {}, [(torch.float64, (2, 8))])
    # V3 is Ascend950-only: nothing emits it any more (it is not in the op-spec table), so
    # ask the gate directly
    ports = kernels.Ports.of({"x": torch.float32}, {"y": torch.float32, "argmax": torch.int64})
    with pytest.raises(DeviceDtypeError, match="no kernel at all for GE op MaxPoolWithArgmaxV3"):
        kernels.classify("MaxPoolWithArgmaxV3", ports, "Ascend910B1", "pool")


def test_kinds_ai_cpu_and_unproven_are_allowed_and_counted():
    b, x = _builder()
    i16 = b.data(torch.int16, (2, 8), "i")
    y, = b.op("Cast", "c", [i16], {"dst_type": 27}, [(torch.bfloat16, (2, 8))])  # AI CPU only
    f = b.data(torch.float32, (2, 8), "f")
    z, = b.op("IsNan", "nan", [f], {}, [(torch.bool, (2, 8))])  # "unknown" in the table
    b.output([y, z])
    counts = kernels.kernel_counts(b.build(), "Ascend910B1")
    assert counts["aicpu"] == 1 and counts["structural"] == 4  # 3 Data + NetOutput
    assert counts["unproven"] == 1 and counts["aicore"] == 0
    assert kernels.ops_of_kind(b.build(), "Ascend910B1", "aicpu") == {"Cast": 1}


def test_soc_version_unknown_is_a_config_error():
    assert config.resolve({"soc_version": "Ascend910B3"}).soc_version == "Ascend910B3"
    with pytest.raises(config.ConfigError, match="soc_version='Ascend310P3'.*Ascend910B1"):
        config.resolve({"soc_version": "Ascend310P3"})


def test_lowering_computes_an_op_without_bf16_kernel_in_float32_and_records_it():
    from harness import check_fn

    from npu_inductor.compile_fx import record_reports

    x, v = torch.randn(6, 4).to(torch.bfloat16), torch.randn(2, 4).to(torch.bfloat16)
    idx = torch.tensor([1, 4])
    with record_reports() as reports:  # TensorScatterUpdate: no bf16 kernel on 910B
        graphs = check_fn(lambda t, i, u: torch.index_put(t, (i,), u) * 2, x, idx, v,
                          options={"fallback": "error"})
    ops = graphs[0].lowered.graph.ops
    scatter = next(op for op in ops if op.type == "TensorScatterUpdate")
    assert scatter.input_descs[0].dtype == torch.float32
    decisions = [str(d) for d in graphs[0].lowered.decisions]
    assert any("TensorScatterUpdate has no kernel for bf16 on Ascend910B1" in d
               for d in decisions), decisions
    assert reports[0].fallbacks == []


def test_cast_pair_without_ai_core_kernel_goes_through_float32():
    from harness import check_fn

    x = torch.arange(12, dtype=torch.int16).reshape(3, 4)
    graphs = check_fn(lambda t: t.to(torch.bfloat16) + 1, x, options={"fallback": "error"})
    graph = graphs[0].lowered.graph
    casts = [(op.input_descs[0].dtype, op.output_descs[0].dtype) for op in graph.ops
             if op.type == "Cast"]
    assert (torch.int16, torch.float32) in casts and (torch.float32, torch.bfloat16) in casts
    assert kernels.kernel_counts(graph, "Ascend910B1")["aicpu"] == 0
