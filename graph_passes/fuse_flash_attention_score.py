"""Training attention (fp16/bf16)  ==>  ``npu::flash_attention_score`` (GE
``FlashAttentionScore``) in the forward graph and ``npu::flash_attention_score_grad``
(GE ``FlashAttentionScoreGrad``) in the backward graph.

    out, lse = _scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=s)
      ==>  m, l, _, out = flash_attention_score(q, k, v, causal, s)
           lse = m[..., 0] + log(l[..., 0])                     (what the backward saves)

    dq, dk, dv = _scaled_dot_product_flash_attention_for_cpu_backward(dy, q, k, v, out, lse,
                                                                     0.0, causal, scale=s)
      ==>  dq, dk, dv = flash_attention_score_grad(q, k, v, dy, expand(lse), ones, out,
                                                   causal, s)

AOTAutograd partitions forward and backward before our passes run; the two graphs meet
only in the saved ``lse``. GE's softmax statistics (max, sum) and torch's logsumexp
convert exactly both ways (softmax = exp(s - max) / sum = exp(s - lse) with sum = 1), so
each graph is rewritten on its own. Both GE ops take fp16/bf16 only: fp32 training keeps
the plain attention ops (logged). An explicit ``attn_mask`` is left unfused here.
"""

from __future__ import annotations

import math
import operator

import torch
from torch.fx import GraphModule, Node

from npu_inductor import ops
from npu_inductor.config import NpuConfig
from npu_inductor.graph_passes.common import aten, bump, call, dtype, finish, graph_kind, log, shape

npu = torch.ops.npu
_FWD = aten._scaled_dot_product_flash_attention_for_cpu.default
_BWD = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
_DTYPES = (torch.float16, torch.bfloat16)


def _arg(node: Node, index: int, name: str, default: object) -> object:
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _refusal(node: Node, query: Node) -> str | None:
    if dtype(query) not in _DTYPES:
        return f"FlashAttentionScore takes fp16/bf16, not {dtype(query)}"
    if node.kwargs.get("attn_mask") is not None:
        return "explicit attn_mask"
    if node.target is _FWD and _arg(node, 3, "dropout_p", 0.0) != 0.0:
        return "dropout"
    if node.target is _BWD and _arg(node, 6, "dropout_p", 0.0) != 0.0:
        return "dropout"
    return None


def _scale(node: Node, query: Node) -> float:
    s = node.kwargs.get("scale")
    return float(s) if s is not None else 1.0 / math.sqrt(shape(query)[-1])


def _getitems(node: Node) -> dict[int, Node]:
    return {u.args[1]: u for u in node.users if u.target is operator.getitem}


def _rewrite_forward(gm: GraphModule, node: Node) -> None:
    q, k, v = node.args[:3]
    causal = bool(_arg(node, 4, "is_causal", False))
    outs = _getitems(node)
    with gm.graph.inserting_before(node):
        fused = call(gm, npu.flash_attention_score.default, (q, k, v, causal, _scale(node, q)),
                     like=node)
        m, s, _, out = (call(gm, operator.getitem, (fused, i)) for i in range(4))
        if 1 in outs:
            lse = call(gm, aten.add.Tensor, (
                call(gm, aten.select.int, (m, -1, 0)),
                call(gm, aten.log.default, (call(gm, aten.select.int, (s, -1, 0)),))))
            outs[1].replace_all_uses_with(lse)
    if 0 in outs:
        outs[0].replace_all_uses_with(out)
    bump("fuse_flash_attention_score")


def _rewrite_backward(gm: GraphModule, node: Node) -> None:
    dy, q, k, v, out, lse = node.args[:6]
    causal = bool(_arg(node, 7, "is_causal", False))
    with gm.graph.inserting_before(node):
        # a symbolic size enters FX args as the node computing it, never as a raw SymInt
        stat = [call(gm, aten.sym_size.int, (lse, i)) if isinstance(d, torch.SymInt) else d
                for i, d in enumerate(shape(lse))] + [ops.SOFTMAX_STAT_WIDTH]
        m = call(gm, aten.expand.default, (call(gm, aten.unsqueeze.default, (lse, -1)), stat))
        ones = call(gm, aten.full.default, (stat, 1.0), {"dtype": torch.float32})
        fused = call(gm, npu.flash_attention_score_grad.default,
                     (q, k, v, dy, m, ones, out, causal, _scale(node, q)), like=node)
        grads = [call(gm, operator.getitem, (fused, i)) for i in range(3)]
    for i, user in _getitems(node).items():
        user.replace_all_uses_with(grads[i])
    bump("fuse_flash_attention_score_grad")


def fuse_flash_attention_score(gm: GraphModule, config: NpuConfig) -> GraphModule:
    kind = graph_kind(gm)
    if kind == "inference":
        return gm  # inference attention is fuse_attention's (PromptFlashAttention)
    target, rewrite = (_FWD, _rewrite_forward) if kind == "forward" else (_BWD, _rewrite_backward)
    for node in list(gm.graph.find_nodes(op="call_function", target=target)):
        query = node.args[1 if target is _BWD else 0]
        why = _refusal(node, query)
        if why is not None:
            log.info("fuse_flash_attention_score: %s left unfused in the %s graph: %s",
                     node.name, kind, why)
            continue
        rewrite(gm, node)
    return finish(gm)
