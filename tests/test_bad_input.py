"""Bad input gets a clear error or a correct answer, never a wrong one: inputs unlike the
compiled ones (dtype, rank, device, memory format), odd module and parameter names, empty and
0-d tensors, strided inputs, NaN and Inf."""

from __future__ import annotations

import ast
import re

import pytest
import torch
from harness import STRICT, assert_close, record_graphs

from npu_inductor.runtime.device import GraphInputError

NAN, INF = float("nan"), float("inf")


def _f(x, y):
    return torch.relu(x) * 2 + y


def _check(fn, *args, tol: float = 1e-5):
    """Compiled (fallback="error") vs eager, NaN equal to NaN; a GE graph must have run."""
    torch._dynamo.reset()
    with record_graphs() as graphs:
        out = torch.compile(fn, backend="npu", options=STRICT)(*args)
    assert graphs, "no GE graph was compiled"
    leaves = torch.utils._pytree.tree_leaves
    for o, e in zip(leaves(out), leaves(fn(*args)), strict=True):
        assert (o.dtype, o.shape) == (e.dtype, e.shape)
        torch.testing.assert_close(o, e, equal_nan=True, rtol=tol, atol=tol)


def _run(compiled, fn, *args):
    with record_graphs() as graphs:
        out = compiled(*args)
    expected = fn(*args)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    torch.testing.assert_close(out, expected, equal_nan=True)
    return graphs


# ---- inputs unlike the compiled ones: Dynamo recompiles, the answer stays right -------------
X = torch.randn(2, 3, 4, 5)
VARIANTS = {
    "dtype": lambda x: x.half(),  # (float64 has no 910B kernels: the dtype gate refuses it)
    "rank": lambda x: x[0],
    "size": lambda x: x[:1],
    "channels_last": lambda x: x.contiguous(memory_format=torch.channels_last),
    "transposed": lambda x: x.transpose(2, 3).contiguous().transpose(2, 3),
    "expanded": lambda x: x[:, :1].expand(2, 3, 4, 5),
}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_changed_input_recompiles_or_matches(variant, dynamic):
    compiled = torch.compile(_f, backend="npu", dynamic=dynamic, options=STRICT)
    _run(compiled, _f, X, X + 1)
    x2 = VARIANTS[variant](X)
    graphs = _run(compiled, _f, x2, torch.ones_like(x2))
    if variant in ("dtype", "rank"):  # a graph for the old dtype/rank cannot serve these
        assert graphs, f"no recompile for a new {variant}"
        spec = graphs[0].lowered.graph.data_ops()[0].output_descs[0]
        assert spec.dtype == x2.dtype and len(spec.shape) == x2.dim()


@pytest.mark.parametrize("layout", ["transposed", "channels_last", "step_slice"])
def test_bucketed_graph_with_strided_inputs(layout):
    """Shape buckets pad the input (a guard-free path once compiled): strided inputs too."""
    make = {"transposed": lambda n: torch.randn(6, n).t(),
            "channels_last": lambda n: torch.randn(n, 3, 2, 2).contiguous(
                memory_format=torch.channels_last),
            "step_slice": lambda n: torch.randn(n, 8)[:, ::2]}[layout]
    compiled = torch.compile(lambda x: torch.relu(x) * 2 + x.sum(-1, keepdim=True),
                             backend="npu", dynamic=True,
                             options={**STRICT, "shape_buckets": {"x": {0: [4, 8]}}})
    with record_graphs() as graphs:
        for n in (3, 5):
            x = make(n)
            torch.testing.assert_close(compiled(x), torch.relu(x) * 2 + x.sum(-1, keepdim=True))
    sizes = {g.lowered.graph.data_ops()[0].output_descs[0].shape[0] for g in graphs}
    assert sizes == {4, 8}, sizes  # the bucketed (padded static) graphs ran


def test_input_on_another_device_is_an_error_naming_it():
    compiled = torch.compile(_f, backend="npu")
    _run(compiled, _f, X, X)
    with pytest.raises(Exception, match=r"GraphInputError: input L\['x'\] is a tensor on meta"):
        compiled(X.to("meta"), X.to("meta"))


