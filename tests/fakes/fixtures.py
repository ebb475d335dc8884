"""pytest fixtures for the acl path: the fake ``acl`` importable and the fake ``atc`` on
PATH for one test; skipped (not failed) where a real pyACL is installed."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import types
from pathlib import Path

import pytest

FAKES = Path(__file__).resolve().parent


def install_atc(folder: Path) -> Path:
    """An ``atc`` executable in ``folder`` that runs the fake with this interpreter."""
    folder.mkdir(parents=True, exist_ok=True)
    atc = folder / "atc"
    atc.write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" "{FAKES / "fake_atc.py"}" '
                   '"$@"\n')
    atc.chmod(0o755)
    return atc


def env_for_workers(tmp: Path) -> dict[str, str]:
    """Environment that gives subprocesses (distributed ranks) the fakes."""
    bin_dir = tmp / "bin"
    install_atc(bin_dir)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]),
            "FAKE_ATC_LOG": str(tmp / "atc_runs.jsonl")}


def _clear_device_cache() -> None:
    from npu_inductor.runtime import device

    device._device.cache_clear()  # the process-wide devices: a fresh AclDevice per test


@pytest.fixture
def fake_acl(tmp_path, monkeypatch):
    spec = importlib.util.find_spec("acl")
    if spec is not None and not str(spec.origin).startswith(str(FAKES)):
        pytest.skip(f"a real pyACL is installed ({spec.origin}); the fakes would shadow it")
    for name in [m for m in sys.modules if m == "acl" or m.startswith("acl.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(FAKES))
    for key, value in env_for_workers(tmp_path).items():
        monkeypatch.setenv(key, value)
    acl = importlib.import_module("acl")
    acl.reset()
    _clear_device_cache()

    def atc_runs() -> list[dict]:
        log = tmp_path / "atc_runs.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() \
            else []

    yield types.SimpleNamespace(acl=acl, atc_runs=atc_runs, calls=acl.CALLS)
    _clear_device_cache()
    for name in [m for m in sys.modules if m == "acl" or m.startswith("acl.")]:
        sys.modules.pop(name)
