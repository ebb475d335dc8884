"""The fuzzer's op templates: elementwise, broadcasting, views, reductions, matmuls,
indexing and in-place statements (see ``programs.py``)."""

from __future__ import annotations

import torch
from programs import Builder, Template, Value, broadcast_partner, floating, random_shape

aten = torch.ops.aten


def _float_operand(b: Builder) -> Value | None:
    return b.pick(floating)


def _partner(b: Builder, x: Value, dtype: torch.dtype | None = None) -> Value:
    """A second operand broadcasting with ``x``: an existing value or a new input."""
    dtype = dtype or x.dtype
    if b.d.bool(40):
        y = b.pick(lambda v: v is not x and v.dtype == dtype and _broadcasts(v.shape, x.shape))
        if y is not None:
            return y
    return b.new_input(broadcast_partner(b.d, x.shape), dtype)


def _broadcasts(a: tuple, c: tuple) -> bool:
    try:
        return torch.broadcast_shapes(a, c) == torch.Size(c)
    except RuntimeError:
        return False


def _dim(b: Builder, x: Value) -> int:
    d = b.d.int(0, len(x.shape) - 1)
    return d - len(x.shape) if b.d.bool(25) else d


def _scalar(b: Builder) -> str:
    return b.d.choice(("2", "0.5", "-1.5", "3", "1e-3"))


# ---- elementwise --------------------------------------------------------------------------
def unary(name: str, expr: str, *needs, any_dtype: bool = False) -> Template:
    def build(b: Builder) -> Value | None:
        x = b.pick() if any_dtype else b.pick(floating)
        return x and b.emit(name, expr.format(x=x.name), {x.name: x})
    return Template(name, build, needs)


UNARY = [
    unary("neg", "torch.neg({x})", aten.neg.default, any_dtype=True),
    unary("abs", "torch.abs({x})", aten.abs.default),
    unary("exp", "torch.exp({x})", aten.exp.default),
    unary("sin", "torch.sin({x})", aten.sin.default),
    unary("cos", "torch.cos({x})", aten.cos.default),
    unary("tanh", "torch.tanh({x})", aten.tanh.default),
    unary("sigmoid", "torch.sigmoid({x})", aten.sigmoid.default),
    unary("relu", "torch.relu({x})", aten.relu.default),
    unary("floor", "torch.floor({x})", aten.floor.default),
    unary("ceil", "torch.ceil({x})", aten.ceil.default),
    unary("erf", "torch.erf({x})", aten.erf.default),
    unary("sqrt_abs", "torch.sqrt({x}.abs())", aten.sqrt.default),
    unary("rsqrt", "torch.rsqrt({x}.abs() + 1)", aten.rsqrt.default),
    unary("log1p", "torch.log1p({x}.abs())", aten.log1p.default),
    unary("reciprocal", "torch.reciprocal({x})", aten.reciprocal.default),
    unary("gelu", "F.gelu({x})", aten.gelu.default),
    unary("gelu_tanh", "F.gelu({x}, approximate='tanh')", aten.gelu.default),
    unary("silu", "F.silu({x})", aten.silu.default),
    unary("softplus", "F.softplus({x})", aten.softplus.default),
    unary("hardswish", "F.hardswish({x})", aten.hardswish.default),
    unary("leaky_relu", "F.leaky_relu({x}, 0.1)", aten.leaky_relu.default),
    unary("elu", "F.elu({x})", aten.elu.default),
    unary("clamp", "{x}.clamp(-0.5, 0.75)", aten.clamp.default),
    unary("pow2", "{x}.pow(2)", aten.pow.Tensor_Scalar),
    unary("square_add", "{x} * {x} + 1", aten.mul.Tensor),
    unary("isnan_where", "torch.where(torch.isnan({x}), 0.0, {x})", aten.isnan.default),
    unary("logical_not", "torch.logical_not({x})", aten.logical_not.default, any_dtype=True),
    unary("to_f32", "{x}.to(torch.float32)", aten._to_copy.default, any_dtype=True),
    unary("to_i64", "{x}.to(torch.int64)", aten._to_copy.default, any_dtype=True),
    unary("gt0", "{x} > 0", aten.gt.Scalar, any_dtype=True),
]


def binary(name: str, expr: str, *needs, float_only: bool = True) -> Template:
    def build(b: Builder) -> Value | None:
        x = b.pick(floating if float_only else (lambda v: v.dtype != torch.bool))
        if x is None:
            return None
        y = _partner(b, x)
        x, y = (y, x) if b.d.bool(20) else (x, y)
        return b.emit(name, expr.format(x=x.name, y=y.name), {x.name: x, y.name: y})
    return Template(name, build, needs)


