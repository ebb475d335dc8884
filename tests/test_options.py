"""Options that hold: every value is checked (type and range) when the backend resolves its
options, env overrides name the variable on garbage, sizes parse, and the memory limit is
enforced with and without a static memory plan."""

from __future__ import annotations

import os

import pytest
import torch

import npu_inductor
from npu_inductor.config import ConfigError, parse_size, resolve
from npu_inductor.runtime.allocator import LIMIT_ENV, limit_from_env


@pytest.fixture
def unlimited():
    npu_inductor.empty_cache()
    yield
    npu_inductor.set_memory_limit(None)


# ---- every option's value is type-checked ---------------------------------------------------
BAD_VALUES = [
    ("device", "gpu", "not one of"),
    ("fallback", True, "not one of"),
    ("pad", "maybe", "not one of"),
    ("precision_mode", "fp8", "not one of"),
    ("fusions", "no", "must be True or False"),
    ("memory_plan", 0, "must be True or False"),
    ("verify", "yes", "must be True or False"),
    ("freeze_parameters", None, "must be True or False"),
    ("exact_above_buckets", "False", "must be True or False"),
    ("max_buckets", "8", "must be a positive int"),
    ("max_buckets", 0, "must be a positive int"),
    ("max_buckets", True, "must be a positive int"),
    ("dump_dir", 3, "must be a path"),
    ("cache_dir", ["a"], "must be a path"),
    ("soc_version", 910, "must be None or a non-empty string"),
    ("compare", "on", "must be True or False"),
    ("shape_buckets", [16, 32], "must be None, 'auto' or a dict"),
    ("shape_buckets", {"x": [16, 32]}, "must map an input name or position"),
    ("shape_buckets", {"x": {1: [0, 16]}}, "positive ints"),
    ("shape_buckets", {"x": {"one": [16]}}, "dims are ints"),
    ("memory_limit", "1XB", "is not a size"),
    ("memory_limit", -1, "must be >= 0"),
    ("memory_limit", 1.5e9, "got float"),
]


@pytest.mark.parametrize(("key", "value", "problem"), BAD_VALUES,
                         ids=[f"{k}={v!r}" for k, v, _ in BAD_VALUES])
def test_bad_value_is_an_error_naming_option_and_value(key, value, problem):
    with pytest.raises(ConfigError) as err:
        resolve({key: value})
    msg = str(err.value)
    assert f"option {key}" in msg and problem in msg, msg
    if not isinstance(value, dict):  # nested values: the message quotes the bad part
        assert repr(value) in msg, msg


def test_every_option_has_a_value_check():
    # a new option without a check would accept anything (fusions="no" meant True once)
    from npu_inductor.config import _CHECKS, _CHOICES, NpuConfig

    sizes = {"memory_limit", "cache_size_limit"}  # parsed by parse_size
    unchecked = set(NpuConfig.keys()) - set(_CHECKS) - set(_CHOICES) - sizes
    assert not unchecked, f"options without a value check: {sorted(unchecked)}"


def test_bad_value_through_torch_compile_names_the_option():
    f = torch.compile(lambda x: x + 1, backend="npu", options={"fusions": "no"})
    with pytest.raises(Exception, match=r"fusions='no' must be True or False") as err:
        f(torch.randn(3))
    # the backend's own error leads the message (no Dynamo internals before it)
    assert str(err.value).splitlines()[1].startswith("ConfigError: npu_inductor option")


def test_good_values_pass():
    cfg = resolve({"fusions": False, "memory_plan": False, "max_buckets": 3, "dump_dir": None,
                   "shape_buckets": {"x": {1: [16, 32]}, 0: {"0": "auto"}}})
    assert (cfg.fusions, cfg.memory_plan, cfg.max_buckets) == (False, False, 3)


# ---- sizes ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    (4096, 4096), ("4096", 4096), ("1GB", 10**9), ("1GiB", 1 << 30), ("512MiB", 512 << 20),
    ("512 mb", 512 * 10**6), ("1.5GiB", 3 << 29), ("64K", 64 << 10), ("none", None),
    (None, None),
])
def test_size_strings_parse(text, expected):
    assert parse_size(text) == expected
    assert resolve({"memory_limit": text}).memory_limit == expected


def test_memory_limit_size_string_is_enforced(unlimited):
    f = torch.compile(lambda x: torch.relu(x @ x) @ x + 1.0, backend="npu",
                      options={"memory_limit": "4KiB"})
    with pytest.raises(torch.OutOfMemoryError, match=r"limit 4\.00 KiB"):
        f(torch.randn(64, 64))


def test_set_memory_limit_checks_its_argument(unlimited):
    npu_inductor.set_memory_limit("2MiB")
    assert npu_inductor.memory_stats()["limit"] == 2 << 20
    with pytest.raises(ConfigError, match="memory limit='lots' is not a size"):
        npu_inductor.set_memory_limit("lots")
    assert npu_inductor.memory_stats()["limit"] == 2 << 20  # unchanged by the bad call


