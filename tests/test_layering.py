"""Imports flow one way down the pipeline (DESIGN.md "Layout"): every import statement in the
product's source, module-level or inside a function, is checked against the layering rules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# source folder -> the package it installs as ([tool.setuptools.package-dir])
FOLDERS = {"npu_inductor": "npu_inductor", "graph_passes": "npu_inductor.graph_passes",
           "lowering": "npu_inductor.lowering", "runtime": "npu_inductor.runtime",
           "codegen_templates": "npu_inductor.codegen_templates",
           "benchmarks": "npu_inductor.benchmarks"}
P = "npu_inductor."
# (importer package prefix, forbidden import prefix, why)
RULES = [
    (P + "ge", P, "the GE IR imports nothing above it"),
    (P + "runtime", P + "lowering", "the runtime never imports lowering"),
    (P + "runtime", P + "graph_passes", "the runtime never imports the FX passes"),
    (P + "lowering", P + "runtime", "lowering never imports the runtime"),
    (P + "lowering", P + "backend", "lowering never imports the backend"),
    (P + "", P + "benchmarks", "the product never imports benchmarks"),
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = [FOLDERS[rel.parts[0]], *rel.parts[1:]]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source`` (relative ones resolved)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".")[: -node.level]
                base = ".".join([*pkg, base] if base else pkg)
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".") or (
        prefix.endswith(".") and name.startswith(prefix))


def violations(module: str, source: str, where: str) -> list[str]:
    found = []
    for line, name in imports_of(source, module):
        for importer, forbidden, why in RULES:
            if not _within(module, importer) or not _within(name, forbidden):
                continue
            if forbidden == P and _within(name, importer):
                continue  # the GE IR importing its own modules
            if forbidden == P + "benchmarks" and _within(module, P + "benchmarks"):
                continue
            found.append(f"{where}:{line}: {module} imports {name} ({why})")
    return found


def _product_files() -> list[Path]:
    files = [f for folder in FOLDERS for f in (ROOT / folder).rglob("*.py")]
    return [f for f in files if not f.name.endswith("_pb2.py")]


def test_layering_rules_hold():
    files = _product_files()
    assert len(files) > 50, f"found only {len(files)} source files under {ROOT}"
    found = [v for f in files
             for v in violations(_module_name(f), f.read_text(), str(f.relative_to(ROOT)))]
    assert not found, "layering violations:\n" + "\n".join(found)


@pytest.mark.parametrize("module,source", [
    ("npu_inductor.ge.ir", "from npu_inductor.lowering import helpers"),
    ("npu_inductor.ge.ir", "import npu_inductor.config"),
    ("npu_inductor.runtime.device", "def f():\n    from npu_inductor.lowering import x"),
    ("npu_inductor.runtime.kernels.nn", "from ...graph_passes import common"),
    ("npu_inductor.lowering.collectives", "from npu_inductor.runtime import collectives"),
    ("npu_inductor.backend", "import npu_inductor.benchmarks.zoo"),
])
def test_checker_catches_a_violation(module, source):
    assert violations(module, source, "x.py"), f"{source!r} in {module} was not caught"


@pytest.mark.parametrize("module,source", [
    ("npu_inductor.ge.ir", "from npu_inductor.ge import op_specs\nimport torch"),
    ("npu_inductor.lowering.conv", "from npu_inductor.ge.ir import Graph"),
    ("npu_inductor.runtime.device", "from npu_inductor.ge import serialize"),
    ("npu_inductor.benchmarks.cli", "from npu_inductor.benchmarks import zoo"),
])
def test_checker_allows_downward_imports(module, source):
    assert not violations(module, source, "x.py")
