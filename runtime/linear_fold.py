"""Host codegen: a linear's input Reshape folded into its matmul.

[Note: linear fold]
A dynamic graph writes each ``nn.Linear`` on a 3-D input as ``Reshape(x, Pack(M, K))`` ->
``MatMulV2`` (2-D) -> ``Reshape(y, Pack(...))``: three Python-level torch calls on the host
where eager's ``linear`` makes one. When every reader of the flattened ``x`` is such a
2-D matmul (``torch.mm``, ``x`` not transposed) whose result is only read by Reshapes, the
generated executor skips the first Reshape and calls ``torch.matmul`` on ``x`` itself:
matmul flattens the leading dims the same way inside one call (the same ``mm`` on the same
rows, so the result is bitwise equal) and the Reshapes after it read its ``[..., N]`` result
as they read ``[M, N]`` (same elements, same order). The GE graph is unchanged.
"""

from __future__ import annotations

from typing import Any

from npu_inductor.runtime.shape_steps import packed_reshape
from npu_inductor.runtime.step_graph import readers

_MATH = "npu_inductor.runtime.kernels.math"


def _is_mm(st: Any, b: Any) -> bool:
    """A ``MatMulV2`` the codegen writes as one ``torch.mm`` (``host_codegen._inline_call``)."""
    return (st.op.type == "MatMulV2" and getattr(st.fn, "__name__", "") == "matmul_2d"
            and st.fn.__module__ == _MATH and len(st.args) == 2 and st.compute is None
            and not b.use_out and not b.detach and len(st.outs) == 1)


def _is_reshape(b: Any) -> bool:
    return b.step.fn is packed_reshape and not b.use_out and not b.detach


def plan(model: Any) -> tuple[dict[int, int], set[int]]:
    """(flattening Reshape step -> its input slot, matmul steps reading the 3-D input)."""
    steps = [b.step for b in model.bound]
    sig = {s: g for st in steps for s, g in zip(st.outs, st.sigs)}
    reads = readers(steps)
    outputs = set(model.output_slots)
    flat: dict[int, int] = {}
    mms: set[int] = set()
    for i, b in enumerate(model.bound):
        st = b.step
        if not _is_reshape(b) or len(st.args) != 2 or not isinstance(st.args[1], tuple) \
                or len(st.args[1]) != 2 or b.dests[0][0] != "keep":
            continue
        x, out = st.args[0], st.outs[0]
        xs, outs = sig.get(x, (None, ()))[1], sig[out][1]
        if len(xs) < 3 or len(outs) != 2 or xs[-1] != outs[-1] or xs[-1] == -1 \
                or out in outputs:
            continue
        users = reads.get(out, [])
        if users and all(_folds(model, k, out, reads, outputs) for k in users):
            flat[i] = x
            mms.update(users)
    return flat, mms


def _folds(model: Any, k: int, flat: int, reads: dict, outputs: set[int]) -> bool:
    """Step ``k`` is a 2-D matmul of ``flat`` (left, not transposed) whose result only
    Reshapes read."""
    b = model.bound[k]
    st = b.step
    if not _is_mm(st, b) or st.args[0] != flat or st.args[1] == flat \
            or st.attrs.get("transpose_x1", False):
        return False
    y = st.outs[0]
    users = reads.get(y, [])
    return bool(users) and y not in outputs and b.dests[0][0] == "keep" and all(
        _is_reshape(model.bound[u]) and model.bound[u].step.args[0] == y for u in users)
