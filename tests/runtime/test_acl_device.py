"""The acl device path (``AclDevice``, the acl executor, ATC) through the strict fakes of
``acl`` and ``atc`` in ``tests/fakes``: static, ``dynamic=True`` and gear models."""

from __future__ import annotations

import torch
from fakes.fixtures import fake_acl  # noqa: F401  (fixture)
from harness import STRICT, check_fn

ACL = {**STRICT, "device": "acl"}


def test_static_function_on_acl(fake_acl):  # noqa: F811
    graphs = check_fn(lambda x, y: torch.relu(x @ y) + 1, torch.randn(3, 4), torch.randn(4, 5),
                      options=ACL)
    assert graphs[0].executor.device.kind == "acl"
    assert len(fake_acl.atc_runs()) == 1
    assert ("mdl.execute", (graphs[0].executor.model_id,)) in fake_acl.calls


def _calls(fake, name):
    return [args for call, args in fake.calls if call == name]


def test_dynamic_shapes_describe_inputs_and_read_output_shapes(fake_acl):  # noqa: F811
    def f(x, w):
        return torch.tanh(x @ w).sum(-1, keepdim=True) * 2

    w = torch.randn(4, 3)
    compiled = torch.compile(f, backend="npu", dynamic=True, options=ACL)
    for n in (5, 7, 2):
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x, w), f(x, w), rtol=1e-5, atol=1e-5)
    runs = fake_acl.atc_runs()
    assert len(runs) == 1, runs
    assert any(a.startswith("--input_shape=") and "-1" in a for a in runs[0]["argv"])
    assert "--soc_version=Ascend910B2" in runs[0]["argv"]  # from aclrtGetSocName


def test_shape_buckets_are_one_gear_model(fake_acl):  # noqa: F811
    def f(x):
        return torch.relu(x) * 3 + 1

    compiled = torch.compile(f, backend="npu", dynamic=True,
                             options={**ACL, "shape_buckets": {"x": {0: [2, 4, 8]}}})
    for n in (3, 8, 2, 4, 6):
        x = torch.randn(n, 5)
        torch.testing.assert_close(compiled(x), f(x))
    runs = fake_acl.atc_runs()
    assert len(runs) == 1 and runs[0]["gears"] == [[2, 5], [4, 5], [8, 5]], runs
    assert "--dynamic_dims=2;4;8" in runs[0]["argv"]
    gears = [args[2]["dims"] for args in _calls(fake_acl, "mdl.set_input_dynamic_dims")]
    assert gears == [[4, 5], [8, 5], [2, 5], [4, 5], [8, 5]]


def _om(tmp_path, shape, *extra):
    """A fake .om of a one-input graph (input ``x`` of ``shape``), via the fake atc."""
    import fake_atc

    from npu_inductor.ge import GraphBuilder, to_air

    b = GraphBuilder("g")
    b.output([b.data(torch.float32, shape, "x")])
    (tmp_path / "g.air").write_bytes(to_air(b.build()))
    argv = [f"--model={tmp_path / 'g.air'}", "--framework=1", f"--output={tmp_path / 'g'}",
            "--soc_version=Ascend910B2", *extra]
    return fake_atc.main(argv), tmp_path / "g.om"


def test_fake_atc_refuses_what_atc_refuses(fake_acl, tmp_path):  # noqa: F811
    assert _om(tmp_path, (-1, 4), "--input_shape=x:-1,4")[0] == 0
    assert _om(tmp_path, (2, 4), "--no_such_flag=1")[0] == 1
    assert _om(tmp_path, (-1, 4), "--input_shape=y:-1,4")[0] == 1  # not a Data op
    assert _om(tmp_path, (-1, 4), "--input_shape=x:-1,5")[0] == 1  # contradicts dim 4
    gear = ("--input_shape=x:-1,4", "--input_format=ND")
    assert _om(tmp_path, (-1, 4), *gear, "--dynamic_dims=2")[0] == 1  # one gear
    assert _om(tmp_path, (-1, 4), *gear, "--dynamic_dims=2,1;4,1")[0] == 1  # too wide
    assert _om(tmp_path, (-1, 4), *gear, "--dynamic_dims=2;4")[0] == 0


def test_fake_acl_refuses_what_acl_refuses(fake_acl, tmp_path):  # noqa: F811
    acl = fake_acl.acl
    assert acl.rt.malloc(64, 0)[1] == acl.ACL_ERROR_UNINITIALIZE
    assert acl.init() == 0 and acl.init() == acl.ACL_ERROR_REPEAT_INITIALIZE
    assert acl.rt.malloc(64, 0)[1] == acl.ACL_ERROR_RT_CONTEXT_NULL  # before set_device
    assert acl.rt.set_device(0) == 0
    assert acl.rt.malloc(0, 0)[1] == acl.rt.malloc(-8, 0)[1] == acl.ACL_ERROR_INVALID_PARAM
    _, om = _om(tmp_path, (-1, 4), "--input_shape=x:-1,4")
    data = om.read_bytes()
    model, ret = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(data), len(data))
    assert ret == 0
    ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    assert acl.mdl.execute(model, ins, outs) == acl.ACL_ERROR_MODEL_INPUT_NOT_MATCH
    ptr, _ = acl.rt.malloc(64, 0)
    acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(ptr, 64))
    acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(0, 0))
    assert acl.mdl.execute(model, ins, outs) == acl.ACL_ERROR_INVALID_PARAM  # -1, no desc
    desc = acl.create_tensor_desc(0, [3, 4], 2)
    assert acl.mdl.set_dataset_tensor_desc(ins, desc, 0)[1] == 0
    assert acl.mdl.execute(model, ins, outs) == 0
    _, om = _om(tmp_path, (-1, 4), "--input_shape=x:-1,4", "--input_format=ND",
                "--dynamic_dims=2;4")
    data = om.read_bytes()
    gear_model, _ = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(data), len(data))
    gin = acl.mdl.create_dataset()
    for _ in range(2):
        acl.mdl.add_dataset_buffer(gin, acl.create_data_buffer(ptr, 64))
    assert acl.mdl.execute(gear_model, gin, outs) == acl.ACL_ERROR_INVALID_PARAM  # no gear
