"""Settings: one frozen dataclass, parsed from ``torch.compile(..., options={...})``.

Precedence, lowest first: field defaults, ``config.patch(...)`` (tests), the
``NPU_INDUCTOR_<KEY>`` environment variables, explicit ``options``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

ENV_PREFIX = "NPU_INDUCTOR_"
DEFAULT_SOC_VERSION = "Ascend910B1"
DEFAULT_PRECISION_MODE = "must_keep_origin_dtype"  # fp32 stays fp32 (ATC's default is fp16)
DEFAULT_MAX_BUCKETS = 8
DEFAULT_CACHE_SIZE_LIMIT = 8 << 30  # compile cache, bytes

_CHOICES: dict[str, tuple[str, ...]] = {
    "device": ("auto", "host", "acl"),
    "fallback": ("eager", "error"),
    "pad": ("safe", "trust"),
    "precision_mode": ("force_fp16", "force_fp32", "cube_fp16in_fp32out", "allow_mix_precision",
                       "allow_fp32_to_fp16", "must_keep_origin_dtype",
                       "allow_mix_precision_fp16", "allow_mix_precision_bf16",
                       "allow_fp32_to_bf16"),
}


class ConfigError(ValueError):
    """A bad ``options=`` key or value."""


@dataclass(frozen=True)
class NpuConfig:
    """Every option ``torch.compile(model, backend="npu", options={...})`` accepts."""

    device: str = "auto"
    """``auto`` (acl when pyACL and a device exist, else host), ``host`` or ``acl``."""
    fallback: str = "eager"
    """``eager``: ops without a converter run in eager between GE graphs; ``error``: raise."""
    dump_dir: str | None = None
    """Write .air, .pbtxt, FX graphs, executor source and memory plan per GE graph here."""
    cache_dir: str | bool | None = None
    """On-disk compile cache folder (None: the per-user default, ``~/.cache/npu_inductor``;
    False or ``"off"``: no disk cache). See ``npu_inductor/cache.py``."""
    cache_size_limit: int | None = DEFAULT_CACHE_SIZE_LIMIT
    """Bytes the compile cache may hold; least recently used entries go first (None: no limit)."""
    shape_buckets: Any = None
    """Static-shape buckets: a dict per input/dim, ``"auto"``, or None (exact shapes)."""
    max_buckets: int = DEFAULT_MAX_BUCKETS
    """Upper bound on buckets chosen by ``shape_buckets="auto"``."""
    pad: str = "safe"
    """``safe``: pad only where the padding-safety analysis proves exactness; ``trust``."""
    exact_above_buckets: bool = False
    """Sizes above the largest bucket compile exactly instead of raising."""
    precision_mode: str = DEFAULT_PRECISION_MODE
    """ATC/GE ``precision_mode`` for the acl device."""
    soc_version: str | None = None
    """ATC ``--soc_version`` for the acl device (None: the device's, ``aclrtGetSocName``)."""
    device_id: int | None = None
    """acl device of this process (None: ``LOCAL_RANK``, else ``DEVICE_ID``, else 0)."""
    freeze_parameters: bool = False
    """Inference: parameters become GE constants (enables folding)."""
    fusions: bool = True
    """Run the fusion passes (RmsNorm, FlashAttention, ...)."""
    memory_plan: bool = True
    """Execute each GE graph in a statically planned workspace."""
    memory_limit: int | None = None
    """Device memory limit for the caching allocator: bytes, or a size string such as
    ``"512MiB"`` / ``"2GB"`` (parsed to bytes); None: unlimited."""
    verify: bool = False
    """Run the FX graph verifier after every pass."""
    compare: bool = False
    """Run each GE graph op by op next to its FX graph in eager on every call and report
    the first op that diverges (``npu_inductor.debug``; slow: debugging only)."""

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in fields(cls)]


_PATCHED: dict[str, Any] = {}
_LOCK = threading.Lock()


