"""The device side of the C++ fake ACL (acl_stub.cpp): ``describe OM WORK`` writes the model's
input/output buffer sizes to WORK/desc.txt; ``run OM WORK`` runs the ``.air`` inside the fake
``.om`` on the host device with WORK/in<i>.bin at the gear in WORK/dims.txt and writes
WORK/out<i>.bin. A gear that is not one of the model's, or an input of the wrong size, fails."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import fake_om  # noqa: E402

from npu_inductor import codegen  # noqa: E402
from npu_inductor.ge import from_air  # noqa: E402
from npu_inductor.ge.dtypes import from_cpp  # noqa: E402
from npu_inductor.runtime import get_device  # noqa: E402

OUTPUT_BYTES = 16 << 20  # the fake cannot know a gear model's largest output: a bound


def _elem(dtype: int) -> int:
    return torch.empty((), dtype=from_cpp(dtype)).element_size()


def _shapes(header: dict, dims: list[int] | None) -> list[list[int]]:
    """Per model input, its shape at gear ``dims`` (None: the largest of every gear)."""
    shapes = [list(x["shape"]) for x in header["inputs"]]
    offset = 0
    for k in header["gear_inputs"]:
        rank = len(shapes[k])
        if dims is None:
            shapes[k] = [max(g[offset + j] for g in header["gears"]) for j in range(rank)]
        else:
            shapes[k] = dims[offset:offset + rank]
        offset += rank
    return shapes


def describe(om: Path, work: Path) -> None:
    header, _ = fake_om.unpack(om.read_bytes())
    sizes = [math.prod(s) * _elem(x["dtype"])
             for s, x in zip(_shapes(header, None), header["inputs"])]
    gear_index = len(sizes) if header["gears"] else -1
    if header["gears"]:
        sizes.append(8 * len(header["gears"][0]))
    outs = [OUTPUT_BYTES] * len(header["outputs"])
    (work / "desc.txt").write_text(f"{len(sizes)} {gear_index}\n{' '.join(map(str, sizes))}\n"
                                   f"{len(outs)}\n{' '.join(map(str, outs))}\n")


def run(om: Path, work: Path) -> None:
    header, air = fake_om.unpack(om.read_bytes())
    dims = [int(v) for v in (work / "dims.txt").read_text().split()]
    if header["gears"] and dims not in header["gears"]:
        raise SystemExit(f"fake acl: dims {dims} are not a gear of the model {header['gears']}")
    feeds = []
    for k, (shape, x) in enumerate(zip(_shapes(header, dims or None), header["inputs"])):
        dtype = from_cpp(x["dtype"])
        data = bytearray((work / f"in{k}.bin").read_bytes())
        if len(data) != math.prod(shape) * _elem(x["dtype"]):
            raise SystemExit(f"fake acl: input {k} has {len(data)} bytes for {shape}")
        feeds.append(torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(shape))
    graph = from_air(air)
    module = codegen.load_executor(codegen.executor_source(graph, "host"), "fake_acl_c")
    executor = module.Executor(get_device("host"), air)
    for i, y in enumerate(executor.run(feeds)):
        flat = torch.empty(y.numel(), dtype=y.dtype).copy_(y.reshape(-1))
        (work / f"out{i}.bin").write_bytes(flat.view(torch.uint8).numpy().tobytes())


if __name__ == "__main__":
    {"describe": describe, "run": run}[sys.argv[1]](Path(sys.argv[2]), Path(sys.argv[3]))
