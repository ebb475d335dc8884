"""``shape_buckets`` by option: size 1 needs no flag.

[Note: size 1 under shape_buckets]
``set_buckets`` tags a tensor, so a compile of a frame that receives it runs size-oblivious
(``buckets._oblivious_while_tagged``). ``options={"shape_buckets": ...}`` tags nothing, and
Dynamo's general (dynamic) graph of a frame would guard its bucketed size ``>= 2`` (0/1
specialization): a later size 1 recompiles a graph of its own. So a Dynamo compile of a
frame compiled by this backend, whose ``shape_buckets`` option names tensors of that frame,
runs size-oblivious when **every** configured dim present has size >= 2 at that compile:
its symbols get the range [0, inf), and size 1 later runs the general graph padded to the
smallest bucket. When a configured dim has size 1 at the compile (``generate()``'s decode
step: ``input_ids`` of length 1 on every step), the default stays: Dynamo specializes it to
1 and the step is one unpadded graph (size-oblivious there would make transformers'
``q_len > 1 and ...`` a SymBool that sdpa's ``is_causal`` rejects: a graph break).

Limits: the callbacks are (re)installed by this backend's compiles and by ``set_buckets``;
``torch._dynamo.reset()`` clears them, so the first compile after a reset runs without
(under ``dynamic=True`` its graph keeps the ``>= 2`` guard and size 1 gets a graph of its
own). Without ``dynamic=True``, a first call of size 1 is Dynamo's static trace and runs in
eager (``EagerFirstCall``); the next size recompiles the general graph. Code of the user's
that branches on the size being 1 still guards it (transformers' sdpa tests ``q_len > 1``).
"""

from __future__ import annotations

from typing import Any

import torch

from npu_inductor.buckets import AUTO


def general_compile(compile_frame: Any) -> bool:
    """Should this Dynamo compile (``convert_frame._compile``'s frame) run size-oblivious?
    (See the note.)"""
    sizes = configured_sizes(compile_frame.f_locals.get("compiler_fn"),
                             compile_frame.f_locals.get("locals"))
    return bool(sizes) and min(sizes) >= 2


def configured_sizes(compiler_fn: Any, f_locals: Any) -> list[int]:
    """The sizes, in the frame's arguments, of the dims its ``shape_buckets`` option (a dict,
    or ``"auto"``: every dim) configures; [] when the compile is not this backend's or has
    no such option."""
    buckets = _shape_buckets(compiler_fn)
    if not isinstance(buckets, (dict, str)) or not isinstance(f_locals, dict):
        return []
    tensors = _frame_tensors(f_locals)
    if buckets == AUTO:  # every dim of every tensor argument
        return [size for _, t in tensors for size in t.shape]
    by_name = dict(tensors)
    sizes = []
    for key, dims in buckets.items():
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            t = tensors[int(key)][1] if int(key) < len(tensors) else None
        else:
            t = by_name.get(key)
        if t is None or not isinstance(dims, dict):
            continue
        sizes += [t.shape[int(d)] for d in dims if -t.dim() <= int(d) < t.dim()]
    return sizes


def _shape_buckets(compiler_fn: Any) -> Any:
    from npu_inductor.backend import npu_backend
    from npu_inductor.config import resolve

    wrapper = getattr(compiler_fn, "_torchdynamo_orig_backend", compiler_fn)
    if getattr(wrapper, "compiler_fn", wrapper) is not npu_backend:
        return None
    try:
        return resolve(getattr(wrapper, "kwargs", {}).get("options")).shape_buckets
    except Exception:  # a bad option: the backend reports it, naming the option
        return None


def _frame_tensors(f_locals: dict) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) of the frame's tensor arguments, in order, named as the backend names
    Dynamo's sources (``buckets._user_inputs``): ``x``, ``args[i]`` as ``"i"``,
    ``kwargs['x']`` as ``x``."""
    out = []
    for name, value in f_locals.items():
        if isinstance(value, torch.Tensor):
            out.append((name, value))
        elif name == "args" and isinstance(value, tuple):
            out += [(str(i), v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
        elif name == "kwargs" and isinstance(value, dict):
            out += [(k, v) for k, v in value.items() if isinstance(v, torch.Tensor)]
    return out
