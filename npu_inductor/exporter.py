"""Offline export: a model's whole inference forward as ONE GE graph, and a folder that
builds and runs it on a machine without Python (``npu_inductor.export``).

[Note: export]
The model is captured the way ``torch.compile(backend="npu")`` captures it (Dynamo with
``fullgraph=True``, AOTAutograd, the same passes and lowering), with the settings an
offline model needs: inference, ``freeze_parameters`` (weights become ``Const`` ops),
``fallback="error"`` (a node without a GE lowering is an error naming the op and the
source line: an export has no eager islands), the host device and no compile cache.

Without ``buckets`` the graph is static. With ``buckets`` ({input: {dim: sizes}}) those
dims are traced symbolically and the graph keeps ``-1`` there; the sizes become ATC
``--dynamic_dims`` gears of one ``.om`` (npu_inductor/gears.py), exactly as the acl
device compiles a bucketed graph: the runner pads each input up to the smallest gear
that fits, selects that gear, and slices the outputs back. Padding must be proven exact
by the padding-safety analysis (``pad="trust"`` skips the proof), as for ``shape_buckets``.

The folder (``export_bundle.py``) holds ``model.air``, ``atc.sh``, ``manifest.json``, the
C++ runner, ``model.onnx`` (``export_onnx.py``) and sample inputs / eager outputs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sympy
import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import default_partition
from torch._subclasses.fake_tensor import unset_fake_temporarily

from npu_inductor.buckets import BucketedGraph, BucketError, find_bucketed_dims
from npu_inductor.compile_fx import COMPILE_HOOKS, CompiledGraph, compile_fx_graph, recording
from npu_inductor.config import DEFAULT_SOC_VERSION, resolve
from npu_inductor.gears import MAX_GEARS, MIN_GEARS, GearError, Gears, gear_plan
from npu_inductor.graph_passes import real_inputs
from npu_inductor.lowering.decompositions import decomposition_table

FORMATS = ("air", "onnx")


class ExportError(RuntimeError):
    """The model cannot be exported as one GE graph (the message says which op or input)."""


@dataclass(frozen=True)
class Affine:
    """An output dim ``scale * symbol + offset`` (a bucketed size seen through the graph)."""

    symbol: str
    scale: int
    offset: int

    def __call__(self, values: dict[str, int]) -> int:
        return self.scale * values[self.symbol] + self.offset


Dim = int | str | Affine  # static size | a bucketed symbol (inputs) | an affine size (outputs)


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output: ``dims`` hold symbols (``"s0"``) at bucketed dims."""

    name: str
    dtype: torch.dtype
    dims: tuple[Dim, ...]
    data: str | None = None  # the GE Data op (inputs)


@dataclass(frozen=True)
class Symbol:
    """A bucketed size: where it is read from and its buckets (the gears' values)."""

    name: str
    input: str
    dim: int
    buckets: tuple[int, ...]


@dataclass(frozen=True)
class Traced:
    """What ``trace`` captured: the GE graph and how the model's tensors map onto it.

    ``feeds``: per GE ``Data`` op in index order, ``("input", k)`` (model input k) or
    ``("size", symbol)`` (a 0-d int64 size input Dynamo made for a bucketed dim)."""

    compiled: CompiledGraph
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    feeds: tuple[tuple[str, Any], ...]
    symbols: tuple[Symbol, ...]
    gears: Gears | None
    soc_version: str


