"""ATC: compiling a GE ``.air`` graph into an offline ``.om`` model for the acl device.

The script is rendered from ``codegen_templates/atc.sh.jinja``; flags follow
shared/reference/acl_api.md §3 (``--framework=1`` reads a binary ``ModelDef``).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from npu_inductor import codegen
from npu_inductor.config import NpuConfig
from npu_inductor.ge.ir import Graph


class AtcError(RuntimeError):
    """ATC is missing or rejected the graph."""


def input_shape_arg(graph: Graph) -> str:
    """``--input_shape`` value: ``name:d0,d1;name2:...`` in Data-index order (-1 = dynamic)."""
    return ";".join(f"{op.name}:{','.join(str(d) for d in op.output_descs[0].shape)}"
                    for op in graph.data_ops())


def dynamic_dims_arg(gears: list[list[int]]) -> str:
    """``--dynamic_dims`` value: one group per gear, values for the ``-1`` dims in order."""
    return ";".join(",".join(str(v) for v in gear) for gear in gears)


def atc_script(graph: Graph, air_path: Path, om_stem: Path, config: NpuConfig,
               gears: list[list[int]] | None = None) -> str:
    dynamic = bool(gears)
    return codegen.render("atc.sh.jinja", graph_name=graph.name, air_path=str(air_path),
                          om_stem=str(om_stem), soc_version=config.soc_version,
                          precision_mode=config.precision_mode,
                          input_shape=input_shape_arg(graph) if dynamic else "",
                          dynamic_dims=dynamic_dims_arg(gears) if dynamic else "")


def compile_om(graph: Graph, air: bytes, config: NpuConfig,
               gears: list[list[int]] | None = None) -> bytes:
    """Run ATC on ``air`` and return the ``.om`` bytes (needs CANN's ``atc`` on PATH)."""
    if shutil.which("atc") is None:
        raise AtcError("ATC (`atc`) is not on PATH: install CANN's toolkit and source its "
                       "set_env.sh, or use device='host'")
    # a private scratch folder: the compile cache (npu_inductor/cache.py) keeps the .om
    folder = Path(tempfile.mkdtemp(prefix="npu_inductor_atc_")) / graph.name
    folder.mkdir(parents=True, exist_ok=True)
    air_path = folder / f"{graph.name}.air"
    air_path.write_bytes(air)
    script = folder / "atc.sh"
    script.write_text(atc_script(graph, air_path, folder / graph.name, config, gears))
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        raise AtcError(f"ATC failed for graph {graph.name} ({script}):\n{done.stdout}"
                       f"\n{done.stderr}")
    om = (folder / f"{graph.name}.om").read_bytes()
    shutil.rmtree(folder.parent, ignore_errors=True)
    return om
