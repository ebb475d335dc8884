"""Settings: one frozen dataclass, parsed from ``torch.compile(..., options={...})``.

Precedence, lowest first: field defaults, ``config.patch(...)`` (tests), the
``NPU_INDUCTOR_<KEY>`` environment variables, explicit ``options``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
from dataclasses import dataclass, fields
from typing import Any, Iterator

ENV_PREFIX = "NPU_INDUCTOR_"
DEFAULT_SOC_VERSION = "Ascend910B1"
DEFAULT_PRECISION_MODE = "must_keep_origin_dtype"  # fp32 stays fp32 (ATC's default is fp16)
DEFAULT_MAX_BUCKETS = 8

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
    cache_dir: str | None = None
    """On-disk cache of compiled GE graphs (None: no disk cache)."""
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
    soc_version: str = DEFAULT_SOC_VERSION
    """ATC ``--soc_version`` for the acl device."""
    freeze_parameters: bool = False
    """Inference: parameters become GE constants (enables folding)."""
    fusions: bool = True
    """Run the fusion passes (RmsNorm, FlashAttention, ...)."""
    memory_plan: bool = True
    """Execute each GE graph in a statically planned workspace."""
    memory_limit: int | None = None
    """Device memory limit in bytes for the caching allocator (None: unlimited)."""
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
    default = next(f for f in fields(NpuConfig) if f.name == name).default
    low = raw.strip().lower()
    if isinstance(default, bool):
        return low in ("1", "true", "yes", "on")
    if name in ("max_buckets", "memory_limit"):
        return None if low in ("", "none") else int(raw)
    if name == "shape_buckets":
        return raw if low == "auto" else json.loads(raw)
    return None if low in ("", "none") and default is None else raw


def _env_values() -> dict[str, Any]:
    out = {}
    for name in NpuConfig.keys():
        raw = os.environ.get(ENV_PREFIX + name.upper())
        if raw is not None:
            out[name] = _coerce(name, raw)
    return out


def _validate(values: dict[str, Any]) -> None:
    for key, allowed in _CHOICES.items():
        if key in values and values[key] not in allowed:
            raise ConfigError(f"npu_inductor option {key}={values[key]!r} is not one of "
                              f"{list(allowed)}")


def resolve(options: dict[str, Any] | None = None) -> NpuConfig:
    """Build the config for one ``torch.compile`` call; unknown keys are an error."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(NpuConfig.keys()))
    if unknown:
        raise ConfigError(f"unknown npu_inductor option(s) {unknown}; valid options: "
                          f"{NpuConfig.keys()}")
    values = {**_PATCHED, **_env_values(), **options}
    _validate(values)
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


def replace(config: NpuConfig, **changes: Any) -> NpuConfig:
    return dataclasses.replace(config, **changes)
