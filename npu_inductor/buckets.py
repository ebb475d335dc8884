"""Static-shape bucketing: pad dynamic dims up to configured sizes, compile one static GE
graph per bucket, slice outputs back.

[Note: shape buckets]
On Ascend every new input shape costs a GE compile, and static graphs run faster than
dynamic ones. torchair's "gears" require an input to *equal* a listed size. Here a dynamic
dim is padded with zeros up to the smallest bucket that fits, the graph for that bucket is
compiled once (Dynamo's graph re-traced by AOTAutograd with the padded static shapes) and
cached, and every output dim of the form ``s + c`` is sliced back to ``n + c``.

Padding is applied only where ``padding_safety.analyze`` proves the valid region exact;
otherwise that size compiles exactly and the reason is logged and kept for ``explain``.
``pad="trust"`` skips the proof. Training graphs (grad enabled with inputs that require
grad) are not bucketed: they compile exactly.

Buckets are configured per tensor (``set_buckets``), per compile
(``options={"shape_buckets": {"ids": {1: [16, 32, 64]}}}``, inputs named by argument name
or by position among the tensor arguments), or ``"auto"``: see ``AutoBuckets``.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import logging
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.fx.experimental._config as fx_config
from torch.fx.experimental.symbolic_shapes import statically_known_true

from npu_inductor import bucket_tails
from npu_inductor.bucket_cost import graph_cost
from npu_inductor.config import NpuConfig
from npu_inductor.gears import MAX_GEARS as MAX_ATC_GEARS
from npu_inductor.gears import MIN_GEARS, GearPlan, gear_plan
from npu_inductor.padding_safety import SafetyReport, analyze

log = logging.getLogger("npu_inductor.buckets")
BUCKETS_ATTR = "_npu_inductor_buckets"
AUTO = "auto"
MAX_GEARS = 100  # GE's limit on dynamic-dims gears
AUTO_PROFILE_CALLS = 32  # calls observed (in eager) before auto buckets are chosen
REPORTS: list[BucketReport] = []  # every bucketed graph's report, for explain()


class BucketError(ValueError):
    """Bad bucket configuration, or a size above the largest bucket."""


def validate_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    out = tuple(sorted({int(s) for s in sizes}))
    if not out or out[0] < 1:
        raise BucketError(f"bucket sizes must be positive integers, got {list(sizes)}")
    return out


def set_buckets(tensor: torch.Tensor, buckets: dict[int, Sequence[int] | str]) -> torch.Tensor:
    """Bucket ``tensor``'s dims: ``set_buckets(ids, {1: [16, 32, 64]})`` (or ``{1: "auto"}``).
    Marks the dims dynamic for Dynamo (no ``dynamic=True`` needed) and keeps sizes 0 and 1
    symbolic (see ``_oblivious_while_tagged``); returns the tensor."""
    spec: dict[int, tuple[int, ...] | str] = {}
    for dim, sizes in buckets.items():
        dim = dim % tensor.dim()
        spec[dim] = AUTO if sizes == AUTO else validate_sizes(sizes)
        torch._dynamo.mark_dynamic(tensor, dim)
    setattr(tensor, BUCKETS_ATTR, spec)
    install_compile_callbacks()
    return tensor


# ---- sizes 0 and 1 stay symbolic --------------------------------------------------------
# Dynamo specializes a dynamic dim whose first size is 0 or 1 into a static graph (its
# "0/1 specialization"), so a first prompt of length 1 would compile a graph of its own.
# torchair's gears have the same limit. A Dynamo compile of a frame that receives a tensor
# tagged by set_buckets runs with torch.fx.experimental._config.backed_size_oblivious on
# (set at the compile's start, restored at its end, via Dynamo's compile callbacks): its
# dynamic dims get the range [0, inf) without a 0/1 guard. The user sets no flag; compiles
# of other frames (e.g. generate()'s decode step, whose fresh input is untagged and should
# specialize to one static graph) are untouched. Code that branches on the size being 1
# still gets its own graph for size 1 (transformers' sdpa_attention tests q_length > 1);
# mark_unbacked would avoid the 0/1 guard too, but graph-breaks on every shape branch.
_SAVED_OBLIVIOUS: list[bool] = []
_CONTAINERS = (list, tuple, dict)


def _has_tagged(value: Any, depth: int = 2) -> bool:
    if isinstance(value, torch.Tensor):
        return hasattr(value, BUCKETS_ATTR)
    if depth and isinstance(value, _CONTAINERS):
        items = value.values() if isinstance(value, dict) else value
        return any(_has_tagged(v, depth - 1) for v in items)
    return False


def _compile_frame() -> Any:
    """The frame of ``torch._dynamo.convert_frame._compile`` up the stack (its ``locals``
    argument holds the locals of the frame Dynamo is compiling), or None."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_compile" and "convert_frame" in frame.f_code.co_filename:
            return frame
        frame = frame.f_back
    return None


