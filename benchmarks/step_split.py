"""Where a warm decode step of the serving stream goes, layer by layer.

    python -m npu_inductor.benchmarks.step_split [--static] [--prefill LENGTHS] [--stream]

The zoo decoder's ``Llama.decode`` (``LlamaDecode``, as ``npu-bench --mode serve`` compiles
it: ``dynamic=True``; ``--static``: ``dynamic=False`` at one cache length) is called over
and over after its compile, with CPU timers at each boundary between the layers a call
crosses:

* ``dynamo + aot``: Dynamo's guards and frame, AOTAutograd's runtime wrappers and the
  boxed runner around our graph (the call minus ``CompiledGraph.__call__``); ``dynamo +
  aot, graph stubbed`` is the same with the graph's outputs returned at once (what these
  layers cost with hot caches);
* ``compile_fx glue``: ``CompiledGraph.__call__`` around the executor (inputs, outputs);
* ``executor glue``: the device executor around the host model (binding buffers);
* ``host model``: the host device running the GE graph's ops (kernels and the Python
  that dispatches them; runtime/host_model.py).

``--prefill 17,256``: instead, the dynamic-shape stream's call (``npu-bench --mode dynamic``:
``llama_prefill`` under ``dynamic=True``, batch 2) at each of these prompt lengths;
``--buckets pow2`` (or ``auto``, or sizes ``8,16,...``): that stream's bucketed variant, whose
call adds a row:

* ``bucket wrapper``: ``BucketedGraph`` around the static graph's call (bucket choice,
  padding the inputs, narrowing and compacting the outputs; ``buckets.py``).

``--stream``: the dynamic-shape stream itself (``npu-bench --mode dynamic``'s 60 requests,
``dynamic=True``), eager interleaved request by request as that benchmark does, once per
layer boundary: eager's time over the time of the full ``torch.compile`` call, of the
``CompiledGraph`` call alone and of the host model alone (each called with the inputs
captured at that boundary during a first pass), per warm pass.

``eager`` is the same step uncompiled, timed interleaved with the compiled one. CPU time
(``time.process_time``), median over ``passes`` passes of ``calls`` calls, in ms per call.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from npu_inductor import buckets, compile_fx
from npu_inductor.benchmarks.dynamic import _warm_pass, pow2_buckets, stream, stream_model
from npu_inductor.benchmarks.zoo import Llama, LlamaDecode
from npu_inductor.buckets import AUTO_PROFILE_CALLS
from npu_inductor.runtime import host_model


@contextlib.contextmanager
def _timers(targets: list[tuple[Any, str]]) -> Iterator[list[float]]:
    """CPU seconds spent inside each ``(owner, method)``, in a list in that order."""
    spent, saved = [0.0] * len(targets), []
    for i, (owner, name) in enumerate(targets):
        saved.append((owner, name, owner.__dict__.get(name)))
        setattr(owner, name, _timed(getattr(owner, name) if saved[-1][2] is None
                                    else saved[-1][2], spent, i))
    try:
        yield spent
    finally:
        for owner, name, original in saved:
            if original is None:  # an instance's method: drop the timer, the class's shows
                delattr(owner, name)
            else:
                setattr(owner, name, original)


def _timed(fn: Callable[..., Any], spent: list[float], i: int) -> Any:
    def run(*args: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args)
        finally:
            spent[i] += time.process_time() - start
    return run


def _median_ms(samples: list[float], calls: int) -> float:
    return statistics.median(samples) / calls * 1e3


def decode_split(model: Llama, past: int = 30, dynamic: bool = True, passes: int = 7,
                 calls: int = 100) -> dict[str, float]:
    """ms per warm decode call in each layer (module docstring), and eager's."""
    k = torch.randn(len(model.layers), 1, model.layers[0].kv_heads, past, model.layers[0].d)
    tok, v = torch.tensor([[1]]), torch.randn_like(k)
    torch._dynamo.reset()
    with torch.no_grad(), compile_fx.recording(compile_fx.COMPILE_HOOKS) as graphs:
        step = torch.compile(LlamaDecode(model), backend="npu", dynamic=dynamic)
        step(tok, k, v)
        return _split(step, lambda: model.decode(tok, k, v), (tok, k, v), graphs[-1],
                      passes, calls)


