"""Linear-algebra converters: SVD, QR, LU, Cholesky, eigh, det / slogdet, inverses, solves,
pinv, Householder reflectors (geqrf / householder_product / ormqr), and the
``_linalg_check_errors`` effect -> GE's TensorFlow-like linalg ops.

[Note: linalg lowering]
GE's ops follow TensorFlow, not ATen, so each converter maps semantics around them:

* ``Svd`` returns ``(sigma, u, v)`` with ``x = u diag(sigma) v^H``: ``Vh`` is ``v``
  transposed. ``Cholesky`` / ``SelfAdjointEig`` / ``MatrixTriangularSolve`` read one
  triangle (lower, or the ``lower`` attr's): an ``upper`` / ``UPLO='U'`` variant runs on
  the transpose.
* ``Lu`` returns the row permutation ``p`` (``x[p] == L @ U``) where ATen returns LAPACK's
  sequential row swaps (1-based ``pivots``). Converting between the two is inherently
  sequential (swap ``i`` depends on swaps ``< i``), and GE has no loop op we can use here,
  so the conversion is unrolled over the (static) matrix size: a handful of small int32 ops
  per row, refused past ``MAX_UNROLLED_ROWS``. ``Lu`` takes square matrices: an m x n
  input is factored zero-padded to a square one (same pivots, same factors).
* ``SelfAdjointEig`` reads the lower triangle. Eager's ``UPLO='U'`` runs LAPACK's upper
  reduction, whose eigenvectors differ in sign, so only its eigenvalues are lowered.
* ``MatrixInverse``, ``MatrixSolve`` and ``Cholesky`` fail at run time on a singular / not
  positive-definite input, as TensorFlow's kernels (which GE's prototypes follow) do, and
  so do the host kernels. So whenever a
  graph produces results their LAPACK ``info`` is 0, and the ``info`` outputs of
  ``linalg_inv_ex`` / ``_linalg_solve_ex`` / ``linalg_cholesky_ex`` are zeros. Where eager
  returns ``info > 0`` with garbage factors (``*_ex`` on a bad input), the GE graph raises
  instead: a clear error, never a silent result. ``Lu`` does not fail (a singular LU is a
  valid factorization): its ``info`` is computed from U's diagonal, like LAPACK's getrf.
* ``with_effects(_linalg_check_errors, info)`` (how AOTAutograd keeps the error check of
  ``linalg.inv`` / ``solve`` / ``cholesky`` / ``lu_factor``) lowers to GE ``Assert(info ==
  0)`` with a control edge into the op that produces the new effect token, so the check
  cannot be pruned and a failing check stops the graph with an error.
* Secondary outputs GE has no op for (``LU`` / ``pivots`` of ``_linalg_det``,
  ``_linalg_slogdet``, ``_linalg_solve_ex``) are computed with ``Lu`` when the graph reads
  them (training graphs save them for backward) and not built at all otherwise.
* No GE op works with Householder reflectors (GE's ``Qr`` returns Q): geqrf, orgqr and
  ormqr are LAPACK's unblocked loops (dgeqr2, dorg2r, dorm2r) unrolled over the static
  column count with GE elementwise ops and ``BatchMatMulV2``, in LAPACK's operation order.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from npu_inductor.ge.ir import Value
from npu_inductor.lowering.context import LoweringContext, static_shape
from npu_inductor.lowering.elementwise import pointwise, select, signbit
from npu_inductor.lowering.helpers import broadcast_shape, cast, checked, int_list, promote
from npu_inductor.lowering.index import filled
from npu_inductor.lowering.reduction import reduce
from npu_inductor.lowering.registry import register
from npu_inductor.lowering.shape import broadcast_to, move, reshape, strided_slice, transpose

aten = torch.ops.aten
# Unrolled pivots <-> permutation conversions cost ~7 small GE ops per row.
MAX_UNROLLED_ROWS = 64
_FLOATS = (torch.float32, torch.float64)
_MATMUL = (torch.float32,)  # BatchMatMulV2 has no float64


# ---- capability checks -------------------------------------------------------------------
def _tensors(node: torch.fx.Node) -> list[torch.Tensor]:
    vals = [a.meta.get("val") for a in node.all_input_nodes]
    out = node.meta.get("val")
    vals += list(out) if isinstance(out, (tuple, list)) else [out]
    return [v for v in vals if isinstance(v, torch.Tensor)]


def used(node: torch.fx.Node, index: int) -> bool:
    """Whether output ``index`` of a multi-output node is read."""
    return any(u.target is operator.getitem and u.args[1] == index for u in node.users)


def _arg(node: torch.fx.Node, pos: int, name: str, default: Any) -> Any:
    if len(node.args) > pos:
        return node.args[pos]
    return node.kwargs.get(name, default)


def linalg_ok(*, dtypes_: Sequence[torch.dtype] = _FLOATS, square: bool = False,
              rows: bool = False, extra: Any = None):
    """Capability: real float inputs (``dtypes_``), static shapes, square matrices
    (``square``), at most ``MAX_UNROLLED_ROWS`` rows (``rows``: pivots are unrolled), plus
    ``extra(node)`` -> reason."""

    def check(node: torch.fx.Node) -> str | None:
        a = node.all_input_nodes[0].meta.get("val")
        if a.dtype not in dtypes_:
            return f"GE linalg ops here take {', '.join(map(str, dtypes_))}, not {a.dtype}"
        if any(-1 in static_shape(t.shape) for t in _tensors(node)):
            return "linalg lowering needs static shapes"
        if square and a.shape[-1] != a.shape[-2]:
            return "GE's factorization takes square matrices only"
        if rows and max(a.shape[-2:]) > MAX_UNROLLED_ROWS:
            return f"pivots conversion is unrolled per row (at most {MAX_UNROLLED_ROWS})"
        return extra(node) if extra is not None else None
    return check


# ---- small builders ----------------------------------------------------------------------
def _mT(ctx: LoweringContext, x: Value, suffix: str = "mT") -> Value:
    return transpose(ctx, x, [*range(x.rank - 2), x.rank - 1, x.rank - 2], suffix)


def _diag(ctx: LoweringContext, x: Value, suffix: str = "diag") -> Value:
    k = min(x.shape[-2:])
    return ctx.op("MatrixDiagPartV2", [x, ctx.const(0, torch.int32, "k"),
                                       ctx.const(0, x.dtype, "pad")],
                  out=(x.dtype, (*x.shape[:-2], k)), suffix=suffix)


def _unit_diag(ctx: LoweringContext, x: Value, suffix: str = "unit") -> Value:
    """``x`` with ones on its main diagonal (LAPACK's implicit unit diagonal)."""
    k = min(x.shape[-2:])
    ones = broadcast_to(ctx, ctx.const(torch.ones(k), x.dtype, "ones"), (*x.shape[:-2], k),
                        suffix + "_ones")
    return ctx.op("MatrixSetDiagV2", [x, ones, ctx.const(0, torch.int32, "k")],
                  out=(x.dtype, x.shape), suffix=suffix)


def _tri(ctx: LoweringContext, ge_type: str, x: Value, diagonal: int, suffix: str) -> Value:
    return ctx.op(ge_type, [x], {"diagonal": diagonal}, out=(x.dtype, x.shape), suffix=suffix)


def _bmm(ctx: LoweringContext, a: Value, b: Value, adj_a: bool = False, adj_b: bool = False,
         suffix: str = "bmm") -> Value:
    m = a.shape[-1] if adj_a else a.shape[-2]
    n = b.shape[-2] if adj_b else b.shape[-1]
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    return ctx.op("BatchMatMulV2", [a, b], {"adj_x1": adj_a, "adj_x2": adj_b},
                  out=(a.dtype, (*batch, m, n)), suffix=suffix)


def _batched(ctx: LoweringContext, a: Value, b: Value) -> tuple[Value, Value]:
    """``a`` and ``b`` broadcast to one batch shape (GE's linalg ops do not broadcast)."""
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    return (broadcast_to(ctx, a, (*batch, *a.shape[-2:]), "batch_a"),
            broadcast_to(ctx, b, (*batch, *b.shape[-2:]), "batch_b"))


def _trisolve(ctx: LoweringContext, a: Value, b: Value, lower: bool, adjoint: bool = False,
              suffix: str = "trsm") -> Value:
    a, b = _batched(ctx, a, b)
    return ctx.op("MatrixTriangularSolve", [a, b], {"lower": lower, "adjoint": adjoint},
                  out=(b.dtype, b.shape), suffix=suffix)


def _eye(ctx: LoweringContext, n: int, batch: Sequence[int], dtype: torch.dtype) -> Value:
    return broadcast_to(ctx, ctx.const(torch.eye(n), dtype, "eye"), (*batch, n, n), "eye_b")


def _column(ctx: LoweringContext, x: Value, i: int, suffix: str) -> Value:
    """``x[..., i:i+1]``."""
    return strided_slice(ctx, x, [x.rank - 1], [i], [i + 1], [1], suffix)


def _argmax_last(ctx: LoweringContext, x: Value, suffix: str) -> Value:
    """int32 index of the first maximum along the last axis."""
    return ctx.op("ArgMaxV2", [x, ctx.const(x.rank - 1, torch.int32, "last_axis")],
                  {"dtype": torch.int32}, out=(torch.int32, x.shape[:-1]),
                  suffix=suffix)


# ---- LU: permutation <-> LAPACK pivots ---------------------------------------------------
def _lu(ctx: LoweringContext, a: Value) -> tuple[Value, Value]:
    """GE ``Lu``: packed factors and the int32 row permutation ``p`` (``a[p] == L @ U``).
    GE's Lu takes square matrices: an m x n ``a`` is factored zero-padded to s x s
    (s = max(m, n)). Partial pivoting never prefers a zero row, and zero columns are left
    of nothing, so the first m rows / n columns and min(m, n) pivots are ``a``'s own."""
    m, n = a.shape[-2:]
    s = max(m, n)
    padded = a
    if m != n:
        pads = int_list(ctx, [0, 0] * (a.rank - 2) + [0, s - m, 0, s - n], "paddings")
        padded = move(ctx, "PadV3", [a, pads, ctx.const(0, a.dtype, "zero")], {"mode": "constant"},
                      out=(a.dtype, (*a.shape[:-2], s, s)), data=(0, 2), suffix="square")
    lu, perm = ctx.op("Lu", [padded], {"output_idx_type": torch.int32},
                      out=[(a.dtype, padded.shape), (torch.int32, padded.shape[:-1])],
                      suffix="lu")
    if m == n:
        return lu, perm
    lu = strided_slice(ctx, lu, [lu.rank - 2, lu.rank - 1], [0, 0], [m, n], [1, 1], "lu_mn")
    return lu, strided_slice(ctx, perm, [perm.rank - 1], [0], [m], [1], "perm_m")


def _perm_to_pivots(ctx: LoweringContext, perm: Value, k: int | None = None) -> Value:
    """LAPACK's first ``k`` 1-based swaps: swap ``i`` brings row ``perm[i]`` (found in the
    current arrangement ``cur``) up to position ``i``."""
    n = perm.shape[-1]
    k = n if k is None else k
    rows = ctx.const(torch.arange(n, dtype=torch.int32), torch.int32, "rows")
    cur = broadcast_to(ctx, rows, perm.shape, "cur")
    pivots = []
    for i in range(k):
        want = _column(ctx, perm, i, f"want{i}")
        here = ctx.op("Equal", [cur, want], out=(torch.bool, perm.shape), suffix=f"find{i}")
        j = _argmax_last(ctx, cast(ctx, here, torch.int32), f"piv{i}")
        pivots.append(j)
        if i < k - 1:  # swap positions i and j of cur
            at_i = ctx.const(torch.arange(n) == i, torch.bool, f"at{i}")
            moved = select(ctx, here, _column(ctx, cur, i, f"cur{i}"), cur, torch.int32,
                           f"swap{i}")
            cur = select(ctx, at_i, want, moved, torch.int32, f"swapped{i}")
    packed = ctx.op("Pack", [pivots], {"axis": perm.rank - 1, "N": k},
                    out=(torch.int32, (*perm.shape[:-1], k)), suffix="pivots0")
    return pointwise(ctx, "Add", [packed, 1], torch.int32, suffix="pivots")


def _pivots_to_perm(ctx: LoweringContext, pivots: Value, m: int) -> Value:
    """The row permutation of ``m`` rows that LAPACK's swaps ``pivots`` (1-based) make."""
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    rows = ctx.const(torch.arange(m, dtype=torch.int32), torch.int32, "rows")
    cur = broadcast_to(ctx, rows, (*batch, m), "cur")
    swaps = pointwise(ctx, "Sub", [cast(ctx, pivots, torch.int32), 1], torch.int32,
                      suffix="swaps")
    for i in range(k):
        j = _column(ctx, swaps, i, f"j{i}")
        there = ctx.op("GatherElements", [cur, j], {"dim": cur.rank - 1},
                       out=(torch.int32, j.shape), suffix=f"take{i}")
        at_j = ctx.op("Equal", [rows, j], out=(torch.bool, cur.shape), suffix=f"at_j{i}")
        at_i = ctx.const(torch.arange(m) == i, torch.bool, f"at{i}")
        moved = select(ctx, at_j, _column(ctx, cur, i, f"cur{i}"), cur, torch.int32,
                       f"swap{i}")
        cur = select(ctx, at_i, there, moved, torch.int32, f"swapped{i}")
    return cur


def _perm_matrix(ctx: LoweringContext, perm: Value, dtype: torch.dtype) -> Value:
    """ATen's ``P`` (``A = P @ L @ U``): ``P[r, i] = (perm[i] == r)``."""
    m = perm.shape[-1]
    rows = ctx.const(torch.arange(m, dtype=torch.int32).reshape(m, 1), torch.int32, "rows_col")
    lifted = reshape(ctx, perm, (*perm.shape[:-1], 1, m), "perm_row")
    eq = ctx.op("Equal", [lifted, rows], out=(torch.bool, (*perm.shape[:-1], m, m)),
                suffix="P_mask")
    return cast(ctx, eq, dtype)


def _lu_info(ctx: LoweringContext, lu: Value) -> Value:
    """getrf's ``info``: 1 + the first zero on U's diagonal, 0 when there is none."""
    zero = pointwise(ctx, "Equal", [_diag(ctx, lu, "u_diag"), 0], lu.dtype, y_dtype=torch.bool,
                     suffix="u_zero")
    first = _argmax_last(ctx, cast(ctx, zero, torch.int32), "first_zero")
    anyzero = reduce(ctx, "ReduceAny", zero, [zero.rank - 1], False, torch.bool, suffix="singular")
    return select(ctx, anyzero, pointwise(ctx, "Add", [first, 1], torch.int32, suffix="info1"),
                  0, torch.int32, "info")


def _lu_outputs(ctx: LoweringContext, a: Value, want_lu: bool, want_pivots: bool) -> tuple:
    if not (want_lu or want_pivots):
        return None, None
    lu, perm = _lu(ctx, a)
    return lu, (_perm_to_pivots(ctx, perm) if want_pivots else None)


def _lu_used(first: int) -> Any:
    """Capability part: the ``LU`` / ``pivots`` outputs at ``first``/``first+1`` need a square
    input of at most ``MAX_UNROLLED_ROWS`` rows when read."""
    def check(node: torch.fx.Node) -> str | None:
        if not (used(node, first) or used(node, first + 1)):
            return None
        a = node.all_input_nodes[0].meta["val"]
        if a.shape[-1] != a.shape[-2] or a.shape[-1] > MAX_UNROLLED_ROWS:
            return f"LU/pivots outputs read: needs a square matrix of <= {MAX_UNROLLED_ROWS} rows"
        return None
    return check


# ---- error checks ------------------------------------------------------------------------
def _check_errors_ok(node: torch.fx.Node) -> str | None:
    if node.args[1] is not aten._linalg_check_errors.default:
        return f"no GE lowering for the effectful op {node.args[1]}"
    return None


@register(torch.ops.higher_order.with_effects, capability=_check_errors_ok)
def with_effects(ctx, a, b, c):
    """with_effects(token, aten._linalg_check_errors, info, api_name, *, is_matrix)
    -> (token, None)"""
    token, info = a, c
    ok = pointwise(ctx, "Equal", [info, 0], info.dtype, y_dtype=torch.bool, suffix="info_ok")
    all_ok = reduce(ctx, "ReduceAll", ok, list(range(ok.rank)), False, torch.bool,
                    suffix="all_ok")
    api = str(ctx.node.args[3]).replace(".", "_")
    return (checked(ctx, token, all_ok, [info], f"{api}_check_errors"), None)


# ---- SVD ---------------------------------------------------------------------------------
@register(aten._linalg_svd.default, capability=linalg_ok())
def linalg_svd(ctx, A, full_matrices=False, compute_uv=True, driver=None):
    """_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *,
    str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)"""
    u_spec, s_spec, vh_spec = ctx.out_specs()
    v_spec = (vh_spec[0], vh_spec[1][:-2] + vh_spec[1][:-3:-1]) if compute_uv else vh_spec
    s, u, v = ctx.op("Svd", [A], {"compute_uv": compute_uv, "full_matrices": full_matrices},
                     out=[s_spec, u_spec, v_spec])
    return u, s, (_mT(ctx, v, "Vh") if compute_uv else v)


# ---- inverses and solves -----------------------------------------------------------------
@register(aten.linalg_inv_ex.default, capability=linalg_ok(square=True))
def linalg_inv_ex(ctx, A, check_errors=False):
    """linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)"""
    inv = ctx.op("MatrixInverse", [A], {"adjoint": False}, out=(A.dtype, A.shape))
    return inv, filled(ctx, A.shape[:-2], 0, torch.int32)  # MatrixInverse fails instead


def _vector_rhs(A: Value, B: Value) -> bool:
    return B.rank == 1 or (B.rank == A.rank - 1 and B.shape == A.shape[:-1])


@register(aten._linalg_solve_ex.default, capability=linalg_ok(square=True, extra=_lu_used(1)))
def linalg_solve_ex(ctx, A, B, left=True, check_errors=False):
    """_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False)
    -> (Tensor result, Tensor LU, Tensor pivots, Tensor info)"""
    vector = _vector_rhs(A, B)
    rhs = reshape(ctx, B, (*B.shape, 1), "rhs") if vector else B
    rhs = rhs if left else _mT(ctx, rhs, "rhs_t")
    a, rhs = _batched(ctx, A, rhs)
    x = ctx.op("MatrixSolve", [a, rhs], {"adjoint": not left}, out=(rhs.dtype, rhs.shape),
               suffix="solve")
    x = x if left else _mT(ctx, x, "x_t")
    x = reshape(ctx, x, ctx.out_specs()[0][1], "result")
    lu, pivots = _lu_outputs(ctx, A, used(ctx.node, 1), used(ctx.node, 2))
    return x, lu, pivots, filled(ctx, A.shape[:-2], 0, torch.int32)


@register(aten.linalg_solve_triangular.default, capability=linalg_ok())
def linalg_solve_triangular(ctx, self, B, upper, left=True, unitriangular=False):
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True,
    bool unitriangular=False) -> Tensor"""
    a = _unit_diag(ctx, self) if unitriangular else self
    if left:
        return _trisolve(ctx, a, B, lower=not upper)
    # X A = B  <=>  A^T X^T = B^T
    return _mT(ctx, _trisolve(ctx, a, _mT(ctx, B, "B_t"), lower=not upper, adjoint=True), "")


@register(aten.triangular_solve.default, capability=linalg_ok())
def triangular_solve(ctx, self, A, upper=True, transpose=False, unitriangular=False):
    """triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False,
    bool unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)"""
    a = _unit_diag(ctx, A) if unitriangular else A
    x = _trisolve(ctx, a, self, lower=not upper, adjoint=transpose)
    coefficient = broadcast_to(ctx, A, ctx.out_specs()[1][1], "coefficient")
    if coefficient is A:
        coefficient = ctx.op("Identity", [A], out=(A.dtype, A.shape), suffix="coefficient")
    return x, coefficient


# ---- Cholesky ----------------------------------------------------------------------------
def _cholesky(ctx: LoweringContext, a: Value, upper: bool) -> Value:
    if not upper:
        return ctx.op("Cholesky", [a], out=(a.dtype, a.shape), suffix="chol")
    # U = L(A^T)^T: GE's Cholesky reads the lower triangle, ATen's upper=True the upper one
    lower = ctx.op("Cholesky", [_mT(ctx, a, "a_t")], out=(a.dtype, a.shape), suffix="chol")
    return _mT(ctx, lower, "U")


@register(aten.cholesky.default, capability=linalg_ok(square=True))
def cholesky(ctx, self, upper=False):
    """cholesky(Tensor self, bool upper=False) -> Tensor"""
    return _cholesky(ctx, self, upper)


@register(aten.linalg_cholesky_ex.default, capability=linalg_ok(square=True))
def linalg_cholesky_ex(ctx, self, upper=False, check_errors=False):
    """linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False)
    -> (Tensor L, Tensor info)"""
    return _cholesky(ctx, self, upper), filled(ctx, self.shape[:-2], 0, torch.int32)


@register(aten.cholesky_solve.default, capability=linalg_ok())
def cholesky_solve(ctx, self, input2, upper=False):
    """cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor"""
    # A = L L^H: L Y = B, L^H X = Y (A = U^H U: U^H Y = B, U X = Y), as LAPACK's potrs
    y = _trisolve(ctx, input2, self, lower=not upper, adjoint=upper, suffix="trsm_1")
    return _trisolve(ctx, input2, y, lower=not upper, adjoint=not upper, suffix="trsm_2")


@register(aten.cholesky_inverse.default, capability=linalg_ok(dtypes_=_MATMUL, square=True))
def cholesky_inverse(ctx, self, upper=False):
    """cholesky_inverse(Tensor self, bool upper=False) -> Tensor"""
    # (L L^H)^-1 = L^-H L^-1, (U^H U)^-1 = U^-1 U^-H, with the triangular inverse as a solve
    n = self.shape[-1]
    inv = _trisolve(ctx, self, _eye(ctx, n, self.shape[:-2], self.dtype), lower=not upper,
                    suffix="tri_inv")
    return _bmm(ctx, inv, inv, adj_a=not upper, adj_b=upper, suffix="")


# ---- determinants ------------------------------------------------------------------------
@register(aten._linalg_det.default, capability=linalg_ok(square=True, extra=_lu_used(1)))
def linalg_det(ctx, A):
    """_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots)"""
    det = ctx.op("MatrixDeterminant", [A], out=(A.dtype, A.shape[:-2]), suffix="det")
    return (det, *_lu_outputs(ctx, A, used(ctx.node, 1), used(ctx.node, 2)))


@register(aten._linalg_slogdet.default, capability=linalg_ok(square=True, extra=_lu_used(2)))
def linalg_slogdet(ctx, A):
    """_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU,
    Tensor pivots)"""
    sign, logabs = ctx.op("Slogdet", [A], out=[(A.dtype, A.shape[:-2])] * 2, suffix="slogdet")
    return (sign, logabs, *_lu_outputs(ctx, A, used(ctx.node, 2), used(ctx.node, 3)))


# ---- eigh, QR ----------------------------------------------------------------------------
def _eigh_ok(node: torch.fx.Node) -> str | None:
    if _arg(node, 1, "UPLO", "L") == "U" and _arg(node, 2, "compute_v", True) and used(node, 1):
        # LAPACK's upper and lower reductions give eigenvectors different signs, and GE's
        # SelfAdjointEig reads the lower triangle: the eigenvalues agree, the vectors do not
        return "eigenvectors of the upper triangle (UPLO='U'): signs would differ from eager"
    return None


@register(aten._linalg_eigh.default, capability=linalg_ok(square=True, extra=_eigh_ok))
def linalg_eigh(ctx, A, UPLO="L", compute_v=True):
    """_linalg_eigh(Tensor A, str UPLO="L", bool compute_v=True) -> (Tensor eigenvalues,
    Tensor eigenvectors)"""
    a = _mT(ctx, A, "upper") if UPLO == "U" else A
    return ctx.op("SelfAdjointEig", [a], {"compute_v": compute_v}, suffix="eigh")


@register(aten.linalg_qr.default, capability=linalg_ok())
def linalg_qr(ctx, A, mode="reduced"):
    """linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)"""
    m, n = A.shape[-2:]
    full = mode == "complete"
    qcols = m if full else min(m, n)
    q, r = ctx.op("Qr", [A], {"full_matrices": full},
                  out=[(A.dtype, (*A.shape[:-2], m, qcols)), ctx.out_specs()[1]], suffix="qr")
    if mode == "r":  # ATen returns an empty Q
        q = filled(ctx, (0,), 0, A.dtype)
    return q, r


# ---- LU ----------------------------------------------------------------------------------
def _pivot_ok(node: torch.fx.Node) -> str | None:
    if not node.kwargs.get("pivot", True):
        return "GE's Lu always pivots (pivot=False is not available)"
    return None


@register(aten.linalg_lu_factor_ex.default, capability=linalg_ok(rows=True, extra=_pivot_ok))
def linalg_lu_factor_ex(ctx, A, pivot=True, check_errors=False):
    """linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False)
    -> (Tensor LU, Tensor pivots, Tensor info)"""
    lu, perm = _lu(ctx, A)
    pivots = _perm_to_pivots(ctx, perm, min(A.shape[-2:])) if used(ctx.node, 1) else None
    return lu, pivots, (_lu_info(ctx, lu) if used(ctx.node, 2) else None)


def _lu_parts(ctx: LoweringContext, lu: Value) -> tuple[Value, Value]:
    """ATen's ``L`` (m x k, unit diagonal) and ``U`` (k x n) from packed factors."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    lower = strided_slice(ctx, lu, [lu.rank - 1], [0], [k], [1], "L_cols") if n > k else lu
    upper = strided_slice(ctx, lu, [lu.rank - 2], [0], [k], [1], "U_rows") if m > k else lu
    return (_unit_diag(ctx, _tri(ctx, "Tril", lower, -1, "L_strict"), "L"),
            _tri(ctx, "Triu", upper, 0, "U"))


