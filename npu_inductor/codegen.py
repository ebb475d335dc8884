"""Renders the jinja templates in ``codegen_templates/`` (one cached environment).

Anything from the user's model that reaches generated code goes through ``pystr``
(a Python string literal) or ``shq`` (a shell-quoted word).
"""

from __future__ import annotations

import functools
import importlib.resources
import shlex
import types
from typing import Any

import jinja2
import torch

from npu_inductor.ge.dtypes import to_cpp
from npu_inductor.ge.ir import Graph
from npu_inductor.gears import Gears


@functools.cache
def environment() -> jinja2.Environment:
    folder = str(importlib.resources.files("npu_inductor.codegen_templates"))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(folder),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters["pystr"] = repr
    env.filters["shq"] = lambda s: shlex.quote(str(s))
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def _dtype_src(dtype: torch.dtype) -> str:
    return f"torch.{str(dtype).removeprefix('torch.')}"


def executor_source(graph: Graph, device: str, gears: Gears | None = None) -> str:
    """The executor module for ``graph`` on ``device`` (``host`` or ``acl``); ``gears``:
    the acl model's ATC ``--dynamic_dims`` gears."""
    descs = [op.output_descs[0] for op in graph.data_ops()]
    refs = [i for i, op in enumerate(graph.data_ops()) if op.type == "RefData"]
    outs = list(graph.net_output().input_descs)
    names = [op.name for op in graph.data_ops()]
    if device != "acl":
        return render("executor.py.jinja", graph_name=graph.name, input_names=names,
                      inputs=[(_dtype_src(d.dtype), d.shape) for d in descs],
                      outputs=[(_dtype_src(d.dtype), d.shape) for d in outs], refs=refs)
    return render("executor_acl.py.jinja", graph_name=graph.name, input_names=names,
                  inputs=[(_dtype_src(d.dtype), d.shape, to_cpp(d.dtype)) for d in descs],
                  outputs=[(_dtype_src(d.dtype), d.shape, to_cpp(d.dtype)) for d in outs],
                  gear_inputs=[i for i, _ in gears.shapes] if gears else [],
                  gears=gears.full_dims() if gears else [], refs=refs)


def load_executor(source: str, name: str) -> types.ModuleType:
    """Import generated executor source as a module."""
    module = types.ModuleType(f"npu_inductor_executor_{name}")
    exec(compile(source, f"<npu_inductor executor {name}>", "exec"), module.__dict__)
    return module
