"""The host device's model loader and executor.

[Note: host execution plan]
``HostModel`` is built from the parsed ``.air`` bytes only. Ops are already in
topological order; each becomes a step ``(kernel, argument slots, attrs, output slots)``
over a flat list of value slots. Data steps read the bound inputs, Const payloads are
decoded once at load time.

Each step output has a destination:

* ``ws``: an intermediate placed by the static memory plan (``memory_plan.py``) at an
  offset of one workspace taken from the caching allocator for the run. An ``out=``
  kernel writes there directly; any other kernel's result is copied there.
* ``graph``: a graph output. An ``out=`` kernel writes straight into the tensor handed to
  the user; any other kernel's result is handed over as is when it is fresh memory, and
  copied only when it aliases the workspace, an input or a constant.
* ``keep``: the kernel's result is used as is (views of graph inputs; every intermediate
  when planning is off, released right after its last reader).
* ``drop``: an output nobody reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from npu_inductor.ge.device_rules import check_graph, input_index_by_name
from npu_inductor.ge.ir import Graph, OpNode
from npu_inductor.ge.op_specs import get_spec
from npu_inductor.runtime import (
    assign_steps,
    attention_chain,
    attention_edges,
    attention_grad_chain,
    shape_steps,
)
from npu_inductor.runtime.kernels import (
    KERNELS,
    MULTI_OUT_KERNELS,
    OUT_KERNELS,
    RUNTIME,
    SPECIALIZERS,
)
from npu_inductor.runtime.memory_plan import (
    ALIAS_OPS,
    VIEW_OPS,
    MemoryPlan,
    PlanError,
    PlanStep,
    plan_memory,
)
from npu_inductor.runtime.step_graph import read_counts, slots

_SPEC_CONST_MAX = 64  # Const inputs decoded for kernel specialization: shapes, axes, sizes


class HostExecutionError(RuntimeError):
    """A GE op failed on the host device; names the op."""


@dataclass(frozen=True)
class Step:
    op: OpNode
    fn: Callable[..., Any]
    args: tuple  # per prototype input: slot int, None (unfed) or tuple of slots (dynamic)
    attrs: dict[str, Any]
    outs: tuple[int, ...]
    sigs: tuple[tuple[torch.dtype | None, tuple[int, ...]], ...]  # (dtype, shape) per output
    compute: torch.dtype | None = None  # precision_mode moved the op to this dtype
    chain: tuple[Step, ...] = ()  # a fused attention chain's op steps (attention_chain.py)


@dataclass(frozen=True)
class Bound:
    """A step with its output destinations decided (see the note at the top)."""

    step: Step
    use_out: bool                  # call the kernel with out= (a multi-output one: a tuple)
    dests: tuple[tuple, ...]       # per output: ("ws", slot) | ("graph",) | ("keep",) | ("drop",)
    frees: tuple[int, ...]
    detach: bool = False           # a planned output overlaps a planned input's bytes
    notask: bool = False           # a view op whose planned output is its input's bytes
    private: bool = False          # a graph output viewing a fresh result only it reads


def _arg_layout(op: OpNode, slot_of: dict[str, int]) -> tuple:
    """Group an op's edge strings by prototype port (dynamic ports become tuples), matching
    inputs by name through the op's port-name maps as GE does."""
    spec = get_spec(op.type)
    data_edges = [e for e in op.inputs if not e.endswith(":-1")]
    index = input_index_by_name(op)
    args: list[Any] = []
    for port in spec.inputs:
        if port.kind == "dynamic":
            group = []
            while f"{port.name}{len(group)}" in index:
                group.append(slot_of[data_edges[index[f"{port.name}{len(group)}"]]])
            args.append(tuple(group))
        elif port.name in index and data_edges[index[port.name]] != "":
            args.append(slot_of[data_edges[index[port.name]]])
        else:
            args.append(None)
    while args and args[-1] is None:
        args.pop()
    return tuple(args)


def _nbytes(sig: tuple[torch.dtype | None, tuple[int, ...]]) -> int | None:
    dtype, shape = sig
    if dtype is None or any(d < 0 for d in shape):
        return None
    return torch.Size(shape).numel() * dtype.itemsize


