"""The target SoC's kernel table and the dtype gate.

[Note: the dtype gate]
A GE op the target SoC has no kernel for at its dtypes is refused when it is built, like a
prototype violation, so that no graph the host device runs would be refused by the chip.
The table (``soc_ascend910b.json``, copied from shared/reference by
``tools/gen_soc_table.py``) gives per GE op type:

* ``kind``: ``aicore`` | ``aicpu`` (AI CPU only) | ``hccl`` | ``none`` (no kernel on the SoC)
  | ``structural`` (Data, Reshape...: GE-local, no kernel) | ``unknown`` (unproven);
* ``combos``: the kernel's dtype combinations. OpDef entries are positional (entry i of every
  port is one combination); entries from an aclnn dispatcher list only the gated main input.
  Either way an op matches when one combination agrees with every port the op feeds;
* ``aicpu``: per port, the AI CPU kernel's dtypes where stated (an op the AI Core kernel
  refuses runs there instead).

``classify`` returns the kernel kind an op gets (``aicore``, ``aicpu``, ``hccl``,
``structural`` or ``unproven``) or raises ``DeviceDtypeError`` naming the op, the port, the
dtype and the SoC. ``unknown`` ops and op types the table does not list are allowed and
counted as unproven: the table proves kernels exist, it cannot prove they do not.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from npu_inductor.ge.dtypes import ge_name
from npu_inductor.ge.op_specs import OpSpecError

# SoC version (ATC --soc_version / aclrtGetSocName) -> kernel table family.
# Ascend910B1..B4 share the DAV_2201 kernels the table was read from. Ascend910_93xx is
# configured separately in the OpDefs (``ascend910_93``), so it is not assumed equal.
_FAMILIES = ((re.compile(r"Ascend910B[1-4]"), "ascend910b"),)
TABLE_FILES = {"ascend910b": "soc_ascend910b.json"}
# kernel kinds as device_report counts them
KINDS = ("aicore", "aicpu", "hccl", "unproven", "structural")


class DeviceDtypeError(OpSpecError):
    """An op at dtypes the target SoC has no kernel for (or an op type it has none for)."""


class UnknownSocError(ValueError):
    """A SoC without a kernel table (the option check turns it into a ``ConfigError``)."""


def family(soc_version: str) -> str:
    """``Ascend910B1`` -> ``ascend910b``; an unknown SoC is an ``UnknownSocError``."""
    for pattern, fam in _FAMILIES:
        if pattern.fullmatch(soc_version):
            return fam
    raise UnknownSocError(f"npu_inductor option soc_version={soc_version!r}: no kernel table for "
                      f"this SoC; supported: Ascend910B1, Ascend910B2, Ascend910B3, "
                      f"Ascend910B4")


@functools.cache
def _table(fam: str) -> dict[str, Any]:
    return json.loads(Path(__file__).with_name(TABLE_FILES[fam]).read_text())


def table(soc_version: str) -> dict[str, Any]:
    """The kernel table of ``soc_version`` (op type -> entry)."""
    return _table(family(soc_version))


@dataclass(frozen=True)
class Ports:
    """An op's dtypes by port: inputs by name, outputs as ``->name`` (GE dtype names)."""

    dtypes: Mapping[str, str]

    @classmethod
    def of(cls, inputs: Mapping[str, torch.dtype | None],
           outputs: Mapping[str, torch.dtype | None]) -> Ports:
        d = {k: ge_name(v) for k, v in inputs.items() if v is not None}
        d.update({f"->{k}": ge_name(v) for k, v in outputs.items() if v is not None})
        return cls(d)


def _port_key(name: str, entry_ports: set[str]) -> str:
    """Dynamic ports are numbered in descs (``x0``, ``x1``); the table names ``x``."""
    if name in entry_ports:
        return name
    base = name.rstrip("0123456789")
    return base if base in entry_ports else name


