"""Per-op eager fallback: ops without a GE converter run eagerly between GE partitions."""

from __future__ import annotations

import warnings

import pytest
import torch
from harness import check_fn, check_model, record_graphs

from npu_inductor.compile_fx import (
    GraphReport,
    record_reports,
    reset_fallback_warnings,
)
from npu_inductor.lowering.registry import CONVERTERS, register

pytestmark = pytest.mark.fallback("this file tests the eager fallback itself")

OP_NS = "npu_fallback_test"


# Test-only ops: deliberately without a GE converter (softclip, softclip_grad) or with a
# converter that raises (broken_relu), so they can only run through the fallback.
@torch.library.custom_op(f"{OP_NS}::softclip", mutates_args=())
def softclip(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 3


@softclip.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op(f"{OP_NS}::softclip_grad", mutates_args=())
def softclip_grad(x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    return grad * 3 * (1 - torch.tanh(x) ** 2)


@softclip_grad.register_fake
def _(x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _softclip_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _softclip_backward(ctx, grad):
    return softclip_grad(ctx.saved_tensors[0], grad)


softclip.register_autograd(_softclip_backward, setup_context=_softclip_setup)

SEEN_PTRS: list[int] = []


@torch.library.custom_op(f"{OP_NS}::record_ptr", mutates_args=())
def record_ptr(x: torch.Tensor) -> torch.Tensor:
    SEEN_PTRS.append(x.data_ptr())
    return x + 1


@record_ptr.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op(f"{OP_NS}::broken_relu", mutates_args=())
def broken_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


@broken_relu.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


BROKEN = torch.ops.npu_fallback_test.broken_relu.default
if BROKEN not in CONVERTERS:
    @register(BROKEN)
    def _broken_converter(ctx, x):
        """broken_relu(Tensor x) -> Tensor"""
        raise RuntimeError("converter bug for the test")


@torch.library.custom_op(f"{OP_NS}::unloadable", mutates_args=())
def unloadable(x: torch.Tensor) -> torch.Tensor:
    return x * 5


@unloadable.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


UNLOADABLE = torch.ops.npu_fallback_test.unloadable.default
if UNLOADABLE not in CONVERTERS:
    @register(UNLOADABLE)
    def _unloadable_converter(ctx, x):
        """unloadable(Tensor x) -> Tensor"""
        # lowers fine, but GE has no DataType for this dtype: serializing the graph fails
        return ctx.const(torch.zeros(1, dtype=torch.float8_e4m3fnuz), torch.float8_e4m3fnuz)


class Softclipped(torch.nn.Module):
    """GE work before and after the converter-less op, with parameters on both sides."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(8))
        self.w2 = torch.nn.Parameter(torch.randn(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(softclip(torch.relu(x * self.w1) + 1) * self.w2)




@pytest.fixture(autouse=True)
def _warn_again():
    reset_fallback_warnings()


def _fallback_targets(reports: list[GraphReport]) -> set[str]:
    return {f.target for r in reports for f in r.fallbacks}


def test_supported_graph_is_one_ge_graph_without_partitioning():
    with record_reports() as reports:
        check_fn(lambda x, y: torch.relu(x @ y) + 1, torch.randn(2, 3), torch.randn(3, 4))
    assert len(reports) == 1
    assert len(reports[0].ge_graphs) == 1 and reports[0].module is None
    assert reports[0].fallbacks == []


def test_custom_op_falls_back_forward_and_backward_match_eager():
    model = Softclipped()
    with record_reports() as reports, pytest.warns(UserWarning, match="softclip") as rec:
        check_model(model, (torch.randn(3, 8),), train=True)
    forward = next(r for r in reports if r.kind == "forward")
    backward = next(r for r in reports if r.kind == "backward")
    # GE before and after the eager op in the forward graph
    assert len(forward.ge_graphs) >= 2, forward.module.print_readable(print_output=False)
    assert f"{OP_NS}.softclip.default" in _fallback_targets([forward])
    assert f"{OP_NS}.softclip_grad.default" in _fallback_targets([backward])
    assert backward.ge_graphs, "backward ran entirely in eager"
    messages = [str(w.message) for w in rec if "softclip.default" in str(w.message)]
    assert len(messages) == 1 and "1 npu_fallback_test.softclip.default node(s)" in messages[0]
    assert "test_fallback.py" in messages[0]  # the user's source line


def test_warns_once_per_op_type_with_count():
    def fn(x):
        return softclip(softclip(x * 2) + 1) * 3

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        check_fn(fn, torch.randn(4))
        check_fn(lambda x: softclip(x - 1) * 2, torch.randn(5))
    messages = [str(w.message) for w in rec if "softclip.default" in str(w.message)]
    assert len(messages) == 1, messages
    assert "2 npu_fallback_test.softclip.default node(s)" in messages[0]


def test_fallback_error_names_op_and_source_line():
    model = Softclipped()
    compiled = torch.compile(model, backend="npu", options={"fallback": "error"})
    with pytest.raises(Exception, match=r"softclip") as info:
        compiled(torch.randn(3, 8))
    message = str(info.value)
    assert "fallback='error'" in message
    assert "test_fallback.py" in message and "softclip(torch.relu(x * self.w1)" in message


def test_converter_failure_falls_back_with_reason():
    def fn(x):
        return broken_relu(x * 2) + 1

    with record_reports() as reports, pytest.warns(UserWarning, match="converter failed"):
        check_fn(fn, torch.randn(6))
    (fb,) = [f for r in reports for f in r.fallbacks]
    assert fb.target == f"{OP_NS}.broken_relu.default"
    assert "converter bug for the test" in fb.reason


def test_converter_failure_with_fallback_error_raises():
    compiled = torch.compile(lambda x: broken_relu(x * 2) + 1, backend="npu",
                             options={"fallback": "error"})
    with pytest.raises(Exception, match="broken_relu"):
        compiled(torch.randn(6))


def test_eager_island_gets_input_tensors_by_reference():
    x = torch.randn(4, 4)
    SEEN_PTRS.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_fn(lambda a: record_ptr(a) * 2, x)
    assert SEEN_PTRS[-1] == x.data_ptr()  # the compiled call passed the user's tensor


def test_tuple_outputs_and_getitem_across_islands():
    def fn(x):
        a, b = torch.ops.aten.split.Tensor(softclip(x), 2)  # getitem of eager/GE results
        return softclip(a * b), b + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with record_graphs() as graphs:
            check_fn(fn, torch.randn(4, 3))
    assert graphs


def test_graph_that_fails_to_load_runs_in_eager():
    def fn(x):
        return softclip(unloadable(x) + 1) * 3

    with record_reports() as reports, pytest.warns(UserWarning, match="failed to load"):
        check_fn(fn, torch.randn(5))  # the GE graph after softclip still compiles
    (report,) = reports
    assert {f.target for f in report.fallbacks} >= {f"{OP_NS}.unloadable.default",
                                                    "aten.add.Tensor"}
    assert len(report.ge_graphs) == 1


def test_graph_that_fails_to_load_with_fallback_error_raises():
    compiled = torch.compile(lambda x: unloadable(x) * 2, backend="npu",
                             options={"fallback": "error"})
    with pytest.raises(Exception, match="float8_e4m3fnuz"):
        compiled(torch.randn(3))


def test_dynamic_shapes_symint_inputs_cross_islands():
    def fn(x):
        y = softclip(x * 2)  # eager island between GE graphs that use the symbolic size
        return y.reshape(x.shape[0] * 2, -1) + x.shape[0]

    compiled = torch.compile(fn, backend="npu", dynamic=True)
    with warnings.catch_warnings(), record_reports() as reports:
        warnings.simplefilter("ignore")
        for n in (4, 6):
            x = torch.randn(n, 4)
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-5)
    assert reports and all(len(r.ge_graphs) == 2 for r in reports)
