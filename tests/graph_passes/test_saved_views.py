"""Views in graph outputs: a weight's transpose saved for the backward is recomputed there
(graph_passes/saved_views.py), and a graph output that is a view of an input or of an
intermediate is replayed on the returned tensor, not copied (lowering/output_views.py)."""

from __future__ import annotations

import torch
from torch import nn

from npu_inductor.compile_fx import record_reports
from npu_inductor.graph_passes.common import counters

OPTIONS = {"fallback": "error", "device": "host"}


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


def _step(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    out = model(x)
    out.square().sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


def _graphs(reports, kind):
    return [g for r in reports if r.kind == kind for g in r.ge_graphs]


def test_training_saves_weights_not_their_transposes_and_matches_eager():
    x = torch.randn(4, 16)
    ref, model = _mlp(), _mlp()
    before = counters["saved_input_views"]
    with record_reports() as reports:
        out, grads = _step(torch.compile(model, backend="npu", options=OPTIONS), x)
    ref_out, ref_grads = _step(ref, x)
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-6)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)
    assert counters["saved_input_views"] - before >= 1
    (fw,), (bw,) = _graphs(reports, "forward"), _graphs(reports, "backward")
    # the forward hands weights back as the inputs they are; it emits no Transpose
    assert "input" in {s.kind for s in fw.lowered.outputs}
    assert not any(op.type in ("Transpose", "TransposeD") for op in fw.lowered.graph.ops)
    # the backward reads the second weight (8, 32) itself, not a saved (32, 8) transpose
    shapes = {tuple(op.output_descs[0].shape) for op in bw.lowered.graph.data_ops()}
    assert (8, 32) in shapes and (32, 8) not in shapes


def test_output_views_alias_their_base_as_in_eager():
    def fn(w, x):
        y = torch.relu(x @ w)
        return w.t(), y.view(-1), y.view(2, 2, 16).transpose(0, 1), y + 1

    w, x = torch.randn(8, 16), torch.randn(4, 8)
    with record_reports() as reports:
        got = torch.compile(fn, backend="npu", options=OPTIONS)(w, x)
    for g, want in zip(got, fn(w, x)):
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-6)
        assert g.stride() == want.stride()
    assert got[0].data_ptr() == w.data_ptr()  # a view of the input, as eager's
    assert got[1].untyped_storage().data_ptr() == got[2].untyped_storage().data_ptr()
    (graph,) = _graphs(reports, "inference")
    kinds = [s.kind for s in graph.lowered.outputs]
    assert "input_view" in kinds and "ge_view" in kinds
    # the views need no GE op: no Transpose, and the relu is returned once for both
    ops = graph.lowered.graph.ops
    assert not any(op.type in ("Transpose", "TransposeD") for op in ops)
    relu = [op.name for op in ops if op.type == "Relu"]
    assert sum(e.split(":")[0] in relu for e in ops[-1].inputs) == 1


def test_a_written_input_is_not_replayed():
    from npu_inductor.lowering.output_views import split_view

    aten = torch.ops.aten
    g = torch.fx.Graph()
    buf, x = g.placeholder("buf"), g.placeholder("x")
    for node in (buf, x):
        node.meta["val"] = torch.zeros(2, 3)
    view = g.call_function(aten.view.default, (buf, [-1]))
    g.call_function(aten.copy_.default, (buf, x))
    g.output((view,))
    assert split_view(view) == (view, ())  # the output must be the value before the write
    view_of_x = g.call_function(aten.t.default, (x,))
    assert split_view(view_of_x) == (x, (("t.default", ()),))


def test_replay_methods_are_the_recorded_aten_ops():
    """The Tensor methods ``replay`` calls for speed give what the recorded aten op gives
    (same values, sizes, strides, storage offset and base), autograd history included."""
    from npu_inductor.lowering import output_views as ov

    cases = {"detach.default": (), "t.default": (), "reshape.default": ([4, 6],),
             "transpose.int": (0, 1), "permute.default": ([1, 0],),
             "unsqueeze.default": (1,), "select.int": (1, 2), "squeeze.dim": (0,)}
    assert set(cases) == set(ov._METHODS)
    for name, args in cases.items():
        base = torch.randn(6, 4, requires_grad=True) * 1  # a non-leaf: grad_fn kept
        x = base[None] if name == "squeeze.dim" else base
        got, want = ov.replay(x, ((name, args),)), ov._op(name)(x, *args)
        assert got.shape == want.shape and got.stride() == want.stride(), name
        assert got.storage_offset() == want.storage_offset(), name
        assert got.data_ptr() == want.data_ptr() and torch.equal(got, want), name
        assert got.requires_grad == want.requires_grad, name
        assert type(got.grad_fn) is type(want.grad_fn), name