class HostModel:
    """A loaded GE graph, executable with host kernels in a planned workspace."""

    def __init__(self, graph: Graph, allocator: Any = None, *, memory_plan: bool = True,
                 fuse_attention: bool | None = None, rules_checked: bool = False) -> None:
        self.graph = graph
        self.rules_checked = rules_checked  # the device rules passed already (HostAcl)
        # run fp32 attention chains (runtime/attention_chain.py) and Reshape(Pack) pairs
        # (runtime/shape_steps.py) as one step each; None: the environment's switch
        self.fuse_attention = attention_chain.enabled() if fuse_attention is None \
            else fuse_attention
        self.allocator = allocator
        self.inputs = graph.data_ops()
        self.consts: dict[int, torch.Tensor] = {}
        self.steps: list[Step] = []     # what runs: op steps, attention chains fused
        self.op_steps: list[Step] = []  # one step per GE op (op-by-op debugging)
        self.data_slots: list[int] = []
        self.output_slots: tuple[int, ...] = ()
        self.output_sigs: list[tuple] = []
        self._build()
        self.plan: MemoryPlan | None = None
        self.plan_steps: list[PlanStep] = []  # what the plan was made from (for validation)
        self.plan_error: str | None = None
        self._views: tuple[Any, dict[int, torch.Tensor]] | None = None
        self.precision_mode = "must_keep_origin_dtype"
        self.compute_dtypes: dict[str, torch.dtype] = {}  # op name -> precision_mode's dtype
        self.set_memory_plan(memory_plan)

    # ---- loading ---------------------------------------------------------------------------
    def _build(self) -> None:
        if not self.rules_checked:
            check_graph(self.graph)  # refuse what the device refuses (device_rules.py)
        slot_of: dict[str, int] = {}
        raw: list[tuple[OpNode, tuple]] = []
        data_slot: dict[int, int] = {}
        sig_of: dict[int, tuple] = {}
        for op in self.graph.ops:
            args = () if op.type in ("Data", "RefData", "Const") else _arg_layout(op, slot_of)
            if op.type == "NetOutput":
                edges = [e for e in op.inputs if not e.endswith(":-1")]
                self.output_slots = tuple(slot_of[e] for e in edges)
                self.output_sigs = [sig_of[s] for s in self.output_slots]
                continue
            for k in range(max(len(op.output_descs), 1)):
                slot_of[f"{op.name}:{k}"] = len(slot_of)
                d = op.output_descs[k] if k < len(op.output_descs) else None
                sig_of[len(slot_of) - 1] = (d.dtype, tuple(d.shape)) if d else (None, ())
            if op.type in ("Data", "RefData"):
                data_slot[op.attr("index")] = slot_of[f"{op.name}:0"]
            elif op.type == "Const":
                self.consts[slot_of[f"{op.name}:0"]] = op.attr("value")
            else:
                if op.type not in KERNELS:
                    raise HostExecutionError(f"host device has no kernel for GE op type "
                                             f"{op.type!r} (op {op.name!r})")
                raw.append((op, args))
        self.num_slots = len(slot_of)
        self.slot_of = slot_of  # GE edge "op:index" -> value slot (op-by-op debugging)
        self.data_slots = [data_slot[i] for i in range(len(data_slot))]
        for op, args in raw:
            first = slot_of[f"{op.name}:0"]
            outs = tuple(range(first, first + max(len(op.output_descs), 1)))
            attrs = {k: _py(a.value) for k, a in op.attrs.items()
                     if not k.startswith("_")}  # private GE attrs (port-name maps)
            self.steps.append(Step(op, self._kernel(op, args, attrs), args, attrs, outs,
                                   tuple(sig_of[s] for s in outs)))
        self.op_steps = self.steps
        self.steps = self._fused(self.op_steps)
        self._produced = {s for st in self.steps for s in st.outs}

    def _kernel(self, op: OpNode, args: tuple, attrs: dict[str, Any]) -> Callable[..., Any]:
        """The op's kernel, specialized to its Const inputs and attrs when it offers that."""
        spec = SPECIALIZERS.get(op.type)
        if spec is not None:
            consts = [None if a is None else self.consts[a].tolist()
                      if isinstance(a, int) and a in self.consts
                      and self.consts[a].numel() <= _SPEC_CONST_MAX else RUNTIME for a in args]
            fn = spec(consts, attrs)
            if fn is not None:
                return fn
        return KERNELS[op.type]

    def _fused(self, steps: list[Step]) -> list[Step]:
        if not self.fuse_attention:
            return steps
        outs = set(self.output_slots)
        steps = attention_chain.fuse_chains(steps, outs, self.consts)
        steps = attention_grad_chain.fuse_grad_chains(steps, outs, self.consts)
        steps = assign_steps.fuse_assign_adds(steps, outs, set(self.data_slots))
        steps = assign_steps.foreach_updates(steps, outs, set(self.data_slots), self.consts)
        steps = shape_steps.fuse_dim_sizes(steps, outs, self.consts)
        steps = shape_steps.fuse_reshape_packs(steps, outs)
        steps = attention_edges.fuse_rotary_copies(steps, outs)
        return attention_edges.fuse_attention_edges(steps, outs, self.consts)

    def set_precision_mode(self, mode: str, soc: str) -> None:
        """Compute each op in the dtype ATC's ``precision_mode`` would pick on ``soc``
        (``runtime/precision.py``); ``compute_dtypes`` names the ops moved."""
        from npu_inductor.runtime import precision

        if mode == self.precision_mode:
            return
        self.precision_mode = mode
        steps, self.compute_dtypes = [], {}
        for st in self.op_steps:
            base = self._kernel(st.op, st.args, st.attrs)
            fn, compute = precision.apply(st.op, base, mode, soc)
            steps.append(replace(st, fn=fn, compute=compute))
            if compute is not None:
                self.compute_dtypes[st.op.name] = compute
        self.op_steps = steps
        self.steps = self._fused(steps)
        self.set_memory_plan(self.memory_plan_enabled)

    # ---- binding outputs to memory ---------------------------------------------------------
    def set_memory_plan(self, enabled: bool) -> None:
        """Plan intermediates into one workspace (``enabled``) or keep kernel results (the
        binding is deterministic: asking again for the current setting and steps keeps it)."""
        bound_for = getattr(self, "_bound_for", None)
        if bound_for is not None and bound_for[0] == bool(enabled) and bound_for[1] is self.steps:
            return
        self._bound_for = (bool(enabled), self.steps)
        self.memory_plan_enabled = enabled
        self.plan, self.plan_error, self._views = None, None, None
        self.bound = self._bind(planned=enabled)
        if self.plan is None and self.plan_error is None:
            self.plan_error = "no intermediate tensors" if enabled else "memory_plan is off"

    def _bind(self, planned: bool) -> list[Bound]:
        graph_outs = set(self.output_slots)
        external = set(self.data_slots) | set(self.consts)
        reads = read_counts(self.steps)
        dests: dict[int, tuple] = {}
        use_out: list[bool] = []
        handed = _handed_over(self.steps, graph_outs, reads)
        fresh = _fresh_attention(self.steps, graph_outs)
        for st in self.steps:
            src = (slots(st.args) or [None])[0]
            for s in st.outs:
                if s in graph_outs:
                    dests[s] = ("graph",)
                elif s in handed or s in fresh:  # its memory goes to the user through a view
                    dests[s] = ("keep",)
                elif not planned or st.op.type in ALIAS_OPS or (
                        st.op.type in VIEW_OPS and dests.get(src, ("x",))[0] != "ws"):
                    dests[s] = ("keep",) if reads.get(s) else ("drop",)
                elif reads.get(s) or _can_out(st):
                    dests[s] = ("ws", s)
                else:
                    dests[s] = ("drop",)
            use_out.append(_can_out(st) and dests[st.outs[0]][0] in ("ws", "graph")
                           or _can_out_multi(st, dests))
        if planned:
            ws = {s for s, d in dests.items() if d[0] == "ws"}
            self.plan_steps = self._plan_steps(use_out)
            try:
                self.plan = plan_memory(self.plan_steps, ws) if ws else None
            except PlanError as e:
                self.plan_error = str(e)
                return self._bind(planned=False)
        frees = _frees(self.steps, dests, graph_outs | external)
        return [Bound(st, u, tuple(dests[s] for s in st.outs), f,
                      not u and _shares_bytes(st, self.plan), _no_task(st, dests, self.plan),
                      (slots(st.args) or [None])[0] in handed
                      and st.op.type in VIEW_OPS)
                for st, u, f in zip(self.steps, use_out, frees)]

    def _plan_steps(self, use_out: list[bool]) -> list[PlanStep]:
        sig = {s: g for st in self.steps for s, g in zip(st.outs, st.sigs)}
        return [PlanStep(st.op.type, tuple(slots(st.args)), st.outs,
                         tuple(_nbytes(g) for g in st.sigs), st.sigs,
                         tuple(sig.get(s) for s in slots(st.args)), writes_early=u)
                for st, u in zip(self.steps, use_out)]

    # ---- execution ---------------------------------------------------------------------------
    def execute(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Run the graph; returns fresh output tensors (never views of the workspace)."""
        if torch.is_grad_enabled():  # a device runs plain kernels (out= rejects autograd)
            with torch.no_grad():
                return self._execute(inputs)
        return self._execute(inputs)

    def _execute(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        if self.plan is None or self.allocator is None:
            if getattr(self.allocator, "limit", None) is not None:
                return self._run_accounted(inputs)
            return self._run(inputs, {}, None)
        addr = self.allocator.malloc(self.plan.workspace_bytes)
        try:
            return self._run(inputs, *self._workspace_views(addr))
        finally:
            self.allocator.free(addr)

    def _workspace_views(self, addr: int) -> tuple[dict[int, torch.Tensor], torch.Tensor]:
        """The planned tensors' views into the workspace at ``addr`` (made once per address:
        the caching allocator hands a model the same block call after call)."""
        key = (addr, getattr(self.allocator, "generation", 0))
        if self._views is None or self._views[0] != key:
            plan = self.plan
            ws = self.allocator.tensor(addr, plan.workspace_bytes)
            sigs = {s: g for st in self.steps for s, g in zip(st.outs, st.sigs)}
            views = {s: ws[off:off + plan.nbytes[s]].view(sigs[s][0]).view(sigs[s][1])
                     for s, off in plan.offsets.items()}
            self._views = (key, views, ws)
        return self._views[1], self._views[2]

    def _run(self, inputs: Sequence[torch.Tensor], views: dict[int, torch.Tensor],
             ws: torch.Tensor | None) -> list[torch.Tensor]:
        from npu_inductor.runtime import host_codegen  # the generated fast path (same plan)
        gen = getattr(self, "_codegen", None)
        if gen is None or gen[0] is not self.bound or gen[1] != host_codegen.enabled():
            fast = host_codegen.compile_host_model(self)
            self._codegen = gen = (self.bound, fast is not None, fast)
        if gen[2] is not None:
            return gen[2](inputs, views, ws)
        return self._interpret(inputs, views, ws)

    def _interpret(self, inputs: Sequence[torch.Tensor], views: dict[int, torch.Tensor],
                   ws: torch.Tensor | None, account: _Accounting | None = None
                   ) -> list[torch.Tensor]:
        vals: list[Any] = [None] * self.num_slots
        for slot, t in self.consts.items():
            vals[slot] = t
        for slot, t in zip(self.data_slots, inputs):
            vals[slot] = t
        ws_ptr = ws.untyped_storage().data_ptr() if ws is not None else None
        for b in self.bound:
            try:
                _run_step(b, vals, views, ws_ptr)
            except Exception as e:
                op = b.step.op
                raise HostExecutionError(f"GE op {op.name!r} ({op.type}) failed on the host "
                                         f"device: {type(e).__name__}: {e}") from e
            if account is not None:
                account.track(b, vals)
            for s in b.frees:
                if account is not None:
                    account.release(s)
                vals[s] = None
        return self._outputs(vals)

    def _run_accounted(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Without a static plan, under a memory limit: every intermediate's bytes are taken
        from the caching allocator while it lives, so the limit holds (interpreted run)."""
        account = _Accounting(self.allocator, [*inputs, *self.consts.values()])
        try:
            return self._interpret(inputs, {}, None, account)
        finally:
            account.close()

    def _outputs(self, vals: list[Any]) -> list[torch.Tensor]:
        produced = self._produced
        seen: set[int] = set()
        outs = []
        for s in self.output_slots:
            t = vals[s]
            # inputs, constants and repeated outputs must not be shared with the caller
            outs.append(t.clone() if s in seen or s not in produced else t)
            seen.add(s)
        return outs

    def plan_json(self) -> dict[str, Any]:
        """The memory plan as written to ``memory_plan.json`` (or why there is none)."""
        if self.plan is None:
            return {"graph": self.graph.name, "planned": False, "reason": self.plan_error}
        names = {s: f"{st.op.name}:{k}" for st in self.steps for k, s in enumerate(st.outs)}
        data = self.plan.to_json()
        for b in data["buffers"]:
            b["tensors"] = [names[s] for s in b["slots"]]
        return {"graph": self.graph.name, "planned": True, **data}