def _frame_has_tagged_input(compile_frame: Any) -> bool:
    """Does the frame Dynamo is compiling receive a set_buckets tensor?"""
    f_locals = compile_frame.f_locals.get("locals")
    return isinstance(f_locals, dict) and _has_tagged(list(f_locals.values()))


def _oblivious_while_tagged(args: Any) -> None:
    """Also for frames configured by ``shape_buckets`` (``bucket_options``)."""
    from torch._dynamo.callback import CallbackTrigger

    from npu_inductor import bucket_options

    _SAVED_OBLIVIOUS.append(fx_config.backed_size_oblivious)
    frame = _compile_frame() if args.callback_trigger is CallbackTrigger.DYNAMO else None
    if frame is not None and (_frame_has_tagged_input(frame)
                              or bucket_options.general_compile(frame)):
        fx_config.backed_size_oblivious = True


def _restore_oblivious(args: Any) -> None:
    if _SAVED_OBLIVIOUS:
        fx_config.backed_size_oblivious = _SAVED_OBLIVIOUS.pop()


def install_compile_callbacks() -> None:
    """(Re)register the callbacks: ``torch._dynamo.reset()`` clears them."""
    handler = torch._dynamo.callback_handler
    if _oblivious_while_tagged not in handler.start_callbacks:
        handler.register_start_callback(_oblivious_while_tagged)
        handler.register_end_callback(_restore_oblivious)


install_compile_callbacks()  # at import: torch.compile(backend="npu") imports this first


@dataclass(frozen=True)
class BucketedDim:
    position: int  # placeholder position in the Dynamo graph
    dim: int
    symbol: sympy.Symbol
    sizes: tuple[int, ...] | str  # sorted sizes, or "auto"
    label: str


def _source_name(node: torch.fx.Node) -> str:
    grapharg = node.meta.get("grapharg")
    return grapharg.source.name if grapharg is not None else node.name


# Dynamo sources of the user's arguments: L['x'] (a function's), L['args'][0] and
# L['kwargs']['x'] (an nn.Module's forward called through torch.compile(module))
_ARG_SOURCE = re.compile(r"L\['(\w+)'\]|L\['args'\]\[(\d+)\]|L\['kwargs'\]\['(\w+)'\]")


def _user_inputs(placeholders: list[torch.fx.Node]) -> list[tuple[int, str]]:
    """(position, argument name) of the user's tensor arguments, in argument order."""
    out = []
    for i, node in enumerate(placeholders):
        match = _ARG_SOURCE.fullmatch(_source_name(node))
        if match and isinstance(node.meta.get("example_value"), torch.Tensor):
            out.append((i, next(g for g in match.groups() if g is not None)))
    return out


def _config_specs(placeholders: list[torch.fx.Node], config: NpuConfig) -> dict:
    """{position: {dim: sizes}} from ``options["shape_buckets"]``."""
    cfg = config.shape_buckets
    users = _user_inputs(placeholders)
    if cfg == AUTO:
        return {pos: {d: AUTO for d in range(placeholders[pos].meta["example_value"].dim())}
                for pos, _ in users}
    if not cfg:
        return {}
    if not isinstance(cfg, dict):
        raise BucketError(f"shape_buckets must be a dict or 'auto', got {cfg!r}")
    by_name = {name: pos for pos, name in users}
    specs: dict[int, dict] = {}
    for key, dims in cfg.items():
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            if int(key) >= len(users):
                raise BucketError(f"shape_buckets names tensor argument #{key}; the graph has "
                                  f"{len(users)}: {[n for _, n in users]}")
            pos = users[int(key)][0]
        elif key in by_name:
            pos = by_name[key]
        else:
            continue  # an argument of another graph (graph breaks split the arguments)
        specs[pos] = {int(d): (AUTO if s == AUTO else validate_sizes(s)) for d, s in dims.items()}
    return specs


