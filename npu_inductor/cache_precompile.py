"""Precompiled models: a warm start that skips Dynamo's trace too (``npu_inductor.precompile``).

[Note: precompile]
The compile cache (cache.py) and AOTAutograd's bundled cache (aot_cache.py) skip lowering,
ATC, AOT tracing and the FX passes on a warm start, but every new process still pays
Dynamo's trace of the model (~85% of a warm bert start). torch 2.13 can skip it for a
full graph: ``torch.compile(fn, fullgraph=True).aot_compile(((args), kwargs))`` returns an
``AOTCompiledFunction`` holding Dynamo's bytecode, its guards and the compiled graph, which
``AOTCompiledFunction.serialize`` turns into bytes and ``deserialize`` (what
``torch.compiler.load_compiled_function`` calls) back into a callable. The compiled graph
is AOTAutograd's bundled entry wrapped in ``BundledAOTAutogradSerializableCallable``; for
npu_inductor that entry holds ``NpuOutputCode`` (aot_cache.py), a reference to the GE
graphs in npu_inductor's checksummed cache.

``precompile(model, args)`` keys the artifact without tracing: the model's class and
forward source file, the inputs' and parameters' dtype/shape/stride, the grad mode, the
options, the device and SoC and the versions (cache_key.py). A hit deserializes it; torch
then checks the guards on every call, and npu_inductor checks, after loading, that the
source of every function Dynamo inlined is unchanged (torch records their checksums). Any
mismatch, a guard failure, or a model Dynamo cannot capture as one graph falls back to
``torch.compile(model, backend="npu")`` (logged once): never a wrong result.

Safety. torch's format is pickle: deserializing unpickles Dynamo's state
(``AOTCompileUnpickler``: code objects, the pickled ``GuardsState``) and AOTAutograd's
bundled entry (which pickles ``NpuOutputCode``: options, entry key, versions), and runs
Dynamo's bytecode. So an artifact is only unpickled when it is whole and was written by
this user's npu_inductor: the file is ``MAGIC | HMAC-SHA256(secret, payload) | payload``,
the secret a random key in ``<cache_dir>/precompile.key`` (owner-only, made once), and the
cache folder must pass cache.py's ownership check. A planted, copied, truncated or
bit-flipped file fails the HMAC, is logged once and rebuilt, never unpickled.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import inspect
import json
import logging
import os
import platform
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from npu_inductor import aot_cache, cache
from npu_inductor.config import ConfigError, NpuConfig

log = logging.getLogger("npu_inductor")
FORMAT_VERSION = 1
MAGIC = b"NPUINDUCTOR-PRECOMPILED\n"
SUFFIX = ".npup"
_HEADER_LEN = 8
_SECRET = "precompile.key"


class Precompiled:
    """``model`` with its compiled graph loaded or compiled ahead of the first call."""

    def __init__(self, model: Any, fn: Callable[..., Any], options: dict[str, Any],
                 dynamic: bool | None, compiled: Any | None, source: str) -> None:
        self.model, self._fn, self._options, self._dynamic = model, fn, options, dynamic
        self._compiled = compiled  # AOTCompiledFunction, None: falls back
        self.source = source  # "hit", "miss" (compiled and stored) or "fallback"
        self._eager_compiled: Callable[..., Any] | None = None
        self._warned = False

    def _bound(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.model, *args) if isinstance(self.model, torch.nn.Module) else args

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        full = self._bound(args)
        if self._compiled is not None:
            if self._compiled.guard_check(*full, **kwargs):
                return self._compiled.fn(*full, **kwargs)
            if not self._warned:
                self._warned = True
                log.warning("npu_inductor precompile: guards of the precompiled %s fail for "
                            "this call; it runs through torch.compile", _name(self._fn))
        return self._fallback()(*args, **kwargs)

    def _fallback(self) -> Callable[..., Any]:
        if self._eager_compiled is None:
            self._eager_compiled = torch.compile(self.model, backend="npu",
                                                 options=self._options, dynamic=self._dynamic)
        return self._eager_compiled


def precompile(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None, *,
               options: dict[str, Any] | None = None,
               dynamic: bool | None = None) -> Precompiled:
    """``model`` (an ``nn.Module`` or a function) compiled for calls like ``model(*args,
    **kwargs)`` under the current grad mode, loaded from the cache folder when a process
    compiled it before (no Dynamo trace, no AOT trace, no lowering, no ATC), else compiled
    with ``torch.compile(fullgraph=True)`` and stored. Needs the compile cache on."""
    from npu_inductor.backend import user_errors, with_device_soc
    from npu_inductor.config import resolve

    options = dict(options or {})
    config = with_device_soc(resolve(options))
    root = cache.cache_root(config)
    if root is None:
        raise ConfigError("npu_inductor.precompile needs the compile cache: option cache_dir "
                          "(or NPU_INDUCTOR_CACHE_DIR) is off")
    kwargs = dict(kwargs or {})
    fn = _function(model)
    if fn is None or not cache.prepare_root(root):
        return Precompiled(model, model, options, dynamic, None, "fallback")
    full = (model, *args) if isinstance(model, torch.nn.Module) else tuple(args)
    key = artifact_key(fn, model, full, kwargs, config, dynamic)
    path = root / "precompiled" / f"{key}{SUFFIX}"
    compiled = load(path, key, fn, config)
    if compiled is not None:
        cache.COUNTERS["precompile_hit"] += 1
        log.info("npu_inductor precompile hit for %s (key %s)", _name(fn), key[:16])
        return Precompiled(model, fn, options, dynamic, compiled, "hit")
    cache.COUNTERS["precompile_miss"] += 1
    try:
        compiled = _aot_compile(fn, full, kwargs, options, dynamic)
        store(path, key, _serialize(compiled), _name(fn))
    except user_errors():  # the same error torch.compile would raise on the first call
        raise
    except Exception as e:  # noqa: BLE001 - torch's precompile is experimental: fall back
        cache._warn_once(f"precompile:{_name(fn)}", "npu_inductor precompile: %s cannot be "
                         "precompiled (%s: %s); it runs through torch.compile", _name(fn),
                         type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        torch._dynamo.reset()
        return Precompiled(model, fn, options, dynamic, None, "fallback")
    return Precompiled(model, fn, options, dynamic, compiled, "miss")


def _aot_compile(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 options: dict[str, Any], dynamic: bool | None) -> Any:
    """torch's ``aot_compile``, with FX graph modules recompiled lazily as Dynamo's own
    frame compile does (``aot_compile_fullgraph`` does not: each of the passes' ~24
    ``gm.recompile()`` then generates code, +2 s on a bert compile), and without torch's
    guard-latency timing (a cache flush, ~25 ms: guard_profile.py)."""
    from torch.fx._lazy_graph_module import _use_lazy_graph_module

    from npu_inductor import guard_profile

    compiled = torch.compile(fn, backend="npu", fullgraph=True, options=options,
                             dynamic=dynamic)
    with (_use_lazy_graph_module(torch._dynamo.config.use_lazy_graph_module),
          guard_profile.skipped()):  # no guard-latency timing (guard_profile.py)
        return compiled.aot_compile((args, kwargs))


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def _function(model: Any) -> Callable[..., Any] | None:
    """The function Dynamo traces: ``type(model).forward`` (``self`` an argument, as
    torch's ``aot_compile_module`` does) for a module without hooks, ``model`` itself for
    a plain function; None for anything else (falls back)."""
    if isinstance(model, torch.nn.Module):
        from torch.nn.modules import module as nn_module

        hooks = (model._forward_pre_hooks, model._forward_hooks, model._backward_hooks,
                 model._backward_pre_hooks, nn_module._global_forward_pre_hooks,
                 nn_module._global_forward_hooks, nn_module._global_backward_hooks,
                 nn_module._global_backward_pre_hooks)
        if any(hooks) or type(model).__call__ is not torch.nn.Module.__call__:
            return None
        return type(model).forward
    return model if inspect.isfunction(model) else None


# ---- key ---------------------------------------------------------------------------------
def artifact_key(fn: Callable[..., Any], model: Any, full_args: tuple[Any, ...],
                 kwargs: dict[str, Any], config: NpuConfig, dynamic: bool | None) -> str:
    """What decides the artifact, known before any trace (the graph is not)."""
    from npu_inductor.aot_cache import _device_kind
    from npu_inductor.cache_key import _spec, versions_part
    from npu_inductor.config import target_soc

    kind = _device_kind(config)
    h = hashlib.sha256(f"precompile {FORMAT_VERSION} {platform.python_version()}".encode())
    h.update(f"\n{fn.__module__}.{fn.__qualname__}:{fn.__code__.co_firstlineno}".encode())
    h.update(b"\n" + _file_digest(inspect.getsourcefile(fn)).encode())
    if isinstance(model, torch.nn.Module):
        h.update(f"\ntraining {model.training}".encode())
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            h.update(f"\n{name} {_spec(t)}".encode())
    h.update(f"\nargs {_spec(list(full_args[isinstance(model, torch.nn.Module):]))}".encode())
    h.update(f"\nkwargs {sorted((k, _spec(v)) for k, v in kwargs.items())}".encode())
    h.update(f"\ngrad {torch.is_grad_enabled()} dynamic {dynamic}".encode())
    # every option, as NpuOutputCode.post_compile compares them all (verify, dump_dir too)
    options = json.dumps({k: getattr(config, k) for k in NpuConfig.keys()}, sort_keys=True,
                         default=repr)
    h.update("\n".join(["", options, f"device {kind}",
                        f"soc {target_soc(config)}", versions_part(kind)]).encode())
    return h.hexdigest()


def _file_digest(path: str | None) -> str:
    if path is None:
        return "no source file"
    with contextlib.suppress(OSError):
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return f"unreadable {path}"


# ---- file format -------------------------------------------------------------------------
def secret(root: Path) -> bytes:
    """This cache folder's HMAC key: 32 random bytes in an owner-only file made once."""
    path = root / _SECRET
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise cache.CacheEntryError(f"{path} is not owner-only")
    data = path.read_bytes()
    if len(data) != 32:
        raise cache.CacheEntryError(f"{path} is not a 32-byte key")
    return data


def encode(torch_bytes: bytes, key: str, name: str, secret_key: bytes) -> bytes:
    header = json.dumps({"format": FORMAT_VERSION, "key": key, "function": name,
                         "torch": torch.__version__}).encode()
    payload = len(header).to_bytes(_HEADER_LEN, "big") + header + torch_bytes
    return MAGIC + hmac.new(secret_key, payload, "sha256").hexdigest().encode() + b"\n" + payload


def decode(data: bytes, key: str, secret_key: bytes) -> bytes:
    """torch's bytes in ``data``; ``CacheEntryError`` unless whole, signed and matching."""
    if not data.startswith(MAGIC):
        raise cache.CacheEntryError("not an npu_inductor precompiled artifact (bad magic)")
    end = len(MAGIC) + 64
    digest, payload = data[len(MAGIC):end], data[end + 1:]
    expected = hmac.new(secret_key, payload, "sha256").hexdigest().encode()
    if data[end:end + 1] != b"\n" or not hmac.compare_digest(digest, expected):
        raise cache.CacheEntryError("signature mismatch (truncated, corrupt or not written "
                                    "by this cache folder's owner)")
    size = int.from_bytes(payload[:_HEADER_LEN], "big")
    header = json.loads(payload[_HEADER_LEN:_HEADER_LEN + size])
    if header.get("format") != FORMAT_VERSION:
        raise cache.CacheEntryError(f"format {header.get('format')!r}, "
                                    f"expected {FORMAT_VERSION}")
    if header.get("key") != key:
        raise cache.CacheEntryError("artifact was written for another key")
    return payload[_HEADER_LEN + size:]


def _serialize(compiled: Any) -> bytes:
    return type(compiled).serialize(compiled).serialized_data


def store(path: Path, key: str, torch_bytes: bytes, name: str) -> None:
    """Write the signed artifact atomically (temp file + rename)."""
    path.parent.mkdir(exist_ok=True, mode=0o700)
    cache.write_atomic(path, encode(torch_bytes, key, name, secret(path.parent.parent)),
                       key[:16])
    cache.COUNTERS["precompile_stored"] += 1


def load(path: Path, key: str, fn: Callable[..., Any], config: NpuConfig) -> Any | None:
    """The ``AOTCompiledFunction`` stored for ``key``, or None (missing, or unusable: logged
    once, to be rebuilt)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        cache._warn_once(str(path), "npu_inductor precompile: cannot read %s (%s)", path, e)
        return None
    try:
        torch_bytes = decode(data, key, secret(path.parent.parent))
    except (cache.CacheEntryError, OSError, ValueError, KeyError, TypeError) as e:
        _rebuilt(path, e)
        return None
    from torch._dynamo.aot_compile import AOTCompiledFunction

    try:
        with aot_cache.scope(config, True):  # NpuOutputCode.post_compile checks the options
            compiled = AOTCompiledFunction.deserialize(torch_bytes, f_globals=fn.__globals__)
        _check_sources(compiled)
    except Exception as e:  # noqa: BLE001 - another torch/npu_inductor, a gone GE entry
        _rebuilt(path, e)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)
    return compiled


def _check_sources(compiled: Any) -> None:
    """Every function Dynamo inlined still has the source it was traced from."""
    import importlib

    from torch._dynamo.package import _hash_sourcelines

    for src in compiled.source_info().inlined_sources:
        module = importlib.import_module(src.module)
        if _hash_sourcelines(module, src.firstlineno, src.lastlineno) != src.checksum:
            raise cache.CacheEntryError(f"source of {src.module} lines {src.firstlineno}-"
                                        f"{src.lastlineno} changed")


def _rebuilt(path: Path, error: Exception) -> None:
    cache._warn_once(str(path), "npu_inductor precompile: ignoring %s (%s: %s); it will be "
                     "rebuilt", path.name, type(error).__name__, error)
    cache.COUNTERS["precompile_rebuilt"] += 1
