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

from npu_inductor.ge.ir import Graph


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


def executor_source(graph: Graph, device: str) -> str:
    inputs = [(_dtype_src(op.output_descs[0].dtype), op.output_descs[0].shape)
              for op in graph.data_ops()]
    outputs = [(_dtype_src(d.dtype), d.shape) for d in graph.net_output().input_descs]
    return render("executor.py.jinja", graph_name=graph.name, device=device, inputs=inputs,
                  outputs=outputs, input_names=[op.name for op in graph.data_ops()])


def load_executor(source: str, name: str) -> types.ModuleType:
    """Import generated executor source as a module."""
    module = types.ModuleType(f"npu_inductor_executor_{name}")
    exec(compile(source, f"<npu_inductor executor {name}>", "exec"), module.__dict__)
    return module
