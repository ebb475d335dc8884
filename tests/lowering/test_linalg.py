"""Linear-algebra converters: compiled with fallback="error" vs eager, batched and unbatched;
backward graphs; error checks (singular / not positive-definite inputs raise); refusals.

Factorizations whose factors are not unique (SVD, QR, eigh's eigenvectors, LU's pivot
choice) are checked by their defining properties — reconstruction,
orthogonality, triangularity, the unique parts against eager — not against eager's factors,
which only a kernel calling the same LAPACK routine would reproduce."""

from __future__ import annotations

import warnings

import pytest
import torch
from harness import STRICT, check_ge_ops, check_grad, ge_op_types, record_graphs

from npu_inductor.compile_fx import record_reports
from npu_inductor.ge import format_graph
from npu_inductor.runtime.host_model import HostExecutionError

linalg = torch.linalg
# Factorizations and solves of well-conditioned 4x4..5x5 matrices: a few ulps times the
# condition number; eager and GE run the same LAPACK routines, so this is loose.
TOL = {"rtol": 1e-5, "atol": 1e-5}
SHAPES = [(4, 4), (2, 3, 4, 4)]  # unbatched, batched


def spd(*shape: int) -> torch.Tensor:
    a = torch.randn(*shape)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


def wellcond(*shape: int) -> torch.Tensor:
    return torch.randn(*shape) + shape[-1] * torch.eye(shape[-1])


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---- defining properties of non-unique factorizations ----------------------------------------
def compiled_factors(fn, *inputs, ge: str):
    """``fn`` compiled with fallback="error"; its outputs, with ``ge`` in the GE graph."""
    torch._dynamo.reset()
    with record_graphs() as graphs:
        out = torch.compile(fn, backend="npu", options=STRICT)(*inputs)
    assert ge in ge_op_types(graphs), f"{ge} not in {sorted(ge_op_types(graphs))}"
    return out


def _near(x, y, scale: float, what: str) -> None:
    """Equal up to float32 rounding of O(n) products of entries of size ``scale``."""
    n = max(x.shape[-2:], default=1)
    torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5 * n * max(scale, 1.0),
                               msg=lambda m: f"{what}: {m}")


def assert_orthonormal_columns(q, what: str) -> None:
    eye = torch.eye(q.shape[-1], dtype=q.dtype).expand(*q.shape[:-2], -1, -1)
    _near(q.mT @ q, eye, 1.0, f"{what}: Q^T Q != I")


def assert_triangular(t, upper: bool, what: str, unit: bool = False) -> None:
    tri = t.triu() if upper else t.tril()
    assert torch.equal(t, tri), f"{what} is not {'upper' if upper else 'lower'} triangular"
    if unit:
        assert torch.equal(t.diagonal(dim1=-2, dim2=-1),
                           torch.ones_like(t.diagonal(dim1=-2, dim2=-1))), f"{what}: diag != 1"


