"""On-disk compile cache: a restarted process loads its GE graphs instead of compiling them.

[Note: compile cache]
One entry per post-pass FX graph, keyed by ``cache_key.cache_key`` (graph, options,
device, SoC, versions). An entry holds what lowering and serialization made of the graph:
for each GE graph the ``.air`` bytes, the executor source, the ``.om`` on the acl device,
the FX-input positions feeding its Data ops, where each FX output comes from, and the
memory plan (for ``cache info`` and dumps), the device-rule decisions the lowering made and
the SoC it gated dtypes for; plus the nodes that fall back to eager when the graph is
partitioned and the decisions the FX passes made (so ``explain``, ``device_report`` and the
benchmark CSV report the same on a hit as on a miss). A hit skips lowering, serialization,
codegen and ATC.

Entry file (``<cache_dir>/entries/<key>.npuc``)::

    MAGIC | sha256(payload) hex | "\\n" | payload
    payload = 8-byte big-endian header length | header JSON | blobs

The header carries ``format`` (``FORMAT_VERSION``) and the key it was written for. An
entry whose magic, checksum, format, key or layout does not match is logged once, never
loaded, and rebuilt. Nothing is unpickled; the only code executed from an entry is its
executor source, after the checksum matched. The cache folder is created owner-only and
a folder owned by another user or writable by everyone is refused (the checksum detects
damage, the folder's permissions keep others out).

Writes go to a temp file in the same folder and ``os.replace`` into place, so a reader
sees a whole entry or none; ``flock`` on ``<cache_dir>/lock`` serializes the bookkeeping
(counters, eviction). Two processes compiling the same graph both write a whole entry;
the last rename wins. A hit touches the entry's mtime: eviction past ``cache_size_limit``
removes the least recently used entries first, down to 90% of the limit. A running total
of the entries' bytes (``<cache_dir>/usage``) spares a store the scan of the whole folder
until the total passes the limit.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import stat
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npu_inductor.config import NpuConfig
from npu_inductor.ge.soc import Decision
from npu_inductor.lowering.lower import OutputSlot

log = logging.getLogger("npu_inductor")
FORMAT_VERSION = 2  # 2: lowering decisions and SoC per graph, pass decisions
MAGIC = b"NPUINDUCTOR-CACHE\n"
SUFFIX = ".npuc"
USAGE = "usage"  # running total of the entries' bytes (see _account)
_DISABLED = ("0", "false", "off", "no", "disabled")
_HEADER_LEN = 8
# Per-process counters (``explain``, ``npu-bench``): hit, miss, rebuilt, stored.
COUNTERS: Counter[str] = Counter()
_WARNED: set[str] = set()


class CacheEntryError(ValueError):
    """An entry file that must not be loaded (corrupt, truncated, foreign, old format)."""


@dataclass(frozen=True)
class CachedGraph:
    """One GE graph as stored: enough to load it without lowering or ATC."""

    air: bytes
    source: str  # the generated executor module
    om: bytes | None  # ATC's model (acl device)
    data_inputs: tuple[int, ...]
    outputs: tuple[OutputSlot, ...]
    plan: dict[str, Any] | None = None
    decisions: tuple[Decision, ...] = ()  # device rules that changed the lowering
    soc: str | None = None  # the SoC the graph was dtype-gated for


@dataclass(frozen=True)
class Entry:
    graphs: tuple[CachedGraph, ...]
    failures: dict[str, str] = field(default_factory=dict)  # FX node -> why it runs eager
    pass_decisions: tuple[Decision, ...] = ()  # device rules the FX passes applied


# ---- where -------------------------------------------------------------------------------
def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "npu_inductor"


def cache_root(config: NpuConfig) -> Path | None:
    """The cache folder for ``config`` (None: the cache is off)."""
    value = config.cache_dir
    if value is False or (isinstance(value, str) and value.strip().lower() in _DISABLED):
        return None
    return Path(value) if value not in (None, True, "") else default_dir()


def _warn_once(tag: str, message: str, *args: Any) -> None:
    if tag not in _WARNED:
        _WARNED.add(tag)
        log.warning(message, *args)


def prepare_root(root: Path) -> bool:
    """Create ``root`` owner-only; False (cache off, warned once) when it is unsafe."""
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        root.mkdir(exist_ok=True, mode=0o700)
        (root / "entries").mkdir(exist_ok=True, mode=0o700)
        st = root.stat()
    except OSError as e:
        _warn_once(f"root:{root}", "npu_inductor cache disabled: cannot use %s: %s", root, e)
        return False
    if st.st_uid != os.getuid() or st.st_mode & stat.S_IWOTH:
        _warn_once(f"root:{root}", "npu_inductor cache disabled: %s is owned by another user "
                   "or writable by everyone", root)
        return False
    return True


def entry_path(root: Path, key: str) -> Path:
    return root / "entries" / f"{key}{SUFFIX}"


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``root/lock`` (held only for short bookkeeping)."""
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