@register(aten.linalg_lu.default, capability=linalg_ok(extra=_pivot_ok))
def linalg_lu(ctx, A, pivot=True):
    """linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)"""
    lu, perm = _lu(ctx, A)
    return (_perm_matrix(ctx, perm, A.dtype), *_lu_parts(ctx, lu))


def _unpack_ok(node: torch.fx.Node) -> str | None:
    if not (_arg(node, 2, "unpack_data", True) and _arg(node, 3, "unpack_pivots", True)):
        return "lu_unpack without unpack_data / unpack_pivots"
    lu = node.args[0].meta["val"]
    if max(lu.shape[-2:]) > MAX_UNROLLED_ROWS:
        return f"pivots conversion is unrolled per row (at most {MAX_UNROLLED_ROWS})"
    return None


@register(aten.lu_unpack.default, capability=linalg_ok(extra=_unpack_ok))
def lu_unpack(ctx, LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True,
    bool unpack_pivots=True) -> (Tensor P, Tensor L, Tensor U)"""
    perm = _pivots_to_perm(ctx, LU_pivots, LU_data.shape[-2])
    return (_perm_matrix(ctx, perm, LU_data.dtype), *_lu_parts(ctx, LU_data))


@register(aten.linalg_lu_solve.default,
          capability=linalg_ok(dtypes_=_MATMUL, square=True, rows=True))
def linalg_lu_solve(ctx, LU, pivots, B, left=True, adjoint=False):
    """linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True,
    bool adjoint=False) -> Tensor"""
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return _mT(ctx, _lu_solve(ctx, LU, pivots, _mT(ctx, B, "B_t"), not adjoint), "")
    return _lu_solve(ctx, LU, pivots, B, adjoint)


def _lu_solve(ctx: LoweringContext, lu: Value, pivots: Value, b: Value, adjoint: bool) -> Value:
    """A X = B with A = P L U (getrs): permute B's rows, then two triangular solves; with
    ``adjoint`` the solves go first (U^H, then L^H) and the permutation last."""
    batch = broadcast_shape(lu.shape[:-2], b.shape[:-2], pivots.shape[:-1])
    lu = broadcast_to(ctx, lu, (*batch, *lu.shape[-2:]), "LU_b")
    b = broadcast_to(ctx, b, (*batch, *b.shape[-2:]), "B_b")
    perm = _pivots_to_perm(ctx, broadcast_to(ctx, pivots, (*batch, pivots.shape[-1]), "piv_b"),
                           lu.shape[-1])
    unit_lower = _unit_diag(ctx, lu, "L")
    if not adjoint:
        pb = _rows(ctx, b, perm, "PB")
        y = _trisolve(ctx, unit_lower, pb, lower=True, suffix="trsm_L")
        return _trisolve(ctx, lu, y, lower=False, suffix="trsm_U")
    y = _trisolve(ctx, lu, b, lower=False, adjoint=True, suffix="trsm_U")
    w = _trisolve(ctx, unit_lower, y, lower=True, adjoint=True, suffix="trsm_L")
    # inverse[perm[i]] = i: the column of row r's one in P
    inverse = _argmax_last(ctx, _perm_matrix(ctx, perm, torch.int32), "inv_perm")
    return _rows(ctx, w, inverse, "")


def _rows(ctx: LoweringContext, x: Value, order: Value, suffix: str) -> Value:
    """``x[..., order, :]`` per batch element (``GatherElements`` along the rows)."""
    index = broadcast_to(ctx, reshape(ctx, order, (*order.shape, 1), suffix + "_idx"),
                         x.shape, suffix + "_idx_b")
    return ctx.op("GatherElements", [x, index], {"dim": x.rank - 2}, out=(x.dtype, x.shape),
                  suffix=suffix)


# ---- pinv --------------------------------------------------------------------------------
def _pinv_ok(node: torch.fx.Node) -> str | None:
    composed = node.kwargs.get("hermitian", False) or any(
        node.kwargs.get(k) is not None for k in ("atol", "rtol"))
    if composed and node.args[0].meta["val"].dtype not in _MATMUL:
        return "pinv with atol / rtol / hermitian is composed with BatchMatMulV2 (no float64)"
    return None


@register(aten.linalg_pinv.atol_rtol_tensor, capability=linalg_ok(extra=_pinv_ok))
def linalg_pinv(ctx, self, atol=None, rtol=None, hermitian=False):
    """linalg_pinv.atol_rtol_tensor(Tensor self, *, Tensor? atol=None, Tensor? rtol=None,
    bool hermitian=False) -> Tensor"""
    m, n = self.shape[-2:]
    if m == 0 or n == 0:
        return filled(ctx, ctx.out_specs()[0][1], 0, self.dtype)
    default_rtol = torch.finfo(self.dtype).eps * max(m, n)
    if atol is None and rtol is None and not hermitian:  # GE Pinverse: s <= rcond * s_max
        return ctx.op("Pinverse", [self], {"rcond": default_rtol}, suffix="")
    # ATen's formula (LinearAlgebra.cpp linalg_pinv), tolerances in float64 as there
    given_atol = atol is not None
    atol = atol if given_atol else ctx.const(0.0, torch.float64, "atol")
    if rtol is None:
        rtol_d = ctx.const(default_rtol, torch.float64, "rtol")
        rtol = rtol_d if not given_atol else select(
            ctx, pointwise(ctx, "Greater", [atol, 0], atol.dtype, y_dtype=torch.bool,
                           suffix="atol_pos"), 0.0, rtol_d, torch.float64, "rtol")
    if hermitian:
        s, u = ctx.op("SelfAdjointEig", [self], {"compute_v": True},
                      out=[(self.dtype, self.shape[:-1]), (self.dtype, self.shape)], suffix="eigh")
        s_abs = pointwise(ctx, "Abs", [s], s.dtype, suffix="s_abs")
        v = u
    else:
        k = min(m, n)
        s, u, v = ctx.op("Svd", [self], {"compute_uv": True, "full_matrices": False},
                         out=[(self.dtype, (*self.shape[:-2], k)),
                              (self.dtype, (*self.shape[:-2], m, k)),
                              (self.dtype, (*self.shape[:-2], n, k))], suffix="svd")
        s_abs = s
    s_max = reduce(ctx, "ReduceMax", s_abs, [s_abs.rank - 1], True, s.dtype, suffix="s_max")
    a_col = reshape(ctx, atol, (*atol.shape, 1), "atol_col")
    r_col = reshape(ctx, rtol, (*rtol.shape, 1), "rtol_col")
    scaled = pointwise(ctx, "Mul", [r_col, s_max], promote(r_col, s_max), suffix="rtol_s")
    tol = pointwise(ctx, "Maximum", [a_col, scaled], promote(a_col, scaled), suffix="tol")
    keep = pointwise(ctx, "Greater", [s_abs, tol], promote(s_abs, tol), y_dtype=torch.bool,
                     suffix="keep")
    s_inv = select(ctx, keep, pointwise(ctx, "Reciprocal", [s], s.dtype, suffix="s_recip"),
                   0.0, s.dtype, "s_pinv")
    s_row = reshape(ctx, s_inv, (*s_inv.shape[:-1], 1, s_inv.shape[-1]), "s_row")
    scaled_v = pointwise(ctx, "Mul", [v, s_row], s.dtype, suffix="v_s")
    return _bmm(ctx, scaled_v, u, adj_b=True, suffix="")


# ---- Householder reflectors (no GE op: LAPACK's unblocked loops, unrolled) -----------------
def _reflector(ctx: LoweringContext, v_all: Value, tau: Value, i: int) -> tuple[Value, Value]:
    """Column ``i`` of the unit lower-trapezoidal ``v_all`` and ``tau[..., i]`` as
    ``[..., 1, 1]``."""
    v = _column(ctx, v_all, i, f"v{i}")
    t = _column(ctx, tau, i, f"tau{i}")
    return v, reshape(ctx, t, (*t.shape, 1), f"tau{i}_11")


def _apply_reflector(ctx: LoweringContext, c: Value, v: Value, t: Value, left: bool,
                     i: int) -> Value:
    """LAPACK's dlarf: ``H C = C - v (tau v^T C)`` (left) or ``C H = C - (C v) (tau v^T)``,
    with ``H = I - tau v v^T``; multiplied in dger's order."""
    if left:
        w = _bmm(ctx, v, c, adj_a=True, suffix=f"w{i}")            # 1 x n: v^T C
        tw = pointwise(ctx, "Mul", [w, t], c.dtype, suffix=f"tw{i}")
        outer = pointwise(ctx, "Mul", [v, tw], c.dtype, suffix=f"outer{i}")
    else:
        w = _bmm(ctx, c, v, suffix=f"w{i}")                        # m x 1: C v
        tv = pointwise(ctx, "Mul", [_mT(ctx, v, f"v{i}_t"), t], c.dtype, suffix=f"tv{i}")
        outer = pointwise(ctx, "Mul", [w, tv], c.dtype, suffix=f"outer{i}")
    return pointwise(ctx, "Sub", [c, outer], c.dtype, suffix=f"h{i}")


