"""Run one fuzz program compiled (``backend="npu"``, ``fallback="error"``) and in eager, and
compare outputs, mutated inputs and, for backward programs, input gradients."""

from __future__ import annotations

from typing import Any

import torch
from programs import Program

# fp32: 1e-5 relative to the output's magnitude; fp16/bf16: a few units in the last place
# of the low-precision result (GE kernels may round intermediate results differently).
TOLERANCES = {torch.float32: 1e-5, torch.float16: 2e-3 * 4, torch.bfloat16: 1.6e-2 * 2}
STRICT = {"fallback": "error"}


class InvalidProgram(Exception):
    """Eager itself rejects the program (a generator limitation, not a compiler bug)."""


def run(prog: Program, options: dict | None = None) -> None:
    """Raise AssertionError (naming the program) when compiled and eager disagree."""
    torch._dynamo.reset()
    fn = prog.function()
    eager_in, comp_in = _inputs(prog), _inputs(prog)
    try:
        expected = fn(*eager_in)
    except Exception as e:
        raise InvalidProgram(f"eager rejects the program: {type(e).__name__}: {e}") from e
    compiled = torch.compile(fn, backend="npu", options=options or STRICT)
    actual = compiled(*comp_in)
    _compare(actual, expected, "output")
    _compare(comp_in, eager_in, "input after the program")  # in-place ops on inputs
    if prog.backward:
        _compare_grads(prog, actual, expected, comp_in, eager_in)


def _inputs(prog: Program) -> list[torch.Tensor]:
    return [t.detach().requires_grad_(True) if spec.grad else t
            for spec, t in zip(prog.inputs, prog.make_inputs())]


def _compare_grads(prog: Program, actual: Any, expected: Any, comp_in: list,
                   eager_in: list) -> None:
    outs = [(a, e) for a, e in zip(actual, expected) if e.requires_grad]
    if not outs:
        return
    gen = torch.Generator().manual_seed(prog.data_seed + 1)
    weights = [torch.randn(e.shape, generator=gen) for _, e in outs]
    torch.autograd.backward([e for _, e in outs], weights)
    torch.autograd.backward([a for a, _ in outs], weights)
    _compare([t.grad for t in comp_in if t.requires_grad],
             [t.grad for t in eager_in if t.requires_grad], "input gradient")


def _compare(actual: Any, expected: Any, what: str) -> None:
    assert len(actual) == len(expected), f"{what}: {len(actual)} values vs {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if e is None or a is None:
            assert a is None and e is None, f"{what}[{i}]: {a} vs {e}"
            continue
        a, e = a.detach(), e.detach()
        assert a.dtype == e.dtype and a.shape == e.shape, (
            f"{what}[{i}]: {a.dtype}{tuple(a.shape)} vs eager {e.dtype}{tuple(e.shape)}")
        tol = TOLERANCES.get(e.dtype, 0.0)
        finite = e[torch.isfinite(e)] if e.is_floating_point() else e.reshape(-1)[:0]
        scale = max(1.0, finite.abs().max().item()) if finite.numel() else 1.0
        torch.testing.assert_close(a, e, rtol=tol, atol=tol * scale, equal_nan=True,
                                   msg=lambda m, i=i: f"{what}[{i}]: {m}")