def scalar_op(name: str, expr: str, *needs) -> Template:
    def build(b: Builder) -> Value | None:
        x = b.pick(lambda v: v.dtype != torch.bool)
        return x and b.emit(name, expr.format(x=x.name, s=_scalar(b)), {x.name: x})
    return Template(name, build, needs)


BINARY = [
    binary("add", "torch.add({x}, {y})", aten.add.Tensor, float_only=False),
    binary("sub", "{x} - {y}", aten.sub.Tensor, float_only=False),
    binary("mul", "{x} * {y}", aten.mul.Tensor, float_only=False),
    binary("div", "{x} / {y}", aten.div.Tensor),
    binary("maximum", "torch.maximum({x}, {y})", aten.maximum.default, float_only=False),
    binary("minimum", "torch.minimum({x}, {y})", aten.minimum.default),
    binary("atan2", "torch.atan2({x}, {y})", aten.atan2.default),
    binary("where_gt", "torch.where({x} > {y}, {x}, {y})", aten.where.self, float_only=False),
    binary("eq", "({x} == {y})", aten.eq.Tensor, float_only=False),
    binary("lerp", "torch.lerp({x}, {y}, 0.3)", aten.lerp.Scalar),
    binary("add_alpha", "torch.add({x}, {y}, alpha=2)", aten.add.Tensor),
    scalar_op("add_s", "{x} + {s}", aten.add.Tensor),
    scalar_op("mul_s", "{x} * {s}", aten.mul.Tensor),
    scalar_op("rsub_s", "{s} - {x}", aten.rsub.Scalar),
    scalar_op("div_s", "{x} / {s}", aten.div.Tensor),
]


# ---- views and shape ops ------------------------------------------------------------------
def _view(name: str, make, *needs, min_rank: int = 1) -> Template:
    def build(b: Builder) -> Value | None:
        x = b.pick(lambda v: len(v.shape) >= min_rank)
        if x is None:
            return None
        expr = make(b, x)
        return expr and b.emit(name, expr, {x.name: x})
    return Template(name, build, needs)


def _slice(b: Builder, x: Value) -> str:
    parts = []
    for s in x.shape:
        if b.d.bool(50):
            parts.append(":")
            continue
        start = b.d.int(0, max(s - 1, 0))
        step = b.d.choice((1, 2, 3))
        stop = b.d.choice(("", str(s), str(min(s, start + 2)), "-1"))
        parts.append(f"{start}:{stop}:{step}")
    return f"{x.name}[{', '.join(parts) or '...'}]"


def _expand(b: Builder, x: Value) -> str | None:
    sizes = [b.d.choice((2, 3)) if s == 1 else s for s in x.shape]
    lead = [b.d.choice((1, 2))] if b.d.bool(30) else []
    return f"{x.name}.expand({', '.join(map(str, lead + sizes)) or '()'})"


def _permute(b: Builder, x: Value) -> str:
    perm = list(range(len(x.shape)))
    for i in range(len(perm) - 1, 0, -1):
        j = b.d.int(0, i)
        perm[i], perm[j] = perm[j], perm[i]
    return f"{x.name}.permute({', '.join(map(str, perm))})"


def _reshape(b: Builder, x: Value) -> str:
    shape = x.shape
    if len(shape) >= 2 and b.d.bool(60):
        i = b.d.int(0, len(shape) - 2)
        new = (*shape[:i], shape[i] * shape[i + 1], *shape[i + 2:])
    else:
        new = (-1,) if 0 not in shape else (0,)
    method = b.d.choice(("reshape", "reshape", "view")) if x.meta.is_contiguous() else "reshape"
    return f"{x.name}.{method}({', '.join(map(str, new)) or '()'})"


def _cat(name: str, fn: str) -> Template:
    def build(b: Builder) -> Value | None:
        x = b.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            return None
        y = b.pick(lambda v: v is not x and v.shape == x.shape and v.dtype == x.dtype)
        y = y or b.new_input(x.shape, x.dtype)
        d = _dim(b, x)
        return b.emit(name, f"torch.{fn}([{x.name}, {y.name}], {d})", {x.name: x, y.name: y})
    return Template(name, build, (getattr(aten, fn).default,))