def _reflectors(ctx: LoweringContext, a: Value) -> Value:
    """The Householder vectors stored below ``a``'s diagonal, with their implicit 1s."""
    return _unit_diag(ctx, _tri(ctx, "Tril", a, -1, "V_strict"), "V")


def _tau_ok(tau_pos: int):
    def check(node: torch.fx.Node) -> str | None:
        k = node.args[tau_pos].meta["val"].shape[-1]
        if k > MAX_UNROLLED_ROWS:
            return f"reflectors are applied one by one, unrolled (at most {MAX_UNROLLED_ROWS})"
        return None
    return check


@register(aten.linalg_householder_product.default,
          capability=linalg_ok(dtypes_=_MATMUL, extra=_tau_ok(1)))
def linalg_householder_product(ctx, input, tau):
    """linalg_householder_product(Tensor input, Tensor tau) -> Tensor"""
    # LAPACK's dorg2r: Q[:, :n] = H_0 ... H_{k-1} I[:, :n], accumulated from the back
    m, n = input.shape[-2:]
    batch = broadcast_shape(input.shape[:-2], tau.shape[:-1])
    v_all = broadcast_to(ctx, _reflectors(ctx, input), (*batch, m, n), "V_b")
    tau = broadcast_to(ctx, tau, (*batch, tau.shape[-1]), "tau_b")
    q = broadcast_to(ctx, ctx.const(torch.eye(m, n), input.dtype, "eye"), (*batch, m, n), "I")
    for i in reversed(range(tau.shape[-1])):
        v, t = _reflector(ctx, v_all, tau, i)
        q = _apply_reflector(ctx, q, v, t, True, i)
    return q


