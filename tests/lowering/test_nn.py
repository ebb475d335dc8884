"""Convolution, pooling, normalization, softmax, embedding, attention and loss converters:
compiled vs eager, forward and backward (input and parameter gradients)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from harness import STRICT, assert_close, check_fn, check_model, record_graphs
from torch import nn

aten = torch.ops.aten
# Convolutions / attention sum many products; float32 reassociation differs from eager's
# kernels by a few ulps times the reduction length, so they get 1e-4 absolute.
ACC = {"rtol": 1e-5, "atol": 1e-4}
# bfloat16 has 8 mantissa bits, float16 11: one rounding of a result is ~4e-3 / ~5e-4.
LOW = {torch.float16: {"rtol": 2e-3, "atol": 2e-3}, torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2}}


def ge_ops(graphs) -> set[str]:
    return {op.type for g in graphs for op in g.lowered.graph.ops}


def check_grad(fn, *inputs, rtol: float = 1e-5, atol: float = 1e-5, ge_backward: bool = True):
    """Compiled (strict) vs eager: outputs and the gradient of every floating input
    (``ge_backward``: the backward graph must also have compiled to GE; otherwise the backward
    is an eager fallback, which the caller says by passing ``ge_backward=False``)."""
    torch._dynamo.reset()
    leaves = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    ref = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    with record_graphs() as graphs:
        options = STRICT if ge_backward else {**STRICT, "fallback": "eager"}
        actual = torch.compile(fn, backend="npu", options=options)(*leaves)
        expected = fn(*ref)
        assert_close(actual, expected, rtol, atol, "output")
        outs = actual if isinstance(actual, tuple) else (actual,)
        grads = [torch.randn_like(o) for o in outs]
        torch.autograd.backward(outs, grads)
        torch.autograd.backward(expected if isinstance(expected, tuple) else (expected,), grads)
    for i, (a, e) in enumerate(zip(leaves, ref)):
        if e.grad is not None:
            assert_close(a.grad, e.grad, rtol, atol, f"grad of input {i}")
    kinds = {g.name.split("_")[0] for g in graphs}
    assert {"forward", "backward"} <= kinds if ge_backward else "forward" in kinds, kinds
    return graphs


# ---- convolution ----------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    {}, {"stride": 2, "padding": 1}, {"padding": (1, 2), "dilation": 2}, {"groups": 2}])
def test_conv2d_fwd_bwd(kw):
    x, w, b = torch.randn(2, 4, 7, 6), torch.randn(6, 4 // kw.get("groups", 1), 3, 3), \
        torch.randn(6)
    graphs = check_grad(lambda x, w, b: F.conv2d(x, w, b, **kw), x, w, b, **ACC)
    assert {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"} <= ge_ops(graphs)


def test_conv2d_no_bias_stride_odd():
    check_grad(lambda x, w: F.conv2d(x, w, stride=2), torch.randn(1, 3, 8, 8),
               torch.randn(4, 3, 2, 2), **ACC)


def test_conv1d_fwd_bwd():
    check_grad(lambda x, w, b: F.conv1d(x, w, b, padding=1, stride=2), torch.randn(2, 3, 9),
               torch.randn(5, 3, 3), torch.randn(5), **ACC)


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1, "output_padding": 1},
                                {"groups": 2, "dilation": 2}])
def test_conv_transpose2d_fwd_bwd(kw):
    x, w = torch.randn(2, 4, 5, 5), torch.randn(4, 6 // kw.get("groups", 1), 3, 3)
    graphs = check_grad(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), x, w,
                        torch.randn(6 // kw.get("groups", 1) * kw.get("groups", 1)), **ACC)
    assert "Conv2DTranspose" not in ge_ops(graphs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_conv2d_low_precision(dtype):
    x, w, b = (torch.randn(*s).to(dtype) for s in ((1, 3, 6, 6), (4, 3, 3, 3), (4,)))
    check_fn(lambda x, w, b: F.conv2d(x, w, b, padding=1), x, w, b, **LOW[dtype])


# ---- pooling --------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
                                {"kernel_size": 2, "dilation": 2, "ceil_mode": True}])
def test_max_pool2d_fwd_bwd(kw):
    graphs = check_grad(lambda x: F.max_pool2d(x, **kw), torch.randn(2, 3, 7, 7))
    assert {"MaxPoolWithArgmaxV1", "MaxPoolGradWithArgmaxV1"} <= ge_ops(graphs)


def test_max_pool2d_indices_match_torch():
    x = torch.randn(2, 3, 6, 5)
    check_fn(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x)


@pytest.mark.parametrize("fn,shape", [(lambda x: F.avg_pool2d(x, 3, 2, 1), (3, 7, 6)),
                                      (lambda x: F.avg_pool3d(x, 2), (2, 4, 4, 4)),
                                      (lambda x: F.max_pool2d(x, 2), (2, 5, 4))])
def test_unbatched_pooling_pools_a_batch_of_one(fn, shape):
    """The device's pooling kernels take NCHW/NCDHW only (device rule ``layout``)."""
    graphs = check_grad(fn, torch.randn(shape))
    pools = [op for g in graphs for op in g.lowered.graph.ops if "Pool" in op.type]
    assert pools and all(len(op.input_descs[-1].shape) == len(shape) + 1 for op in pools)