def export(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor], out_dir: str | Path,
           *, buckets: dict[str | int, dict[int, Sequence[int]]] | None = None,
           soc_version: str = DEFAULT_SOC_VERSION, formats: Sequence[str] = FORMATS,
           pad: str = "safe", input_names: Sequence[str] | None = None,
           precision_mode: str | None = None) -> Path:
    """Export ``model``'s inference forward at ``example_inputs`` to the folder ``out_dir``
    (see docs/export.md): ``model.air``, ``atc.sh``, ``manifest.json``, ``runner/``,
    ``model.onnx``, ``inputs/*.bin`` and ``outputs/*.bin`` (eager's outputs).

    ``buckets``: {input name or position: {dim: sizes}}, ATC gears of one model;
    ``formats``: the model files to write (``"air"``, ``"onnx"``)."""
    from npu_inductor import export_bundle

    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ExportError(f"formats {list(formats)}: choose from {list(FORMATS)}")
    traced = trace(model, example_inputs, buckets=buckets, soc_version=soc_version, pad=pad,
                   input_names=input_names, precision_mode=precision_mode)
    with torch.no_grad(), _eval(model):
        eager = model(*example_inputs)
    return export_bundle.write(traced, list(example_inputs), _leaves(eager), Path(out_dir),
                               tuple(formats), precision_mode)


@contextlib.contextmanager
def _eval(model: Any) -> Iterator[None]:
    """Inference mode for a module (BatchNorm's running statistics, no dropout)."""
    training = isinstance(model, torch.nn.Module) and model.training
    if training:
        model.eval()
    try:
        yield
    finally:
        if training:
            model.train()


def _leaves(out: Any) -> list[torch.Tensor]:
    leaves = torch.utils._pytree.tree_leaves(out)
    bad = [type(x).__name__ for x in leaves if not isinstance(x, torch.Tensor)]
    if bad:
        raise ExportError(f"the model returns non-tensor values ({bad}); an exported model "
                          f"returns tensors only")
    return leaves