def check_svd(a, out, full: bool) -> None:
    u, s, vh = out
    k = min(a.shape[-2:])
    _near(s, linalg.svdvals(a), a.abs().max().item(), "singular values")  # unique
    assert (s[..., :-1] >= s[..., 1:]).all(), "singular values not descending"
    m, n = a.shape[-2:]
    assert u.shape[-2:] == ((m, m) if full else (m, k)), u.shape
    assert vh.shape[-2:] == ((n, n) if full else (k, n)), vh.shape
    assert_orthonormal_columns(u, "U")
    assert_orthonormal_columns(vh.mT, "V")
    _near((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, a.abs().max().item(),
          "U diag(S) Vh != A")


def check_qr(a, out, mode: str) -> None:
    q, r = out
    scale = a.abs().max().item()
    m, n = a.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    assert r.shape[-2:] == ((k, n) if mode != "r" else (min(m, n), n)), r.shape
    assert_triangular(r, True, "R")
    if mode == "r":
        assert q.numel() == 0, "mode='r' returns an empty Q"
        _near(r.mT @ r, a.mT @ a, scale * scale, "R^T R != A^T A")  # R up to row signs
        return
    assert q.shape[-2:] == (m, k), q.shape
    assert_orthonormal_columns(q, "Q")
    _near(q @ r, a, scale, "QR != A")


def check_eigh(a, out) -> None:
    values, vectors = out
    _near(values, linalg.eigvalsh(a), a.abs().max().item(), "eigenvalues")  # unique
    assert_orthonormal_columns(vectors, "eigenvectors")
    _near(a @ vectors, vectors * values[..., None, :], a.abs().max().item(), "A V != V L")


def check_plu(a, p, lower, upper) -> None:
    assert_triangular(lower, False, "L", unit=True)
    assert_triangular(upper, True, "U")
    assert set(p.unique().tolist()) <= {0.0, 1.0} and (p.sum(-1) == 1).all() \
        and (p.sum(-2) == 1).all(), "P is not a permutation matrix"
    _near(p @ lower @ upper, a, a.abs().max().item(), "P L U != A")


def check_lu_factor(a, out) -> None:
    lu, pivots, *info = out
    m, n = a.shape[-2:]
    assert pivots.dtype == torch.int32 and pivots.shape[-1] == min(m, n)
    rows = torch.arange(1, min(m, n) + 1, dtype=torch.int32)
    assert ((pivots >= rows) & (pivots <= m)).all(), f"pivots out of range: {pivots}"
    if info:
        assert not info[0].any(), f"info {info[0]} on a nonsingular input"
    check_plu(a, *torch.lu_unpack(lu, pivots))


# ---- forward, batched and unbatched -----------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [False, True])
def test_svd(shape, full):
    a = torch.randn(*shape[:-1], shape[-1] + 1)
    fn = lambda x: linalg.svd(x, full_matrices=full)  # noqa: E731
    check_svd(a, fn(a), full)  # the property check holds for eager's factors
    check_svd(a, compiled_factors(fn, a, ge="Svd"), full)
    check_svd(a.mT, compiled_factors(fn, a.mT.contiguous(), ge="Svd"), full)  # tall


@pytest.mark.parametrize("shape", SHAPES)
def test_svdvals_and_matrix_norms(shape):
    a = torch.randn(shape)
    check_ge_ops(linalg.svdvals, a, ge="Svd", **TOL)
    check_ge_ops(lambda x: linalg.matrix_norm(x, "nuc"), a, ge="Svd", **TOL)
    check_ge_ops(linalg.cond, a, ge="Svd", **TOL)
    check_ge_ops(linalg.matrix_rank, a, ge="Svd")


@pytest.mark.parametrize("shape", SHAPES)
def test_inverse(shape):
    graphs = check_ge_ops(linalg.inv, wellcond(*shape), ge=("MatrixInverse", "Assert"), **TOL)
    check_ge_ops(linalg.inv_ex, wellcond(*shape), ge="MatrixInverse", **TOL)
    text = format_graph(graphs[0].lowered.graph)
    assert "^%" in text  # the Assert reaches the output through a control edge


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("left", [True, False])
def test_solve(shape, left):
    a, b = wellcond(*shape), torch.randn(*shape[:-1], 3) if left else torch.randn(3, shape[-1])
    check_ge_ops(lambda x, y: linalg.solve(x, y, left=left), a, b, ge="MatrixSolve", **TOL)
    check_ge_ops(lambda x, y: linalg.solve_ex(x, y, left=left), a, b, ge="MatrixSolve", **TOL)


def test_solve_vector_rhs_and_broadcast():
    a = wellcond(2, 4, 4)
    check_ge_ops(linalg.solve, a, torch.randn(4), ge="MatrixSolve", **TOL)
    check_ge_ops(linalg.solve, a, torch.randn(2, 4), ge="MatrixSolve", **TOL)
    check_ge_ops(linalg.solve, wellcond(4, 4), torch.randn(3, 4, 2), ge="MatrixSolve", **TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("upper,left,unit", [(True, True, False), (False, True, True),
                                             (True, False, False), (False, False, True)])
def test_solve_triangular(shape, upper, left, unit):
    a = wellcond(*shape)
    b = torch.randn(*shape[:-1], 2) if left else torch.randn(*shape[:-2], 2, shape[-1])
    check_ge_ops(lambda x, y: linalg.solve_triangular(x, y, upper=upper, left=left,
                                                      unitriangular=unit),
                 a, b, ge="MatrixTriangularSolve", **TOL)


@pytest.mark.parametrize("transpose", [False, True])
def test_triangular_solve_legacy(transpose):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.triangular_solve is deprecated
        check_ge_ops(lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=transpose),
                     torch.randn(2, 4, 3), wellcond(2, 4, 4), ge="MatrixTriangularSolve", **TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family(shape, upper):
    a = spd(*shape)
    check_ge_ops(lambda x: linalg.cholesky(x, upper=upper), a, ge="Cholesky", **TOL)
    check_ge_ops(lambda x: linalg.cholesky_ex(x, upper=upper), a, ge="Cholesky", **TOL)
    check_ge_ops(lambda x: torch.cholesky(x, upper=upper), a, ge="Cholesky", **TOL)
    factor = linalg.cholesky(a, upper=upper)
    check_ge_ops(lambda f: torch.cholesky_inverse(f, upper=upper), factor,
                 ge="MatrixTriangularSolve", **TOL)
    check_ge_ops(lambda b, f: torch.cholesky_solve(b, f, upper=upper),
                 torch.randn(*shape[:-1], 2), factor, ge="MatrixTriangularSolve", **TOL)


@pytest.mark.parametrize("shape", SHAPES)
def test_determinants(shape):
    a = wellcond(*shape)
    check_ge_ops(linalg.det, a, ge="MatrixDeterminant", **TOL)
    check_ge_ops(linalg.slogdet, a, ge="Slogdet", **TOL)
    check_ge_ops(torch.logdet, spd(*shape), ge="Slogdet", **TOL)


@pytest.mark.parametrize("shape", SHAPES)
def test_eigh_lower(shape):
    a = spd(*shape)
    check_eigh(a, compiled_factors(linalg.eigh, a, ge="SelfAdjointEig"))
    check_ge_ops(linalg.eigvalsh, a, ge="SelfAdjointEig", **TOL)
    check_ge_ops(lambda x: linalg.eigvalsh(x, UPLO="U"), torch.randn(shape), ge="SelfAdjointEig",
                 **TOL)


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(shape, mode):
    a = torch.randn(shape)
    fn = lambda x: linalg.qr(x, mode=mode)  # noqa: E731
    check_qr(a, fn(a), mode)
    check_qr(a, compiled_factors(fn, a, ge="Qr"), mode)
    wide = torch.randn(*shape[:-2], shape[-1], shape[-2])
    check_qr(wide, compiled_factors(fn, wide, ge="Qr"), mode)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5), (5, 3), (2, 6, 6)])