VIEWS = [
    _view("transpose", lambda b, x: f"{x.name}.transpose({_dim(b, x)}, {_dim(b, x)})",
          aten.transpose.int),
    _view("t", lambda b, x: f"{x.name}.t()", aten.t.default, min_rank=2),
    _view("permute", _permute, aten.permute.default),
    _view("slice", _slice, aten.slice.Tensor),
    _view("expand", _expand, aten.expand.default, min_rank=0),
    _view("unsqueeze", lambda b, x: f"{x.name}.unsqueeze({b.d.int(0, len(x.shape))})",
          aten.unsqueeze.default, min_rank=0),
    _view("squeeze", lambda b, x: f"{x.name}.squeeze({_dim(b, x)})", aten.squeeze.dim),
    _view("reshape", _reshape, aten.view.default, min_rank=0),
    _view("flatten", lambda b, x: f"{x.name}.flatten()", aten.view.default, min_rank=0),
    _view("narrow", lambda b, x: f"{x.name}.narrow({_dim(b, x)}, 0, 1)", aten.slice.Tensor),
    _view("select", lambda b, x: f"{x.name}.select({_dim(b, x)}, -1)", aten.select.int),
    _view("contiguous", lambda b, x: f"{x.name}.contiguous()", aten.clone.default),
    _view("flip", lambda b, x: f"{x.name}.flip({_dim(b, x)})", aten.flip.default),
    _view("roll", lambda b, x: f"{x.name}.roll(1, {_dim(b, x)})", aten.roll.default),
    _view("repeat", lambda b, x: f"{x.name}.repeat(2{', 1' * (len(x.shape) - 1)})",
          aten.repeat.default),
    _view("chunk", lambda b, x: f"{x.name}.chunk(2, {_dim(b, x)})[0]", aten.split.Tensor),
    _view("diagonal", lambda b, x: f"{x.name}.diagonal(0, -2, -1)", aten.diagonal.default,
          min_rank=2),
    _view("tril", lambda b, x: f"{x.name}.tril()", aten.tril.default, min_rank=2),
    _cat("cat", "cat"),
    _cat("stack", "stack"),
]


# ---- reductions ---------------------------------------------------------------------------
def reduction(name: str, expr: str, *needs, float_only: bool = True) -> Template:
    def build(b: Builder) -> Value | None:
        x = b.pick(lambda v: len(v.shape) >= 1 and (floating(v) or not float_only))
        if x is None:
            return None
        keep = b.d.choice(("True", "False"))
        return b.emit(name, expr.format(x=x.name, d=_dim(b, x), k=keep), {x.name: x})
    return Template(name, build, needs)


REDUCTIONS = [
    reduction("sum", "{x}.sum({d}, keepdim={k})", aten.sum.dim_IntList, float_only=False),
    reduction("sum_all", "{x}.sum()", aten.sum.default),
    reduction("mean", "{x}.mean({d}, keepdim={k})", aten.mean.dim),
    reduction("amax", "{x}.amax({d}, keepdim={k})", aten.amax.default, float_only=False),
    reduction("amin", "{x}.amin({d}, keepdim={k})", aten.amin.default),
    reduction("prod", "{x}.prod({d}, keepdim={k})", aten.prod.dim_int),
    reduction("argmax", "{x}.argmax({d}, keepdim={k})", aten.argmax.default),
    reduction("max_dim", "{x}.max({d}, keepdim={k})[0]", aten.max.dim),
    reduction("softmax", "{x}.softmax({d})", aten._softmax.default),
    reduction("log_softmax", "{x}.log_softmax({d})", aten._log_softmax.default),
    reduction("cumsum", "{x}.cumsum({d})", aten.cumsum.default),
    reduction("var", "{x}.var({d}, keepdim={k})", aten.var.correction),
    reduction("logsumexp", "{x}.logsumexp({d}, keepdim={k})"),
    reduction("norm", "torch.linalg.vector_norm({x}, 2, {d}, keepdim={k})",
              aten.linalg_vector_norm.default),
    reduction("any", "({x} > 0).any({d}, keepdim={k})", aten.any.dim, float_only=False),
]


# ---- matmuls ------------------------------------------------------------------------------
def _matmul(b: Builder) -> Value | None:
    x = b.pick(lambda v: floating(v) and 1 <= len(v.shape) <= 3)
    if x is None:
        return None
    n = b.d.choice((1, 2, 3, 4))
    w = b.new_input((x.shape[-1], n), x.dtype)
    expr = b.d.choice(("{x} @ {w}", "torch.matmul({x}, {w})"))
    return b.emit("matmul", expr.format(x=x.name, w=w.name), {x.name: x, w.name: w})


