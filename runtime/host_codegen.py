"""Straight-line Python for a loaded host model (Inductor's wrapper-codegen idea).

[Note: host codegen]
``HostModel`` interprets its bound steps: per GE op it fetches argument slots from a
list, dispatches on the output destinations and stores results back, ~10 us of Python
per op. ``compile_host_model`` renders ``codegen_templates/host_model.py.jinja`` into one
function per model instead: every value slot is a local ``v<slot>``, kernels, attrs,
constants and output signatures are closure constants, workspace destinations are
``out=`` calls or ``store`` into ``W[slot]``, graph outputs go through ``hand_over``, and
frees are ``del``. It is the interpreter unrolled, with the same helpers for the same
``Bound`` destinations, so results are identical. Exceptions are mapped back to the GE
op through the generated line numbers. A dynamic graph's ``Reshape(x, Pack(sizes))`` step
(``shape_steps.py``) is written inline as ``x.reshape((...))``: Const sizes are literals
checked at load, each other size slot is converted (and checked: a 0-d int) once, at its
first use, by ``scalar_size``. ``NPU_INDUCTOR_HOST_CODEGEN=0`` keeps the interpreter.
"""

from __future__ import annotations

import bisect
import keyword
import linecache
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from npu_inductor.codegen import render
from npu_inductor.config import env_bool
from npu_inductor.runtime import linear_fold, size_prelude
from npu_inductor.runtime.host_model import (
    Bound,
    HostExecutionError,
    _detach_overlaps,
    _hand_over,
    _store,
)
from npu_inductor.runtime.kernels import CONST_INPUTS, KERNELS
from npu_inductor.runtime.shape_steps import packed_reshape, scalar_size
from npu_inductor.runtime.size_prelude import size_input, specialized_slice

ENV_FLAG = "NPU_INDUCTOR_HOST_CODEGEN"
_HELPERS = (torch.empty, _store, _hand_over, _detach_overlaps, scalar_size, specialized_slice,
            size_input, torch.mm, torch.matmul)
_MATH = "npu_inductor.runtime.kernels.math"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/\-]")

RunFn = Callable[[Sequence[torch.Tensor], dict, Any], list]


_PARSED: list = [object(), True]  # the variable's last value and what it means


def enabled() -> bool:
    """Whether loaded host models run generated code (``NPU_INDUCTOR_HOST_CODEGEN``; read
    on every call, parsed when it changed)."""
    raw = os.environ.get(ENV_FLAG)
    if raw is not _PARSED[0] and raw != _PARSED[0]:
        _PARSED[1] = env_bool(ENV_FLAG, True)  # (garbage raises, every call)
        _PARSED[0] = raw
    return _PARSED[1]


def _label(b: Bound) -> str:
    """The GE op for a comment line: only harmless characters reach the source."""
    return _UNSAFE.sub("_", f"{b.step.op.name} ({b.step.op.type})")[:120]


def _arg_expr(a: Any, consts: dict[int, Any], decoded: bool = False) -> str:
    """A kernel argument; ``decoded``: a Const read as its pre-decoded list ``l<slot>``."""
    if decoded and isinstance(a, int) and a in consts:
        return f"l{a}"
    if a is None:
        return "None"
    if isinstance(a, tuple):
        return "[" + ", ".join(_slot(s, consts) for s in a) + "]"
    return _slot(a, consts)


def _slot(s: int, consts: dict[int, Any]) -> str:
    return f"c{s}" if s in consts else f"v{s}"


def _attr_call(k: int, attrs: dict[str, Any], binds: list) -> list[str]:
    """Keyword arguments bound to closure constants (``**a<k>`` if a name is no identifier)."""
    if all(n.isidentifier() and not keyword.iskeyword(n) for n in attrs):
        out = []
        for j, name in enumerate(attrs):
            binds.append((f"a{k}_{j}", (k, name)))
            out.append(f"{name}=a{k}_{j}")
        return out
    binds.append((f"a{k}", (k, None)))
    return [f"**a{k}"]


def _const_size(t: torch.Tensor) -> int | None:
    """A Const Pack input as a Python int: 0-d integer payloads only."""
    return int(t) if t.dim() == 0 and t.dtype in (torch.int32, torch.int64) else None