@register(aten.ormqr.default, capability=linalg_ok(dtypes_=_MATMUL, extra=_tau_ok(1)))
def ormqr(ctx, self, input2, input3, left=True, transpose=False):
    """ormqr(Tensor self, Tensor input2, Tensor input3, bool left=True, bool transpose=False)
    -> Tensor"""
    # LAPACK's dorm2r: Q = H_0 ... H_{k-1} applied to C one reflector at a time
    batch = broadcast_shape(self.shape[:-2], input2.shape[:-1], input3.shape[:-2])
    v_all = broadcast_to(ctx, _reflectors(ctx, self), (*batch, *self.shape[-2:]), "V_b")
    tau = broadcast_to(ctx, input2, (*batch, input2.shape[-1]), "tau_b")
    c = broadcast_to(ctx, input3, (*batch, *input3.shape[-2:]), "C_b")
    k = tau.shape[-1]
    forward = left == transpose  # Q^T C and C Q apply H_0 first
    for i in (range(k) if forward else reversed(range(k))):
        v, t = _reflector(ctx, v_all, tau, i)
        c = _apply_reflector(ctx, c, v, t, left, i)
    return c


def _dlapy2(ctx: LoweringContext, x: Value, y: Value, i: int) -> Value:
    """LAPACK's overflow-safe ``sqrt(x^2 + y^2)``: ``w sqrt(1 + (z/w)^2)``, ``w`` when z = 0."""
    dt = x.dtype
    xa = pointwise(ctx, "Abs", [x], dt, suffix=f"xa{i}")
    ya = pointwise(ctx, "Abs", [y], dt, suffix=f"ya{i}")
    w = pointwise(ctx, "Maximum", [xa, ya], dt, suffix=f"w{i}")
    z = pointwise(ctx, "Minimum", [xa, ya], dt, suffix=f"z{i}")
    q = pointwise(ctx, "RealDiv", [z, w], dt, suffix=f"q{i}")
    r = pointwise(ctx, "Sqrt", [pointwise(ctx, "Add", [1, pointwise(ctx, "Mul", [q, q], dt,
                                                                      suffix=f"q2{i}")],
                                          dt, suffix=f"q2p1{i}")], dt, suffix=f"sq{i}")
    scaled = pointwise(ctx, "Mul", [w, r], dt, suffix=f"hyp{i}")
    z0 = pointwise(ctx, "Equal", [z, 0], dt, y_dtype=torch.bool, suffix=f"z0{i}")
    return select(ctx, z0, w, scaled, dt, f"lapy2_{i}")