def test_lu_factor_and_unpack(shape):
    a = torch.randn(shape)
    check_lu_factor(a, compiled_factors(linalg.lu_factor_ex, a, ge="Lu"))
    check_plu(a, *compiled_factors(linalg.lu, a, ge="Lu"))
    lu, pivots = linalg.lu_factor(a)  # lu_unpack is a function of its inputs: vs eager
    check_ge_ops(torch.lu_unpack, lu, pivots, **TOL)


@pytest.mark.parametrize("left,adjoint", [(True, False), (True, True), (False, False),
                                          (False, True)])
def test_lu_solve(left, adjoint):
    lu, pivots = linalg.lu_factor(wellcond(2, 5, 5))
    b = torch.randn(2, 5, 3) if left else torch.randn(2, 3, 5)
    check_ge_ops(lambda x, p, y: linalg.lu_solve(x, p, y, left=left, adjoint=adjoint),
                 lu, pivots, b, ge="MatrixTriangularSolve", **TOL)


@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv(hermitian):
    a = spd(2, 4, 4) if hermitian else torch.randn(2, 4, 3)
    check_ge_ops(lambda x: linalg.pinv(x, hermitian=hermitian), a,
                 ge="SelfAdjointEig" if hermitian else "Pinverse", **TOL)
    check_ge_ops(lambda x: linalg.pinv(x, atol=0.1, rtol=0.01, hermitian=hermitian), a,
                 ge="SelfAdjointEig" if hermitian else "Svd", **TOL)
    rank_deficient = torch.randn(4, 2) @ torch.randn(2, 3)
    check_ge_ops(torch.pinverse, rank_deficient, ge="Svd", **TOL)  # rcond: a tensor rtol


@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (2, 3, 4, 4), (3, 5)])
def test_geqrf(shape):
    a = torch.randn(shape)
    a[..., 2:, 1] = 0  # one trivial reflector (tau = 0)
    # LAPACK's convention (beta = -sign(alpha) * norm) makes the reflectors unique: vs eager
    check_ge_ops(torch.geqrf, a, **TOL)


@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (2, 5, 3)])
def test_householder_product(shape):
    a, tau = torch.geqrf(torch.randn(shape))
    check_ge_ops(linalg.householder_product, a, tau, ge="BatchMatMulV2", **TOL)
    check_ge_ops(linalg.householder_product, a, tau[..., :2], **TOL)  # fewer reflectors


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_ormqr(left, transpose):
    a, tau = torch.geqrf(torch.randn(2, 5, 5))
    c = torch.randn(2, 5, 3) if left else torch.randn(2, 3, 5)
    check_ge_ops(lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=transpose),
                 a, tau, c, **TOL)