def find_bucketed_dims(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                       config: NpuConfig) -> list[BucketedDim]:
    """The dynamic dims of ``gm`` that are bucketed (by ``set_buckets`` or the options).
    Configured dims that are static here are in ``static_bucketed_dims``."""
    if config.shape_buckets:
        install_compile_callbacks()  # the next compile of a frame (bucket_options)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    dims = []
    for pos, dim, sizes in _bucket_specs(placeholders, example_inputs, config):
        size = placeholders[pos].meta["example_value"].shape[dim]
        if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
            dims.append(BucketedDim(pos, dim, size.node.expr, sizes,
                                    f"{_source_name(placeholders[pos])} dim {dim}"))
    return dims


def static_bucketed_dims(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                         config: NpuConfig) -> list[str]:
    """Labels of configured bucket dims that Dynamo made static in ``gm``: a first call
    without ``dynamic=True`` (Dynamo traces static, and only a second size recompiles), or
    a size 1 that Dynamo specialized in a partly dynamic graph (``dynamic=True``: the next
    size recompiles the general graph, which size 1 then runs; see ``bucket_options``)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    partly = any(is_symbolic(n.meta.get("example_value")) for n in placeholders)
    out = []
    for pos, dim, _ in _bucket_specs(placeholders, example_inputs, config):
        size = placeholders[pos].meta["example_value"].shape[dim]
        if not isinstance(size, torch.SymInt) and (not partly or size == 1):
            out.append(f"{_source_name(placeholders[pos])} dim {dim}")
    return out


def is_symbolic(value: Any) -> bool:
    """A SymInt, or a tensor with a SymInt size."""
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in value.shape)
    return isinstance(value, torch.SymInt)


def _bucket_specs(placeholders: list[torch.fx.Node], example_inputs: Sequence[Any],
                  config: NpuConfig) -> list[tuple[int, int, tuple[int, ...] | str]]:
    """(placeholder position, dim, sizes) of every configured bucket dim."""
    specs = _config_specs(placeholders, config)
    for pos, ex in enumerate(example_inputs):
        tagged = getattr(ex, BUCKETS_ATTR, None)
        if tagged:
            specs.setdefault(pos, {}).update(tagged)
    return [(pos, dim, sizes) for pos, by_dim in sorted(specs.items())
            for dim, sizes in sorted(by_dim.items())]


class EagerFirstCall:
    """A static graph whose configured bucket dims Dynamo specialized (a first call without
    ``dynamic=True``): its first call runs in eager instead of compiling a graph for that
    one size, as Dynamo recompiles a dynamic (bucketed) graph on the next size and looks
    that graph up first. Only if this size is called again is it compiled (exactly)."""

    def __init__(self, gm: torch.fx.GraphModule, compile_now: Callable[[], Callable],
                 labels: list[str]) -> None:
        self.gm, self.compile_now, self.fn = gm, compile_now, None
        self.report = new_report([], f"first call of {', '.join(labels)} ran in eager: Dynamo "
                                     "traced it static (no dynamic=True, or size 1)")
        log.info("%s", self.report.exact_reasons[0])

    def __call__(self, *args: Any) -> Any:
        self.report.calls += 1
        if self.report.calls == 1:
            self.report.eager_calls += 1
            return self.gm(*args)
        if self.fn is None:
            self.fn = _call_without_dynamo(lambda _: self.compile_now(), ())
            self.report.compiles += 1
        return self.fn(*args)


# ---- the auto policy -------------------------------------------------------------------

def optimal_buckets(samples: Sequence[int], k: int, top: int,
                    cost: Callable[[int], float] | None = None) -> tuple[int, ...]:
    """At most ``k`` buckets (the largest = ``top``) minimising the total cost of ``samples``
    each run at its bucket: ``cost(bucket)`` per sample (default: the bucket size, i.e. the
    total padding); exact dynamic programming over the sorted distinct sample sizes."""
    xs = sorted(set(samples))
    cands = [x for x in xs if x < top] + [top]
    per = [cost(c) if cost else c for c in cands]
    # counts[i]: samples in (cands[i-1], cands[i]]
    counts = [sum(1 for s in samples if (i == 0 or cands[i - 1] < s) and s <= c)
              for i, c in enumerate(cands)]
    prefix = list(itertools.accumulate(counts, initial=0))
    n = len(cands)

    def run(lo: int, hi: int) -> float:  # samples in (cands[lo-1], cands[hi]] run at hi
        return (prefix[hi + 1] - prefix[lo]) * per[hi]

    inf = math.inf
    best = [[inf] * n for _ in range(k + 1)]  # best[j][i]: j buckets, last = cands[i]
    back = [[-1] * n for _ in range(k + 1)]
    for i in range(n):
        best[1][i] = run(0, i)
    for j in range(2, k + 1):
        for i in range(n):
            for p in range(i):
                c = best[j - 1][p] + run(p + 1, i)
                if c < best[j][i]:
                    best[j][i], back[j][i] = c, p
    j = min(range(1, k + 1), key=lambda j: best[j][n - 1])
    out, i = [], n - 1
    while i >= 0 and j >= 1:
        out.append(cands[i])
        i, j = back[j][i], j - 1
    return tuple(sorted(out))


def round_up_nice(n: int) -> int:
    """Round up to a multiple of an eighth of n's power of two (482 -> 512, 100 -> 104)."""
    step = max(1, 2 ** max(0, n.bit_length() - 4))
    return -(-n // step) * step


@dataclass
class AutoBuckets:
    """Profile-guided buckets for one dim (the documented ``shape_buckets="auto"`` policy):

    1. the first ``AUTO_PROFILE_CALLS`` calls run in eager and record their sizes;
    2. then ``max_buckets`` buckets are fixed: the largest is the largest size seen,
       rounded up to a "nice" size (1/8 power-of-two steps), the others minimise the
       estimated compute of the recorded sizes run at their buckets (exact DP; the cost of
       a size is ``bucket_cost.graph_cost``, quadratic where attention is; without an
       estimate, the total padding);
    3. a later size above the largest bucket runs in eager (logged once); buckets are
       compiled lazily, so at most ``max_buckets`` graphs are ever compiled.
    """

    max_buckets: int
    cost: Callable[[], Callable[[int], float] | None] = lambda: None  # built when choosing
    seen: list[int] = field(default_factory=list)
    sizes: tuple[int, ...] | None = None

    def observe(self, n: int) -> None:
        if self.sizes is None:
            self.seen.append(n)
            if len(self.seen) >= AUTO_PROFILE_CALLS:
                self.sizes = optimal_buckets(self.seen, self.max_buckets,
                                             round_up_nice(max(self.seen)), self.cost())
                log.info("auto buckets chosen from %d sizes: %s", len(self.seen), self.sizes)


# ---- the runtime wrapper --------------------------------------------------------------

@dataclass
class BucketReport:
    """What bucketing did for one Dynamo graph (read by explain and the benchmark)."""

    dims: list[str]
    safety: SafetyReport | None = None
    compiles: int = 0
    calls: int = 0
    eager_calls: int = 0
    real_elements: int = 0
    padded_elements: int = 0
    exact_reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what explain says besides the reasons
    atc_input_shape: str = ""  # ATC --input_shape / --dynamic_dims for the acl device
    atc_dynamic_dims: str = ""
    # per dim label, the bucket sizes in effect: configured ones, auto's once chosen
    buckets: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def padding_overhead(self) -> float:
        return self.padded_elements / self.real_elements - 1 if self.real_elements else 0.0


def _sym_value(expr: sympy.Expr, values: dict) -> int:
    return int(expr.xreplace({s: sympy.Integer(v) for s, v in values.items()}))


class BucketedGraph:
    """AOTAutograd's inference compiler for a graph with bucketed dims: ``aten_gm`` is the
    symbolic aten graph; each bucket gets a static specialization of it, compiled once."""

    _boxed_call = True  # AOTAutograd calls it with the list of inputs

    def __init__(self, aten_gm: torch.fx.GraphModule, config: NpuConfig,
                 dims: list[BucketedDim],
                 compile_static: Callable[[torch.fx.GraphModule, list], Callable],
                 refuse: str | None = None, eager_first: bool = False) -> None:
        """``refuse``: why padding must not be tried (the sizes then compile exactly);
        ``eager_first``: the first call runs the aten graph in eager (``EagerFirstCall``
        for a partly dynamic graph, whose compile must keep its symbols: see
        ``static_bucketed_dims``)."""
        self.gm, self.config, self.dims, self.refuse = aten_gm, config, dims, refuse
        self.eager_first = eager_first
        self.compile_static = compile_static
        self.placeholders = [n for n in aten_gm.graph.nodes if n.op == "placeholder"]
        self.symbols = self._symbol_sources()
        self.outputs = self._output_exprs()
        self.cache: dict[tuple, Callable] = {}
        self.names = sorted((str(s), s) for s in self.symbols)  # the cache key's order
        self.narrows: dict[tuple, list] = {}  # per input-size signature: _slice's plan
        self.auto = {d.symbol: AutoBuckets(config.max_buckets, functools.partial(
            graph_cost, aten_gm, d.symbol)) for d in dims if d.sizes == AUTO}
        self.report = new_report(dims)
        self.report.buckets = {d.label: d.sizes for d in dims if d.sizes != AUTO}
        self.report.safety = self._safety()
        self.report.atc_input_shape, self.report.atc_dynamic_dims = self._atc_gears()
        self.combos = self._gear_combos()
        self.gear_cache: dict[tuple, Callable] = {}

    def _symbol_sources(self) -> dict[sympy.Symbol, list[tuple[int, int | None]]]:
        """Every place each free symbol appears: (position, dim), dim None for an int input.
        Values are read from the first; padding rewrites them all."""
        out: dict = {}
        for pos, node in enumerate(self.placeholders):
            val = node.meta.get("val")
            if isinstance(val, torch.SymInt) and val.node.expr.is_Symbol:
                out.setdefault(val.node.expr, []).append((pos, None))
            elif isinstance(val, torch.Tensor):
                for d, size in enumerate(val.shape):
                    if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                        out.setdefault(size.node.expr, []).append((pos, d))
        return out

    def _output_exprs(self) -> list:
        out = next(n for n in self.gm.graph.nodes if n.op == "output")
        exprs = []
        for node in torch.utils._pytree.tree_leaves(out.args[0]):
            val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
            if isinstance(val, torch.Tensor):
                exprs.append([s.node.expr if isinstance(s, torch.SymInt) else int(s)
                              for s in val.shape])
            else:
                exprs.append(None)
        return exprs

    def _atc_gears(self) -> tuple[str, str]:
        """The buckets as ATC gears for the acl device: ``--input_shape`` with ``-1`` at
        every bucketed dim and ``--dynamic_dims`` with one group per bucket combination
        (GE allows at most 100; other dims keep the sizes they were traced with)."""
        fixed = [d for d in self.dims if d.sizes != AUTO]
        if not fixed:
            return "", ""
        combos = list(itertools.product(*[d.sizes for d in fixed]))
        if len(combos) > MAX_GEARS:
            return "", ""
        syms = [d.symbol for d in fixed]
        shapes, order = [], []
        for node in self.placeholders:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                continue
            dims = []
            for size in val.shape:
                expr = size.node.expr if isinstance(size, torch.SymInt) else None
                if expr in syms:
                    dims.append("-1")
                    order.append(syms.index(expr))
                else:
                    dims.append(str(size.node.hint if expr is not None else int(size)))
            shapes.append(f"{node.name}:{','.join(dims)}")
        gears = [",".join(str(combo[i]) for i in order) for combo in combos]
        return ";".join(shapes), ";".join(gears)

    def _gear_combos(self) -> tuple[tuple[int, ...], ...] | None:
        """On the acl device, the bucket combinations that become ATC gears of ONE model
        (2..100 of them, padding proven safe); None: compile each bucket on its own."""
        from npu_inductor.runtime.device import get_device

        if any(d.sizes == AUTO for d in self.dims) or not self.report.safety.safe:
            return None
        if get_device(self.config.device, self.config.device_id).kind != "acl":
            return None
        syms = list(dict.fromkeys(d.symbol for d in self.dims))
        sizes = [next(d.sizes for d in self.dims if d.symbol == s) for s in syms]
        combos = tuple(itertools.product(*sizes))
        return combos if MIN_GEARS <= len(combos) <= MAX_ATC_GEARS else None

    def _gear_plan(self, args: Sequence[Any]) -> GearPlan:
        syms = list(dict.fromkeys(d.symbol for d in self.dims))
        geared: dict[int, dict[int, int]] = {}
        for sym, places in self.symbols.items():
            for pos, dim in places:
                if sym in syms and dim is not None:
                    geared.setdefault(pos, {})[dim] = syms.index(sym)
        shapes = {pos: tuple(a.shape) for pos, a in enumerate(args)
                  if isinstance(a, torch.Tensor)}
        return GearPlan(shapes, geared, self.combos)

    def _gear_model(self, call_args: list, padded: dict) -> Callable | None:
        """The ONE gear model of this graph (per value of the non-bucketed symbols)."""
        bucketed = {d.symbol for d in self.dims}
        if self.combos is None or any(
                padded[d.symbol] not in d.sizes for d in self.dims):
            return None
        key = tuple(sorted((str(s), v) for s, v in padded.items() if s not in bucketed))
        fn = self.gear_cache.get(key)
        if fn is None:
            with gear_plan(self._gear_plan(call_args)):
                fn = self.compile_static(self.gm, list(call_args))
            self.gear_cache[key] = fn
            self.report.compiles += 1
        return fn

    def _safety(self) -> SafetyReport:
        if self.refuse:
            return SafetyReport(False, self.refuse)
        if self.config.pad == "trust":
            return SafetyReport(True, "pad='trust'")
        report = analyze(self.gm, {d.symbol for d in self.dims})
        if not report.safe:
            log.warning("shape buckets for %s: %s; those sizes compile exactly",
                        ", ".join(self.report.dims), report)
        return report

    # ---- per call --------------------------------------------------------------------
    def __call__(self, args: list[Any]) -> Any:
        return _call_without_dynamo(self._call, tuple(args))

    def _read(self, args: Sequence[Any]) -> dict:
        values = {}
        for sym, places in self.symbols.items():
            pos, dim = places[0]
            values[sym] = int(args[pos]) if dim is None else int(args[pos].shape[dim])
        return values

    def _bucket(self, d: BucketedDim, n: int) -> int | None:
        sizes = d.sizes
        if sizes == AUTO:
            policy = self.auto[d.symbol]
            policy.observe(n)
            sizes = policy.sizes
            if sizes is None:
                return None  # still profiling: eager
            if d.label not in self.report.buckets:
                self.report.buckets[d.label] = sizes
        i = bisect.bisect_left(sizes, n)
        if i == len(sizes):
            if d.sizes == AUTO:
                return None
            if self.config.exact_above_buckets:
                return n
            raise BucketError(f"{d.label} has size {n}, above the largest bucket {sizes[-1]} "
                              f"(buckets {list(sizes)}); add a bucket or set "
                              "options={'exact_above_buckets': True}")
        return sizes[i]

    def _call(self, args: tuple) -> Any:
        self.report.calls += 1
        if self.eager_first and self.report.calls == 1:
            self.report.eager_calls += 1
            return self.gm(*args)
        if not self.report.safety.safe:
            return self._call_exact(args)
        values = self._read(args)
        padded = dict(values)
        chosen = {d.symbol: self._bucket(d, values[d.symbol]) for d in self.dims}
        if None in chosen.values():  # auto buckets still profiling, or above them
            self.report.eager_calls += 1
            return self.gm(*args)
        padded.update(chosen)
        tails = self.report.safety.tail_slices
        kinds = bucket_tails.plan(tails, values) if tails else ()
        if kinds is None:  # a tail slice longer than the valid size: run unpadded
            padded = dict(values)
        self._count(values, padded)
        key = (tuple((name, padded[s]) for name, s in self.names), kinds)
        call_args = self._pad(args, values, padded)
        if kinds:
            values = {**values, **bucket_tails.sizes(tails, kinds, values)}
            call_args += bucket_tails.indices(tails, kinds, values)
        fn = (None if tails else self._gear_model(call_args, padded)) or self.cache.get(key)
        if fn is None:
            gm = bucket_tails.rewrite(self.gm, tails, kinds) if kinds else self.gm
            fn = self.compile_static(specialize(gm, call_args), list(call_args))
            self.cache[key] = fn
            self.report.compiles += 1
        return self._slice(fn(list(call_args)), values, padded)

    def _call_exact(self, args: tuple) -> Any:
        """Padding not proven exact: each size of the configured bucket dims (and each
        value of the int inputs) compiles exactly; the graph's other dynamic dims (e.g.
        generate()'s cache length, and ``"auto"`` dims) stay symbolic, so they do not
        compile a graph per size."""
        if str(self.report.safety) not in self.report.exact_reasons:
            self.report.exact_reasons.append(str(self.report.safety))
        values = self._read(args)
        self._count(values, values)
        exact = self._exact_symbols()
        kept = [s for s in self.symbols if s not in exact]
        # a kept symbol's graph is valid for sizes >= 2 that equal the same other kept sizes
        # (duck sizing merges equal sizes, sizes 0 and 1 specialize)
        shape = tuple(min(values[s], 2) if values[s] < 2 else
                      next(i for i, t in enumerate(kept) if values[t] == values[s])
                      for s in kept)
        key = (tuple(sorted((str(s), v) for s, v in values.items() if s in exact)), shape)
        fn = self.cache.get(key)
        if fn is None:
            keep = [self.symbols[s] for s in kept]
            fn = self.compile_static(specialize(self.gm, args, keep), list(args))
            self.cache[key] = fn
            self.report.compiles += 1
        return fn(list(args))

    def _exact_symbols(self) -> set:
        """The symbols of configured buckets and of int inputs (a symbolic int, e.g. a
        slice bound, would make data-dependent sizes). ``"auto"`` dims stay symbolic: auto
        promises bounded compiles, and buckets it cannot pad become one dynamic graph."""
        ints = {sym for sym, places in self.symbols.items()
                if all(dim is None for _, dim in places)}
        return {d.symbol for d in self.dims if d.sizes != AUTO} | ints

    def _count(self, values: dict, padded: dict) -> None:
        for d in self.dims:
            self.report.real_elements += values[d.symbol]
            self.report.padded_elements += padded[d.symbol]

    def _pad(self, args: tuple, values: dict, padded: dict) -> list:
        out = list(args)
        for sym, places in self.symbols.items():
            if padded[sym] == values[sym]:
                continue
            for pos, dim in places:
                out[pos] = padded[sym] if dim is None else _pad_dim(out[pos], dim, padded[sym])
        return out

    def _slice(self, outs: Any, values: dict, padded: dict) -> Any:
        if padded == values:
            return outs
        result = list(outs)
        for k, narrows in self._narrows(values):
            if not isinstance(result[k], torch.Tensor):
                continue
            t = result[k]
            for dim, n in narrows:
                if n != t.shape[dim]:
                    t = t.narrow(dim, 0, n)
            # contiguous, as an unpadded graph's output: a narrowed one has the bucket's
            # strides, and a Dynamo graph that receives it (generate()'s decode step gets
            # the prefill's key/value cache) guards on them and recompiles on the next step
            result[k] = t.contiguous() if t is not result[k] else t
        return result

    def _narrows(self, values: dict) -> list:
        """Per output with a symbolic size: (index, [(dim, valid size)]), evaluated once per
        input-size signature (sympy per call cost ~0.1 ms; the valid sizes depend on the
        sizes alone, not on the buckets they were padded to)."""
        key = tuple(values.items())
        plan = self.narrows.get(key)
        if plan is None:
            plan = [(k, [(dim, _sym_value(e, values)) for dim, e in enumerate(exprs)
                         if isinstance(e, sympy.Expr) and e.free_symbols])
                    for k, exprs in enumerate(self.outputs) if exprs is not None]
            if len(self.narrows) >= 256:
                self.narrows.clear()
            self.narrows[key] = plan = [(k, n) for k, n in plan if n]
        return plan


def new_report(dims: list[BucketedDim], exact_reason: str | None = None) -> BucketReport:
    report = BucketReport([d.label for d in dims])
    if exact_reason:
        report.exact_reasons.append(exact_reason)
    REPORTS.append(report)
    return report


def specialize(gm: torch.fx.GraphModule, args: Sequence[Any],
               keep: Sequence[list[tuple[int, int | None]]] = ()) -> torch.fx.GraphModule:
    """A copy of the symbolic aten graph ``gm`` for these concrete inputs: static, except
    the sizes in ``keep`` (per symbol, its places: (position, dim), dim None for an int
    input), which stay symbolic."""
    from torch.fx.experimental.proxy_tensor import make_fx

    static = make_fx(gm, tracing_mode="fake")(*_fakes(args, keep)) if keep else \
        make_fx(gm, tracing_mode="fake")(*args)
    _drop_static_asserts(static)
    # make_fx leaves meta['val'] off the placeholders of the (now concrete) size arguments:
    # the passes and the verifier expect it everywhere
    for node, arg in zip((n for n in static.graph.nodes if n.op == "placeholder"), args):
        if "val" not in node.meta and isinstance(arg, (int, float, bool)):
            node.meta["val"] = arg
    return static


def _fakes(args: Sequence[Any], keep: Sequence[list[tuple[int, int | None]]]) -> list:
    """Fake inputs whose ``keep`` sizes are symbols (equal sizes share one: duck sizing)
    and whose other sizes are static."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    dims = {place for places in keep for place in places if place[1] is not None}
    mode = FakeTensorMode(shape_env=ShapeEnv())
    out: list = []
    for pos, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            out.append(a)
            continue
        dynamic = [DimDynamic.DUCK if (pos, d) in dims else DimDynamic.STATIC
                   for d in range(a.dim())]
        context = StatelessSymbolicContext(dynamic_sizes=dynamic,
                                           constraint_sizes=[None] * a.dim())
        out.append(mode.from_tensor(a, symbolic_context=context))
    for places in keep:  # an int input that is a kept size: that size's symbol
        tensor_pos, dim = next(p for p in places if p[1] is not None)
        for pos, d in places:
            if d is None:
                out[pos] = out[tensor_pos].shape[dim]
    return out


def _drop_static_asserts(gm: torch.fx.GraphModule) -> None:
    """The symbolic graph's runtime asserts (``_assert_scalar``) are constants once the sizes
    are (or provably true of the sizes that stay symbolic): drop those that hold; one that
    fails means these (padded) sizes break the model's own size checks."""
    for node in list(gm.graph.nodes):
        if node.target is not torch.ops.aten._assert_scalar.default:
            continue
        cond = node.args[0]
        if isinstance(cond, torch.fx.Node):
            if not statically_known_true(cond.meta.get("val", False)):
                continue  # still data dependent: lowered (or refused) as any other op
            cond = True
        if not cond:
            raise BucketError(f"the padded sizes fail the model's own size check "
                              f"{node.args[1]!r}; use smaller buckets for this input")
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()


def _pad_dim(a: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """Zero-pad ``a`` along ``dim`` up to ``size``."""
    shape = list(a.shape)
    shape[dim] = size - shape[dim]
    return torch.cat([a, a.new_zeros(shape)], dim)


@torch._dynamo.disable
def _call_without_dynamo(fn: Callable, args: tuple) -> Any:
    return fn(args)
