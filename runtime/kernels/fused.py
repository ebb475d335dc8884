"""Host kernels of the GE fused ops, on torch's fused CPU kernels where they exist
(``_fused_rms_norm``, ``scaled_dot_product_attention``)."""

from __future__ import annotations

import itertools
import weakref

import torch
import torch.nn.functional as F

from npu_inductor.runtime.kernels import kernel

aten = torch.ops.aten


@kernel("RmsNorm", outs=True)
def rms_norm(x, gamma, epsilon=1e-6, out=None):
    """x * rsqrt(mean(x^2) + eps) * gamma, in fp32 for low-precision input. Four torch ops
    with in-place updates: at decode sizes cheaper than ``_fused_rms_norm``, which is a
    composite on CPU (the same ops plus dispatch and dtype checks around them). ``out``:
    (y, rstd), each a tensor to write into or None."""
    y_out, rstd_out = out if out is not None else (None, None)
    xf = x if x.dtype == torch.float32 else x.float()
    sq = torch.mul(xf, xf)
    rstd = (sq.mean(-1, keepdim=True) if rstd_out is None else
            torch.mean(sq, -1, keepdim=True, out=rstd_out.view(sq.shape[:-1] + (1,))))
    rstd = rstd.add_(epsilon).rsqrt_()
    if x.dtype == torch.float32 and gamma.dtype == torch.float32:
        y = torch.mul(xf, rstd, out=y_out).mul_(gamma)
    else:
        y = torch.mul(xf, rstd).mul_(gamma.float())
        y = y.to(x.dtype) if y_out is None else y_out.copy_(y)
    return y, (rstd if rstd_out is None else rstd_out)


@kernel("AddRmsNorm", outs=True)
def add_rms_norm(x1, x2, gamma, epsilon=1e-6, out=None):
    """``out``: (y, rstd, x), each a tensor to write into or None."""
    y_out, rstd_out, x_out = out if out is not None else (None, None, None)
    x = torch.add(x1, x2, out=x_out)
    y, rstd = rms_norm(x, gamma, epsilon, out=(y_out, rstd_out))
    return y, rstd, x


def _bnsd(t, layout):
    return t.transpose(1, 2) if layout in ("BSND", "BSH") else t


def _layout_out(y, layout, out=None):
    """BNSD attention result in the op's layout; with ``out`` one copy straight into it."""
    if layout in ("BSND", "BSH"):
        y = y.transpose(1, 2)
    if out is not None:
        out.view(y.shape).copy_(y)
        return out
    return y.contiguous().flatten(2) if layout == "BSH" else y.contiguous()


def _split_bsh(t, heads, layout):
    if layout != "BSH":
        return t
    b, s, h = t.shape
    return t.reshape(b, s, heads, h // heads)


def _band(sq, skv, pre_tokens, next_tokens):
    """Keys query i may see under sparse_mode 0: i - pre_tokens <= j <= i + next_tokens."""
    i = torch.arange(sq).unsqueeze(1)
    j = torch.arange(skv).unsqueeze(0)
    return (j <= i + next_tokens) & (j >= i - pre_tokens)


# id(mask) -> (a weak reference to it, (its version, sq, skv, pre, next), plain causal?): a
# graph's mask is a Const that lives as long as the loaded model and is read by every
# attention op, every call (tensors compare elementwise, so the key is the id, the weak
# reference proving it is still the same tensor)
_CAUSAL: dict[int, tuple] = {}
_CAUSAL_MAX = 256


def _plain_causal(atten_mask, sq, skv, pre_tokens, next_tokens):
    """The band is top-left causal and the mask hides nothing inside it: torch's
    ``is_causal`` fast path computes exactly this. The answer is cached per mask tensor and
    its version counter (an in-place write to the mask asks again)."""
    if not (next_tokens == 0 and pre_tokens >= sq and sq == skv and atten_mask.dim() == 2):
        return False
    key = (atten_mask._version, sq, skv, pre_tokens, next_tokens)
    seen = _CAUSAL.get(id(atten_mask))
    if seen is not None and seen[0]() is atten_mask and seen[1] == key:
        return seen[2]
    causal = not atten_mask.tril().any()
    if len(_CAUSAL) >= _CAUSAL_MAX:
        _CAUSAL.clear()
    _CAUSAL[id(atten_mask)] = (weakref.ref(atten_mask), key, causal)
    return causal


def _attention(q, k, v, pse, atten_mask, scale, pre_tokens, next_tokens):
    """softmax(q k^T * scale + pse, masked where atten_mask != 0) v, q/k/v in BNSD."""
    sq, skv = q.shape[-2], k.shape[-2]
    gqa = k.shape[1] != q.shape[1]
    bias, causal = pse, False
    if atten_mask is not None:
        if pse is None and _plain_causal(atten_mask, sq, skv, pre_tokens, next_tokens):
            causal = True
        else:
            keep = _band(sq, skv, pre_tokens, next_tokens) & (atten_mask == 0)
            neg = torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, float("-inf"))
            bias = neg if bias is None else bias + neg
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale,
                                          is_causal=causal, enable_gqa=gqa)