def _bmm(b: Builder) -> Value | None:
    x = b.pick(lambda v: floating(v) and len(v.shape) == 3)
    if x is None:
        return None
    w = b.new_input((x.shape[0], x.shape[2], b.d.choice((1, 2, 3))), x.dtype)
    return b.emit("bmm", f"torch.bmm({x.name}, {w.name})", {x.name: x, w.name: w})


def _linear(b: Builder) -> Value | None:
    x = b.pick(lambda v: floating(v) and len(v.shape) >= 1)
    if x is None:
        return None
    n = b.d.choice((1, 3, 4))
    w = b.new_input((n, x.shape[-1]), x.dtype)
    bias = b.new_input((n,), x.dtype)
    return b.emit("linear", f"F.linear({x.name}, {w.name}, {bias.name})",
                  {x.name: x, w.name: w, bias.name: bias})


MATMULS = [Template("matmul", _matmul, (aten.mm.default,)),
           Template("bmm", _bmm, (aten.bmm.default,)),
           Template("linear", _linear, (aten.addmm.default,))]


# ---- indexing -----------------------------------------------------------------------------
def _index(b: Builder, x: Value, d: int, shape: tuple, negative: bool = False) -> Value:
    """Indices into dim ``d`` of ``x`` (none at all when that dim is empty); with
    ``negative`` (ops that wrap them) some may be negative."""
    if x.shape[d] == 0 and len(shape) == 1:
        shape = (0,)
    low = -x.shape[d] if negative and b.d.bool(50) else 0
    return b.new_input(shape, torch.int64, kind="index", high=x.shape[d], low=low)


def _gather(b: Builder) -> Value | None:
    x = b.pick(lambda v: len(v.shape) >= 1)
    if x is None:
        return None
    d = _dim(b, x)
    shape = tuple(b.d.int(0, s) for s in x.shape)
    idx = _index(b, x, d, shape)
    return b.emit("gather", f"torch.gather({x.name}, {d}, {idx.name})", {x.name: x, idx.name: idx})


def _index_select(b: Builder) -> Value | None:
    x = b.pick(lambda v: len(v.shape) >= 1)
    if x is None:
        return None
    d = _dim(b, x)
    advanced = d in (0, -len(x.shape)) and b.d.bool(50)
    idx = _index(b, x, d, (b.d.int(0, 4),), negative=advanced)
    expr = "{x}[{i}]" if advanced else "{x}.index_select({d}, {i})"
    return b.emit("index_select", expr.format(x=x.name, d=d, i=idx.name),
                  {x.name: x, idx.name: idx})


def _index_put(b: Builder) -> Value | None:
    x = b.pick(lambda v: len(v.shape) >= 1 and v.dtype != torch.bool)
    if x is None:
        return None
    idx = _index(b, x, 0, (b.d.int(1, 3),), negative=True)
    vals = b.new_input(broadcast_partner(b.d, (idx.shape[0], *x.shape[1:])), x.dtype)
    acc = b.d.choice(("True", "False")) if floating(x) else "True"
    expr = f"{x.name}.index_put(({idx.name},), {vals.name}, accumulate={acc})"
    return b.emit("index_put", expr, {x.name: x, idx.name: idx, vals.name: vals})


def _masked(b: Builder) -> Value | None:
    x = b.pick(lambda v: v.dtype != torch.bool)
    if x is None:
        return None
    mask = b.new_input(broadcast_partner(b.d, x.shape), torch.bool, kind="mask")
    expr = b.d.choice(("{x}.masked_fill({m}, -2)", "torch.where({m}, {x}, 0)"))
    return b.emit("masked", expr.format(x=x.name, m=mask.name), {x.name: x, mask.name: mask})


def _scatter_add(b: Builder) -> Value | None:
    x = b.pick(lambda v: floating(v) and len(v.shape) >= 1)
    if x is None:
        return None
    d = _dim(b, x)
    shape = tuple(b.d.int(0, s) for s in x.shape)
    idx = _index(b, x, d, shape)
    src = b.new_input(shape, x.dtype)
    expr = b.d.choice(("{x}.scatter_add({d}, {i}, {s})", "{x}.scatter({d}, {i}, {s})"))
    return b.emit("scatter", expr.format(x=x.name, d=d, i=idx.name, s=src.name),
                  {x.name: x, idx.name: idx, src.name: src})


