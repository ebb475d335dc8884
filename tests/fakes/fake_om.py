"""The offline-model format shared by the fake ``atc`` and the fake ``acl``: a magic, a JSON
header (SoC, inputs after ``--input_shape``, gears, outputs) and the ``.air`` bytes. A real
``.om`` holds compiled kernels; the fake acl runs the ``.air`` on the host device instead."""

from __future__ import annotations

import json
import struct
from typing import Any

MAGIC = b"FAKE-OM\0"


def pack(header: dict[str, Any], air: bytes) -> bytes:
    head = json.dumps(header).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + air


def unpack(data: bytes) -> tuple[dict[str, Any], bytes]:
    if not data.startswith(MAGIC):
        raise ValueError("not an offline model (.om) written by atc")
    (n,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    return json.loads(data[start:start + n]), data[start + n:]
