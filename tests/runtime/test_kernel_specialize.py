"""Host kernels specialized at load time, no-task view ops, and the rewritten fused kernels,
each against torch's own eager result (or a float64 reference)."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import record_graphs  # noqa: E402

from npu_inductor.runtime.kernels import (  # noqa: E402
    KERNELS,
    RUNTIME,
    SPECIALIZERS,
    fused,  # noqa: E402
)


def _host_model(compiled):
    ex = compiled.executor
    return ex.device.acl.models[ex.model_id]


def _compile(fn, *inputs):
    torch._dynamo.reset()
    with record_graphs() as graphs:
        out = torch.compile(fn, backend="npu")(*inputs)
    return out, [_host_model(g) for g in graphs]


# ---- StridedSliceV2 ------------------------------------------------------------------------
SLICES = [  # begin, end, axes, strides, begin_mask, end_mask, eager index
    ([1], [3], [0], [1], 0, 0, (slice(1, 3),)),
    ([0, 2], [4, 7], [1, 2], [2, 3], 0, 0, (slice(None), slice(0, 4, 2), slice(2, 7, 3))),
    ([-3], [100], [-1], None, 0, 0, (slice(None), slice(None), slice(-3, 100))),
    ([5, 1], [0, 2], [0, 1], [1, 1], 1, 0, (slice(None, 0), slice(1, 2))),
    ([5, 1], [3, 2], [0, 1], [1, 1], 1, 0, (slice(None, 3), slice(1, 2))),
    ([1], [0], [2], [2], 0, 1, (slice(None), slice(None), slice(1, None, 2))),
]


@pytest.mark.parametrize("begin,end,axes,strides,bmask,emask,index", SLICES)
def test_strided_slice_specialized_matches_eager_and_generic(begin, end, axes, strides, bmask,
                                                           emask, index):
    x = torch.randn(4, 6, 9)
    attrs = {"begin_mask": bmask, "end_mask": emask}
    consts = [RUNTIME, begin, end, axes, strides]
    fn = SPECIALIZERS["StridedSliceV2"](consts, attrs)
    assert fn is not None
    t = [torch.tensor(v) if v is not None else None for v in (begin, end, axes, strides)]
    generic = KERNELS["StridedSliceV2"](x, *t, begin_mask=bmask, end_mask=emask)
    for _ in range(2):  # the second call takes the cached index
        got = fn(x, *t, begin_mask=bmask, end_mask=emask)
        assert torch.equal(got, x[index]) and torch.equal(got, generic)


def test_strided_slice_not_specialized_for_runtime_bounds():
    assert SPECIALIZERS["StridedSliceV2"]([RUNTIME, RUNTIME, [3], [0], None], {}) is None


def test_strided_slice_specialized_still_rejects_masks():
    fn = SPECIALIZERS["StridedSliceV2"]([RUNTIME, [0], [1], [0], None], {"shrink_axis_mask": 1})
    with pytest.raises(ValueError, match="shrink_axis"):
        fn(torch.randn(3, 3))


# ---- BatchMatMulV2 -------------------------------------------------------------------------
@pytest.mark.parametrize("adj1", [False, True])
@pytest.mark.parametrize("adj2", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("use_out", [False, True])
def test_batch_matmul_specialized(adj1, adj2, bias, use_out):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2, 5, 8, generator=g)
    b = torch.randn(8, 3, generator=g)
    c = torch.randn(3, generator=g) if bias else None
    x1 = a.mT.contiguous() if adj1 else a
    x2 = b.mT.contiguous() if adj2 else b
    fn = SPECIALIZERS["BatchMatMulV2"]([RUNTIME, RUNTIME, RUNTIME if bias else None],
                                       {"adj_x1": adj1, "adj_x2": adj2})
    out = torch.empty(2, 5, 3) if use_out else None
    got = fn(x1, x2, c, out=out)
    ref = a.double() @ b.double() + (c.double() if bias else 0)
    assert got.shape == (2, 5, 3)
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)
    if use_out:
        assert got.data_ptr() == out.data_ptr()
    eager = F.linear(a, b.mT, c) if bias else a @ b
    torch.testing.assert_close(got, eager, rtol=1e-6, atol=1e-6)


def test_linear_bias_runs_through_the_specialized_kernel():
    lin = torch.nn.Linear(16, 8)
    x = torch.randn(3, 4, 16)
    with torch.no_grad():
        out, models = _compile(lin, x)
        torch.testing.assert_close(out, lin(x), rtol=1e-5, atol=1e-6)
    names = {st.op.type: st.fn.__name__ for hm in models for st in hm.steps}
    assert names.get("BatchMatMulV2", names.get("MatMulV2")) in ("batch_matmul_2d", "matmul_2d")


# ---- no-task view ops ----------------------------------------------------------------------
def test_reshape_between_planned_tensors_runs_no_kernel():
    def fn(x, w1, w2):
        h = (x @ w1).reshape(4, 3, 16)  # a view of a planned intermediate
        return torch.relu(h).sum(1) @ w2

    args = (torch.randn(12, 8), torch.randn(8, 16), torch.randn(16, 5))
    out, models = _compile(fn, *args)
    torch.testing.assert_close(out, fn(*args), rtol=1e-5, atol=1e-6)
    (hm,) = models
    notask = [b for b in hm.bound if b.notask]
    assert notask and all(b.step.op.type == "Reshape" for b in notask)
    for b in notask:
        s = b.step.outs[0]
        assert f"v{s} = W[{s}]" in hm.codegen_source
        src = b.step.args[0]
        assert hm.plan.offsets[src] == hm.plan.offsets[s]


def test_no_task_view_same_result_in_interpreter(monkeypatch):
    from npu_inductor.runtime import host_codegen

    def fn(x, w):
        return torch.tanh((x @ w).reshape(2, -1) * 2)

    args = (torch.randn(6, 4), torch.randn(4, 4))
    results = []
    for flag in ("1", "0"):
        monkeypatch.setenv(host_codegen.ENV_FLAG, flag)
        out, models = _compile(fn, *args)
        assert any(b.notask for hm in models for b in hm.bound)
        results.append(out)
    assert torch.equal(results[0], results[1])
    torch.testing.assert_close(results[0], fn(*args), rtol=1e-5, atol=1e-6)


# ---- rotary, RMSNorm, attention out= -------------------------------------------------------
def _rotate_half_ref(x):
    h = (x.shape[-1] + 1) // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


@pytest.mark.parametrize("width", [8, 7, 64])
def test_rotary_kernels_match_rotate_half_formula(width):
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 5, 4, width, generator=g)
    k = torch.randn(2, 5, 2, width, generator=g)
    cos = torch.randn(1, 5, 1, width, generator=g)
    sin = torch.randn(1, 5, 1, width, generator=g)
    ref = [t.double() * cos.double() + _rotate_half_ref(t.double()) * sin.double() for t in (q, k)]
    got = fused.apply_rotary_pos_emb(q, k, cos, sin)
    for a, r in zip(got, ref):
        torch.testing.assert_close(a.double(), r, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fused.rotary_mul(q, cos, sin).double(), ref[0], rtol=1e-5,
                               atol=1e-6)


def test_rotary_mul_broadcast_shape_grows():
    x = torch.randn(1, 1, 8)
    r1, r2 = torch.randn(3, 1, 8), torch.randn(3, 1, 8)
    got = fused.rotary_mul(x, r1, r2)
    assert got.shape == (3, 1, 8)
    torch.testing.assert_close(got, x * r1 + _rotate_half_ref(x) * r2, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("width", [8, 7])
def test_rotary_mul_out_of_a_transposed_input(width):
    """out=: a strided x (a Transpose of a projection) is written contiguous into ``out``,
    the result of the plain call (the host executor then hands it over without a copy)."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 5, 4, width, generator=g).transpose(1, 2)  # [2, 4, 5, w], strided
    r1, r2 = torch.randn(5, width, generator=g), torch.randn(5, width, generator=g)
    out = torch.empty(2, 4, 5, width)
    got = fused.rotary_mul(x, r1, r2, out=out)
    assert got is out and out.is_contiguous()
    assert torch.equal(out, fused.rotary_mul(x, r1, r2))
    ref = x.double() * r1.double() + _rotate_half_ref(x.double()) * r2.double()
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.float16, 1e-3),
                                       (torch.bfloat16, 1e-2)])
