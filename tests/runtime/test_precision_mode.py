"""``precision_mode`` on the host device computes each op in the dtype ATC would pick
(runtime/precision.py), and on the acl device it reaches ATC, whose choice the model keeps."""

from __future__ import annotations

import pytest
import torch
from fakes.fixtures import fake_acl  # noqa: F401  (fixture)
from harness import record_graphs

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def fn(a, b, c):
    return torch.exp(a @ b) + c  # a cube op (MatMul), then two vector ops


def _inputs(dtype=F32):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*s, generator=g).to(dtype) / 2 for s in ((4, 8), (8, 4), (4, 4)))


def _run(mode, *inputs, device="host"):
    torch._dynamo.reset()
    options = {"fallback": "error", "device": device, "precision_mode": mode}
    with record_graphs() as graphs:
        out = torch.compile(fn, backend="npu", options=options)(*inputs)
    (graph,) = graphs
    return out, graph


def _host_model(graph):
    ex = graph.executor
    models = ex.device.acl.models if graph.om is None else ex.device.acl.S.models
    model = models[ex.model_id]
    return getattr(model, "host_model", model)


def _dtypes(model) -> dict[str, torch.dtype | None]:
    """Op type -> the dtype the host computes it in (None: the graph's own)."""
    return {st.op.type: st.compute for st in model.steps
            if st.op.type in ("MatMulV2", "MatMul", "Exp", "Add")}


def _per_op(a, b, c, cube, vector=None, round_only=False):
    """fn with the Cast pair ATC puts around each moved op."""
    if round_only:
        mm = a.to(cube).float() @ b.to(cube).float()
    else:
        mm = (a.to(cube) @ b.to(cube)).float() if cube else a @ b
    e = torch.exp(mm.to(vector)).float() if vector else torch.exp(mm)
    return (e.to(vector) + c.to(vector)).float() if vector else e + c


MODES = {  # mode -> (cube op dtype, vector op dtype), for float32 inputs
    "must_keep_origin_dtype": (None, None),
    "force_fp16": (F16, F16),
    "allow_mix_precision": (F16, None),
    "allow_mix_precision_fp16": (F16, None),
    "allow_mix_precision_bf16": (BF16, None),
    "cube_fp16in_fp32out": (F16, None),
    "allow_fp32_to_fp16": (None, None),  # the 910B has float32 kernels for all three
    "allow_fp32_to_bf16": (None, None),
    "force_fp32": (None, None),  # nothing in float16 to move up
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_float32_graph_computes_in_the_dtypes_atc_picks(mode):
    a, b, c = _inputs()
    out, graph = _run(mode, a, b, c)
    cube, vector = MODES[mode]
    dtypes = _dtypes(_host_model(graph))
    assert {k: v for k, v in dtypes.items() if k != "Add" and k != "Exp"} == {
        k: cube for k in dtypes if k.startswith("MatMul")}
    assert dtypes["Exp"] == vector and dtypes["Add"] == vector
    expected = _per_op(a, b, c, cube, vector, round_only=mode == "cube_fp16in_fp32out")
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert out.dtype == F32
    if cube is not None:  # the choice is observable in the numbers
        assert not torch.equal(out, fn(a, b, c))


def test_force_fp32_computes_float16_graphs_in_float32():
    a, b, c = _inputs(F16)
    out, graph = _run("force_fp32", a, b, c)
    assert set(_dtypes(_host_model(graph)).values()) == {F32}
    expected = (torch.exp((a.float() @ b.float()).half().float()).half().float()
                + c.float()).half()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert out.dtype == F16
    _, keep = _run("must_keep_origin_dtype", a, b, c)
    assert set(_dtypes(_host_model(keep)).values()) == {None}


def test_acl_device_passes_precision_mode_to_atc_and_the_model_follows_it(fake_acl):  # noqa: F811
    a, b, c = _inputs()
    out, graph = _run("allow_mix_precision_bf16", a, b, c, device="acl")
    (run,) = fake_acl.atc_runs()
    assert "--precision_mode=allow_mix_precision_bf16" in run["argv"]
    dtypes = _dtypes(_host_model(graph))
    assert {v for k, v in dtypes.items() if k.startswith("MatMul")} == {BF16}
    torch.testing.assert_close(out, _per_op(a, b, c, BF16), rtol=0, atol=0)