def _packed_reshape(b: Bound, consts: dict, sizes: set[int]) -> tuple[list, str] | None:
    """``Reshape(x, Pack(sizes))`` as ``x.reshape((...))``: Const sizes are int literals
    (checked at load), others ``i<slot>``, each converted (and checked) once by
    ``scalar_size`` at its first use; None when a Const size is no 0-d int."""
    x, parts = b.step.args
    exprs, pre = [], []
    for s in parts:
        if s in consts:
            n = _const_size(consts[s])
            if n is None:
                return None
            exprs.append(repr(n))
            continue
        if s not in sizes:
            pre.append(f"i{s} = scalar_size(v{s})")
            sizes.add(s)
        exprs.append(f"i{s}")
    tail = "," if len(exprs) == 1 else ""
    return pre, f"{_slot(x, consts)}.reshape(({', '.join(exprs)}{tail}))"


def _inline_call(st: Any, args: list[str], out: str | None = None) -> str | None:
    """A kernel that is one torch call, written as that call (no Python frame, no keyword
    dict per call): a ``MatMulV2`` / ``BatchMatMulV2`` without bias (``matmul_2d`` /
    ``batch_matmul_2d``: ``torch.mm`` / ``torch.matmul`` of the operands, ``.mT`` per
    transpose flag, into ``out`` when it writes its planned place), a ``Transpose`` by a
    Const perm and a ``Reshape`` to a Const shape (``x.permute`` / ``x.reshape``)."""
    name = getattr(st.fn, "__name__", "")
    if st.op.type in _MATMULS and name == _MATMULS[st.op.type][0] \
            and st.fn.__module__ == _MATH and len(st.args) == 2:
        fn, flags = _MATMULS[st.op.type][1:]
        a, b = (f"{x}.mT" if st.attrs.get(flag, False) else x for x, flag in zip(args, flags))
        return f"{fn}({a}, {b}{'' if out is None else ', out=' + out})"
    if out is not None or len(args) != 2 or not args[1].startswith("l"):
        return None
    if st.op.type == "Transpose" and st.fn is KERNELS["Transpose"]:
        return f"{args[0]}.permute({args[1]})"
    if st.op.type == "Reshape" and st.fn is KERNELS["Reshape"]:
        return f"{args[0]}.reshape({args[1]})"
    return None


# op type -> (its specialized kernel's name, the torch call, its transpose flags)
_MATMULS = {"MatMulV2": ("matmul_2d", "mm", ("transpose_x1", "transpose_x2")),
            "BatchMatMulV2": ("batch_matmul_2d", "matmul", ("adj_x1", "adj_x2"))}


def _step_context(k: int, b: Bound, consts: dict, binds: list, sigs: dict,
                  sizes: set[int]) -> dict[str, Any]:
    st = b.step
    lists = CONST_INPUTS.get(st.op.type, ())
    args = [_arg_expr(a, consts, i in lists) for i, a in enumerate(st.args)]
    ctx: dict[str, Any] = {"index": k, "label": _label(b), "args": args, "use_out": b.use_out,
                           "multi": len(st.outs) > 1, "detach": b.detach, "stores": [],
                           "notask": b.notask, "out_slot": st.outs[0] if st.outs else None,
                           "pre": [], "raw": []}
    inline = _packed_reshape(b, consts, sizes) if st.fn is packed_reshape \
        and not b.use_out else None
    if inline is not None:
        ctx["pre"], ctx["expr"] = inline
    elif not b.use_out and st.compute is None:
        expr = _inline_call(st, args)
        if expr is not None:
            ctx["expr"] = expr
    call = args + _attr_call(k, st.attrs, binds)
    if b.use_out and ctx["multi"]:  # the "ws" results written in place (_can_out_multi)
        ws = [s for s, d in zip(st.outs, b.dests) if d[0] == "ws"]
        call.append("out=(" + "".join(f"W[{s}], " if s in ws else "None, " for s in st.outs)
                    + ")")
        ctx["use_out"] = False
        ctx["multi"] = any(d[0] in ("graph", "keep") for d in b.dests)  # r[i] read
        for i, (s, dest) in enumerate(zip(st.outs, b.dests)):
            if dest[0] == "graph":
                sigs[s] = st.sigs[i]
            if dest[0] != "drop":
                ctx["stores"].append(("keep", s, f"W[{s}]") if dest[0] == "ws"
                                     else (dest[0], s, f"r[{i}]"))
    elif b.use_out:
        s = st.outs[0]
        ctx["out_slot"] = s
        fresh = (_inline_call(st, args) if b.dests[0][0] != "ws" and st.op.type == "MatMulV2"
                 and st.compute is None else None)
        if fresh is not None:
            # a 2-D matmul's result (torch.mm, or matmul folding a 3-D x to mm) is fresh
            # contiguous memory of the graph's dtype and shape: handed over as it is,
            # without allocating an out= tensor first (a backward's weight gradients)
            ctx["expr"] = fresh
        else:
            if b.dests[0][0] == "ws":
                out = f"W[{s}]"
            else:
                sigs[s] = st.sigs[0]
                out = f"empty(s{s}[1], dtype=s{s}[0])"
            call.append(f"out={out}")
            expr = _inline_call(st, args, out) if st.compute is None else None
            if expr is not None:
                ctx["expr"] = expr
    else:
        indexed = ctx["multi"] or b.detach
        for i, (s, dest) in enumerate(zip(st.outs, b.dests)):
            if dest[0] == "drop":
                continue
            if dest[0] == "graph":
                sigs[s] = st.sigs[i]
            ctx["stores"].append((dest[0], s, f"r[{i}]" if indexed else "r"))
    ctx.setdefault("expr", f"k{k}({', '.join(call)})")
    ctx["hand_args"] = [] if b.private else args  # a private source needs no alias check
    return ctx