def _index_add(b: Builder) -> Value | None:
    x = b.pick(lambda v: floating(v) and len(v.shape) >= 1)
    if x is None:
        return None
    idx = _index(b, x, 0, (b.d.int(0, 3),))
    src = b.new_input((idx.shape[0], *x.shape[1:]), x.dtype)
    expr = f"{x.name}.index_add(0, {idx.name}, {src.name})"
    return b.emit("index_add", expr, {x.name: x, idx.name: idx, src.name: src})


INDEXING = [Template("gather", _gather, (aten.gather.default,)),
            Template("index_select", _index_select, (aten.index_select.default,)),
            Template("index_put", _index_put, (aten.index_put.default,)),
            Template("masked", _masked, (aten.masked_fill.Scalar, aten.where.self)),
            Template("scatter", _scatter_add, (aten.scatter_add.default,)),
            Template("index_add", _index_add, (aten.index_add.default,))]


# ---- in-place -----------------------------------------------------------------------------
def _inplace(b: Builder) -> Value | None:
    """An in-place op on a value that owns its memory (or on a graph input), whole or
    through a slice."""
    t = b.pick(lambda v: v.fresh or (v.is_input and v.dtype != torch.bool))
    if t is None or t.dtype == torch.bool:
        return None
    target = t.name
    if t.shape and b.d.bool(40):
        target = f"{t.name}[{b.d.int(0, max(t.shape[0] - 1, 0))}::2]"
    kind = b.d.choice(("add_", "mul_", "clamp_", "relu_", "copy_", "masked_fill_"))
    refs = {t.name: t}
    if kind in ("add_", "copy_"):
        y = b.new_input(broadcast_partner(b.d, _target_shape(t, target)), t.dtype)
        refs[y.name] = y
        expr = f"{target}.{kind}({y.name})"
    elif kind == "masked_fill_":
        m = b.new_input(broadcast_partner(b.d, _target_shape(t, target)), torch.bool, kind="mask")
        refs[m.name] = m
        expr = f"{target}.masked_fill_({m.name}, 1)"
    elif kind == "clamp_" and floating(t):
        expr = f"{target}.clamp_(-1, 1)"
    elif kind == "relu_" and floating(t):
        expr = f"{target}.relu_()"
    else:
        expr = f"{target}.mul_(2)"
    v = b.emit("inplace_" + kind, expr, refs, inplace=True)
    if v is not None and b.d.bool(60):  # read the mutated value itself afterwards
        return b.emit("read_mutated", f"{t.name} * 1", {t.name: t})
    return v


def _target_shape(t: Value, target: str) -> tuple:
    if target == t.name:
        return t.shape
    start = int(target.split("[")[1].split(":")[0])
    return (len(range(start, t.shape[0], 2)), *t.shape[1:])


INPLACE = [Template("inplace", _inplace, (aten.add.Tensor, aten.copy.default))]


# ---- integer / bool / dtype-changing ops --------------------------------------------------
def _of(pred, name: str, expr: str, *needs) -> Template:
    def build(b: Builder) -> Value | None:
        x = b.pick(pred)
        return x and b.emit(name, expr.format(x=x.name), {x.name: x})
    return Template(name, build, needs)


def _int(v: Value) -> bool:
    return v.dtype == torch.int64


def _f32(v: Value) -> bool:
    return v.dtype == torch.float32


def _bool_pair(name: str, op: str, *needs) -> Template:
    def build(b: Builder) -> Value | None:
        x = b.pick(lambda v: v.dtype in (torch.bool, torch.int64))
        if x is None:
            return None
        y = _partner(b, x)
        return b.emit(name, f"{x.name} {op} {y.name}", {x.name: x, y.name: y})
    return Template(name, build, needs)


def _topk(b: Builder) -> Value | None:
    x = b.pick(lambda v: floating(v) and len(v.shape) >= 1 and 0 not in v.shape)
    if x is None:
        return None
    d = _dim(b, x)
    k = b.d.int(1, x.shape[d])
    expr = b.d.choice((f"{x.name}.topk({k}, {d})[0]", f"{x.name}.sort({d})[0]",
                       f"{x.name}.sort({d}, descending=True)[0]"))
    return b.emit("topk", expr, {x.name: x})


def _multi_reduce(b: Builder) -> Value | None:
    x = b.pick(lambda v: floating(v) and len(v.shape) >= 2)
    if x is None:
        return None
    dims = sorted({_dim(b, x) % len(x.shape) for _ in range(2)})
    fn = b.d.choice(("sum", "mean", "amax", "std"))
    return b.emit("multi_reduce", f"{x.name}.{fn}({tuple(dims)}, keepdim={b.d.bool()})",
                  {x.name: x})


