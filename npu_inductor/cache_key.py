"""The compile cache's key: a stable hash of everything that decides a compiled GE graph.

Parts: the post-pass FX graph in a canonical form (its nodes, the dtype/shape/stride
of its inputs' and outputs' values, symbolic sizes by expression, the bytes of every
constant it holds),
the options that change the result, the device kind and SoC, and the versions of
npu_inductor (a hash of its source files, so an edited converter never reuses a stale
entry), torch and, on the acl device, CANN. The graph's name (``inference_3``) is not
part of it: the same graph compiled in another order or process hits.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import operator
import os
from pathlib import Path
from typing import Any

import torch

from npu_inductor.config import NpuConfig, target_soc

# Options that never change a compiled graph (where it is written, how it is checked,
# the allocator's runtime limit).
_NOT_IN_KEY = frozenset({"cache_dir", "cache_size_limit", "dump_dir", "verify", "memory_limit"})
# The installed packages whose source decides what gets compiled.
_PACKAGES = ("npu_inductor", "npu_inductor.graph_passes", "npu_inductor.lowering",
             "npu_inductor.codegen_templates", "npu_inductor.runtime")
_SOURCE_SUFFIXES = (".py", ".jinja", ".json", ".proto")
# Subfolders that are packages of their own in _PACKAGES (an in-tree layout nests them).
_PACKAGE_FOLDERS = frozenset({"graph_passes", "lowering", "codegen_templates", "runtime"})


def _spec(val: Any) -> str:
    """A node value's description: dtype, shape and stride (symbolic sizes by expression)."""
    if isinstance(val, torch.Tensor):
        return f"T({val.dtype},{tuple(val.shape)},{val.stride()},{val.requires_grad})"
    if isinstance(val, (list, tuple)):
        return "(" + ",".join(_spec(v) for v in val) + ")"
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return f"S({val.node.expr})"
    return type(val).__name__ + ":" + repr(val)[:200]


def _tensor_digest(t: torch.Tensor) -> str:
    t = t.detach()
    flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.reshape(-1))
    data = flat.view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return f"{t.dtype}{tuple(t.shape)}:" + hashlib.sha256(data).hexdigest()


class _Ref:
    """A node argument as it appears in the canonical form: the node's name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"%{self.name}"


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # aten.mm.default
    module = getattr(target, "__module__", None) or type(target).__module__
    return f"{module}.{getattr(target, '__qualname__', None) or repr(target)}"


def _node_line(node: torch.fx.Node) -> str:
    """One node of the canonical form: kind, name, target and arguments (nodes by name).
    Holds what ``gm.code`` is generated from, without generating it (which costs ~0.1 s
    on a training graph: passes leave the module's recompile pending)."""
    args = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: _Ref(n.name))
    return f"{node.op} {node.name} {_target_name(node.target)} {args!r}"


def graph_digest(gm: torch.fx.GraphModule) -> str:
    """sha256 of ``gm``'s canonical form: every node (kind, target, arguments), the inputs'
    and outputs' values (the values in between follow from them and the nodes), constants'
    bytes, and the graph's calling convention."""
    codegen = gm.graph._codegen
    h = hashlib.sha256(f"{type(codegen).__qualname__} "
                       f"{getattr(codegen, 'pytree_info', None)!r}".encode())
    for node in gm.graph.nodes:
        h.update(f"\n{_node_line(node)}".encode())
        if node.op in ("placeholder", "output"):
            h.update(f"\n{node.name}:{_spec(node.meta.get('val'))}".encode())
        elif node.op == "get_attr":
            value = operator.attrgetter(node.target)(gm)
            digest = _tensor_digest(value) if isinstance(value, torch.Tensor) else repr(value)
            h.update(f"={digest}".encode())
    return h.hexdigest()


def options_part(config: NpuConfig) -> str:
    values = {k: getattr(config, k) for k in NpuConfig.keys() if k not in _NOT_IN_KEY}
    return json.dumps(values, sort_keys=True, default=repr)


def package_folders() -> list[tuple[str, Path]]:
    """(package, folder) of each installed package whose source decides what is compiled."""
    return [(package, Path(folder)) for package in _PACKAGES
            for folder in importlib.util.find_spec(package).submodule_search_locations or ()]


def source_files() -> list[tuple[str, Path]]:
    """(package-relative name, path) of every source file the compiler is built from: the
    Python modules, jinja templates, op-spec JSON and protos of each package folder and its
    subfolders (``npu_inductor/ge``, ``runtime/kernels``), in a stable order."""
    files = []
    for package, folder in package_folders():
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if path.suffix in _SOURCE_SUFFIXES and "__pycache__" not in rel.parts \
                    and _PACKAGE_FOLDERS.isdisjoint(rel.parts[:1]) and path.is_file():
                files.append((f"{package}/{rel.as_posix()}", path))
    return files


@functools.cache
def source_digest() -> str:
    """sha256 over npu_inductor's installed source files (names and bytes)."""
    h = hashlib.sha256()
    for name, path in source_files():
        h.update(f"{name}\0{path.stat().st_size}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@functools.cache
def cann_version() -> str:
    """CANN's version as its toolkit folder records it ('none' without CANN)."""
    home = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    for name in ("version.cfg", "version.info"):
        path = Path(home or "/nonexistent") / name
        if path.is_file():
            return path.read_text(errors="replace")[:2000]
    return f"none ({home})" if home else "none"


@functools.cache
def _our_version() -> str:
    """npu_inductor's installed version (reading package metadata costs ~10 ms: once)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("npu_inductor")
    except PackageNotFoundError:
        return "unknown"


def versions_part(device_kind: str) -> str:
    ours = _our_version()
    cann = cann_version() if device_kind == "acl" else "host"
    return (f"npu_inductor {ours} {source_digest()}; torch {torch.__version__} "
            f"{torch.version.git_version}; cann {cann}")


def cache_key(gm: torch.fx.GraphModule, config: NpuConfig, device_kind: str) -> str:
    """The entry key for compiling the post-pass graph ``gm`` with ``config``."""
    parts = [graph_digest(gm), options_part(config), f"device {device_kind}",
             f"soc {target_soc(config)}", versions_part(device_kind)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
