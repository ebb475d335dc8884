"""The host executor holds no input of a call after it returns once that input has
changed between calls (activations, gradients), and keeps a stable one bound (a weight)."""

import gc
import weakref

import torch


def test_changing_inputs_are_not_kept_alive() -> None:
    weight = torch.randn(8, 8)

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ weight) + 1.0

    compiled = torch.compile(f, backend="npu", options={"fallback": "error"})
    refs = []
    for _ in range(4):
        x = torch.randn(4, 8)
        out = compiled(x)
        torch.testing.assert_close(out, f(x), rtol=1e-5, atol=1e-6)
        refs.append(weakref.ref(x))
        del x, out
        gc.collect()
    # the first input is unbound when the second replaces it; from then on every call
    # releases its input on return (before: the last call's input stayed bound)
    assert [r() is None for r in refs] == [True, True, True, True]
