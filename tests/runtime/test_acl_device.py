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