def test_rms_norm_kernel(dtype, tol):
    x = torch.randn(3, 7, 32).to(dtype)
    w = torch.randn(32).to(dtype)
    y, rstd = KERNELS["RmsNorm"](x, w, epsilon=1e-5)
    xd = x.double()
    ref_rstd = torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-5)
    assert y.dtype == dtype and rstd.dtype == torch.float32
    torch.testing.assert_close(y.double(), xd * ref_rstd * w.double(), rtol=tol, atol=tol)
    torch.testing.assert_close(rstd.double(), ref_rstd, rtol=1e-5, atol=1e-6)
    y2, _, s = KERNELS["AddRmsNorm"](x, x, w, epsilon=1e-5)
    assert torch.equal(s, x + x)


@pytest.mark.parametrize("layout", ["BSH", "BSND", "BNSD"])
@pytest.mark.parametrize("op", ["PromptFlashAttention", "IncreFlashAttention"])
def test_attention_out_matches_fresh_result(layout, op):
    b, n, s, d = 2, 4, 1 if op == "IncreFlashAttention" else 6, 8
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(b, n, s if i == 0 else 6, d, generator=g) for i in range(3))
    ref = F.scaled_dot_product_attention(q, k, v)

    def to_layout(t):
        if layout == "BNSD":
            return t
        t = t.transpose(1, 2).contiguous()
        return t.flatten(2) if layout == "BSH" else t

    args = [to_layout(t) for t in (q, k, v)]
    if op == "IncreFlashAttention":
        args = [args[0], [args[1]], [args[2]]]
    kw = dict(num_heads=n, num_key_value_heads=n, scale_value=d ** -0.5, input_layout=layout)
    fresh = KERNELS[op](*args, **kw)
    out = torch.empty_like(fresh)
    got = KERNELS[op](*args, **kw, out=out)
    assert got.data_ptr() == out.data_ptr() and torch.equal(got, fresh)
    torch.testing.assert_close(fresh, to_layout(ref), rtol=1e-5, atol=1e-6)