GUARD_FREE = [
    ("dtype", [X.double(), X], r"input 0 \('arg0_1'\): compiled for float32\[2, 3, 4, 5\] on "
                               r"cpu, called with float64\[2, 3, 4, 5\] on cpu"),
    ("rank", [X, X[0]], r"input 1 .*compiled for float32\[2, 3, 4, 5\].*float32\[3, 4, 5\]"),
    ("size", [X[:1], X], r"input 0 .*called with float32\[1, 3, 4, 5\]"),
    ("device", [X, X.to("meta")], r"input 1 .*called with float32\[2, 3, 4, 5\] on meta"),
]


@pytest.mark.parametrize(("what", "args", "message"), GUARD_FREE, ids=[g[0] for g in GUARD_FREE])
def test_guard_free_call_with_other_input_is_an_error_naming_both_specs(what, args, message):
    """The compiled graph itself (the executor's binding path, below Dynamo's guards)
    refuses an input unlike its GE Data op instead of running with it."""
    with record_graphs() as graphs:
        torch.compile(_f, backend="npu", options=STRICT)(X, X + 1)  # two distinct inputs
    graph = graphs[0]
    with pytest.raises(GraphInputError, match=message):
        graph(list(args))
    torch.testing.assert_close(graph([X, X])[0], _f(X, X))  # still usable afterwards


def test_guard_free_dynamic_dims_accept_any_size_but_not_another_rank():
    with record_graphs() as graphs:
        torch.compile(_f, backend="npu", dynamic=True, options=STRICT)(X, X + 1)
    graph = graphs[0]
    specs = [d.output_descs[0] for d in graph.lowered.graph.data_ops()]
    assert any(-1 in s.shape for s in specs)

    def args_like(x):  # SymInt inputs (0-d int64 Data) get a size, tensors get x
        args = [None] * (max(graph.lowered.data_inputs) + 1)
        for i, s in zip(graph.lowered.data_inputs, specs):
            args[i] = x.shape[0] if not s.shape else x
        return args

    small = torch.randn(1, 2, 2, 3)
    torch.testing.assert_close(graph(args_like(small))[0], _f(small, small))
    with pytest.raises(GraphInputError, match=r"compiled for float32\[\?, \?, \?, \?\]"
                                              r" on cpu, called with float32\[3, 4, 5\]"):
        graph(args_like(X[0]))


# ---- odd names cannot break or inject into generated code, dumps or paths ------------------
ODD = ["quote'", 'dq"x', "nl\nx", "br{x}", "bs\\x", "ünï", "sp ace", "${HOME}", "x;y",
       "\nopen('PWNED','w')\n", "%s{0}"]


class OddNames(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleDict({n: torch.nn.Linear(4, 4) for n in ODD})
        for i, n in enumerate(ODD):
            self.register_buffer("b" + n, torch.full((4,), float(i)))

    def forward(self, x):
        for n in ODD:
            x = torch.tanh(self.blocks[n](x)) + getattr(self, "b" + n)
        return x


@pytest.mark.parametrize("freeze", [False, True], ids=["params", "frozen"])
def test_odd_module_and_parameter_names(tmp_path, monkeypatch, freeze):
    monkeypatch.chdir(tmp_path)
    dump, cache = tmp_path / "dump dir ü'\"$x", tmp_path / "cache {0} ü'\\"
    model, x = OddNames().eval(), torch.randn(2, 4)
    options = {**STRICT, "dump_dir": str(dump), "cache_dir": str(cache),
               "freeze_parameters": freeze}
    for _ in range(2):  # the second compile loads the cache entry the first one wrote
        torch._dynamo.reset()
        with torch.no_grad(), record_graphs() as graphs:
            torch.testing.assert_close(torch.compile(model, backend="npu", options=options)(x),
                                       model(x))
        assert graphs
    entries = list((cache / "entries").iterdir())
    assert entries and all(re.fullmatch(r"[0-9a-f]{64}\.npuc", p.name) for p in entries)
    assert not (tmp_path / "PWNED").exists()
    files = [p for p in dump.rglob("*") if p.is_file()]
    assert files and all(re.fullmatch(r"[A-Za-z0-9_.\-]+", p.name) for p in files), files
    generated = [p for p in files if p.name in ("executor.py", "host_model.py")]
    assert generated
    for p in generated:
        ast.parse(p.read_text())  # generated Python stays valid Python


def test_odd_graph_and_input_names_in_executor_source():
    from npu_inductor.codegen import executor_source, load_executor
    from npu_inductor.ge import GraphBuilder

    b = GraphBuilder("g'\n{x}\\")
    x = b.data(torch.float32, (2, 2), "in'\"\n{0}\\ü")
    b.output([x])
    graph = b.build()
    for device in ("host", "acl"):
        module = load_executor(executor_source(graph, device), "odd")
        assert module.GRAPH_NAME == graph.name
        assert module.INPUT_NAMES == [graph.data_ops()[0].name]


def test_unicode_argument_names_with_buckets():
    def fn(ünï, 𝔵):
        return ünï * 2 + 𝔵

    x = torch.randn(5, 3)
    compiled = torch.compile(fn, backend="npu", dynamic=True, options={
        **STRICT, "shape_buckets": {"ünï": {0: [8]}}})
    torch.testing.assert_close(compiled(x, x), fn(x, x))


# ---- empty, 0-d, strided and channels-last inputs work ------------------------------------
def _reductions(x):
    return x.sum(0), x.mean(-1), torch.softmax(x, -1), x @ x.transpose(-1, -2)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4)], ids=str)
