"""The acl device path (``AclDevice``, the acl executor, ATC) through the strict fakes of
``acl`` and ``atc`` in ``tests/fakes``: static, ``dynamic=True`` and gear models."""

from __future__ import annotations

import pytest
import torch
from fakes.fixtures import fake_acl  # noqa: F401  (fixture)
from harness import STRICT, check_fn

ACL = {**STRICT, "device": "acl"}


def test_static_function_on_acl(fake_acl):  # noqa: F811
    graphs = check_fn(lambda x, y: torch.relu(x @ y) + 1, torch.randn(3, 4), torch.randn(4, 5),
                      options=ACL)
    assert graphs[0].executor.device.kind == "acl"
    assert len(fake_acl.atc_runs()) == 1
    assert ("mdl.execute", (graphs[0].executor.model_id,)) in fake_acl.calls