def _coerce(name: str, raw: str) -> Any:
    """An environment variable's text as the option's value; garbage names the variable."""
    var = ENV_PREFIX + name.upper()
    default = next(f for f in fields(NpuConfig) if f.name == name).default
    low = raw.strip().lower()
    if isinstance(default, bool):
        if low not in _TRUE + _FALSE:
            raise ConfigError(f"{var}={raw!r} is not a boolean; use one of {list(_TRUE)} or "
                              f"{list(_FALSE)}")
        return low in _TRUE
    if name in ("memory_limit", "cache_size_limit"):
        return parse_size(raw, what=var)
    if name == "max_buckets":
        if not low.isdigit():
            raise ConfigError(f"{var}={raw!r} is not a positive integer")
        return int(low)
    if name == "device_id":
        if low in ("", "none"):
            return None
        if not low.isdigit():
            raise ConfigError(f"{var}={raw!r} is not a device id (an integer >= 0)")
        return int(low)
    if name == "shape_buckets":
        return _buckets_from_env(var, raw)
    return None if low in ("", "none") and default is None else raw


def _buckets_from_env(var: str, raw: str) -> Any:
    low = raw.strip().lower()
    if low in ("", "none"):
        return None
    if low == "auto":
        return "auto"
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{var}={raw!r} is neither 'auto' nor JSON like "
                          f'{{"x": {{"0": [16, 32]}}}}: {e}') from None


def _env_values() -> dict[str, Any]:
    out = {}
    for name in NpuConfig.keys():
        raw = os.environ.get(ENV_PREFIX + name.upper())
        if raw is not None and raw.strip():  # set but empty: as if unset
            out[name] = _coerce(name, raw)
    return out