def prefill_split(model: Llama, length: int, passes: int = 7, calls: int = 20,
                  buckets: list[int] | str | None = None) -> dict[str, float]:
    """The same for one request of the dynamic-shape stream (``benchmarks/dynamic.py``:
    ``dynamic=True``, batch 2) of ``length`` tokens, after a call at another length;
    ``buckets``: that stream's bucketed variant (``"auto"``: after its profiling calls)."""
    gen = torch.Generator().manual_seed(length)
    ids = torch.randint(0, 1000, (2, length), generator=gen)
    options = {} if buckets is None else {
        "shape_buckets": "auto" if buckets == "auto" else {"ids": {1: buckets}}}
    torch._dynamo.reset()
    with torch.no_grad(), compile_fx.recording(compile_fx.COMPILE_HOOKS) as graphs:
        step = torch.compile(model, backend="npu", dynamic=True, options=options)
        warm = AUTO_PROFILE_CALLS if buckets == "auto" else 1
        for n in range(warm):  # sizes around length, so auto's buckets are near it
            step(torch.randint(0, 1000, (2, max(2, length + 1 - n % 3)), generator=gen))
        step(ids)
        return _split(step, lambda: model(ids), (ids,), graphs[-1], passes, calls,
                      bucketed=buckets is not None)


def _split(step: Callable[..., Any], eager_call: Callable[[], Any], args: tuple,
           graph: Any, passes: int, calls: int, bucketed: bool = False) -> dict[str, float]:
    executor = graph.executor
    rows: dict[str, list[float]] = {}
    for _ in range(passes):
        with _timers([(compile_fx.CompiledGraph, "__call__"), (executor, "run"),
                      (host_model.HostModel, "execute"),
                      (buckets.BucketedGraph, "__call__")]) as inner:
            full = _clock(lambda: step(*args), calls)
        eager = _clock(eager_call, calls)
        outer = inner[3] if bucketed else inner[0]  # the graph's boxed call
        split = [("call", full), ("dynamo + aot", full - outer)]
        if bucketed:
            split.append(("bucket wrapper", inner[3] - inner[0]))
        split += [("compile_fx glue", inner[0] - inner[1]),
                  ("executor glue", inner[1] - inner[2]),
                  ("host model", inner[2]), ("eager", eager)]
        for name, value in split:
            rows.setdefault(name, []).append(value)
    rows["dynamo + aot, graph stubbed"] = _stubbed(step, args, passes, calls)
    split = {name: _median_ms(values, calls) for name, values in rows.items()}
    split["ge ops"] = float(len(graph.lowered.graph.ops))
    split["host steps"] = float(len(_host_model(executor).steps))
    return split


def _host_model(executor: Any) -> Any:
    return executor.device.acl.models[executor.model_id]