# ---- environment overrides ------------------------------------------------------------------
@pytest.mark.parametrize(("var", "raw", "problem"), [
    ("NPU_INDUCTOR_MEMORY_LIMIT", "1 gigabyte", "is not a size"),
    ("NPU_INDUCTOR_FUSIONS", "nope", "is not a boolean"),
    ("NPU_INDUCTOR_VERIFY", "2", "is not a boolean"),
    ("NPU_INDUCTOR_MAX_BUCKETS", "eight", "is not a positive integer"),
    ("NPU_INDUCTOR_SHAPE_BUCKETS", "{x: [1]}", "neither 'auto' nor JSON"),
    ("NPU_INDUCTOR_FALLBACK", "never", "not one of"),
])
def test_bad_env_value_names_the_variable(monkeypatch, var, raw, problem):
    monkeypatch.setenv(var, raw)
    with pytest.raises(ConfigError) as err:
        resolve()
    msg = str(err.value)
    assert problem in msg
    assert var in msg or var.removeprefix("NPU_INDUCTOR_").lower() in msg, msg


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("on", True), ("YES", True),
                                            ("0", False), ("off", False), ("False", False)])
def test_env_booleans(monkeypatch, raw, value):
    monkeypatch.setenv("NPU_INDUCTOR_FUSIONS", raw)
    assert resolve().fusions is value


def test_env_memory_limit_accepts_sizes_and_names_itself_in_the_allocator(monkeypatch):
    monkeypatch.setenv(LIMIT_ENV, "256MiB")
    assert resolve().memory_limit == 256 << 20
    assert limit_from_env() == 256 << 20
    monkeypatch.setenv(LIMIT_ENV, "256 megs")
    with pytest.raises(ConfigError, match=f"{LIMIT_ENV}='256 megs' is not a size"):
        limit_from_env()


def test_empty_env_value_means_unset(monkeypatch):
    monkeypatch.setenv("NPU_INDUCTOR_FUSIONS", "")
    monkeypatch.setenv("NPU_INDUCTOR_MEMORY_LIMIT", " ")
    cfg = resolve()
    assert cfg.fusions is True and cfg.memory_limit is None
    assert os.environ["NPU_INDUCTOR_FUSIONS"] == ""


# ---- fallback warnings point at the user's line ---------------------------------------------
@torch.library.custom_op("npu_options_test::no_converter", mutates_args=())
def no_converter(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@no_converter.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _user_fn(x):
    y = torch.relu(x) + 1
    return no_converter(y) * 2  # FALLBACK LINE


def test_fallback_warning_points_at_the_users_line():
    import inspect
    import warnings

    from npu_inductor.compile_fx import FallbackWarning, reset_fallback_warnings

    reset_fallback_warnings()
    lines, first = inspect.getsourcelines(_user_fn)
    lineno = first + next(i for i, text in enumerate(lines) if "FALLBACK LINE" in text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = torch.randn(4)
        torch.testing.assert_close(torch.compile(_user_fn, backend="npu")(x), _user_fn(x))
    ours = [w for w in caught if issubclass(w.category, FallbackWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert "no_converter" in str(ours[0].message)
    assert (ours[0].filename, ours[0].lineno) == (__file__, lineno)


# ---- memory_limit holds without a static memory plan ----------------------------------------
def _mm_chain(x):
    return torch.relu(x @ x) @ x + 1.0


@pytest.mark.parametrize(("options", "dynamic"), [({"memory_plan": False}, False), ({}, True)],
                         ids=["memory_plan=False", "dynamic"])
def test_memory_limit_holds_without_a_static_plan(unlimited, options, dynamic):
    x = torch.randn(64, 64)
    f = torch.compile(_mm_chain, backend="npu", dynamic=dynamic,
                      options={**options, "memory_limit": 4096, "fallback": "error"})
    with pytest.raises(torch.OutOfMemoryError,
                       match=r"without a static memory plan.*limit 4\.00 KiB"):
        f(x)
    # under a limit that fits, intermediates are accounted while they live, then returned
    npu_inductor.set_memory_limit("64MiB")
    npu_inductor.reset_peak_memory_stats()
    torch.testing.assert_close(f(x), _mm_chain(x), rtol=1e-5, atol=1e-5)
    stats = npu_inductor.memory_stats()
    assert stats["peak_allocated_bytes"] >= 64 * 64 * 4
    assert stats["allocated_bytes"] == 0


# ---- backend errors reach the user without pages of frames ---------------------------------
@pytest.mark.parametrize("verbose", [False, True])
def test_backend_error_message_first_and_frames_trimmed(verbose):
    import traceback

    f = torch.compile(_user_fn, backend="npu", options={"fallback": "error"})
    with torch._dynamo.config.patch(verbose=verbose), pytest.raises(Exception) as err:
        f(torch.randn(4))
    text = "".join(traceback.format_exception(err.value))
    header, first = str(err.value).splitlines()[:2]
    assert header == "backend='npu' raised:"
    assert first.startswith("FallbackError: fallback='error'"), first
    assert "npu_options_test.no_converter" in str(err.value)
    assert "test_options.py" in str(err.value)  # the user's source line
    # AOTAutograd's frames and ours are cut unless TORCHDYNAMO_VERBOSE asks for them
    assert ("_functorch" in text) is verbose and ("compile_fx.py" in text) is verbose


def test_host_codegen_flag_rejects_garbage(monkeypatch):
    f = torch.compile(lambda x: torch.relu(x) + 1, backend="npu")
    x = torch.randn(4)
    monkeypatch.setenv("NPU_INDUCTOR_HOST_CODEGEN", "0")  # the interpreter
    torch.testing.assert_close(f(x), torch.relu(x) + 1)
    monkeypatch.setenv("NPU_INDUCTOR_HOST_CODEGEN", "fast")
    with pytest.raises(ConfigError, match="NPU_INDUCTOR_HOST_CODEGEN='fast' is not a boolean"):
        f(x)