# ---- out= on activation / softmax / cast kernels ---------------------------------------------
OUT_CASES = [
    ("GeluV2", {"approximate": "none"}, torch.float32, lambda x: F.gelu(x)),
    ("GeluV2", {"approximate": "tanh"}, torch.float32, lambda x: F.gelu(x, approximate="tanh")),
    ("Gelu", {}, torch.float32, lambda x: F.gelu(x, approximate="tanh")),
    ("Swish", {"scale": 1.0}, torch.float32, F.silu),
    ("Swish", {"scale": 1.5}, torch.float32, lambda x: x * torch.sigmoid(1.5 * x)),
    ("Tanh", {}, torch.float32, torch.tanh),
    ("Sigmoid", {}, torch.float32, torch.sigmoid),
    ("SoftmaxV2", {"axes": [-1]}, torch.float32, lambda x: x.softmax(-1)),
    ("SoftmaxV2", {"axes": [0], "half_to_float": True}, torch.float32,
     lambda x: x.half().softmax(0, dtype=torch.float32)),
    ("Cast", {"dst_type": 3}, torch.int32, lambda x: x.to(torch.int32)),  # GE DT_INT32 = 3
]


@pytest.mark.parametrize("op,attrs,dtype,ref", OUT_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(OUT_CASES)])
def test_out_kernels_write_the_eager_result(op, attrs, dtype, ref):
    x = torch.randn(4, 9) * 3
    if attrs.get("half_to_float"):
        x = x.half()
    fresh = KERNELS[op](x, **attrs)
    out = torch.empty(4, 9, dtype=dtype)
    got = KERNELS[op](x, **attrs, out=out)
    assert got.data_ptr() == out.data_ptr()
    expect = ref(x.float() if attrs.get("half_to_float") else x)
    assert torch.equal(got, fresh) and torch.equal(got, expect)
    if dtype == x.dtype:  # the memory plan may write an elementwise op over its input
        y = x.clone()
        assert torch.equal(KERNELS[op](y, **attrs, out=y), expect)


@pytest.mark.parametrize("sizes,dim", [([2, 3, 1], 1), ([4, -1], 0), ([6], -1)])
def test_split_v_specialized_matches_generic(sizes, dim):
    x = torch.randn(6, 6)
    fn = SPECIALIZERS["SplitV"]([RUNTIME, sizes, dim], {"num_split": len(sizes)})
    args = (torch.tensor(sizes), torch.tensor(dim))
    got, generic = fn(x, *args, num_split=len(sizes)), KERNELS["SplitV"](x, *args,
                                                                         num_split=len(sizes))
    got, generic = (got,) if torch.is_tensor(got) else got, \
        (generic,) if torch.is_tensor(generic) else generic
    full = [s if s != -1 else x.shape[dim] - sum(v for v in sizes if v != -1) for s in sizes]
    assert len(got) == len(generic) == len(full)
    for a, b, c in zip(got, generic, torch.split(x, full, dim)):
        assert torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.parametrize("t1", [False, True])