# ---- value checks (every option, at resolve time) -------------------------------------------
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 10**3, "kib": 1 << 10, "m": 1 << 20,
               "mb": 10**6, "mib": 1 << 20, "g": 1 << 30, "gb": 10**9, "gib": 1 << 30,
               "t": 1 << 40, "tb": 10**12, "tib": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_size(value: Any, what: str = "memory_limit") -> int | None:
    """A byte count: an int, or a string like ``"1073741824"``, ``"512MiB"``, ``"1.5GiB"``,
    ``"2GB"`` (KB/MB/GB are powers of 1000, KiB/MiB/GiB and K/M/G powers of 1024);
    None / ``"none"`` / ``""``: unlimited. Anything else raises naming ``what``."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ConfigError(f"{what}={value!r}: a size in bytes must be >= 0")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{what}={value!r}: expected a size in bytes (int) or a string like "
                          f"'512MiB' / '2GB', got {type(value).__name__}")
    if value.strip().lower() in ("", "none"):
        return None
    match = _SIZE.fullmatch(value)
    unit = match and _SIZE_UNITS.get(match.group(2).lower())
    if unit is None:
        raise ConfigError(f"{what}={value!r} is not a size: use bytes (e.g. 1073741824) or a "
                          f"number with a unit (B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, "
                          f"TiB), e.g. '512MiB', '1.5GiB', '2GB'")
    return int(float(match.group(1)) * unit)


def _check_bool(key: str, v: Any) -> None:
    if not isinstance(v, bool):
        raise ConfigError(f"npu_inductor option {key}={v!r} must be True or False, "
                          f"got {type(v).__name__}")


def _check_path(key: str, v: Any) -> None:
    if key == "cache_dir" and v is False:  # the disk cache switched off
        return
    if v is not None and not isinstance(v, (str, os.PathLike)):
        raise ConfigError(f"npu_inductor option {key}={v!r} must be a path (str or "
                          f"os.PathLike) or None, got {type(v).__name__}")
    if isinstance(v, str) and "\0" in v:
        raise ConfigError(f"npu_inductor option {key}={v!r} contains a NUL byte")


def _check_str(key: str, v: Any) -> None:
    if not isinstance(v, str) or not v:
        raise ConfigError(f"npu_inductor option {key}={v!r} must be a non-empty string")


def _check_max_buckets(key: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"npu_inductor option {key}={v!r} must be a positive int")


def _check_device_id(key: str, v: Any) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
        raise ConfigError(f"npu_inductor option {key}={v!r} must be None or an int >= 0")


def _check_buckets(key: str, v: Any) -> None:
    if v is None or v == "auto":
        return
    if not isinstance(v, dict):
        raise ConfigError(f"npu_inductor option {key}={v!r} must be None, 'auto' or a dict "
                          f"{{input name or position: {{dim: [sizes]}}}}")
    for name, dims in v.items():
        if not isinstance(name, (str, int)) or not isinstance(dims, dict):
            raise ConfigError(f"npu_inductor option {key}: entry {name!r}: {dims!r} must map "
                              f"an input name or position to {{dim: [sizes] or 'auto'}}")
        for dim, sizes in dims.items():
            if not _is_int_like(dim) or not (sizes == "auto" or _positive_ints(sizes)):
                raise ConfigError(f"npu_inductor option {key}: input {name!r} dim {dim!r}: "
                                  f"{sizes!r} must be 'auto' or a non-empty list of positive "
                                  f"ints (dims are ints)")


def _is_int_like(x: Any) -> bool:
    return (isinstance(x, int) and not isinstance(x, bool)) or (
        isinstance(x, str) and x.lstrip("-").isdigit())


def _positive_ints(sizes: Any) -> bool:
    return (isinstance(sizes, (list, tuple)) and len(sizes) > 0 and all(
        isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes))


# option -> check(key, value); the _CHOICES options are checked against their lists
_CHECKS: dict[str, Any] = {
    "dump_dir": _check_path, "cache_dir": _check_path, "shape_buckets": _check_buckets,
    "max_buckets": _check_max_buckets, "soc_version": _check_str,
    "device_id": _check_device_id, "compare": _check_bool,
    "cache_size_limit": lambda key, v: parse_size(v, f"npu_inductor option {key}"),
    "exact_above_buckets": _check_bool, "freeze_parameters": _check_bool,
    "fusions": _check_bool, "memory_plan": _check_bool, "verify": _check_bool,
}


def _validate(values: dict[str, Any]) -> dict[str, Any]:
    """Check every value's type and range; returns ``values`` with sizes parsed to ints."""
    for key, allowed in _CHOICES.items():
        if key in values and values[key] not in allowed:
            raise ConfigError(f"npu_inductor option {key}={values[key]!r} is not one of "
                              f"{list(allowed)}")
    for key, check in _CHECKS.items():
        if key in values:
            check(key, values[key])
    if values.get("soc_version") is not None:  # no kernel table (dtype gate): an error
        from npu_inductor.ge.soc import UnknownSocError, family

        try:
            family(values["soc_version"])
        except UnknownSocError as e:
            raise ConfigError(str(e)) from None
    for key in ("memory_limit", "cache_size_limit"):
        if key in values:
            values = {**values, key: parse_size(values[key], f"npu_inductor option {key}")}
    return values


def resolve(options: dict[str, Any] | None = None) -> NpuConfig:
    """Build the config for one ``torch.compile`` call; unknown keys are an error."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(NpuConfig.keys()))
    if unknown:
        raise ConfigError(f"unknown npu_inductor option(s) {unknown}; valid options: "
                          f"{NpuConfig.keys()}")
    values = {**_PATCHED, **_env_values(), **options}
    values = _validate(values)
    return NpuConfig(**values)


@contextlib.contextmanager
def patch(**overrides: Any) -> Iterator[None]:
    """Temporarily change defaults: ``with config.patch(fallback="error"): ...``."""
    unknown = sorted(set(overrides) - set(NpuConfig.keys()))
    if unknown:
        raise ConfigError(f"unknown npu_inductor option(s) {unknown}")
    with _LOCK:
        saved = dict(_PATCHED)
        _PATCHED.update(overrides)
    try:
        yield
    finally:
        with _LOCK:
            _PATCHED.clear()
            _PATCHED.update(saved)


def target_soc(config: NpuConfig) -> str:
    """The SoC the dtype gate and device rules check against: the option, else the default
    (the backend fills the option from the acl device's ``aclrtGetSocName`` first)."""
    return config.soc_version or DEFAULT_SOC_VERSION


def replace(config: NpuConfig, **changes: Any) -> NpuConfig:
    return dataclasses.replace(config, **changes)