# ---- format ------------------------------------------------------------------------------
def _slot_json(slot: OutputSlot) -> list[Any]:
    return [slot.kind, slot.index, slot.value]


def jsonable(value: Any) -> bool:
    """A constant output JSON keeps exactly (its type survives the round trip)."""
    if isinstance(value, (list, tuple)):
        return False
    return value is None or type(value) in (bool, int, float, str)


def encode(entry: Entry, key: str) -> bytes:
    blobs: list[bytes] = []

    def blob(data: bytes | None) -> list[int] | None:
        if data is None:
            return None
        blobs.append(data)
        return [sum(map(len, blobs[:-1])), len(data)]

    graphs = [{"air": blob(g.air), "source": blob(g.source.encode()), "om": blob(g.om),
               "data_inputs": list(g.data_inputs), "outputs": [_slot_json(s) for s in g.outputs],
               "plan": g.plan, "decisions": _decisions_json(g.decisions), "soc": g.soc}
              for g in entry.graphs]
    header = json.dumps({"format": FORMAT_VERSION, "key": key, "failures": entry.failures,
                         "pass_decisions": _decisions_json(entry.pass_decisions),
                         "graphs": graphs, "created": time.time()}).encode()
    payload = len(header).to_bytes(_HEADER_LEN, "big") + header + b"".join(blobs)
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def decode(data: bytes, key: str) -> Entry:
    """The entry in ``data``; ``CacheEntryError`` for anything but a whole, matching entry."""
    if not data.startswith(MAGIC):
        raise CacheEntryError("not an npu_inductor cache entry (bad magic)")
    digest_end = len(MAGIC) + 64
    digest, payload = data[len(MAGIC):digest_end], data[digest_end + 1:]
    if data[digest_end:digest_end + 1] != b"\n" or \
            hashlib.sha256(payload).hexdigest().encode() != digest:
        raise CacheEntryError("checksum mismatch (truncated or corrupt)")
    size = int.from_bytes(payload[:_HEADER_LEN], "big")
    header = json.loads(payload[_HEADER_LEN:_HEADER_LEN + size])
    if header.get("format") != FORMAT_VERSION:
        raise CacheEntryError(f"format {header.get('format')!r}, expected {FORMAT_VERSION}")
    if header.get("key") != key:
        raise CacheEntryError("entry was written for another key")
    blobs = payload[_HEADER_LEN + size:]
    return Entry(tuple(_graph(g, blobs) for g in header["graphs"]), dict(header["failures"]),
                 _decisions(header["pass_decisions"]))


def _decisions_json(decisions: tuple[Decision, ...]) -> list[list[str]]:
    return [[d.rule, d.where, d.detail] for d in decisions]


def _decisions(rows: list[list[str]]) -> tuple[Decision, ...]:
    return tuple(Decision(str(rule), str(where), str(detail)) for rule, where, detail in rows)


def _graph(g: dict[str, Any], blobs: bytes) -> CachedGraph:
    def blob(span: list[int] | None) -> bytes | None:
        if span is None:
            return None
        start, length = span
        if start < 0 or start + length > len(blobs):
            raise CacheEntryError("blob outside the entry")
        return blobs[start:start + length]

    outputs = tuple(OutputSlot(kind, index, value) for kind, index, value in g["outputs"])
    return CachedGraph(blob(g["air"]), blob(g["source"]).decode(), blob(g["om"]),
                       tuple(g["data_inputs"]), outputs, g.get("plan"),
                       _decisions(g["decisions"]), g["soc"])