@pytest.mark.parametrize("t2", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_matmul_specialized_matches_generic(t1, t2, bias):
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(5, 7, generator=g), torch.randn(7, 3, generator=g)
    c = torch.randn(3, generator=g) if bias else None
    x1 = a.t().contiguous() if t1 else a
    x2 = b.t().contiguous() if t2 else b
    attrs = {"transpose_x1": t1, "transpose_x2": t2}
    fn = SPECIALIZERS["MatMulV2"]([RUNTIME, RUNTIME, RUNTIME if bias else None], attrs)
    out = torch.empty(5, 3)
    got = fn(x1, x2, c, out=out, **attrs)
    assert got.data_ptr() == out.data_ptr()
    assert torch.equal(got, KERNELS["MatMulV2"](x1, x2, c, **attrs))
    torch.testing.assert_close(got, a @ b + (c if bias else 0), rtol=1e-5, atol=1e-5)


def test_layer_norm_kernel_takes_a_pre_decoded_shape():
    x, w, b = torch.randn(2, 5, 8), torch.randn(8), torch.randn(8)
    ref = torch.ops.aten.native_layer_norm(x, [8], w, b, 1e-5)
    for shape in ([8], torch.tensor([8])):
        got = KERNELS["LayerNormV4"](x, shape, w, b, epsilon=1e-5)
        assert all(torch.equal(a, r) for a, r in zip(got, ref))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.bfloat16, 1e-2)])
def test_swiglu_grad_kernel_matches_autograd(dtype, tol):
    """SwiGluGrad: d/dx of silu(a) * b for x = cat(a, b), against float64 autograd."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 12, generator=g).to(dtype)
    dy = torch.randn(2, 5, 6, generator=g).to(dtype)
    ref = x.double().requires_grad_()
    a, b = ref.chunk(2, -1)
    (F.silu(a) * b).backward(dy.double())
    got = fused.swiglu_grad(dy, x)
    assert got.dtype == dtype and got.shape == x.shape and got.is_contiguous()
    torch.testing.assert_close(got.double(), ref.grad, rtol=tol, atol=tol)


def test_identity_makes_a_strided_view_dense_once():
    """GE tensors are dense: Identity of a strided view is a contiguous copy (its readers
    then reshape it for free); of a dense tensor, the tensor itself."""
    x = torch.randn(2, 3, 4)
    assert KERNELS["Identity"](x) is x
    t = x.transpose(1, 2)
    y = KERNELS["Identity"](t)
    assert y.is_contiguous() and torch.equal(y, t)
    assert y.reshape(2, 12).data_ptr() == y.data_ptr()


# ---- reductions and Pow with constant axes / exponent ----------------------------------------
@pytest.mark.parametrize("op,ref", [("ReduceMean", torch.mean), ("ReduceSum", torch.sum),
                                    ("ReduceMax", torch.amax)])
@pytest.mark.parametrize("axes,keep", [([-1], True), ([0, 2], False), (1, False)])
def test_reduce_specialized_matches_generic_and_eager(op, ref, axes, keep):
    x = torch.randn(3, 4, 5)
    fn = SPECIALIZERS[op]([RUNTIME, axes], {"keep_dims": keep})
    assert fn is not None
    dims = axes if isinstance(axes, list) else [axes]
    got = fn(x, torch.tensor(axes), keep_dims=keep)
    assert torch.equal(got, ref(x, dims, keep))
    assert torch.equal(got, KERNELS[op](x, torch.tensor(axes), keep_dims=keep))


def test_reduce_specialized_empty_axes_reduce_nothing():
    x = torch.randn(3, 4)
    fn = SPECIALIZERS["ReduceSum"]([RUNTIME, []], {})
    assert fn(x, torch.tensor([], dtype=torch.int64)) is x


def test_reduce_not_specialized_for_runtime_axes():
    assert SPECIALIZERS["ReduceMean"]([RUNTIME, RUNTIME], {}) is None


@pytest.mark.parametrize("e", [2, 0.5, 3.0])
def test_pow_specialized_matches_generic(e):
    x = torch.rand(4, 6) + 0.1
    fn = SPECIALIZERS["Pow"]([RUNTIME, e], {})
    assert fn is not None
    t = torch.tensor(e)
    assert torch.equal(fn(x, t), KERNELS["Pow"](x, t))
    assert torch.equal(fn(x, t), torch.pow(x, e))
    s = torch.tensor(1.5)  # a 0-d base keeps the generic tensor-tensor path
    assert torch.equal(fn(s, t), KERNELS["Pow"](s, t))


def test_pow_not_specialized_for_tensor_exponent():
    assert SPECIALIZERS["Pow"]([RUNTIME, [2.0, 3.0]], {}) is None
    assert SPECIALIZERS["Pow"]([RUNTIME, RUNTIME], {}) is None


def test_norm_graph_loads_specialized_reduce_and_pow():
    x = torch.randn(2, 5, 8)
    out, models = _compile(lambda t: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6), x)
    steps = {st.op.type: st for m in models for st in m.op_steps}
    assert steps["ReduceMean"].fn is not KERNELS["ReduceMean"]
    assert steps["Pow"].fn is not KERNELS["Pow"]
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
