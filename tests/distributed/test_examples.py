"""The documented example runs under torchrun with 2 ranks (loopback rendezvous)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from launcher import LOOPBACK, free_port

pytestmark = pytest.mark.distributed
ROOT = Path(__file__).resolve().parents[2]


def test_ddp_example_under_torchrun():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-addr", LOOPBACK, "--master-port", str(free_port()),
           str(ROOT / "examples" / "ddp_train.py"), "--steps", "3"]
    env = {**os.environ, "NPU_INDUCTOR_DEVICE": "host", "GLOO_SOCKET_IFNAME": "lo"}
    # own session: on timeout the whole torchrun tree is killed, not just torchrun
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    assert proc.returncode == 0, out[-4000:]
    losses = [float(x) for x in re.findall(r"step \d: loss ([0-9.]+)", out)]
    assert len(losses) == 3 and losses[-1] < losses[0], out[-4000:]
    assert out.count("parameters equal rank 0's: True") == 2, out[-4000:]
