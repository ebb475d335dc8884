"""The CANN ACL headers, fetched from the torch-npu 2.13.0 wheel (``torch_npu/include/acl``)
into a cache directory; never committed. ``python tests/cann_headers.py`` pre-fetches them
(CI), and the header test calls ``acl_headers()``: a failed download is an error, not a skip.

Cache: ``$NPU_INDUCTOR_CANN_CACHE`` or ``~/.cache/npu_inductor/torch_npu-2.13.0``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

WHEEL = "torch-npu==2.13.0"
MEMBER_PREFIX = "torch_npu/include/acl/"
ATTEMPTS = 3
# a plain download picks this interpreter's wheel; the second form pins one that exists
DOWNLOADS = ([], ["--only-binary=:all:", "--platform", "manylinux_2_28_x86_64",
                  "--python-version", "311"])


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "npu_inductor" / "torch_npu-2.13.0"
    return Path(os.environ.get("NPU_INDUCTOR_CANN_CACHE", default))


def _download(wheel_dir: Path) -> Path:
    errors = []
    for attempt in range(ATTEMPTS):
        for extra in DOWNLOADS:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                                   WHEEL, "-d", str(wheel_dir), *extra],
                                  capture_output=True, text=True)
            wheels = sorted(wheel_dir.glob("torch_npu-*.whl"))
            if done.returncode == 0 and wheels:
                return wheels[0]
            errors.append(done.stderr.strip()[-500:])
        time.sleep(5 * (attempt + 1))
    raise RuntimeError(f"pip download --no-deps {WHEEL} failed {len(errors)} times:\n"
                       + "\n".join(errors))


def acl_headers() -> Path:
    """The folder holding ``acl_mdl.h`` etc. (downloaded and extracted once)."""
    target = cache_dir() / "include" / "acl"
    if (target / "acl_mdl.h").exists():
        return target
    wheel_dir = cache_dir() / "wheel"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    wheel = _download(wheel_dir)
    staging = cache_dir() / "include.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(MEMBER_PREFIX) and name.endswith(".h"):
                out = staging / "acl" / name[len(MEMBER_PREFIX):]
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(z.read(name))
    shutil.rmtree(cache_dir() / "include", ignore_errors=True)
    staging.rename(cache_dir() / "include")  # complete or absent, never half-extracted
    shutil.rmtree(wheel_dir, ignore_errors=True)  # only the headers are kept
    return target


if __name__ == "__main__":
    print(acl_headers())