def _geqr2_step(ctx: LoweringContext, a: Value, i: int) -> tuple[Value, Value]:
    """Column ``i`` of LAPACK's dgeqr2: dlarfg makes the reflector that zeroes ``a[i+1:, i]``,
    dlarf applies it to the columns right of ``i``. Works on whole matrices with masks."""
    dt, (m, n) = a.dtype, a.shape[-2:]
    rows = torch.arange(m).reshape(m, 1)
    below = ctx.const(rows > i, torch.bool, f"below{i}")
    col = _column(ctx, a, i, f"col{i}")
    alpha = strided_slice(ctx, col, [col.rank - 2], [i], [i + 1], [1], f"alpha{i}")
    x = select(ctx, below, col, 0.0, dt, f"x{i}")
    sq = pointwise(ctx, "Mul", [x, x], dt, suffix=f"xx{i}")
    xnorm = pointwise(ctx, "Sqrt", [reduce(ctx, "ReduceSum", sq, [sq.rank - 2], True, dt,
                                           suffix=f"ss{i}")], dt, suffix=f"xnorm{i}")
    norm = _dlapy2(ctx, alpha, xnorm, i)
    neg = pointwise(ctx, "Neg", [norm], dt, suffix=f"negnorm{i}")
    beta = select(ctx, signbit(ctx, alpha), norm, neg, dt, f"beta{i}")  # -sign(norm, alpha)
    trivial = pointwise(ctx, "Equal", [xnorm, 0], dt, y_dtype=torch.bool, suffix=f"triv{i}")
    tau = select(ctx, trivial, 0.0, pointwise(ctx, "RealDiv", [pointwise(
        ctx, "Sub", [beta, alpha], dt, suffix=f"ba{i}"), beta], dt, suffix=f"taudiv{i}"),
        dt, f"tau{i}")
    recip = pointwise(ctx, "Reciprocal", [pointwise(ctx, "Sub", [alpha, beta], dt,
                                                    suffix=f"ab{i}")], dt, suffix=f"rab{i}")
    v_below = pointwise(ctx, "Mul", [x, select(ctx, trivial, 1.0, recip, dt, f"scale{i}")], dt,
                        suffix=f"vb{i}")
    at_i = ctx.const(rows == i, torch.bool, f"diag{i}")
    v = select(ctx, at_i, 1.0, v_below, dt, f"v{i}")
    if i + 1 < n:  # dlarf on the trailing columns: C - v (tau v^T C), in dger's order
        right = ctx.const(torch.arange(n) > i, torch.bool, f"right{i}")
        w = _bmm(ctx, v, a, adj_a=True, suffix=f"vtc{i}")
        tw = pointwise(ctx, "Mul", [tau, w], dt, suffix=f"tw{i}")
        upd = pointwise(ctx, "Sub", [a, pointwise(ctx, "Mul", [v, tw], dt, suffix=f"vtw{i}")],
                        dt, suffix=f"upd{i}")
        a = select(ctx, right, upd, a, dt, f"applied{i}")
    head = select(ctx, at_i, select(ctx, trivial, alpha, beta, dt, f"rii{i}"), v_below, dt,
                  f"head{i}")
    new_col = select(ctx, ctx.const(rows < i, torch.bool, f"above{i}"), col, head, dt,
                     f"newcol{i}")
    this = ctx.const(torch.arange(n) == i, torch.bool, f"this{i}")
    return select(ctx, this, new_col, a, dt, f"a{i}"), tau


def _geqrf_ok(node: torch.fx.Node) -> str | None:
    if min(node.args[0].meta["val"].shape[-2:]) > MAX_UNROLLED_ROWS:
        return f"dgeqr2 is unrolled per column (at most {MAX_UNROLLED_ROWS})"
    return None


@register(aten.geqrf.default, capability=linalg_ok(dtypes_=_MATMUL, extra=_geqrf_ok))
def geqrf(ctx, self):
    """geqrf(Tensor self) -> (Tensor a, Tensor tau)"""
    # No GE op returns Householder reflectors (GE's Qr returns Q): LAPACK's unblocked
    # dgeqr2, one column at a time (dnrm2 is a plain sum of squares here: ~1 ulp apart)
    a, taus = self, []
    for i in range(min(self.shape[-2:])):
        a, tau = _geqr2_step(ctx, a, i)
        taus.append(reshape(ctx, tau, tau.shape[:-2], f"tau{i}_s"))
    tau = ctx.op("Pack", [taus], {"axis": self.rank - 2, "N": len(taus)},
                 out=ctx.out_specs()[1], suffix="tau") if taus else filled(
        ctx, ctx.out_specs()[1][1], 0, self.dtype)
    return a, tau