def input_names_of(model: Any, n: int) -> list[str]:
    """The forward's parameter names for ``n`` positional inputs (``input{i}`` otherwise)."""
    try:
        params = list(inspect.signature(model.forward if isinstance(model, torch.nn.Module)
                                        else model).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = names[:n] if len(names) >= n else []
    return [sanitize(x) for x in names] or [f"input{i}" for i in range(n)]


def sanitize(name: str) -> str:
    """A file- and C-identifier-safe name."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else f"_{out}"


def trace(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor], *,
          buckets: dict | None = None, soc_version: str = DEFAULT_SOC_VERSION,
          pad: str = "safe", input_names: Sequence[str] | None = None,
          precision_mode: str | None = None) -> Traced:
    """Capture ``model`` at ``example_inputs`` as one GE graph (see the note above)."""
    inputs = list(example_inputs)
    bad = [i for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)]
    if bad:
        raise ExportError(f"example inputs {bad} are not tensors; export takes tensors only")
    names = list(input_names) if input_names else input_names_of(model, len(inputs))
    if len(set(names)) != len(inputs):
        raise ExportError(f"input names {names} must be {len(inputs)} distinct names")
    spec = _bucket_spec(buckets or {}, names, inputs)
    # copies: mark_dynamic tags the tensor, and inputs are matched by identity below
    inputs = [x.detach().clone() for x in inputs]
    for k, by_dim in spec.items():
        for dim in by_dim:
            torch._dynamo.mark_dynamic(inputs[k], dim)
    options = {"device": "host", "fallback": "error", "freeze_parameters": True,
               "cache_dir": False, "soc_version": soc_version, "pad": pad,
               "shape_buckets": {str(k): v for k, v in spec.items()} or None}
    if precision_mode:
        options["precision_mode"] = precision_mode
    capture = _Capture(resolve(options), inputs, names, spec)
    try:
        compiled = torch.compile(model, backend=capture, fullgraph=True,
                                 dynamic=False if not spec else None)
        with torch.no_grad(), _eval(model), \
                torch._dynamo.config.patch(automatic_dynamic_shapes=False):
            compiled(*inputs)
    except _Done:
        pass
    except ExportError:
        raise
    except Exception as e:  # Dynamo graph breaks, FallbackError: they name op and line
        cause = getattr(e, "inner_exception", None) or e
        if isinstance(cause, ExportError):
            raise cause.with_traceback(None) from None
        raise ExportError(f"cannot export {type(model).__name__} as one GE graph: "
                          f"{type(cause).__name__}: {cause}") from e
    if capture.traced is None:
        raise ExportError("Dynamo produced no graph for the model (nothing to export)")
    return capture.traced


def _bucket_spec(buckets: dict, names: list[str],
                 inputs: list[torch.Tensor]) -> dict[int, dict[int, tuple[int, ...]]]:
    """{input position: {dim: sorted sizes}} from {name or position: {dim: sizes}}."""
    spec: dict[int, dict[int, tuple[int, ...]]] = {}
    for key, dims in buckets.items():
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            k = int(key)
        elif key in names:
            k = names.index(key)
        else:
            raise ExportError(f"buckets name input {key!r}; the inputs are {names}")
        if not 0 <= k < len(inputs):
            raise ExportError(f"buckets name input #{k}; the model has {len(inputs)} inputs")
        for dim, sizes in dims.items():
            d = int(dim) % inputs[k].dim()
            sizes = tuple(sorted({int(s) for s in sizes}))
            if not sizes or sizes[0] < 2:
                raise ExportError(f"buckets of {names[k]} dim {d}: sizes must be integers >= 2 "
                                  f"(Dynamo specializes 0 and 1), got {list(sizes)}")
            if inputs[k].shape[d] > sizes[-1]:
                raise ExportError(f"the example {names[k]} has size {inputs[k].shape[d]} at dim "
                                  f"{d}, above its largest bucket {sizes[-1]}")
            spec.setdefault(k, {})[d] = sizes
    return spec


class _Capture:
    """The Dynamo backend of an export: AOTAutograd inference graph -> one GE graph."""

    def __init__(self, config: Any, inputs: list[torch.Tensor], names: list[str],
                 spec: dict[int, dict[int, tuple[int, ...]]]) -> None:
        self.config, self.inputs, self.names, self.spec = config, inputs, names, spec
        self.traced: Traced | None = None
        self.input_syms: dict[int, dict[int, str]] = {}  # input -> dim -> Dynamo symbol

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        if self.traced is not None:
            raise ExportError("the model compiled to more than one graph")
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        dims = find_bucketed_dims(gm, example_inputs, self.config)
        self.feeds_of = self._placeholder_feeds(placeholders, example_inputs)
        for k, by_dim in self.spec.items():
            fixed = [d for d in by_dim if d not in self.input_syms.get(k, {})]
            if fixed:
                raise ExportError(f"buckets of {self.names[k]} dims {fixed}: the model fixes "
                                  f"their size (Dynamo specialized them to "
                                  f"{[self.inputs[k].shape[d] for d in fixed]}, e.g. by "
                                  f"combining them with a static dim); bucket every input "
                                  f"dim that must match")

        def inference(aten_gm: torch.fx.GraphModule, aten_inputs: list[Any]) -> Any:
            if len([n for n in aten_gm.graph.nodes if n.op == "placeholder"]) != len(
                    placeholders):
                raise ExportError("AOTAutograd changed the graph inputs (aliased or "
                                  "subclass inputs); export needs plain tensor inputs")
            with real_inputs(example_inputs), unset_fake_temporarily():
                self._compile(aten_gm, _concrete(example_inputs), dims)
            return _done  # the graph is what counts: the traced call stops here

        def refuse(aten_gm: torch.fx.GraphModule, aten_inputs: list[Any]) -> Any:
            raise ExportError("export traces inference only, but the forward needs "
                              "gradients (call it under torch.no_grad())")

        with real_inputs(example_inputs):
            return aot_autograd(fw_compiler=refuse, bw_compiler=refuse,
                                inference_compiler=inference,
                                decompositions=decomposition_table(),
                                partition_fn=default_partition,
                                keep_inference_input_mutations=True)(gm, example_inputs)

    def _placeholder_feeds(self, placeholders: list[torch.fx.Node],
                           example_inputs: list[Any]) -> list[tuple[str, Any] | None]:
        """Per Dynamo placeholder: ("input", k), ("size", symbol) or None (a parameter)."""
        feeds: list[tuple[str, Any] | None] = []
        for node, ex in zip(placeholders, example_inputs):
            hit = [k for k, x in enumerate(self.inputs) if ex is x]
            val = node.meta.get("example_value")
            if hit:
                feeds.append(("input", hit[0]))
                self.input_syms[hit[0]] = {
                    d: str(n.node.expr) for d, n in enumerate(val.shape)
                    if isinstance(n, torch.SymInt) and n.node.expr.is_Symbol}
            elif isinstance(val, torch.SymInt):
                feeds.append(("size", str(val.node.expr)))
            else:
                feeds.append(None)
        return feeds

    def _compile(self, aten_gm: torch.fx.GraphModule, real: list[Any], dims: list) -> None:
        if not dims:
            with recording(COMPILE_HOOKS) as graphs:
                compile_fx_graph(aten_gm, real, config=self.config, kind="inference")
            self.traced = self._traced(_one(graphs), None, {})
            return
        bucketed = BucketedGraph(aten_gm, self.config, dims, compile_static=_not_used)
        if not bucketed.report.safety.safe:
            raise ExportError(f"buckets {bucketed.report.dims}: padding is not proven exact "
                              f"({bucketed.report.safety}); pad='trust' skips the proof")
        syms = list(dict.fromkeys(d.symbol for d in dims))
        sizes = [next(d.sizes for d in dims if d.symbol == s) for s in syms]
        combos = tuple(itertools.product(*sizes))
        if not MIN_GEARS <= len(combos) <= MAX_GEARS:
            raise ExportError(f"buckets give {len(combos)} gear combinations; ATC "
                              f"--dynamic_dims takes {MIN_GEARS} to {MAX_GEARS}")
        bucketed.combos = combos
        values = bucketed._read(real)
        try:
            padded = {**values, **{d.symbol: bucketed._bucket(d, values[d.symbol])
                                   for d in dims}}
        except BucketError as e:
            raise ExportError(str(e)) from e
        call_args = bucketed._pad(tuple(real), values, padded)
        plan = bucketed._gear_plan(call_args)
        with gear_plan(plan), real_inputs(call_args), recording(COMPILE_HOOKS) as graphs:
            compile_fx_graph(aten_gm, list(call_args), config=self.config, kind="inference")
        compiled = _one(graphs)
        try:
            gears = plan.gears_for(compiled.lowered.graph, compiled.lowered.data_inputs)
        except GearError as e:
            raise ExportError(f"buckets cannot become ATC gears: {e}") from e
        exprs = {str(s): s for s in syms}
        self.traced = self._traced(compiled, gears, exprs, bucketed.outputs,
                                   dict(zip(map(str, syms), sizes)))

    def _traced(self, compiled: CompiledGraph, gears: Gears | None, symbols: dict,
                out_exprs: list | None = None, sizes: dict | None = None) -> Traced:
        lowered = compiled.lowered
        bad = [k for k, s in enumerate(lowered.outputs) if s.kind != "ge"]
        if bad:
            kinds = [lowered.outputs[k].kind for k in bad]
            raise ExportError(f"outputs {bad} are not computed by the GE graph ({kinds}: an "
                              f"input or constant passed through); export needs every output "
                              f"computed by the graph")
        feeds = []
        for pos in lowered.data_inputs:
            feed = self.feeds_of[pos]
            if feed is None:
                raise ExportError(f"GE graph input {pos} is neither a model input nor a size "
                                  f"(a parameter that was not frozen)")
            feeds.append(feed)
        syms = self._symbols(sizes or {})
        inputs = tuple(self._input_spec(k, compiled, feeds) for k in range(len(self.inputs)))
        outs = compiled.lowered.graph.net_output().input_descs
        outputs = tuple(
            TensorSpec(f"output{i}", d.dtype,
                       _out_dims(d.shape, out_exprs[i] if out_exprs else None, symbols))
            for i, d in enumerate(outs))
        traced = Traced(compiled, inputs, outputs, tuple(feeds), syms, gears,
                        self.config.soc_version)
        return _renamed(traced, {s.name: f"s{i}" for i, s in enumerate(syms)})

    def _symbols(self, sizes: dict[str, tuple[int, ...]]) -> tuple[Symbol, ...]:
        out = []
        for name, buckets in sizes.items():
            k, d = next((k, d) for k, by_dim in self.input_syms.items()
                        for d, s in by_dim.items() if s == name)
            out.append(Symbol(name, self.names[k], d, buckets))
        return tuple(out)

    def _input_spec(self, k: int, compiled: CompiledGraph, feeds: list) -> TensorSpec:
        x = self.inputs[k]
        data_ops = compiled.lowered.graph.data_ops()
        data = next((data_ops[i].name for i, f in enumerate(feeds) if f == ("input", k)), None)
        syms = self.input_syms.get(k, {})
        dims = tuple(syms.get(d, int(n)) for d, n in enumerate(x.shape))
        return TensorSpec(self.names[k], x.dtype, dims, data)


def _concrete(args: list[Any]) -> list[Any]:
    """Dynamo's example inputs with size inputs as plain ints (reading a SymInt would add a
    guard that specializes it)."""
    return [x.node.hint if isinstance(x, torch.SymInt) else x for x in args]


class _Done(Exception):
    """Raised by the traced graph's runner: the export has what it needs."""