def test_max_pool2d_unbatched_indices_match_torch():
    check_fn(lambda x: F.max_pool2d(x, 2, 1, dilation=2, return_indices=True),
             torch.randn(3, 7, 6), options={"fallback": "error"})


def test_max_pool2d_indices_dynamic_sizes():
    """Indices decoded from the V1 mask with N, C, H, W all dynamic: one graph, every size."""
    def fn(x):
        return F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)
    compiled = torch.compile(fn, backend="npu", dynamic=True, options={"fallback": "error"})
    for shape in ((2, 3, 9, 7), (1, 2, 6, 11), (3, 1, 35, 5)):
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), fn(x), rtol=0, atol=0)


@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
                                {"kernel_size": 3, "padding": 1, "count_include_pad": False},
                                {"kernel_size": 2, "ceil_mode": True, "stride": 2},
                                {"kernel_size": 2, "divisor_override": 3}])
def test_avg_pool2d_fwd_bwd(kw):
    graphs = check_grad(lambda x: F.avg_pool2d(x, **kw), torch.randn(2, 3, 7, 7))
    assert {"AvgPoolV2", "AvgPoolV2Grad"} <= ge_ops(graphs)


# ---- normalization --------------------------------------------------------------------
def test_batch_norm_train_updates_running_stats():
    graphs = check_model(nn.BatchNorm2d(3, momentum=0.3), (torch.randn(4, 3, 5, 5) * 2 + 1,),
                         train=True)
    assert {"BatchNormV3", "BatchNormGradV3"} <= ge_ops(graphs)


def test_batch_norm_no_affine_1d():
    rm, rv = torch.zeros(5), torch.ones(5)
    check_grad(lambda x: F.batch_norm(x, rm.clone(), rv.clone(), training=True),
               torch.randn(6, 5))


def test_batch_norm_input_grad():
    w, b, rm, rv = torch.rand(3) + 0.5, torch.randn(3), torch.randn(3), torch.rand(3) + 0.5
    check_grad(lambda x: F.batch_norm(x, rm.clone(), rv.clone(), w, b, True, 0.1, 1e-5),
               torch.randn(4, 3, 2, 2))


def test_batch_norm_eval():
    bn = nn.BatchNorm2d(3)
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2.0)
    graphs = check_model(bn, (torch.randn(2, 3, 4, 4),), train=False)
    assert "BNInfer" in ge_ops(graphs)


def test_layer_norm_fwd_bwd():
    graphs = check_model(nn.LayerNorm((4, 6)), (torch.randn(3, 4, 6),), train=True)
    assert {"LayerNormV4", "LayerNormGradV3"} <= ge_ops(graphs)
    check_grad(lambda x, w, b: F.layer_norm(x, (6,), w, b), torch.randn(2, 3, 6),
               torch.randn(6), torch.randn(6))


def test_layer_norm_no_affine_grad():
    check_grad(lambda x: F.layer_norm(x, (8,)), torch.randn(4, 8))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layer_norm_low_precision(dtype):
    x, w, b = (torch.randn(*s).to(dtype) for s in ((3, 16), (16,), (16,)))
    check_fn(lambda x, w, b: F.layer_norm(x, (16,), w, b), x, w, b, **LOW[dtype])