class _Accounting:
    """Intermediates of an unplanned run held as allocator blocks (one per storage)."""

    def __init__(self, allocator: Any, external: Sequence[torch.Tensor]) -> None:
        self.allocator = allocator
        self.external = {t.untyped_storage().data_ptr() for t in external
                         if isinstance(t, torch.Tensor)}
        self.blocks: dict[int, list[int]] = {}  # storage ptr -> [block address, slot refs]
        self.slot_storage: dict[int, int] = {}

    def track(self, b: Bound, vals: list[Any]) -> None:
        for s, dest in zip(b.step.outs, b.dests):
            t = vals[s]
            if dest[0] != "keep" or not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key in self.external or storage.nbytes() == 0:
                continue
            if key not in self.blocks:
                self.blocks[key] = [self._malloc(b, storage.nbytes()), 0]
            self.blocks[key][1] += 1
            self.slot_storage[s] = key

    def _malloc(self, b: Bound, nbytes: int) -> int:
        from npu_inductor.runtime.allocator import NpuOutOfMemoryError

        try:
            return self.allocator.malloc(nbytes)
        except NpuOutOfMemoryError as e:
            op = b.step.op
            raise NpuOutOfMemoryError(f"GE op {op.name!r} ({op.type}) of graph without a "
                                      f"static memory plan: {e}") from None

    def release(self, slot: int) -> None:
        key = self.slot_storage.pop(slot, None)
        if key is None:
            return
        block = self.blocks[key]
        block[1] -= 1
        if block[1] == 0:
            self.allocator.free(self.blocks.pop(key)[0])

    def close(self) -> None:
        for addr, _ in self.blocks.values():
            self.allocator.free(addr)
        self.blocks.clear()


