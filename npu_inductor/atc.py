"""ATC: compiling a GE ``.air`` graph into an offline ``.om`` model for the acl device.

The script is rendered from ``codegen_templates/atc.sh.jinja``; flags follow
shared/reference/acl_api.md §3 (``--framework=1`` reads a binary ``ModelDef``).

A graph with ``-1`` dims gets ``--input_shape`` naming its dynamic ``Data`` ops. With
``Gears`` (shape buckets on the acl device) the whole bucketed graph is ONE ATC compile:
``--input_shape`` holds ``-1`` at the bucketed dims and ``--dynamic_dims`` one group per
gear (2..100 gears, every group as wide as the ``-1`` count); at run time the executor
selects the gear with ``acl.mdl.set_input_dynamic_dims``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from npu_inductor import codegen
from npu_inductor.config import NpuConfig
from npu_inductor.ge.ir import DYNAMIC_DIM, Graph
from npu_inductor.gears import Gears


class AtcError(RuntimeError):
    """ATC is missing or rejected the graph."""


def input_shape_arg(graph: Graph, gears: Gears | None = None) -> str:
    """``--input_shape`` value, ``name:d0,d1;name2:...`` (-1 = dynamic): the gears' shapes,
    else every ``Data`` op with a ``-1`` dim (empty for a static graph)."""
    data = graph.data_ops()
    if gears is not None:
        shapes = [(data[i].name, dims) for i, dims in gears.shapes]
    else:
        shapes = [(op.name, op.output_descs[0].shape) for op in data
                  if DYNAMIC_DIM in op.output_descs[0].shape]
    return ";".join(f"{name}:{','.join(str(d) for d in dims)}" for name, dims in shapes)


def dynamic_dims_arg(gears: Gears | None) -> str:
    """``--dynamic_dims`` value: one group per gear, values for the ``-1`` dims in order."""
    if gears is None:
        return ""
    return ";".join(",".join(str(v) for v in gear) for gear in gears.values)


def atc_script(graph: Graph, air_path: Path, om_stem: Path, config: NpuConfig,
               soc_version: str, gears: Gears | None = None) -> str:
    return codegen.render("atc.sh.jinja", graph_name=graph.name, air_path=str(air_path),
                          om_stem=str(om_stem), soc_version=soc_version,
                          precision_mode=config.precision_mode,
                          input_shape=input_shape_arg(graph, gears),
                          dynamic_dims=dynamic_dims_arg(gears))


def compile_om(graph: Graph, air: bytes, config: NpuConfig, soc_version: str | None = None,
               gears: Gears | None = None) -> bytes:
    """Run ATC on ``air`` and return the ``.om`` bytes (needs CANN's ``atc`` on PATH).
    ``soc_version``: the option, else the device's SoC name."""
    if shutil.which("atc") is None:
        raise AtcError("ATC (`atc`) is not on PATH: install CANN's toolkit and source its "
                       "set_env.sh, or use device='host'")
    soc = config.soc_version or soc_version
    if not soc:
        raise AtcError("no SoC for ATC --soc_version: set options={'soc_version': ...}")
    # a private scratch folder: the compile cache (npu_inductor/cache.py) keeps the .om
    folder = Path(tempfile.mkdtemp(prefix="npu_inductor_atc_")) / graph.name
    folder.mkdir(parents=True, exist_ok=True)
    air_path = folder / f"{graph.name}.air"
    air_path.write_bytes(air)
    script = folder / "atc.sh"
    script.write_text(atc_script(graph, air_path, folder / graph.name, config, soc, gears))
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        raise AtcError(f"ATC failed for graph {graph.name} ({script}):\n{done.stdout}"
                       f"\n{done.stderr}")
    om = (folder / f"{graph.name}.om").read_bytes()
    shutil.rmtree(folder.parent, ignore_errors=True)
    return om