def _prelude_context(model: Any, sp: size_prelude.SizePlan | None, binds: list, sigs: dict,
                     sizes: set[int]) -> dict[str, Any] | None:
    """The size prelude (``size_prelude.py``): its steps, conversions and results."""
    if sp is None or not (sp.steps or sp.attention or sp.slices):
        return None
    consts = model.consts
    steps = [_step_context(k, model.bound[k], consts, binds, sigs, set()) for k in sp.steps]
    for st in steps:
        st["frees"] = ""  # prelude values live in the cache
    post = [f"i{s} = scalar_size(v{s})" for s in sp.ints]
    post += [f"z{k} = k{k}.size_args({', '.join(_arg_expr(a, consts) for a in args)})"
             for k, args in sp.attention.items()]
    post += [f"k{k}s = specialized_slice({model.bound[k].step.op.type!r}, "
             f"[{', '.join(_arg_expr(a, consts) for a in args)}], B[{k}].step.attrs)"
             for k, args in sp.slices.items()]
    returns = ([f"v{s}" for s in sp.returned] + [f"i{s}" for s in sp.ints]
               + [f"z{k}" for k in sp.attention] + [f"k{k}s" for k in sp.slices])
    sizes.update(sp.ints)
    key = ", ".join(f"i{s}, v{s}.dtype" for s, _ in sp.keys)
    return {"params": ", ".join(f"v{s}" for s, _ in sp.keys), "steps": steps, "post": post,
            "returns": returns or ["None"], "key": key + ("," if len(sp.keys) == 1 else ""),
            "key_ints": [f"i{s} = size_input(v{s}, {name!r})" for s, name in sp.keys],
            "limit": size_prelude.CACHE_ENTRIES}


def _run_context(k: int, b: Bound, model: Any, sp: size_prelude.SizePlan | None, binds: list,
                 sigs: dict, sizes: set[int]) -> dict[str, Any]:
    """A step of ``run``: as it is, or with its sizes from the prelude."""
    if sp is not None and k in sp.dims:
        x, index = sp.dims[k]
        sizes.add(b.step.outs[0])
        ctx = _step_context(k, b, model.consts, [], {}, set())
        ctx["raw"] = [f"i{b.step.outs[0]} = {_slot(x, model.consts)}.shape[{index}]"]
        return ctx
    ctx = _step_context(k, b, model.consts, binds, sigs, sizes)
    if sp is not None and k in sp.attention:
        ctx["expr"] = ctx["expr"][:-1] + f", sizes=z{k})"
    elif sp is not None and k in sp.slices:  # (its result can only view x, not the sizes)
        ctx["expr"] = f"k{k}s({ctx['args'][0]})"
        ctx["hand_args"] = ctx["hand_args"][:1]
    return ctx


def _outputs(model: Any) -> list[str]:
    """Inputs, constants and repeated outputs are cloned (never shared with the caller)."""
    seen: set[int] = set()
    out = []
    for s in model.output_slots:
        expr = _slot(s, model.consts)
        out.append(f"{expr}.clone()" if s in seen or s not in model._produced else expr)
        seen.add(s)
    return out


def _frees(b: Bound, assigned: set[int]) -> str:
    return ", ".join(f"v{s}" for s in b.frees if s in assigned)


