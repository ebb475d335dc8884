"""Backend entry: options, env overrides, entry points, the `npu` name clash, dumps, codegen."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from harness import check_fn

from npu_inductor import config as npu_config
from npu_inductor.atc import atc_script
from npu_inductor.config import ConfigError, resolve
from npu_inductor.ge import GraphBuilder
from npu_inductor.gears import GearError, Gears


def test_unknown_option_is_an_error_listing_valid_keys():
    with pytest.raises(ConfigError) as err:
        resolve({"fallbak": "eager"})
    assert "fallbak" in str(err.value) and "fallback" in str(err.value)
    assert "shape_buckets" in str(err.value)


def test_unknown_option_through_torch_compile():
    fn = torch.compile(lambda x: x * 2, backend="npu", options={"nope": 1})
    with pytest.raises(Exception, match="unknown npu_inductor option"):
        fn(torch.randn(3))


def test_bad_choice_is_an_error():
    with pytest.raises(ConfigError, match="device='gpu'"):
        resolve({"device": "gpu"})


def test_env_override_and_precedence(monkeypatch):
    monkeypatch.setenv("NPU_INDUCTOR_FALLBACK", "error")
    monkeypatch.setenv("NPU_INDUCTOR_FREEZE_PARAMETERS", "1")
    monkeypatch.setenv("NPU_INDUCTOR_MAX_BUCKETS", "4")
    cfg = resolve()
    assert (cfg.fallback, cfg.freeze_parameters, cfg.max_buckets) == ("error", True, 4)
    assert resolve({"fallback": "eager"}).fallback == "eager"  # explicit options win


def test_config_patch():
    with npu_config.patch(dump_dir="/tmp/x"):
        assert resolve().dump_dir == "/tmp/x"
    assert resolve().dump_dir is None


def _run(code: str, env: dict | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, cwd=cwd, timeout=300)


def test_entry_point_works_without_importing_npu_inductor(tmp_path):
    done = _run(f"""
        import sys, torch
        m = torch.nn.Linear(4, 3)
        with torch.no_grad():
            out = torch.compile(m, backend="npu", options={{"dump_dir": {str(tmp_path)!r}}})(
                torch.ones(2, 4))
            assert torch.allclose(out, m(torch.ones(2, 4)), atol=1e-6)
        print("imported-by-torch:", "npu_inductor.backend" in sys.modules)
    """, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "imported-by-torch: True" in done.stdout
    airs = list(tmp_path.glob("*/*.air"))
    assert airs, "the GE path did not run (no .air dumped)"


FAKE_TORCH_NPU = '''
from torch._dynamo.backends.registry import _BACKENDS, register_backend

def torchair_backend(gm, example_inputs, **kwargs):
    import builtins
    builtins.TORCHAIR_RAN = True
    return gm.forward

# what torch_npu.dynamo does: drop any "npu" entry point, then claim the name
_BACKENDS.pop("npu", None)
register_backend(torchair_backend, "npu")
'''


@pytest.fixture
def fake_torch_npu(tmp_path):
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text(FAKE_TORCH_NPU)
    return {"PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_clash_torch_npu_imported_first(fake_torch_npu):
    done = _run("""
        import builtins, warnings, torch, torch_npu
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as w:
            torch.compile(lambda x: x + 1, backend="npu_inductor")(torch.ones(2))
        assert any("npu_inductor" in str(x.message) for x in w), [str(x.message) for x in w]
        torch.compile(lambda x: x * 3, backend="npu")(torch.ones(2))
        print("torchair ran:", getattr(builtins, "TORCHAIR_RAN", False))
    """, env=fake_torch_npu)
    assert done.returncode == 0, done.stderr
    assert "torchair ran: True" in done.stdout


def test_clash_our_entry_point_resolved_first_does_not_crash(fake_torch_npu):
    # torch_npu installed but not imported yet: resolving "npu" must not lead to
    # "duplicate name: npu" in either order
    done = _run("""
        import warnings, torch
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as w:
            torch.compile(lambda x: x + 1, backend="npu")(torch.ones(2))
        import torch_npu  # a later import must not crash either
        print("warned:", any("npu_inductor" in str(x.message) for x in w))
    """, env=fake_torch_npu)
    assert done.returncode == 0, done.stderr
    assert "warned: True" in done.stdout


def test_no_clash_no_warning():
    done = _run("""
        import warnings, torch
        warnings.simplefilter("error")
        torch.compile(lambda x: x + 1, backend="npu")(torch.ones(2))
        print("ok")
    """)
    assert done.returncode == 0, done.stderr


def test_dump_dir_contents(tmp_path):
    check_fn(lambda x, y: torch.relu(x @ y), torch.randn(2, 3), torch.randn(3, 4),
             options={"dump_dir": str(tmp_path)})
    folders = [p for p in tmp_path.iterdir() if (p / "executor.py").exists()]
    assert len(folders) == 1, list(tmp_path.iterdir())
    names = {p.name for p in folders[0].iterdir()}
    assert {"executor.py", "fx_before_passes.py", "fx_after_passes.py", "ge_graph.txt"} <= names
    assert any(n.endswith(".air") for n in names) and any(n.endswith(".pbtxt") for n in names)
    assert "MatMulV2" in (folders[0] / "ge_graph.txt").read_text()


def test_executor_for_an_odd_graph_name_runs():
    """The generated executor is run, not string-matched: a graph name with a quote and a
    newline still gives a module that loads the graph on the host device and computes.
    (The acl-flavoured executor runs end to end against the strict pyACL fake in
    test_acl_models.py.)"""
    from npu_inductor.codegen import executor_source, load_executor
    from npu_inductor.ge import to_air
    from npu_inductor.runtime.device import get_device

    b = GraphBuilder("weird'name\n\"x")
    x = b.data(torch.float32, (2, 2), "x")
    (y,) = b.op("Relu", "relu", [x], {}, [(torch.float32, (2, 2))])
    b.output([y])
    g = b.build()
    for device in ("host", "acl"):
        compile(executor_source(g, device), "<executor>", "exec")  # both render valid Python
    module = load_executor(executor_source(g, "host"), g.name)
    executor = module.Executor(get_device("host"), to_air(g))
    try:
        t = torch.randn(2, 2)
        (out,) = executor.run([t])
        torch.testing.assert_close(out, torch.relu(t))
    finally:
        executor.close()


def test_executor_rebinds_inputs_across_calls():
    """Datasets persist across calls: new tensors, in-place updates of the same tensor and
    non-contiguous inputs are all seen by the next call."""
    torch._dynamo.reset()
    w = torch.randn(4, 4)

    def fn(x, w):
        return torch.relu(x @ w) + 1

    compiled = torch.compile(fn, backend="npu")
    for _ in range(2):
        x = torch.randn(3, 4)
        torch.testing.assert_close(compiled(x, w), fn(x, w))
        x.mul_(-2)  # same object, new values
        torch.testing.assert_close(compiled(x, w), fn(x, w))
    w.add_(1)  # a weight updated in place between calls
    torch.testing.assert_close(compiled(x, w), fn(x, w))
    wt = torch.randn(4, 4).t()  # non-contiguous: bound through a contiguous copy
    torch.testing.assert_close(compiled(x, wt), fn(x, wt))
    wt.add_(1)
    torch.testing.assert_close(compiled(x, wt), fn(x, wt))


def test_atc_script_argument_forms(tmp_path):
    b = GraphBuilder("g")
    x = b.data(torch.float32, (-1, 16), "tokens")
    b.output([x])
    gears = Gears(shapes=((0, (-1, 16)),), values=((1,), (4,), (8,)))
    script = atc_script(b.build(), tmp_path / "g.air", tmp_path / "g", resolve(),
                        "Ascend910B1", gears=gears)
    assert "--framework=1" in script and "--soc_version=Ascend910B1" in script
    assert "--input_shape=tokens:-1,16 " in script
    assert "--dynamic_dims='1;4;8'" in script and "--input_format=ND" in script
    assert "--precision_mode=must_keep_origin_dtype" in script


def test_gears_refuse_what_atc_refuses():
    with pytest.raises(GearError, match="2 to 100 gears"):
        Gears(shapes=((0, (-1, 16)),), values=((4,),))
    with pytest.raises(GearError, match="1 wide"):
        Gears(shapes=((0, (-1, 16)),), values=((4, 2), (8, 2)))
    with pytest.raises(GearError, match="distinct"):
        Gears(shapes=((0, (-1, 16)),), values=((4,), (4,)))


def test_acl_device_requires_cann():
    from npu_inductor.runtime.device import acl_available

    if acl_available():
        pytest.fail("this test documents the no-CANN boundary; pyACL is present here")
    with pytest.raises(Exception, match="pyACL"):
        check_fn(lambda x: x * 2, torch.randn(2), options={"device": "acl"})