# ---- softmax --------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_fwd_bwd(dim):
    graphs = check_grad(lambda x: torch.softmax(x, dim), torch.randn(3, 4, 5))
    assert {"SoftmaxV2", "SoftmaxGrad"} <= ge_ops(graphs)


@pytest.mark.parametrize("dim", [-1, 1])
def test_log_softmax_fwd_bwd(dim):
    graphs = check_grad(lambda x: torch.log_softmax(x, dim), torch.randn(3, 4, 5))
    assert {"LogSoftmaxV2", "LogSoftmaxGrad"} <= ge_ops(graphs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_softmax_low_precision(dtype):
    x = torch.randn(4, 32).to(dtype)
    check_fn(lambda x: torch.softmax(x, -1), x, **LOW[dtype])
    check_fn(lambda x: torch.log_softmax(x, -1), x, **LOW[dtype])


# ---- embedding ------------------------------------------------------------------------
def test_embedding_fwd_bwd():
    emb = nn.Embedding(10, 4)
    graphs = check_model(emb, (torch.tensor([[1, 2, 2], [9, 0, 1]]),), train=True)
    assert {"GatherV2", "EmbeddingDenseGrad"} <= ge_ops(graphs)


def test_embedding_padding_idx_grad():
    check_model(nn.Embedding(8, 3, padding_idx=2), (torch.tensor([2, 3, 2, 7]),), train=True)


# ---- attention ------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.3},
                                {"is_causal": True, "enable_gqa": True}])
def test_sdpa_fwd_bwd(kw):
    hk = 2 if kw.get("enable_gqa") else 4
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, hk, 5, 8), torch.randn(2, hk, 5, 8)
    graphs = check_grad(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw), q, k, v,
                        **ACC)
    assert {"BatchMatMulV2", "SoftmaxV2", "SoftmaxGrad"} <= ge_ops(graphs)


def test_sdpa_float_mask_cross_lengths():
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 5)
    mask = torch.randn(1, 2, 3, 6)
    check_grad(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
               q, k, v, **ACC)



def test_sdpa_inference_computes_no_unused_logsumexp():
    """The logsumexp output is only read by a backward; inference graphs skip it."""
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    with torch.no_grad():
        graphs = check_fn(lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=True), q, k, v, **ACC)
    assert "SoftmaxV2" in ge_ops(graphs)
    assert "ReduceLogSumExp" not in ge_ops(graphs)

# ---- losses ---------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_fwd_bwd(reduction):
    target = torch.tensor([1, 0, 4, 2])
    graphs = check_grad(lambda x: F.cross_entropy(x, target, reduction=reduction),
                        torch.randn(4, 5))
    assert {"NLLLoss", "NLLLossGrad", "LogSoftmaxV2"} <= ge_ops(graphs)


def test_nll_loss_weight_ignore_index():
    target, weight = torch.tensor([1, 0, 4, 2]), torch.rand(5)
    check_grad(lambda x: F.nll_loss(x, target, weight, ignore_index=0), torch.randn(4, 5))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_fwd_bwd(reduction):
    graphs = check_grad(lambda x, y: F.mse_loss(x, y, reduction=reduction), torch.randn(3, 4),
                        torch.randn(3, 4))
    assert {"MseLoss", "MseLossGrad"} <= ge_ops(graphs)


# ---- group norm, spatial, distances ---------------------------------------------------
def test_group_norm_fwd_bwd():
    graphs = check_model(nn.GroupNorm(2, 4), (torch.randn(2, 4, 3, 3),), train=True)
    assert {"GroupNormV2", "GroupNormGrad"} <= ge_ops(graphs)
    check_grad(lambda x: F.group_norm(x, 3), torch.randn(2, 6, 5))


@pytest.mark.parametrize("size", [(3, 2), (2, 1), (4, 4)])
def test_adaptive_avg_pool2d_fwd_bwd(size):
    graphs = check_grad(lambda x: F.adaptive_avg_pool2d(x, size), torch.randn(2, 3, 7, 5))
    assert {"AdaptiveAvgPool2d", "AdaptiveAvgPool2dGrad"} <= ge_ops(graphs)