def _cat_sizes(b: Builder) -> Value | None:
    x = b.pick(lambda v: len(v.shape) >= 1)
    if x is None:
        return None
    d = _dim(b, x)
    shape = list(x.shape)
    shape[d] = b.d.choice((0, 1, 2))
    y = b.new_input(tuple(shape), x.dtype)
    return b.emit("cat_sizes", f"torch.cat([{x.name}, {y.name}], {d})", {x.name: x, y.name: y})


def _embedding(b: Builder) -> Value | None:
    w = b.pick(lambda v: floating(v) and len(v.shape) == 2)
    if w is None:
        return None
    idx = _index(b, w, 0, random_shape(b.d, b.d.int(1, 2)))
    return b.emit("embedding", f"F.embedding({idx.name}, {w.name})", {w.name: w, idx.name: idx})


def _index_fill(b: Builder) -> Value | None:
    x = b.pick(lambda v: v.dtype != torch.bool and len(v.shape) >= 1)
    if x is None:
        return None
    d = _dim(b, x)
    idx = _index(b, x, d, (b.d.int(0, 3),))
    return b.emit("index_fill", f"{x.name}.index_fill({d}, {idx.name}, -1)",
                  {x.name: x, idx.name: idx})


def _arange_add(b: Builder) -> Value | None:
    x = b.pick(lambda v: len(v.shape) >= 1 and v.dtype != torch.bool)
    if x is None:
        return None
    n = x.shape[-1]
    expr = b.d.choice((f"{x.name} + torch.arange({n})", f"{x.name} * torch.ones_like({x.name})",
                       f"torch.full_like({x.name}, 2) - {x.name}"))
    return b.emit("creation", expr, {x.name: x})


MORE = [
    _of(_int, "floordiv", "{x} // 3", aten.floor_divide.default),
    _of(_int, "remainder", "{x} % 3", aten.remainder.Scalar),
    _of(_int, "int_clamp", "{x}.clamp(-2, 2)", aten.clamp.default),
    _of(lambda v: v.dtype in (torch.bool, torch.int64), "bitwise_not", "~{x}",
        aten.bitwise_not.default),
    _bool_pair("and", "&", aten.bitwise_and.Tensor),
    _bool_pair("or", "|", aten.bitwise_or.Tensor),
    _bool_pair("xor", "^", aten.bitwise_xor.Tensor),
    _of(_f32, "to_f16", "{x}.to(torch.float16)", aten._to_copy.default),
    _of(_f32, "to_bf16", "{x}.to(torch.bfloat16)", aten._to_copy.default),
    _of(lambda v: v.dtype in (torch.float16, torch.bfloat16), "to_float", "{x}.float()",
        aten._to_copy.default),
    _of(lambda v: floating(v) and v.shape != () and v.shape[-1] > 0, "layer_norm",
        "F.layer_norm({x}, {x}.shape[-1:])", aten.native_layer_norm.default),
    _of(lambda v: floating(v) and v.shape != (), "pad", "F.pad({x}, (1, 2))",
        aten.constant_pad_nd.default),
    _of(lambda v: floating(v) and v.shape != (), "cumprod", "{x}.cumprod(-1)",
        aten.cumprod.default),
    _of(lambda v: len(v.shape) >= 2, "mT", "{x}.mT", aten.transpose.int),
    _of(lambda v: len(v.shape) >= 2, "movedim", "{x}.movedim(0, -1)", aten.permute.default),
    _of(lambda v: v.shape != (), "unbind", "{x}.unbind(0)[-1] if {x}.shape[0] else {x}",
        aten.unbind.int),
    _of(lambda v: floating(v), "where_scalar", "torch.where({x} > 0, {x}, 0.5)",
        aten.where.self),
    Template("topk", _topk, (aten.topk.default, aten.sort.default)),
    Template("multi_reduce", _multi_reduce, (aten.sum.dim_IntList,)),
    Template("cat_sizes", _cat_sizes, (aten.cat.default,)),
    Template("embedding", _embedding, (aten.embedding.default,)),
    Template("index_fill", _index_fill, (aten.index_fill.int_Scalar,)),
    Template("creation", _arange_add, (aten.arange.start_step,)),
]

TEMPLATES = [*UNARY, *BINARY, *VIEWS, *REDUCTIONS, *MATMULS, *MATMULS, *INDEXING, *INDEXING,
             *INPLACE, *INPLACE, *INPLACE, *MORE]

