"""The op-spec table, the converters and the host kernels agree: every op type the compiler
emits has a spec and a host kernel, every spec is emitted, every host kernel has a spec.
(An op type without a spec cannot be built at all: ``test_ir.test_spec_violations_...``.)

"Emitted" is read from the source: a GE op type name written as a string in the code that
builds GE graphs (lowering/, graph_passes/, npu_inductor/ outside ge/, and the device rules,
which rewrite graphs), plus the few names
that code assembles from parts (``NAMES_BUILT_IN_CODE``, each checked against its file).
"""

from __future__ import annotations

import ast
from pathlib import Path

from npu_inductor.ge.op_specs import raw_specs
from npu_inductor.runtime.kernels import KERNELS

ROOT = Path(__file__).resolve().parents[2]
EMITTING = ["lowering", "graph_passes", "npu_inductor"]
# op types the host model runs itself (graph inputs, constants, the output node)
FRAMEWORK = {"Data", "RefData", "Const", "NetOutput"}
# names the emitting code builds from parts -> (file, the parts it spells)
NAMES_BUILT_IN_CODE = {
    "FFT2D": ("lowering/spectral.py", ['"FFT"', '"2D"']),
    "IFFT2D": ("lowering/spectral.py", ['"IFFT"', '"2D"']),
    "GridSampler2D": ("lowering/vision.py", ['f"GridSampler{_d}D"']),
    "GridSampler3D": ("lowering/vision.py", ['f"GridSampler{_d}D"']),
    "GridSampler2DGrad": ("lowering/vision.py", ['f"GridSampler{_d}DGrad"']),
    "GridSampler3DGrad": ("lowering/vision.py", ['f"GridSampler{_d}DGrad"']),
}


def _sources() -> list[Path]:
    files = [f for d in EMITTING for f in (ROOT / d).rglob("*.py")]
    ge = ROOT / "npu_inductor" / "ge"
    return [f for f in files if ge not in f.parents] + [ge / "device_rules.py"]


def _string_constants(source: str) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def emitted_op_types() -> set[str]:
    specs = set(raw_specs())
    names = set()
    for f in _sources():
        names |= _string_constants(f.read_text()) & specs
    return names | set(NAMES_BUILT_IN_CODE) | FRAMEWORK


def test_names_built_in_code_are_still_built_there():
    for name, (path, parts) in NAMES_BUILT_IN_CODE.items():
        text = (ROOT / path).read_text()
        missing = [p for p in parts if p not in text]
        assert not missing, f"{name}: {path} no longer spells {missing}; update this table"


def test_every_spec_is_emitted():
    unused = sorted(set(raw_specs()) - emitted_op_types())
    assert not unused, f"op-spec entries nothing emits (remove them): {unused}"


def test_every_emitted_op_has_a_host_kernel():
    no_kernel = sorted(emitted_op_types() - FRAMEWORK - set(KERNELS))
    assert not no_kernel, f"emitted GE op types without a host kernel: {no_kernel}"


def test_every_host_kernel_has_a_spec():
    orphans = sorted(set(KERNELS) - set(raw_specs()))
    assert not orphans, f"host kernels for op types outside the op-spec table: {orphans}"


def test_every_host_kernel_is_for_an_emitted_op():
    dead = sorted(set(KERNELS) - emitted_op_types())
    assert not dead, f"host kernels for op types nothing emits: {dead}"