# Kernels whose result (called without out=) is always new memory of its own.
_FRESH_OPS = frozenset({"MatMulV2", "BatchMatMulV2"})


def _handed_over(steps: list[Step], graph_outs: set[int], reads: dict[int, int]) -> set[int]:
    """Results of fresh-memory kernels whose one reader is a view op giving a graph output
    (a matmul reshaped to the logits; a fused attention chain's output and logsumexp
    reshaped for the backward): kept out of the workspace, the view is handed to the user
    as it is instead of being copied (nothing else can reach those bytes)."""
    fresh = {s: st for st in steps for s in st.outs
             if (st.op.type in _FRESH_OPS and len(st.outs) == 1)
             or isinstance(st.fn, attention_chain.AttentionChainKernel)}
    out = set()
    for st in steps:
        args = slots(st.args)
        if st.op.type in VIEW_OPS and len(st.outs) == 1 and st.outs[0] in graph_outs \
                and args and args[0] in fresh and reads.get(args[0]) == 1 \
                and args[0] not in graph_outs and fresh[args[0]].compute is None:
            out.add(args[0])
    return out


def _fresh_attention(steps: list[Step], graph_outs: set[int]) -> set[int]:
    """Results of attention chains with their output Reshape folded in
    (``attention_edges.py``): flash's own memory viewed as ``[B, H, S, D]``, which the
    Transpose + Reshape after it read as they are; copied into the workspace, both would
    copy (kept out of the plan, as ``_handed_over``'s results)."""
    return {st.outs[0] for st in steps if isinstance(st.fn, attention_edges.EdgeAttentionKernel)
            and st.fn.reshape_out and st.outs[0] not in graph_outs}