# ---- load / store ------------------------------------------------------------------------
def load(root: Path, key: str) -> Entry | None:
    """The entry for ``key``, or None (missing, or unusable: logged once, to be rebuilt)."""
    path = entry_path(root, key)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        _warn_once(str(path), "npu_inductor cache: cannot read %s (%s); recompiling", path, e)
        return None
    try:
        entry = decode(data, key)
    except (CacheEntryError, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        _warn_once(str(path), "npu_inductor cache: ignoring entry %s (%s); it will be rebuilt",
                   path.name, e)
        COUNTERS["rebuilt"] += 1
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # least recently used = oldest mtime
    return entry


def write_atomic(path: Path, data: bytes, prefix: str) -> None:
    """Write ``data`` to ``path`` through a synced temp file renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{prefix}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def store(root: Path, key: str, entry: Entry, size_limit: int | None) -> None:
    """Write ``entry`` atomically, then evict least recently used entries past the limit."""
    data = encode(entry, key)
    write_atomic(entry_path(root, key), data, key[:16])
    COUNTERS["stored"] += 1
    if size_limit is not None:
        _account(root, len(data), size_limit)


def _account(root: Path, added: int, size_limit: int) -> None:
    """Add ``added`` bytes to the folder's running total (``usage``) and evict only when the
    total passes ``size_limit``: a store does not stat every entry of a large cache (5,000
    entries cost ~0.5 s a compile). The total only over-counts (a replaced entry is not
    subtracted, entries removed by hand stay counted), so eviction may scan early, never late;
    a scan writes the true total back."""
    with locked(root):
        usage = _read_usage(root)
        total = _scan_total(root) if usage is None else usage + added
        if total > size_limit:  # down to 90%, so a full cache does not scan every store
            total = _evict_locked(root, size_limit * 9 // 10)
        _replace_text(root / USAGE, str(total))


def _replace_text(path: Path, text: str) -> None:
    """Bookkeeping file (the caller holds the lock): a reader sees the old or the new text;
    not synced (a lost or torn file is recomputed or restarts its counters)."""
    with contextlib.suppress(OSError):
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)


def _read_usage(root: Path) -> int | None:
    try:
        return int((root / USAGE).read_text())
    except (OSError, ValueError):
        return None


def _scan_total(root: Path) -> int:
    return sum(st.st_size for _, st in _entries(root))


def _entries(root: Path) -> list[tuple[Path, os.stat_result]]:
    out = []
    for path in (root / "entries").glob(f"*{SUFFIX}"):
        with contextlib.suppress(OSError):
            out.append((path, path.stat()))
    return out


def _evict_locked(root: Path, size_limit: int) -> int:
    """Evict least recently used entries down to ``size_limit`` (the caller holds the lock);
    returns the bytes left."""
    removed = 0
    entries = sorted(_entries(root), key=lambda e: e[1].st_mtime)
    total = sum(st.st_size for _, st in entries)
    for path, st in entries:
        if total <= size_limit:
            break
        with contextlib.suppress(OSError):
            path.unlink()
            total -= st.st_size
            removed += 1
    if removed:
        log.info("npu_inductor cache: evicted %d least recently used entr%s from %s", removed,
                 "y" if removed == 1 else "ies", root)
    return total


def count(root: Path, outcome: str) -> None:
    """Add one ``hit``/``miss`` to the process counters and the folder's lifetime stats."""
    COUNTERS[outcome] += 1
    with contextlib.suppress(OSError, ValueError), locked(root):
        path = root / "stats.json"
        stats = json.loads(path.read_text()) if path.exists() else {}
        stats[outcome] = int(stats.get(outcome, 0)) + 1
        _replace_text(path, json.dumps(stats))


# ---- visibility --------------------------------------------------------------------------
def info(root: Path) -> dict[str, Any]:
    """Entries, bytes, lifetime hit/miss counters, oldest and newest use."""
    entries = _entries(root) if (root / "entries").is_dir() else []
    stats: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        stats = json.loads((root / "stats.json").read_text())
    times = [st.st_mtime for _, st in entries]
    return {"path": str(root), "entries": len(entries),
            "bytes": sum(st.st_size for _, st in entries),
            "hits": int(stats.get("hit", 0)), "misses": int(stats.get("miss", 0)),
            "oldest": min(times) if times else None, "newest": max(times) if times else None}


def clear(root: Path) -> int:
    """Remove every entry and the counters; returns the number of entries removed."""
    removed = 0
    if not (root / "entries").is_dir():
        return 0
    with locked(root):
        for path in (root / "entries").iterdir():
            if path.suffix in (SUFFIX, ".tmp"):
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed += path.suffix == SUFFIX
        for name in ("stats.json", USAGE):
            with contextlib.suppress(OSError):
                (root / name).unlink()
    return removed


def reset_warnings() -> None:
    """Warn again about entries already warned about (tests)."""
    _WARNED.clear()