def _done(args: list[Any]) -> Any:
    args.clear()
    raise _Done


_done._boxed_call = True  # type: ignore[attr-defined]


def _not_used(gm: torch.fx.GraphModule, args: list) -> Any:
    raise AssertionError("export compiles the gear model itself")


def _one(graphs: list[CompiledGraph]) -> CompiledGraph:
    if len(graphs) != 1:
        raise ExportError(f"the forward became {len(graphs)} GE graphs; an export needs one")
    return graphs[0]


def _out_dims(shape: tuple[int, ...], exprs: list | None, symbols: dict) -> tuple[Dim, ...]:
    if exprs is None:
        return tuple(shape)
    return tuple(_affine(e, symbols) if isinstance(e, sympy.Expr) and e.free_symbols else int(e)
                 for e in exprs)


def _affine(expr: sympy.Expr, symbols: dict[str, sympy.Symbol]) -> Affine:
    free = list(expr.free_symbols)
    if len(free) == 1 and str(free[0]) in symbols:
        poly = sympy.Poly(expr, free[0])
        if poly.degree() == 1:
            scale, offset = (int(c) for c in poly.all_coeffs())
            return Affine(str(free[0]), scale, offset)
    raise ExportError(f"an output size is {expr}; export supports outputs whose bucketed "
                      f"sizes are a * s + b of one bucketed size")


def _renamed(traced: Traced, names: dict[str, str]) -> Traced:
    """Dynamo's symbol names (``s27``) as ``s0, s1, ...`` in input order."""
    def dim(d: Dim) -> Dim:
        if isinstance(d, Affine):
            return dataclasses.replace(d, symbol=names[d.symbol])
        return names[d] if isinstance(d, str) else d

    def spec(s: TensorSpec) -> TensorSpec:
        return dataclasses.replace(s, dims=tuple(dim(d) for d in s.dims))

    return dataclasses.replace(
        traced, inputs=tuple(map(spec, traced.inputs)), outputs=tuple(map(spec, traced.outputs)),
        feeds=tuple((k, names[r] if k == "size" else r) for k, r in traced.feeds),
        symbols=tuple(dataclasses.replace(s, name=names[s.name]) for s in traced.symbols))