def test_zero_size_inputs(shape):
    x = torch.randn(shape)
    _check(lambda a: (torch.relu(a) + 1, *_reductions(a), a.reshape(-1)), x)


def test_zero_size_matmul_contraction():
    a, b = torch.randn(3, 0), torch.randn(0, 4)  # a zero-length sum: all zeros
    _check(lambda a, b: a @ b + 1, a, b)


def test_zero_dim_inputs_and_outputs():
    x, y = torch.tensor(1.5), torch.tensor(-2.0)
    _check(lambda a, b: (a * b + 1, torch.maximum(a, b), (a + b).sum(), a.reshape(1)), x, y)
    _check(lambda m: (m.sum(), m.amax(), m.norm()), torch.randn(3, 4))


STRIDED = {
    "transposed": lambda: torch.randn(4, 6).t(),
    "step_slice": lambda: torch.randn(8, 6)[::2, 1::2],
    "expanded": lambda: torch.randn(1, 6).expand(4, 6),
    "offset_view": lambda: torch.randn(30)[5:29].view(4, 6),
}


@pytest.mark.parametrize("kind", list(STRIDED))
def test_non_contiguous_inputs(kind):
    x = STRIDED[kind]()
    w = torch.randn(x.shape[-1], 3)
    _check(lambda a, w: (torch.relu(a) @ w, a.sum(0), a * 2), x, w)


def test_channels_last_model():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1))
    model = model.eval().to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    with torch.no_grad(), record_graphs() as graphs:
        out = torch.compile(model, backend="npu", options=STRICT)(x)
        assert_close(out, model(x), 1e-5, 1e-5, "output")
    assert graphs


# ---- NaN and Inf propagate as in eager ------------------------------------------------------
A = torch.tensor([[NAN, 1.0, -2.0, INF], [-INF, 0.5, NAN, 3.0], [1.0, 2.0, 3.0, 4.0]])
B = torch.tensor([[1.0, NAN, INF, -INF], [2.0, 0.0, -1.0, NAN], [INF, -INF, 0.0, 1.0]])
NAN_FNS = {
    "elementwise": lambda a, b: (a + b, a * b, a / b, torch.relu(a), torch.exp(a), a.abs()),
    "min_max": lambda a, b: (torch.maximum(a, b), torch.minimum(a, b), torch.clamp(a, -1, 1)),
    "reductions": lambda a, b: (a.amax(1), a.amin(0), a.max(1).values, a.argmax(1),
                                a.sum(1), a.mean(0), torch.logsumexp(a, 1)),
    "softmax_norm": lambda a, b: (torch.softmax(a, 1), torch.log_softmax(b, 1),
                                  torch.nn.functional.layer_norm(a, (4,))),
    "matmul": lambda a, b: a @ b.t(),
    "predicates": lambda a, b: (torch.isnan(a), torch.isinf(b), a == b, torch.where(a > 0, a, b),
                                torch.nan_to_num(a)),
    "order": lambda a, b: (torch.sort(a, 1).values, torch.topk(b, 2, 1).values,
                           torch.cumsum(a, 1)),
    "half": lambda a, b: (a.half() * 2, torch.tanh(b.bfloat16())),
}


@pytest.mark.parametrize("name", list(NAN_FNS))
def test_nan_and_inf_propagate_as_in_eager(name):
    _check(NAN_FNS[name], A, B, tol=1e-2 if name == "half" else 1e-5)