@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1,
                                                     "count_include_pad": False}])
def test_avg_pool3d_fwd_bwd(kw):
    graphs = check_grad(lambda x: F.avg_pool3d(x, **kw), torch.randn(1, 2, 5, 4, 6))
    assert {"AvgPool3D", "AvgPool3DGrad"} <= ge_ops(graphs)


@pytest.mark.parametrize("mode,padding", [("bilinear", "zeros"), ("nearest", "border"),
                                          ("bilinear", "reflection")])
def test_grid_sample_fwd_bwd(mode, padding):
    grid = torch.rand(2, 3, 4, 2) * 2.2 - 1.1
    graphs = check_grad(lambda x, g: F.grid_sample(x, g, mode, padding, align_corners=False),
                        torch.randn(2, 3, 5, 6), grid)
    assert {"GridSampler2D", "GridSampler2DGrad"} <= ge_ops(graphs)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_cdist_fwd_bwd(p):
    graphs = check_grad(lambda a, b: torch.cdist(a, b, p), torch.randn(2, 3, 4),
                        torch.randn(2, 5, 4))
    assert {"Cdist", "CdistGrad"} <= ge_ops(graphs)


# ---- more losses, patches, batch norm without running stats ---------------------------
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_nll_loss2d_fwd_bwd(reduction):
    target = torch.randint(0, 3, (2, 4, 5))
    graphs = check_grad(lambda x: F.cross_entropy(x, target, reduction=reduction),
                        torch.randn(2, 3, 4, 5))
    assert {"NLLLoss", "NLLLossGrad"} <= ge_ops(graphs)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_fwd_bwd(reduction):
    p, t, w = torch.rand(3, 4) * 0.9 + 0.05, torch.rand(3, 4), torch.rand(4)
    graphs = check_grad(lambda p: F.binary_cross_entropy(p, t, w, reduction=reduction), p)
    assert {"BinaryCrossEntropy", "BinaryCrossEntropyGrad"} <= ge_ops(graphs)


def test_binary_cross_entropy_with_logits():
    t, pw = torch.rand(3, 4), torch.rand(4) + 0.5
    graphs = check_fn(lambda x: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
                      torch.randn(3, 4))
    assert "SigmoidCrossEntropyWithLogitsV2" in ge_ops(graphs)


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_smooth_l1_loss_fwd_bwd(beta):
    graphs = check_grad(lambda x, y: F.smooth_l1_loss(x, y, beta=beta), torch.randn(3, 4),
                        torch.randn(3, 4))
    assert {"SmoothL1LossV2", "SmoothL1LossGradV2"} <= ge_ops(graphs)


def test_soft_margin_loss_fwd_bwd():
    target = torch.randint(0, 2, (3, 4)).float() * 2 - 1
    graphs = check_grad(lambda x: F.soft_margin_loss(x, target, reduction="sum"),
                        torch.randn(3, 4))
    assert {"SoftMarginLoss", "SoftMarginLossGrad"} <= ge_ops(graphs)


def test_unfold_fold_fwd_bwd():
    graphs = check_grad(lambda x: F.unfold(x, 2, dilation=1, padding=1, stride=2),
                        torch.randn(2, 3, 5, 4))
    assert {"Im2col", "Col2im"} <= ge_ops(graphs)
    check_grad(lambda c: F.fold(c, (4, 5), (2, 3), padding=(1, 0)), torch.randn(2, 12, 15))


def test_adaptive_max_pool2d_indices():
    check_fn(lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True),
             torch.randn(2, 3, 7, 5))


def test_batch_norm_without_running_stats():
    graphs = check_model(nn.BatchNorm2d(3, track_running_stats=False),
                         (torch.randn(4, 3, 2, 2),), train=True)
    assert "BatchNormV3" in ge_ops(graphs)
    check_grad(lambda x: F.batch_norm(x, None, None, training=True), torch.randn(4, 3, 2))


# ---- low precision through casts (GE prototypes without that dtype) -------------------
def test_batch_norm_float16_train():
    check_model(nn.BatchNorm2d(3).half(), (torch.randn(4, 3, 2, 2).half(),), train=True,
                **LOW[torch.float16])


