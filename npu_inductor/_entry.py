"""Target of the ``npu`` entry point (group ``torch_dynamo_backends``).

torch_npu (torchair) registers ``npu`` too, and Dynamo raises "duplicate name" when a
second registration follows the first. So when Dynamo loads our ``npu`` entry point and
torch_npu is installed, torch_npu is imported first and keeps the name (as it does under
PyTorch's device autoload); we warn once that ``npu_inductor`` is this compiler's name.
Neither import order crashes.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any


def __getattr__(name: str) -> Any:
    if name != "npu":
        raise AttributeError(name)
    from torch._dynamo.backends.registry import _COMPILER_FNS

    from npu_inductor import backend

    if "npu" not in _COMPILER_FNS and importlib.util.find_spec("torch_npu") is not None:
        importlib.import_module("torch_npu")
    owner = _COMPILER_FNS.pop("npu", None)
    if owner is None or owner is backend.npu_backend:
        return backend.npu_backend
    backend._warn_clash()
    return owner  # lookup_backend re-registers it under "npu"