def _normalize(ports: Ports, entry_ports: set[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, dt in ports.dtypes.items():
        out.setdefault(_port_key(name, entry_ports), set()).add(dt)
    return out


def _blame(combos: list[dict[str, str]], fed: dict[str, set[str]]) -> tuple[str, str] | None:
    """The first port (in combo order) whose dtype no remaining combination accepts, or
    None when one combination accepts every fed port."""
    live = list(combos)
    for port in dict.fromkeys(k for c in combos for k in c):
        if port not in fed:
            continue
        keep = [c for c in live if fed[port] == {c.get(port)}]
        if not keep:
            return port, sorted(fed[port])[0]
        live = keep
    return None


def _aicpu_accepts(entry: dict[str, Any], fed: dict[str, set[str]]) -> bool:
    ports = entry.get("aicpu")
    if not ports:
        return False
    return all(dts <= set(ports[p.removeprefix("->")]) for p, dts in fed.items()
               if p.removeprefix("->") in ports)


def _combo_ports(entry: dict[str, Any]) -> set[str]:
    return {p for c in entry["combos"] for p in c} | {
        p for p in entry.get("aicpu", {})} | {f"->{p}" for p in entry.get("aicpu", {})}


def _allowed(combos: list[dict[str, str]], port: str) -> list[str]:
    return sorted({c[port].removeprefix("DT_") for c in combos if port in c})


def _refuse(op_type: str, op_name: str, soc: str, port: str, dtype: str, why: str) -> None:
    where = f"output {port[2:]!r}" if port.startswith("->") else f"input {port!r}"
    raise DeviceDtypeError(
        f"{soc} has no kernel for GE op {op_type} (op {op_name!r}) with {where} of dtype "
        f"{dtype.removeprefix('DT_')}: {why}")


def classify(op_type: str, ports: Ports, soc: str, op_name: str = "?") -> str:
    """The kernel kind ``op_type`` at ``ports`` gets on ``soc``; ``DeviceDtypeError`` when the
    SoC has none. Kinds are remembered per op type, port dtypes and SoC (the tables are
    read-only; a lowering and the device's check classify the same few signatures again and
    again); a refusal is not, so its message names each op."""
    try:
        return _classify_signature(op_type, tuple(ports.dtypes.items()), soc)
    except DeviceDtypeError:
        return _classify(op_type, ports, soc, op_name)


@functools.lru_cache(maxsize=4096)
def _classify_signature(op_type: str, dtypes: tuple[tuple[str, str], ...], soc: str) -> str:
    return _classify(op_type, Ports(dict(dtypes)), soc, "?")


def _classify(op_type: str, ports: Ports, soc: str, op_name: str) -> str:
    entry = table(soc).get(op_type)
    if entry is None or entry["kind"] == "unknown":
        return "unproven"
    kind = entry["kind"]
    if kind == "structural":
        return kind
    if kind == "none":
        raise DeviceDtypeError(f"{soc} has no kernel at all for GE op {op_type} (op "
                               f"{op_name!r}); source: {entry['source']}")
    fed = _normalize(ports, _combo_ports(entry))
    combos = entry["combos"]
    blame = _blame(combos, fed) if combos else None
    if blame is None:
        return kind
    if _aicpu_accepts(entry, fed):
        return "aicpu"
    port, dtype = blame
    label = {"aicore": "AI Core", "aicpu": "AI CPU", "hccl": "HCCL"}[kind]
    _refuse(op_type, op_name, soc, port, dtype,
            f"its {label} kernel takes {_allowed(combos, port)} there "
            f"(with the other ports as given); source: {entry['source']}")
    raise AssertionError("unreachable")


def has_kernel(soc: str, op_type: str, **port_dtypes: torch.dtype) -> bool:
    """Whether ``soc`` has a kernel (any kind) for ``op_type`` with these ports' dtypes (the
    other ports free)."""
    try:
        classify(op_type, Ports.of(port_dtypes, {}), soc)
    except DeviceDtypeError:
        return False
    return True


def op_ports(node: Any) -> Ports:
    """The ``Ports`` of a built ``OpNode`` (fed inputs and outputs)."""
    ins = {d.name: d.dtype for d in node.input_descs if not d.unfed}
    outs = {d.name: d.dtype for d in node.output_descs}
    return Ports.of(ins, outs)


def classify_node(node: Any, soc: str) -> str:
    return classify(node.type, op_ports(node), soc, node.name)


def kernel_counts(graph: Any, soc: str) -> dict[str, int]:
    """Ops of a built ``Graph`` by kernel kind on ``soc`` (plumbing ops are ``structural``)."""
    counts = dict.fromkeys(KINDS, 0)
    for node in graph.ops:
        kind = "structural" if node.type == "NetOutput" else classify_node(node, soc)
        counts[kind] += 1
    return counts


def ops_of_kind(graph: Any, soc: str, kind: str) -> dict[str, int]:
    """Op type -> count for the ops of one kernel kind (e.g. which ops run on AI CPU)."""
    out: dict[str, int] = {}
    for node in graph.ops:
        if node.type != "NetOutput" and classify_node(node, soc) == kind:
            out[node.type] = out.get(node.type, 0) + 1
    return out


@dataclass(frozen=True)
class Decision:
    """A device rule that made the compiler choose a different lowering than the natural
    one: ``rule`` (e.g. ``dtype-gate``), where (op / FX node), and what was done instead."""

    rule: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.where}: {self.detail}"


def note(gm: Any, rule: str, where: str, detail: str) -> None:
    """Record a decision made by an FX pass on ``gm`` (read back by the compile report)."""
    gm.meta.setdefault("device_decisions", []).append(Decision(rule, where, detail))