@kernel("PromptFlashAttention", out=True)
def prompt_flash_attention(query, key, value, pse_shift=None, atten_mask=None,
                           actual_seq_lengths=None, actual_seq_lengths_kv=None, deq_scale1=None,
                           quant_scale1=None, deq_scale2=None, quant_scale2=None,
                           quant_offset2=None, num_heads=1, scale_value=1.0,
                           pre_tokens=214748647, next_tokens=0, input_layout="BSH",
                           num_key_value_heads=1, sparse_mode=0, inner_precise=1, out=None):
    kvh = num_key_value_heads or num_heads
    q = _bnsd(_split_bsh(query, num_heads, input_layout), input_layout)
    k = _bnsd(_split_bsh(key, kvh, input_layout), input_layout)
    v = _bnsd(_split_bsh(value, kvh, input_layout), input_layout)
    y = _attention(q, k, v, pse_shift, atten_mask, scale_value, pre_tokens, next_tokens)
    return _layout_out(y, input_layout, out)


@kernel("IncreFlashAttention", out=True)
def incre_flash_attention(query, key, value, pse_shift=None, atten_mask=None,
                          actual_seq_lengths=None, *unused, num_heads=1, scale_value=1.0,
                          input_layout="BSH", num_key_value_heads=1, block_size=0,
                          inner_precise=1, out=None, **unused_attrs):
    # the dynamic inputs hold one tensor per batch block: one block is used as it is
    key = key[0] if len(key) == 1 else torch.cat(list(key), 0)
    value = value[0] if len(value) == 1 else torch.cat(list(value), 0)
    kvh = num_key_value_heads or num_heads
    q = _bnsd(_split_bsh(query, num_heads, input_layout), input_layout)
    k = _bnsd(_split_bsh(key, kvh, input_layout), input_layout)
    v = _bnsd(_split_bsh(value, kvh, input_layout), input_layout)
    bias = None
    if atten_mask is not None:
        bias = torch.zeros(atten_mask.shape, dtype=q.dtype).masked_fill(atten_mask != 0,
                                                                         float("-inf"))
    if pse_shift is not None:
        bias = pse_shift if bias is None else bias + pse_shift
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale_value,
                                       enable_gqa=k.shape[1] != q.shape[1])
    return _layout_out(y, input_layout, out)


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


_SIGNS: dict[tuple[int, torch.dtype], torch.Tensor] = {}


