"""npu_inductor.debug: the accuracy bisector finds a wrong host kernel, names the GE op,
the FX node and the user's source line, and finds nothing on the real kernels."""

import inspect
import warnings

import pytest
import torch

import npu_inductor
from npu_inductor.runtime.kernels import KERNELS, SPECIALIZERS


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.proj(x))
        h = h * torch.sigmoid(h)  # the line a wrong Sigmoid kernel must be traced to
        h = self.norm(h) + x.mean(-1, keepdim=True)
        return torch.softmax(self.head(h).t() @ h, dim=-1)


def _line(marker: str) -> int:
    """The source line number of ``Block.forward`` holding ``marker``."""
    lines, first = inspect.getsourcelines(Block.forward)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def _wrong(op_type: str, monkeypatch, scale: float = 1.01) -> None:
    """Replace the host kernel of ``op_type`` by one that is off by 1% (first output)."""
    real = KERNELS[op_type]
    assert op_type not in SPECIALIZERS  # else the loaded model would not use KERNELS

    def wrong(*args, out=None, **attrs):
        result = real(*args, **attrs)
        if isinstance(result, tuple):
            return (result[0] * scale, *result[1:])
        result = result * scale
        return out.copy_(result) if out is not None else result

    monkeypatch.setitem(KERNELS, op_type, wrong)  # out= kept: OUT_KERNELS still lists it


def _inputs():
    torch.manual_seed(0)
    return Block().eval(), torch.randn(6, 8)


def _loss(y: torch.Tensor) -> torch.Tensor:
    """Weighted, so that gradients are not ~0 (rows of a softmax sum to 1)."""
    return (y * torch.linspace(-1, 1, y.numel()).view(y.shape)).sum()


def test_compare_names_the_wrong_kernel_and_the_source_line(monkeypatch):
    model, x = _inputs()
    _wrong("Sigmoid", monkeypatch)
    report = npu_inductor.debug.compare(model, x)
    div = report.divergence
    assert div is not None, str(report)
    assert (div.ge_type, div.fx_node, div.target) == ("Sigmoid", "sigmoid",
                                                     "aten.sigmoid.default"), str(div)
    assert f"{__file__}:{_line('torch.sigmoid(h)')} in forward" in div.source, div.source
    assert "h = h * torch.sigmoid(h)" in str(report)
    assert "elements differ" in div.detail


def test_compare_finds_nothing_on_the_real_kernels():
    model, x = _inputs()
    report = npu_inductor.debug.compare(model, x)
    assert report.graphs, "no GE graph ran"
    assert report.divergence is None, str(report)
    assert all(g.values_compared > 0 and g.float64_reference for g in report.graphs)
    assert "no divergence" in str(report)


def test_compare_blames_the_first_op_not_its_readers(monkeypatch):
    model, x = _inputs()
    _wrong("Relu", monkeypatch, scale=2.0)  # every later op reads the wrong value too
    div = npu_inductor.debug.compare(model, x).divergence
    assert (div.ge_type, div.target) == ("Relu", "aten.relu.default"), str(div)
    assert f":{_line('torch.relu(self.proj(x))')} in forward" in div.source


def test_env_var_compares_every_call_of_a_run_with_backward(monkeypatch):
    """NPU_INDUCTOR_COMPARE=1: the backward graph is compared too, and a divergence is a
    warning naming the GE op and the forward source line of the node it came from."""
    monkeypatch.setenv("NPU_INDUCTOR_COMPARE", "1")
    model, x = _inputs()
    _wrong("LayerNormGradV3", monkeypatch)
    compiled = torch.compile(model.train(), backend="npu", options={"fallback": "error"})
    with pytest.warns(UserWarning, match=r"LayerNormGradV3.*backward") as caught:
        _loss(compiled(x)).backward()
    msg = str(next(w.message for w in caught if "LayerNormGradV3" in str(w.message)))
    assert f":{_line('self.norm(h)')} in forward" in msg, msg


def test_env_var_is_silent_on_the_real_kernels(monkeypatch, caplog):
    monkeypatch.setenv("NPU_INDUCTOR_COMPARE", "1")
    model, x = _inputs()
    compiled = torch.compile(model.train(), backend="npu", options={"fallback": "error"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a divergence warning would fail the test
        with caplog.at_level("INFO", logger="npu_inductor"):
            _loss(compiled(x)).backward()
    compared = [r.message for r in caplog.records if "npu_inductor compare" in r.message]
    assert any("forward" in m for m in compared) and any("backward" in m for m in compared)
    assert all("no divergence" in m for m in compared), compared