def _clock(fn: Callable[[], Any], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return time.process_time() - start


def _stubbed(step: Callable[..., Any], args: tuple, passes: int, calls: int) -> list[float]:
    """The call with ``CompiledGraph`` returning its first outputs again at once."""
    original, result = compile_fx.CompiledGraph.__call__, []

    def at_once(self: Any, args: list[Any]) -> list[Any]:
        if not result:
            result.extend(original(self, args))
        args.clear()
        return list(result)

    compile_fx.CompiledGraph.__call__ = at_once
    try:
        return [_clock(lambda: step(*args), calls) for _ in range(passes)]
    finally:
        compile_fx.CompiledGraph.__call__ = original


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--static", action="store_true", help="dynamic=False (one cache length)")
    p.add_argument("--prefill", default=None, metavar="LENGTHS",
                   help="split the dynamic stream's prefill at these prompt lengths (17,256)")
    p.add_argument("--buckets", default=None, metavar="SIZES",
                   help="with --prefill: the bucketed variant (pow2, auto or sizes 8,16,...)")
    p.add_argument("--stream", action="store_true",
                   help="eager over each layer on the dynamic-shape stream, per warm pass")
    p.add_argument("--passes", type=int, default=6, help="with --stream: warm passes")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.stream:
        _print_stream(args.passes)
        return
    if args.prefill:
        _print_prefill([int(n) for n in args.prefill.split(",")], _bucket_sizes(args.buckets))
        return
    model = stream_model(71)  # serve.py's decoder for --max-len 64 --max-new 6
    for name, ms in decode_split(model, dynamic=not args.static).items():
        print(f"{name:32s} {ms:8.3f}" + ("" if name == "ge ops" else " ms"))


def stream_split(passes: int = 6, requests: int = 60, max_len: int = 512,
                 seed: int = 0) -> dict[str, list[float]]:
    """Eager's CPU time over each layer's on the dynamic stream, per warm pass (module
    docstring, ``--stream``)."""
    from npu_inductor.runtime import host_codegen

    torch.manual_seed(seed)
    model = stream_model(max(max_len, 8))
    reqs = stream(requests, max_len, seed)
    graphs: list[tuple[Any, list]] = []
    hosts: list[tuple[Any, list, Any, Any]] = []
    guarded, call = host_codegen._guarded, compile_fx.CompiledGraph.__call__

    def capture_host(fast: Any, host: Any, filename: str, lines: Any) -> Any:
        run = guarded(fast, host, filename, lines)

        def captured(inputs: Any, views: Any, ws: Any) -> Any:
            hosts.append((run, list(inputs), views, ws))
            return run(inputs, views, ws)
        return captured

    def capture_graph(self: Any, args: list[Any]) -> Any:
        graphs.append((self, list(args)))
        return call(self, args)

    torch._dynamo.reset()
    host_codegen._guarded, compile_fx.CompiledGraph.__call__ = capture_host, capture_graph
    try:
        with torch.no_grad():
            step = torch.compile(model, backend="npu", dynamic=True)
            for r in reqs:
                step(*r)
    finally:
        host_codegen._guarded, compile_fx.CompiledGraph.__call__ = guarded, call
    if not len(graphs) == len(hosts) == len(reqs):
        raise RuntimeError(f"captured {len(graphs)} graph and {len(hosts)} host calls for "
                           f"{len(reqs)} requests (not one generated host model per call)")
    layers = {
        "torch.compile call": [lambda r=r: step(*r) for r in reqs],
        "CompiledGraph call": [lambda g=g: g[0](list(g[1])) for g in graphs],
        "host model": [lambda h=h: h[0](h[1], h[2], h[3]) for h in hosts]}
    ratios: dict[str, list[float]] = {name: [] for name in layers}
    for i in range(passes):
        for name, calls in layers.items():
            by_ids = {id(r[0]): call for r, call in zip(reqs, calls)}  # the request's call
            mine, theirs = _warm_pass(model, lambda ids, c=by_ids: c[id(ids)](), reqs, i)
            ratios[name].append(theirs.cpu / mine.cpu)
    return ratios


def _print_stream(passes: int) -> None:
    ratios = stream_split(passes)
    print("dynamic stream (60 requests, dynamic=True): eager / layer, CPU time, per warm pass")
    for name, values in ratios.items():
        print(f"{name:22s} " + " ".join(f"{v:6.3f}" for v in values)
              + f"   median {statistics.median(values):.3f}")


def _bucket_sizes(spec: str | None) -> list[int] | str | None:
    if spec in (None, "auto"):
        return spec
    if spec == "pow2":
        return pow2_buckets(512)
    return [int(n) for n in spec.split(",")]


def _print_prefill(lengths: list[int], bucket_sizes: list[int] | str | None = None) -> None:
    """One column per prompt length (the dynamic stream's model, ``benchmarks/dynamic.py``)."""
    model = stream_model(512)
    splits = [prefill_split(model, n, buckets=bucket_sizes) for n in lengths]
    print(f"{'prefill length':32s} " + " ".join(f"{n:>8d}" for n in lengths))
    for name in splits[0]:
        unit = "" if name in ("ge ops", "host steps") else " ms"
        print(f"{name:32s} " + " ".join(f"{s[name]:8.3f}" for s in splits) + unit)


if __name__ == "__main__":
    main()