def _signed_sin(r2):
    """rotate_half(x) * sin == roll(x, d/2) * cat(-sin[:d/2], sin[d/2:]) exactly (a sign
    flip is exact), so the sign moves onto sin, once per call for query and key both."""
    d = r2.shape[-1]
    sign = _SIGNS.get((d, r2.dtype))
    if sign is None:
        sign = _SIGNS[(d, r2.dtype)] = torch.cat([-torch.ones(d // 2, dtype=r2.dtype),
                                                  torch.ones(d - d // 2, dtype=r2.dtype)])
    return r2 * sign


def _rotary(x, r1, signed, out=None):
    """Even width only (the roll identity pairs i with i + d/2)."""
    if out is not None:
        return torch.mul(x, r1, out=out).addcmul_(x.roll(x.shape[-1] // 2, -1), signed)
    if r1.shape != signed.shape:  # the broadcast shape may grow: no in-place update
        return torch.addcmul(x * r1, x.roll(x.shape[-1] // 2, -1), signed)
    return (x * r1).addcmul_(x.roll(x.shape[-1] // 2, -1), signed)


@kernel("RotaryMul", out=True)
def rotary_mul(x, r1, r2, out=None):
    """x * r1 + rotate_half(x) * r2: a multiply, a roll and one in-place addcmul (``out``:
    written there, contiguous even when ``x`` is a strided Transpose result)."""
    if x.shape[-1] % 2:
        return torch.addcmul(x * r1, _rotate_half(x), r2, out=out)
    return _rotary(x, r1, _signed_sin(r2), out)


@kernel("ApplyRotaryPosEmb", outs=True)
def apply_rotary_pos_emb(query, key, cos, sin, layout=1, rotary_mode="half", out=None):
    """``out``: (query, key) results, each a tensor to write into or None."""
    if rotary_mode != "half":
        raise ValueError(f"ApplyRotaryPosEmb: rotary_mode {rotary_mode!r} not supported")
    q_out, k_out = out if out is not None else (None, None)
    if query.shape[-1] % 2:
        return rotary_mul(query, cos, sin, out=q_out), rotary_mul(key, cos, sin, out=k_out)
    signed = _signed_sin(sin)
    return _rotary(query, cos, signed, q_out), _rotary(key, cos, signed, k_out)


@kernel("SwiGlu", out=True)
def swiglu(x, dim=-1, out=None):
    a, b = x.chunk(2, dim=dim)
    return torch.mul(F.silu(a), b, out=out)


@kernel("Gelu", out=True)
def gelu(x, out=None):
    return F.gelu(x, approximate="tanh") if out is None else \
        torch._C._nn.gelu(x, approximate="tanh", out=out)


def _fas_mask(q, k, atten_mask, pre_tockens, next_tockens):
    """(is_causal, additive float mask or None) for torch's CPU flash kernels."""
    if atten_mask is None:
        return False, None
    sq, skv = q.shape[-2], k.shape[-2]
    if _plain_causal(atten_mask, sq, skv, pre_tockens, next_tockens):
        return True, None
    keep = _band(sq, skv, pre_tockens, next_tockens) & (atten_mask == 0)
    return False, torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, float("-inf"))


def _stat(t, dst=None):
    """A softmax statistic [B, N, S] as GE's [B, N, S, 8] (the value repeated), written into
    ``dst`` when given."""
    wide = t.unsqueeze(-1).expand(*t.shape, 8)
    return wide.contiguous() if dst is None else dst.copy_(wide)


def _ones_stat(like, dst=None):
    """The softmax sum GE returns next to the max (ours is folded into the log-sum-exp:
    ones), written into ``dst`` when given."""
    if dst is None:
        return torch.ones(*like.shape, 8, dtype=like.dtype)
    return dst.fill_(1)


@kernel("FlashAttentionScore", outs=True)
def flash_attention_score(query, key, value, real_shift=None, drop_mask=None, padding_mask=None,
                          atten_mask=None, *unused, scale_value=1.0, keep_prob=1.0,
                          pre_tockens=2147483647, next_tockens=2147483647, head_num=1,
                          input_layout="BNSD", inner_precise=1, sparse_mode=0, out=None):
    """(softmax_max, softmax_sum, softmax_out, attention_out). ``out``: a tensor per result
    to write it into, or None: the statistics are written there directly, the attention
    result copied (torch's CPU flash kernel has no ``out=``)."""
    if input_layout != "BNSD" or real_shift is not None or keep_prob != 1.0:
        raise ValueError("FlashAttentionScore host kernel: BNSD, no pse, no dropout only")
    max_out, sum_out, _, att_out = out if out is not None else (None, None, None, None)
    causal, bias = _fas_mask(query, key, atten_mask, pre_tockens, next_tockens)
    y, lse = aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, 0.0, causal, attn_mask=bias, scale=scale_value)
    return (_stat(lse, max_out), _ones_stat(lse, sum_out), query.new_empty([0]),
            _put(y, att_out))


# Below this many keys a bf16/fp16 FlashAttentionScoreGrad runs the attention backward as a
# few fp32 matmuls (``_attention_grad_math``) instead of torch's CPU flash backward, which
# costs ~4x that at short sequences in low precision (2 x 4 x 32 x 32 bf16: ~890 us against
# ~210 us; in fp32 the flash backward is the faster, ~90 us); the same bound as the fused
# fp32 grad chain's (``attention_grad_chain``).
FLASH_GRAD_MIN_KEYS = 256


def _attention_grad_math(q, k, v, dy, causal, scale):
    """(dq, dk, dv) of softmax(q k^T * scale [causal]) v in fp32, rounded once to q's dtype:
    the probabilities recomputed, grouped key/value heads shared by G query heads (their
    gradients summed over the group)."""
    b, n, sq, d = q.shape
    nk, skv = k.shape[1], k.shape[-2]
    g = n // nk
    qf, kf, vf, dyf = (t.float() for t in (q, k, v, dy))
    if g > 1:
        kf, vf = (t.unsqueeze(2).expand(b, nk, g, skv, t.shape[-1]).reshape(
            b, n, skv, t.shape[-1]) for t in (kf, vf))
    s = torch.matmul(qf, kf.mT).mul_(scale)
    if causal:
        s.masked_fill_(_upper(sq, skv), float("-inf"))
    p = torch.softmax(s, -1)
    dv = torch.matmul(p.mT, dyf)
    dp = torch.matmul(dyf, vf.mT)
    ds = dp.sub_((dp * p).sum(-1, keepdim=True)).mul_(p).mul_(scale)
    dq = torch.matmul(ds, kf)
    dk = torch.matmul(ds.mT, qf)
    if g > 1:
        dk, dv = (t.view(b, nk, g, skv, t.shape[-1]).sum(2) for t in (dk, dv))
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


_UPPER: dict[tuple[int, int], torch.Tensor] = {}
_UPPER_MAX = 32  # sizes kept (a dynamic graph's backward meets a new one per length)


def _upper(sq, skv):
    """The keys a top-left causal band hides (j > i), cached per size (at most
    ``_UPPER_MAX`` sizes: the oldest is dropped first)."""
    m = _UPPER.get((sq, skv))
    if m is None:
        if len(_UPPER) >= _UPPER_MAX:
            del _UPPER[next(iter(_UPPER))]
        m = _UPPER[(sq, skv)] = torch.ones(sq, skv, dtype=torch.bool).triu(1)
    return m


@kernel("FlashAttentionScoreGrad", outs=True)
def flash_attention_score_grad(query, key, value, dy, pse_shift=None, drop_mask=None,
                               padding_mask=None, atten_mask=None, softmax_max=None,
                               softmax_sum=None, softmax_in=None, attention_in=None, *unused,
                               scale_value=1.0, keep_prob=1.0, pre_tockens=65536,
                               next_tockens=65536, head_num=1, input_layout="BNSD",
                               inner_precise=1, sparse_mode=0, out=None):
    """(dq, dk, dv, dpse). ``out``: a tensor per result to copy it into, or None."""
    if input_layout != "BNSD" or pse_shift is not None or keep_prob != 1.0:
        raise ValueError("FlashAttentionScoreGrad host kernel: BNSD, no pse, no dropout only")
    causal, bias = _fas_mask(query, key, atten_mask, pre_tockens, next_tockens)
    if query.dtype != torch.float32 and key.shape[-2] < FLASH_GRAD_MIN_KEYS \
            and (causal or bias is None):
        dq, dk, dv = _attention_grad_math(query, key, value, dy, causal, scale_value)
    else:
        lse = softmax_max[..., 0] + softmax_sum[..., 0].log()
        dq, dk, dv = aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dy, query, key, value, attention_in, lse, 0.0, causal, attn_mask=bias,
            scale=scale_value)
    if out is None:
        return dq, dk, dv, query.new_empty([0])
    return (_put(dq, out[0]), _put(dk, out[1]), _put(dv, out[2]),
            query.new_empty([0]) if out[3] is None else out[3])


# ---- backward ops of the training fusions ---------------------------------------------------
@kernel("RmsNormGrad", outs=True)
def rms_norm_grad(dy, x, rstd, gamma, out=None):
    """(dx, dgamma in fp32) of y = x * rstd * gamma, computed in fp32 (updated in place):
    dx = rstd * (dn - normed * mean(dn * normed)), dn = dy * gamma, normed = x * rstd.
    ``out``: (dx, dgamma), each a tensor to write into or None."""
    dx_out, dgamma_out = out if out is not None else (None, None)
    dyf = dy.float()
    normed = x.float() * rstd
    dn = dyf * gamma.float()
    mean = (dn * normed).mean(-1, keepdim=True)
    rows = (dyf * normed).reshape(-1, x.shape[-1])
    dgamma = rows.sum(0) if dgamma_out is None else torch.sum(rows, 0, out=dgamma_out)
    dn.sub_(normed.mul_(mean))
    if dx_out is None:
        return dn.mul_(rstd).to(x.dtype), dgamma
    if dx_out.dtype == torch.float32:
        return torch.mul(dn, rstd, out=dx_out), dgamma
    return dx_out.copy_(dn.mul_(rstd)), dgamma


def _put(t, dst):
    """``t``, or ``dst`` holding it (a multi-output kernel's ``out=`` entry)."""
    return t if dst is None else dst.copy_(t)


def _reduce_to(t, shape):
    """Sum a broadcast gradient back to ``shape``."""
    while t.dim() > len(shape):
        t = t.sum(0)
    dims = [i for i, (a, b) in enumerate(zip(t.shape, shape)) if b == 1 and a != 1]
    return t.sum(dims, keepdim=True) if dims else t


@kernel("RotaryPositionEmbeddingGrad", outs=True)
def rotary_position_embedding_grad(dy, cos, sin, x=None, mode=0, out=None):
    """mode 0 (rotate-half): dx = dy * cos + rotate_half^T(dy * sin); dcos = dy * x,
    dsin = dy * rotate_half(x) reduced to cos's shape (zeros without ``x``). ``out``:
    (dx, dcos, dsin), each a tensor to write into or None."""
    if mode != 0:
        raise ValueError(f"RotaryPositionEmbeddingGrad: mode {mode} is not implemented here")
    dx_out, dcos_out, dsin_out = out if out is not None else (None, None, None)
    h = dy.shape[-1] // 2
    if x is None and dy.shape[-1] % 2 == 0:
        # rotate_half^T(g) = cat(g2, -g1) with g = dy * sin: dy * cos, then the halves of g
        # added / subtracted in place (no cat, no roll), in fp32; the unused dcos / dsin are
        # zeros without a buffer of their own (expanded)
        dyf = dy.float()
        g = dyf * sin.float()
        direct = dx_out is not None and dx_out.dtype == torch.float32
        dx = torch.mul(dyf, cos.float(), out=dx_out) if direct else dyf * cos.float()
        dx[..., :h].add_(g[..., h:])
        dx[..., h:].sub_(g[..., :h])
        zero = cos.new_zeros(())
        return (dx if direct else _put(dx.to(dy.dtype), dx_out),
                _put(zero.expand(cos.shape), dcos_out), _put(zero.expand(sin.shape), dsin_out))
    g = dy.float() * sin.float()
    g1, g2 = g.chunk(2, dim=-1)
    dx = _put((dy.float() * cos.float() + torch.cat((g2, -g1), dim=-1)).to(dy.dtype), dx_out)
    if x is None:
        return dx, _put(torch.zeros_like(cos), dcos_out), _put(torch.zeros_like(sin), dsin_out)
    x1, x2 = x.float().chunk(2, dim=-1)
    dcos = _reduce_to(dy.float() * x.float(), cos.shape).to(cos.dtype)
    dsin = _reduce_to(dy.float() * torch.cat((-x2, x1), dim=-1), sin.shape).to(sin.dtype)
    return dx, _put(dcos, dcos_out), _put(dsin, dsin_out)


@kernel("SwiGluGrad", out=True)
def swiglu_grad(y_grad, x, dim=-1, out=None):
    """d(silu(a) * b) with (a, b) = x's halves, both halves written in place into one buffer
    (``out`` when given). fp32: from one sigmoid, with s = sigmoid(a), (dy * b * s * (1 + a *
    (1 - s)), dy * a * s) -- silu_backward's formula without the second sigmoid. fp16/bf16:
    eager autograd's ops in the tensor dtype, db = dy * silu(a), da = silu_backward(dy * b,
    a) (``MulBackward0``, ``SiluBackward0``: the product rounded as eager rounds it,
    silu_backward computing in fp32 inside), a third of the fp32 round trip's cost."""
    if x.dtype != torch.float32:
        a, b = x.chunk(2, dim=dim)
        grad = torch.empty(x.shape, dtype=x.dtype) if out is None else out
        da, db = grad.chunk(2, dim=dim)
        torch.mul(y_grad, F.silu(a), out=db)
        aten.silu_backward.grad_input(torch.mul(y_grad, b), a, grad_input=da)
        return grad
    a, b = x.chunk(2, dim=dim)
    dyf = y_grad.float()
    s = torch.sigmoid(a)
    grad = torch.empty(x.shape, dtype=torch.float32) if out is None else out
    da, db = grad.chunk(2, dim=dim)
    torch.mul(a, s, out=db).mul_(dyf)
    torch.mul(dyf, b, out=da).mul_(torch.rsub(s, 1).mul_(a).add_(1).mul_(s))
    return grad


def _grouped_lists(xs, ws, bias, ends, split_item, transpose_weight, transpose_x, group_type):
    """The non-quantized list forms the 910B runs (aclnnGroupedMatmulV4, Atlas A2):
    group_type -1 with split_item 0/1 (x, weight, y lists: y_i = x_i @ w_i), group_type 0
    with split_item 2/3 (x, weight lists, one y: the x_i @ w_i stacked on rows). fp16/bf16
    only (float32 is single-tensor only), 2-D weights, x not transposed; a bias list (one
    per weight) is float16 for float16, float32 for bfloat16, added before the rounding."""
    def refuse(why):
        raise ValueError(f"GroupedMatmul (x: {len(xs)} tensors, weight: {len(ws)}, "
                         f"split_item={split_item}, group_type={group_type}): {why}")
    if len(xs) != len(ws) or len(ws) > 128:
        refuse("x and weight must be lists of one length, at most 128")
    if transpose_x or any(t.dtype not in (torch.float16, torch.bfloat16) for t in (*xs, *ws)):
        refuse("only float16/bfloat16 x and weight, x not transposed")
    if any(w.dim() != 2 for w in ws) or any(x.dtype != xs[0].dtype for x in (*xs, *ws)):
        refuse("weights must be 2-D, all tensors of one dtype")
    ws = [w.mT if transpose_weight else w for w in ws]
    if bias:
        want = torch.float16 if xs[0].dtype == torch.float16 else torch.float32
        if len(bias) != len(ws) or any(b.dtype != want or b.dim() != 1 for b in bias):
            refuse(f"bias: one 1-D {want} tensor per weight")
        ys = [(torch.matmul(x.float(), w.float()) + b.float()).to(x.dtype)
              for x, w, b in zip(xs, ws, bias)]
    else:
        ys = [torch.matmul(x, w) for x, w in zip(xs, ws)]
    if group_type == -1 and split_item in (0, 1):
        if ends is not None or len({x.dim() for x in xs}) != 1 or not 2 <= xs[0].dim() <= 6:
            refuse("no group_list; x tensors of one rank in 2..6")
        return ys[0] if len(ys) == 1 else tuple(ys)
    if group_type == 0 and split_item in (2, 3):
        if any(x.dim() != 2 for x in xs) or len({y.shape[1] for y in ys}) != 1:
            refuse("2-D x and weights of equal N")
        if ends is not None and ends.tolist() != list(
                itertools.accumulate(x.shape[0] for x in xs)):
            refuse("group_list must be the cumulative row counts of the x tensors")
        return torch.cat(ys, 0)
    refuse("list forms: group_type -1 with split_item 0/1, or group_type 0 with 2/3")


def _group_bounds(group_list) -> list[tuple[int, int]]:
    ends = [int(e) for e in group_list.tolist()]
    return list(zip([0, *ends[:-1]], ends))


@kernel("GroupedMatmul")
def grouped_matmul(x, weight, bias=(), scale=(), offset=(), antiquant_scale=(),
                   antiquant_offset=(), group_list=None, per_token_scale=None, split_item=0,
                   dtype=0, transpose_weight=False, transpose_x=False, group_type=-1,
                   group_list_type=0, act_type=0, tuning_config=(0,)):
    """Single-tensor forms (split_item 2/3): group_type 0 splits x's rows (weight [E, K, N]
    or [E, N, K] transposed), group_type 2 splits the contracted axis of x stored [K, M]
    (transpose_x) and weight [K, N] into an [E, M, N] result. group_list: cumulative (type
    0) or per-group counts (type 1). Lists of x and weight: ``_grouped_lists``."""
    counts = None if group_list is None else (
        group_list if group_list_type == 0 else group_list.cumsum(0))
    if (len(x) > 1 or len(weight) > 1) and not (scale or offset or antiquant_scale):
        return _grouped_lists(x, weight, bias, counts, split_item, transpose_weight,
                              transpose_x, group_type)
    if len(x) != 1 or len(weight) != 1 or bias or scale or offset or antiquant_scale:
        raise ValueError("GroupedMatmul: only the single-tensor, unquantized form is run here")
    if split_item not in (2, 3) or group_type not in (0, 2) or group_list_type not in (0, 1):
        raise ValueError(f"GroupedMatmul: split_item={split_item}, group_type={group_type}, "
                         f"group_list_type={group_list_type} not supported")
    x, w = x[0], weight[0]
    bounds = _group_bounds(counts)
    if group_type == 0:
        if bounds[-1][1] != x.shape[0]:
            raise ValueError("GroupedMatmul: group_list must end at x's row count")
        w = w.transpose(-1, -2) if transpose_weight else w
        y = x.new_zeros(x.shape[0], w.shape[-1])
        for e, (lo, hi) in enumerate(bounds):
            if hi > lo:
                torch.mm(x[lo:hi], w[e], out=y[lo:hi])
        return y
    if not transpose_x or transpose_weight:
        raise ValueError("GroupedMatmul group_type=2 needs transpose_x and no transpose_weight")
    y = x.new_zeros(len(bounds), x.shape[1], w.shape[1])
    for e, (lo, hi) in enumerate(bounds):
        if hi > lo:
            torch.mm(x[lo:hi].t(), w[lo:hi], out=y[e])
    return y