def _can_out(st: Step) -> bool:
    return (st.compute is None and not st.chain and st.op.type in OUT_KERNELS and len(st.outs) == 1
            and st.op.type not in VIEW_OPS and _nbytes(st.sigs[0]) is not None)


def _can_out_multi(st: Step, dests: dict[int, tuple]) -> bool:
    """A multi-output kernel with an ``out=`` tuple and a result planned in the workspace: it
    writes its planned results there (no copy); the others (graph outputs, kept or dropped
    results) it allocates itself, as without ``out=``."""
    return (st.compute is None and st.op.type in MULTI_OUT_KERNELS
            and (not st.chain or st.fn is KERNELS[st.op.type])  # (rotary: copies fused)
            and len(st.outs) > 1 and any(dests[s][0] == "ws" for s in st.outs))


def _run_step(b: Bound, vals: list[Any], views: dict[int, torch.Tensor],
              ws_ptr: int | None) -> None:
    st = b.step
    if b.notask:
        vals[st.outs[0]] = views[st.outs[0]]
        return
    args = [_fetch(vals, a) for a in st.args]
    if b.use_out and len(st.outs) > 1:  # the "ws" results written in place
        outs = tuple(views[d[1]] if d[0] == "ws" else None for d in b.dests)
        results = tuple(st.fn(*args, out=outs, **st.attrs))
        for s, d, r, sig in zip(st.outs, b.dests, results, st.sigs):
            if d[0] == "ws":
                vals[s] = views[s]
            elif d[0] == "graph":
                vals[s] = _hand_over(r, sig, [] if b.private else args, ws_ptr)
            elif d[0] == "keep":
                vals[s] = r
        return
    if b.use_out:
        dest = b.dests[0]
        dst = views[dest[1]] if dest[0] == "ws" else torch.empty(st.sigs[0][1],
                                                                 dtype=st.sigs[0][0])
        st.fn(*args, out=dst, **st.attrs)
        vals[st.outs[0]] = dst
        return
    result = st.fn(*args, **st.attrs)
    results = (result,) if len(st.outs) == 1 else tuple(result)
    if b.detach:
        results = _detach_overlaps(results, b, views, ws_ptr)
    for s, dest, r, sig in zip(st.outs, b.dests, results, st.sigs):
        kind = dest[0]
        if kind == "ws":
            vals[s] = _store(r, views[s])
        elif kind == "graph":
            vals[s] = _hand_over(r, sig, [] if b.private else args, ws_ptr)
        elif kind == "keep":
            vals[s] = r


