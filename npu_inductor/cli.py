"""``npu-inductor``: the command line, one subcommand per area.

    npu-inductor cache info [--dir DIR]
    npu-inductor cache clear [--dir DIR]
    npu-inductor export MODULE:FACTORY --input NAME:DTYPE:SHAPE ... --out DIR
    npu-inductor run-export DIR

A subcommand is a function that adds its parser to ``SUBCOMMANDS`` (name -> ``add``); the
parser's ``func`` default receives the parsed arguments and returns the exit code.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

Subparsers = "argparse._SubParsersAction[argparse.ArgumentParser]"
SUBCOMMANDS: dict[str, Callable[[Subparsers], None]] = {}


def subcommand(name: str) -> Callable[[Callable[[Subparsers], None]], Callable]:
    """Register ``add(subparsers)`` as the subcommand ``name``."""

    def register(add: Callable[[Subparsers], None]) -> Callable:
        SUBCOMMANDS[name] = add
        return add

    return register


def _cache_root(args: argparse.Namespace) -> Path | None:
    from npu_inductor import cache
    from npu_inductor.config import resolve

    return cache.cache_root(resolve({"cache_dir": args.dir} if args.dir else {}))


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def cache_info(args: argparse.Namespace) -> int:
    from npu_inductor import cache
    from npu_inductor.runtime.allocator import format_bytes

    root = _cache_root(args)
    if root is None:
        print("compile cache: off (cache_dir / NPU_INDUCTOR_CACHE_DIR)")
        return 0
    i = cache.info(root)
    print(f"compile cache: {i['path']}\nentries: {i['entries']}\nsize: {format_bytes(i['bytes'])}"
          f"\nhits: {i['hits']}\nmisses: {i['misses']}\noldest use: {_when(i['oldest'])}"
          f"\nnewest use: {_when(i['newest'])}")
    return 0


def cache_clear(args: argparse.Namespace) -> int:
    from npu_inductor import cache

    root = _cache_root(args)
    if root is None:
        print("compile cache: off (cache_dir / NPU_INDUCTOR_CACHE_DIR)")
        return 0
    print(f"removed {cache.clear(root)} entries from {root}")
    return 0


@subcommand("cache")
def _add_cache(sub: Subparsers) -> None:
    p = sub.add_parser("cache", help="the on-disk compile cache")
    actions = p.add_subparsers(dest="action", required=True)
    for name, func, text in (("info", cache_info, "entries, size, hits/misses, oldest/newest"),
                             ("clear", cache_clear, "remove every entry")):
        q = actions.add_parser(name, help=text)
        q.add_argument("--dir", help="cache folder (default: cache_dir option / "
                       "NPU_INDUCTOR_CACHE_DIR / ~/.cache/npu_inductor)")
        q.set_defaults(func=func)


@subcommand("export")
def _add_export(sub: Subparsers) -> None:
    from npu_inductor.export_cli import add_export  # offline export (docs/export.md)

    add_export(sub)


@subcommand("run-export")
def _add_run_export(sub: Subparsers) -> None:
    from npu_inductor.export_cli import add_run_export

    add_run_export(sub)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="npu-inductor", description="npu_inductor tools")
    sub = p.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS.values():
        add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