def test_batch_norm_bfloat16_eval():
    graphs = check_model(nn.BatchNorm2d(3).bfloat16(), (torch.randn(4, 3, 2, 2).bfloat16(),),
                         train=False, **LOW[torch.bfloat16])
    assert "BNInfer" in ge_ops(graphs)


@pytest.mark.parametrize("op", [lambda x: F.avg_pool2d(x, 2), lambda x: F.max_pool2d(x, 2),
                                lambda x: F.adaptive_avg_pool2d(x, 3)])
def test_pooling_bfloat16(op):
    check_grad(op, torch.randn(1, 3, 6, 6).bfloat16(), **LOW[torch.bfloat16])


# ---- pdist, embedding bag -------------------------------------------------------------
def test_pdist_forward():
    graphs = check_fn(lambda x: F.pdist(x, 3.0), torch.randn(5, 4))
    assert "Pdist" in ge_ops(graphs)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_forward(mode):
    bag = nn.EmbeddingBag(10, 3, mode=mode)
    with torch.no_grad():
        graphs = check_fn(bag, torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 5]))
    assert "EmbeddingBag" in ge_ops(graphs)


def test_batch_norm_with_update_op():
    """torch's newer training batch-norm op; returns running stats updated in place."""
    def fn(x, w, b, rm, rv):
        out = aten._batch_norm_with_update(x, w, b, rm, rv, 0.2, 1e-5)
        return out[0], out[1], out[2], rm, rv

    check_fn(fn, torch.randn(4, 3, 5), torch.rand(3) + 0.5, torch.randn(3), torch.randn(3),
             torch.rand(3) + 0.5)


@pytest.mark.parametrize("fn", [
    lambda x, t: F.mse_loss(x, t), lambda x, t: F.smooth_l1_loss(x, t, beta=0.5),
    lambda x, t: F.binary_cross_entropy_with_logits(x, t),
    lambda x, t: F.binary_cross_entropy(torch.sigmoid(x), t.clamp(0, 1)),
    lambda x, t: F.soft_margin_loss(x, t.detach().sign())])
def test_losses_bfloat16_run_in_float32(fn):
    x, t = torch.randn(3, 4).bfloat16(), torch.rand(3, 4).bfloat16()
    check_grad(fn, x, t, **LOW[torch.bfloat16])


def test_embedding_bag_and_adaptive_max_pool_bfloat16():
    bag = nn.EmbeddingBag(10, 3, mode="mean").bfloat16()
    with torch.no_grad():
        check_fn(bag, torch.tensor([1, 2, 4, 5, 4]), torch.tensor([0, 2]), **LOW[torch.bfloat16])
    check_fn(lambda x: F.adaptive_max_pool2d(x, 2, return_indices=True),
             torch.randn(1, 2, 5, 4).bfloat16(), **LOW[torch.bfloat16])


@pytest.mark.fallback("a dynamic-size conv_transpose2d is refused and must run in eager")
def test_dynamic_batch_matches_eager():
    """Converters that bake sizes into constants refuse dynamic dims (the node runs in
    eager) instead of building a wrong graph."""
    torch._dynamo.reset()
    w = torch.randn(3, 2, 3, 3)
    fn = lambda x: F.conv_transpose2d(x, w, stride=2).softmax(1)  # noqa: E731
    compiled = torch.compile(fn, backend="npu", dynamic=True)
    for batch in (2, 3):
        x = torch.randn(batch, 3, 4, 4)
        assert_close(compiled(x), fn(x), 1e-5, 1e-4, f"batch {batch}")


@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1,
                                                     "dilation": 1, "ceil_mode": True}])
def test_max_pool3d_indices_and_grad(kw):
    x = torch.randn(1, 2, 5, 6, 4)
    graphs = check_fn(lambda x: F.max_pool3d(x, return_indices=True, **kw), x)
    assert "MaxPool3DWithArgmaxV2" in ge_ops(graphs)
    # fallback: no GE converter for max_pool3d_with_indices_backward; it runs in eager on the
    # GE forward's indices
    check_grad(lambda x: F.max_pool3d(x, **kw), x, ge_backward=False)