def _store(r: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """Put a kernel result at its planned place (free when it is already there)."""
    if r.data_ptr() == dst.data_ptr() and r.is_contiguous() and r.dtype == dst.dtype:
        return dst
    if r.shape != dst.shape:
        raise HostExecutionError(f"kernel produced shape {tuple(r.shape)}, the GE graph "
                                 f"declares {tuple(dst.shape)}")
    return dst.copy_(r)


def _hand_over(r: torch.Tensor, sig: tuple, args: list[Any], ws_ptr: int | None) -> torch.Tensor:
    """A graph output: the result itself when it is fresh memory, else a copy."""
    dtype, shape = sig
    if r.shape != shape and not _shape_matches(r.shape, shape):  # (fast path: equal)
        raise HostExecutionError(f"kernel produced shape {tuple(r.shape)}, the GE graph "
                                 f"declares {tuple(shape)}")
    storage = r.untyped_storage().data_ptr()
    if storage == ws_ptr or not r.is_contiguous() or (dtype is not None and r.dtype != dtype) \
            or _aliases(storage, args):
        out = torch.empty(r.shape, dtype=dtype or r.dtype)  # r.shape: -1 dims resolved
        return out.copy_(r)
    return r


def _aliases(storage: int, args: list[Any]) -> bool:
    """Whether a tensor among ``args`` (or in a list there) has its storage at ``storage``."""
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.untyped_storage().data_ptr() == storage:
                return True
        elif isinstance(a, list) and any(storage == x.untyped_storage().data_ptr()
                                         for x in a if isinstance(x, torch.Tensor)):
            return True
    return False


def _shape_matches(actual: Sequence[int], declared: Sequence[int]) -> bool:
    """A declared ``-1`` (dynamic) dim matches any size."""
    return len(actual) == len(declared) and all(d in (-1, a) for a, d in zip(actual, declared))


def _no_task(st: Step, dests: dict[int, tuple], plan: MemoryPlan | None) -> bool:
    """A view op (GE: a no-task op) whose input and output are the same planned bytes: its
    result is the output slot's workspace view as it is, so no kernel runs for it."""
    if plan is None or st.op.type not in VIEW_OPS or len(st.outs) != 1:
        return False
    src, out = slots(st.args)[0], st.outs[0]
    return (dests.get(src, ("x",))[0] == "ws" and dests[out][0] == "ws"
            and plan.offsets.get(src) == plan.offsets.get(out)
            and plan.nbytes.get(src) == plan.nbytes.get(out))


def _shares_bytes(st: Step, plan: MemoryPlan | None) -> bool:
    """Whether a planned output of ``st`` overlaps a planned input (a result viewing that
    input must then be cloned before it is copied into place)."""
    if plan is None or st.op.type in VIEW_OPS:  # a view's bytes are its input's, by design
        return False
    def span(s: int) -> tuple[int, int]:
        return plan.offsets[s], plan.offsets[s] + plan.nbytes[s]
    outs = [span(s) for s in st.outs if s in plan.offsets]
    reads = [plan.aliases.get(s, s) for s in slots(st.args)]
    ins = [span(s) for s in reads if s in plan.offsets]
    return any(a < d and c < b for a, b in outs for c, d in ins)


def _byte_range(t: torch.Tensor) -> tuple[int, int]:
    """Bytes ``[lo, hi)`` a tensor may touch (torch strides are never negative)."""
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    span = sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1
    return (t.data_ptr(), t.data_ptr() + span * t.element_size())


def _detach_overlaps(results: tuple, b: Bound, views: dict[int, torch.Tensor],
                     ws_ptr: int) -> tuple:
    """Clone results that view workspace bytes this step is about to overwrite."""
    in_ws = [i for i, r in enumerate(results)
             if isinstance(r, torch.Tensor) and r.untyped_storage().data_ptr() == ws_ptr]
    if not in_ws:
        return results  # fresh memory: the usual case
    dsts = [_byte_range(views[d[1]]) for d in b.dests if d[0] == "ws"]
    out = list(results)
    for i in in_ws:
        r = out[i]
        lo, hi = _byte_range(r)
        if any(lo < dhi and dlo < hi and not (lo == dlo and r.is_contiguous())
               for dlo, dhi in dsts):
            out[i] = r.clone()
    return tuple(out)


def _frees(steps: list[Step], dests: dict[int, tuple], keep: set[int]) -> list[tuple[int, ...]]:
    """Slots to drop after each step (after their last reader), so memory goes early."""
    last: dict[int, int] = {}
    for i, st in enumerate(steps):
        for s in slots(st.args):
            last[s] = i
    out: list[list[int]] = [[] for _ in steps]
    for s, i in last.items():
        if s not in keep:
            out[i].append(s)
    return [tuple(f) for f in out]


def _fetch(vals: list, a: Any) -> Any:
    if a is None:
        return None
    if isinstance(a, tuple):
        return [vals[s] for s in a]
    return vals[a]


def _py(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v