def test_float64():
    a = spd(2, 4, 4).double()
    b = torch.randn(2, 4, 3, dtype=torch.float64)
    svd = compiled_factors(linalg.svd, a, ge="Svd")
    assert all(t.dtype == torch.float64 for t in svd)
    check_svd(a, svd, full=True)
    check_ge_ops(linalg.solve, a, b, ge="MatrixSolve")
    check_ge_ops(linalg.cholesky, a, ge="Cholesky")
    check_eigh(a, compiled_factors(linalg.eigh, a, ge="SelfAdjointEig"))
    check_lu_factor(a, compiled_factors(linalg.lu_factor, a, ge="Lu"))
    # compositions with BatchMatMulV2 (no float64 in its prototype) fall back instead
    assert _fallbacks(torch.cholesky_inverse, linalg.cholesky(a)) == {
        "aten.cholesky_inverse.default"}


# ---- backward graphs lower too ----------------------------------------------------------------
@pytest.mark.parametrize("name", ["inv", "solve", "cholesky", "svdvals", "det", "slogdet",
                                  "pinv", "eigvalsh", "lu_factor"])
def test_grad(name):
    cases = {
        "inv": (linalg.inv, spd(2, 4, 4)),
        "solve": (linalg.solve, spd(2, 4, 4), torch.randn(2, 4, 3)),
        "cholesky": (linalg.cholesky, spd(2, 4, 4)),
        "svdvals": (linalg.svdvals, torch.randn(2, 4, 3)),
        "det": (linalg.det, spd(3, 3)),
        "slogdet": (lambda a: linalg.slogdet(a)[1], spd(3, 3)),
        "pinv": (linalg.pinv, torch.randn(4, 3)),
        "eigvalsh": (linalg.eigvalsh, spd(4, 4)),
        "lu_factor": (lambda a: linalg.lu_factor(a)[0], torch.randn(4, 4)),
    }
    fn, *inputs = cases[name]
    check_grad(fn, *inputs)


# ---- errors: never a silent wrong answer -------------------------------------------------------
def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="npu", options=STRICT)


def test_singular_inverse_raises():
    with pytest.raises(HostExecutionError, match="MatrixInverse.*not invertible"):
        _compiled(linalg.inv)(torch.ones(3, 3))


def test_singular_solve_raises():
    with pytest.raises(HostExecutionError, match="MatrixSolve.*not invertible"):
        _compiled(linalg.solve)(torch.ones(3, 3), torch.randn(3, 1))


def test_not_positive_definite_cholesky_raises():
    with pytest.raises(HostExecutionError, match="Cholesky.*not positive-definite"):
        _compiled(linalg.cholesky)(-torch.eye(3))


def test_singular_lu_factor_raises_through_assert():
    """GE's Lu factors a singular matrix (as eager's lu_factor_ex does); lu_factor's error
    check is the GE Assert on ``info``."""
    a = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(HostExecutionError, match="Assert"):
        _compiled(linalg.lu_factor)(a)
    check_ge_ops(linalg.lu_factor_ex, a, ge="Lu")  # info == 2, like eager
    assert int(_compiled(linalg.lu_factor_ex)(a).info) == 2


def test_info_is_zero_on_success():
    for fn, a in [(linalg.inv_ex, wellcond(2, 3, 3)), (linalg.cholesky_ex, spd(2, 3, 3)),
                  (linalg.lu_factor_ex, torch.randn(2, 3, 3))]:
        info = _compiled(fn)(a).info
        assert info.dtype == torch.int32 and info.shape == (2,) and not info.any()


# ---- refusals fall back (counted), never approximate ------------------------------------------
def _fallbacks(fn, *args) -> dict:
    torch._dynamo.reset()
    with warnings.catch_warnings(), record_reports() as reports:
        warnings.simplefilter("ignore")
        out = torch.compile(fn, backend="npu", options={"fallback": "eager"})(*args)
    torch.testing.assert_close(out, fn(*args))
    return {str(f.target) for r in reports for f in r.fallbacks}


def test_eigh_upper_eigenvectors_fall_back():
    # LAPACK's upper reduction picks other eigenvector signs than GE's lower-triangle op
    got = _fallbacks(lambda x: linalg.eigh(x, UPLO="U"), spd(4, 4))
    assert got == {"aten._linalg_eigh.default"}


def test_pivots_past_the_unroll_limit_fall_back():
    from npu_inductor.lowering.linalg import MAX_UNROLLED_ROWS

    n = MAX_UNROLLED_ROWS + 1
    assert _fallbacks(linalg.lu_factor_ex, wellcond(n, n)) == {"aten.linalg_lu_factor_ex.default"}
    assert not _fallbacks(linalg.lu_factor_ex, wellcond(8, 8))
