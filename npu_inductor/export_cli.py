"""``npu-inductor export`` and ``npu-inductor run-export`` (registered in cli.py).

    npu-inductor export MODULE:FACTORY --input NAME:DTYPE:SHAPE ... --out DIR
        [--bucket NAME:DIM:SIZES] [--soc-version SOC] [--formats air,onnx] [--pad trust]
    npu-inductor run-export DIR [--rtol R] [--atol A]

``FACTORY`` is a callable in ``MODULE`` returning the model, or ``(model, example_inputs)``;
``--input`` makes random example inputs instead (floats ~ N(0, 1), integers in
``--int-range``, default 0,10); ``SHAPE`` is ``2,8``; a 0-d input has an empty shape.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

import torch


class UsageError(ValueError):
    """A malformed command-line argument."""


def parse_input(text: str, low: int, high: int, generator: torch.Generator) -> tuple[str, Any]:
    parts = text.split(":")
    if len(parts) != 3 or not parts[0]:
        raise UsageError(f"--input {text!r}: expected NAME:DTYPE:SHAPE, e.g. x:float32:4,16")
    from npu_inductor.export_bundle import dtype_of
    from npu_inductor.exporter import ExportError

    name, dtype_name, shape_text = parts
    try:
        dtype = dtype_of(dtype_name)
    except ExportError:
        raise UsageError(f"--input {text!r}: unknown dtype {dtype_name!r}") from None
    try:
        shape = [int(d) for d in shape_text.split(",")] if shape_text else []
    except ValueError:
        raise UsageError(f"--input {text!r}: SHAPE must be integers like 2,8") from None
    if dtype.is_floating_point:
        return name, torch.randn(shape, generator=generator).to(dtype)
    if dtype == torch.bool:
        return name, torch.randint(0, 2, shape, generator=generator).bool()
    return name, torch.randint(low, high, shape, generator=generator).to(dtype)


def parse_bucket(text: str) -> tuple[str, int, list[int]]:
    parts = text.split(":")
    try:
        name, dim, sizes = parts
        return name, int(dim), [int(s) for s in sizes.split(",")]
    except ValueError:
        raise UsageError(f"--bucket {text!r}: expected NAME:DIM:SIZES, e.g. ids:1:16,32,64") \
            from None


def load_factory(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"{spec!r}: expected MODULE:FACTORY, e.g. mypkg.models:make_model")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.pop(0)
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UsageError(f"{module_name} has no callable {attr!r}")
    return factory


def export_main(args: argparse.Namespace) -> int:
    from npu_inductor.exporter import ExportError, export

    try:
        made = load_factory(args.factory)()
        model, inputs = made if isinstance(made, tuple) else (made, None)
        low, high = (int(v) for v in args.int_range.split(","))
        g = torch.Generator().manual_seed(args.seed)
        named = [parse_input(t, low, high, g) for t in args.input]
        if named:
            inputs = [x for _, x in named]
        if inputs is None:
            raise UsageError("give --input NAME:DTYPE:SHAPE for every model input (or let "
                             "FACTORY return (model, example_inputs))")
        buckets: dict[str, dict[int, list[int]]] = {}
        for name, dim, sizes in map(parse_bucket, args.bucket):
            buckets.setdefault(name, {})[dim] = sizes
        folder = export(model, inputs, args.out, buckets=buckets or None,
                        soc_version=args.soc_version, formats=tuple(args.formats.split(",")),
                        pad=args.pad, input_names=[n for n, _ in named] or None)
    except (UsageError, ExportError, ImportError) as e:
        print(f"npu-inductor export: {e}", file=sys.stderr)
        return 2
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        print(path.relative_to(folder))
    return 0


def run_export_main(args: argparse.Namespace) -> int:
    from npu_inductor.export_bundle import run
    from npu_inductor.exporter import ExportError

    try:
        rows = run(args.dir, args.rtol, args.atol)
    except (ExportError, OSError) as e:
        print(f"npu-inductor run-export: {e}", file=sys.stderr)
        return 2
    for r in rows:
        print(f"{r['name']}: shape {r['shape']} max abs err {r['max_abs']:.3g} "
              f"max rel err {r['max_rel']:.3g} {'ok' if r['ok'] else 'MISMATCH'}")
    bad = [r["name"] for r in rows if not r["ok"]]
    print(f"run-export: {len(rows) - len(bad)}/{len(rows)} outputs match eager"
          + (f"; mismatch: {bad}" if bad else ""))
    return 1 if bad else 0


def add_export(sub: Any) -> None:
    from npu_inductor.config import DEFAULT_SOC_VERSION

    p = sub.add_parser("export", help="export a model as one GE graph + ATC script + runner")
    p.add_argument("factory", help="MODULE:FACTORY returning the model (or (model, inputs))")
    p.add_argument("--input", action="append", default=[], metavar="NAME:DTYPE:SHAPE",
                   help="an example input, in forward's order (repeat)")
    p.add_argument("--out", required=True, help="the export folder")
    p.add_argument("--bucket", action="append", default=[], metavar="NAME:DIM:SIZES",
                   help="gear sizes of a dim, e.g. ids:1:16,32,64 (repeat)")
    p.add_argument("--soc-version", default=DEFAULT_SOC_VERSION)
    p.add_argument("--formats", default="air,onnx", help="air,onnx (default both)")
    p.add_argument("--pad", choices=("safe", "trust"), default="safe",
                   help="trust: pad bucketed dims without the padding-safety proof")
    p.add_argument("--int-range", default="0,10", help="LOW,HIGH of random integer inputs")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=export_main)


def add_run_export(sub: Any) -> None:
    p = sub.add_parser("run-export", help="run an export's model.air on the host device and "
                       "compare with its bundled eager outputs")
    p.add_argument("dir", help="the export folder")
    p.add_argument("--rtol", type=float, default=None, help="default 1e-5 (fp16/bf16 1e-2)")
    p.add_argument("--atol", type=float, default=None, help="default 1e-5 (fp16/bf16 1e-2)")
    p.set_defaults(func=run_export_main)