def host_model_source(model: Any) -> tuple[str, dict[str, Any], list[tuple[int, int]]]:
    """The generated source, its closure data and the first source line of each step."""
    binds: list = []
    sigs: dict[int, tuple] = {}
    sp = size_prelude.plan(model)
    sizes: set[int] = set()  # slots converted to Python ints (``i<slot>``) so far
    prelude = _prelude_context(model, sp, binds, sigs, sizes)
    if prelude is not None:
        sizes.update(s for s, _ in sp.keys)
    assigned = set(model.data_slots) | set(sp.returned if prelude is not None else ())
    skip = sp.pure if prelude is not None else set()
    flat, mms = linear_fold.plan(model)
    steps = []
    for k, b in enumerate(model.bound):
        if k in skip:
            continue
        ctx = _run_context(k, b, model, sp, binds, sigs, sizes)
        if k in flat:  # (linear_fold.py) the matmuls read the 3-D input itself
            ctx["expr"] = _slot(flat[k], model.consts)
        elif k in mms:
            ctx["expr"] = "matmul" + ctx["expr"][len("mm"):]
        if not ctx["raw"]:
            assigned.update(s for s, d in zip(b.step.outs, b.dests) if d[0] != "drop")
        ctx["frees"] = _frees(b, assigned)
        assigned.difference_update(b.frees)
        steps.append(ctx)
    every = steps + (prelude["steps"] if prelude is not None else [])
    source = render("host_model.py.jinja", graph_name=model.graph.name, prelude=prelude,
                    kernels=range(len(model.bound)), attr_binds=[n for n, _ in binds],
                    consts=sorted(model.consts), graph_sigs=sorted(sigs),
                    lists=sorted(_decoded_slots(every)),
                    detach_steps=[k for k, b in enumerate(model.bound) if b.detach],
                    data=[f"v{s}" for s in model.data_slots], steps=steps,
                    outputs=_outputs(model))
    attrs = {name: (model.bound[k].step.attrs if key is None else
                    model.bound[k].step.attrs[key]) for name, (k, key) in binds}
    lists = {s: model.consts[s].tolist() for s in _decoded_slots(every)}
    closure = {"K": [b.step.fn for b in model.bound], "A": attrs, "C": model.consts, "L": lists,
               "B": dict(enumerate(model.bound)), "S": sigs, "H": _HELPERS}
    return source, closure, _step_lines(source)


def _decoded_slots(steps: list[dict[str, Any]]) -> set[int]:
    return {int(a[1:]) for st in steps for a in st["args"] if a.startswith("l")}


def _step_lines(source: str) -> list[tuple[int, int]]:
    """(first source line, step index) of each generated step, in source order."""
    return [(i + 1, int(line.split()[2].rstrip(":"))) for i, line in
            enumerate(source.splitlines()) if line.lstrip().startswith("# step ")]


def compile_host_model(model: Any) -> RunFn | None:
    """A generated ``run(inputs, views, ws)`` for ``model``, or None when disabled."""
    if not enabled():
        return None
    source, closure, lines = host_model_source(model)
    filename = f"<npu_inductor host model {id(model):x}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)
    fast = namespace["make"](**closure)
    model.codegen_source = source
    return _guarded(fast, model, filename, lines)


def write_source(device: Any, model_id: int, path: Path) -> None:
    """Dump a host-loaded model's generated executor (no-op on other devices or when off)."""
    models = getattr(getattr(device, "acl", None), "models", None)
    if isinstance(models, dict) and model_id in models and enabled():
        path.write_text(host_model_source(models[model_id])[0])


def _guarded(fast: Callable, model: Any, filename: str, lines: list[tuple[int, int]]
             ) -> RunFn:
    def run(inputs: Sequence[torch.Tensor], views: dict, ws: Any) -> list:
        ws_ptr = ws.untyped_storage().data_ptr() if ws is not None else None
        try:
            return fast(inputs, views, ws_ptr)
        except Exception as e:
            k = _failed_step(e, filename, lines)
            if k is None or k < 0:  # (-1: the size inputs, named by their own error)
                raise
            op = model.bound[k].step.op
            raise HostExecutionError(f"GE op {op.name!r} ({op.type}) failed on the host "
                                     f"device: {type(e).__name__}: {e}") from e
    return run


def _failed_step(e: BaseException, filename: str, lines: list[tuple[int, int]]
                 ) -> int | None:
    """The step whose generated lines raised ``e`` (innermost generated frame)."""
    lineno = None
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            lineno = tb.tb_lineno
        tb = tb.tb_next
    if lineno is None or not lines or lineno < lines[0][0]:
        return None
    return lines[bisect.bisect_right(lines, (lineno, float("inf"))) - 1][1]
