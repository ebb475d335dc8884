"""Linear-algebra GE ops (TensorFlow-like semantics) with torch.linalg.

Each kernel uses the torch.linalg routine eager PyTorch uses for the same factorization, so
vectors with a sign or phase freedom (SVD, QR, eigenvectors) come out as eager's do. Like
the real ops (TensorFlow's and Ascend's AICPU kernels), ``MatrixInverse``, ``MatrixSolve``
and ``Cholesky`` fail on a singular / not positive-definite input instead of returning
garbage; ``Lu`` does not (a singular LU factorization is still valid).
"""

from __future__ import annotations

import torch

from npu_inductor.runtime.kernels import kernel


class LinalgError(ValueError):
    """A factorization the GE op cannot complete (singular or not positive-definite)."""


def _check(info: torch.Tensor, op: str, what: str) -> None:
    if bool((info != 0).any()):
        first = int(info[info != 0].reshape(-1)[0])
        raise LinalgError(f"{op}: {what} (LAPACK info {first} in {int((info != 0).sum())} "
                          f"of {info.numel()} matrices)")


def _empty(x: torch.Tensor) -> torch.Tensor:
    """An output the op leaves undefined (``compute_uv`` / ``compute_v`` off)."""
    return x.new_empty((0,))


@kernel("Svd")
def svd(x, compute_uv=True, full_matrices=False):
    if not compute_uv:
        return torch.linalg.svdvals(x), _empty(x), _empty(x)
    u, s, vh = torch.linalg.svd(x, full_matrices=full_matrices)
    return s, u, vh.mH  # GE's v: x = u @ diag(s) @ v^H


@kernel("MatrixInverse")
def matrix_inverse(x, adjoint=False):
    y, info = torch.linalg.inv_ex(x.mH if adjoint else x)
    _check(info, "MatrixInverse", "input is not invertible")
    return y


@kernel("MatrixSolve")
def matrix_solve(matrix, rhs, adjoint=False):
    if adjoint:  # eager's left=False path: factor ``matrix`` itself, solve with its adjoint
        lu, pivots, info = torch.linalg.lu_factor_ex(matrix)
        _check(info, "MatrixSolve", "input matrix is not invertible")
        return torch.linalg.lu_solve(lu, pivots, rhs, adjoint=True)
    y, info = torch.linalg.solve_ex(matrix, rhs)
    _check(info, "MatrixSolve", "input matrix is not invertible")
    return y


@kernel("MatrixTriangularSolve")
def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False):
    # only ``matrix``'s ``lower`` (else upper) triangle is read, as in TensorFlow
    if adjoint:
        return torch.linalg.solve_triangular(matrix.mH, rhs, upper=lower)
    return torch.linalg.solve_triangular(matrix, rhs, upper=not lower)


@kernel("Cholesky")
def cholesky(x):
    y, info = torch.linalg.cholesky_ex(x)  # reads the lower triangle only
    _check(info, "Cholesky", "input is not positive-definite")
    return y


@kernel("Qr")
def qr(x, full_matrices=False):
    return torch.linalg.qr(x, mode="complete" if full_matrices else "reduced")


@kernel("Lu")
def lu(input, output_idx_type=torch.int32):
    """``lu`` packs L (unit diagonal, not stored) and U; ``p`` is the row permutation:
    ``input[..., p, :] == L @ U``."""
    factors, pivots, _ = torch.linalg.lu_factor_ex(input)
    perm, _, _ = torch.lu_unpack(factors, pivots, unpack_data=False)
    return factors, perm.argmax(dim=-2).to(output_idx_type)  # input = P @ L @ U


@kernel("SelfAdjointEig")
def self_adjoint_eig(x, compute_v=True):
    if not compute_v:
        return torch.linalg.eigvalsh(x, UPLO="L"), _empty(x)
    return torch.linalg.eigh(x, UPLO="L")


@kernel("MatrixDeterminant")
def matrix_determinant(x):
    return torch.linalg.det(x)


@kernel("Slogdet")
def slogdet(x):
    return torch.linalg.slogdet(x)


@kernel("Pinverse")
def pinverse(x, rcond=1e-15):
    return torch.linalg.pinv(x, rtol=rcond)  # drops singular values <= rcond * max


@kernel("MatrixSetDiagV2")
def matrix_set_diag_v2(input, diagonal, k):
    k = int(k.reshape(-1)[0])
    y = input.clone()
    y.diagonal(k, -2, -1).copy_(diagonal)
    return y


@kernel("Assert")
def assert_(input_condition, input_data=(), summarize=3):
    if bool(input_condition.all()):
        return None
    shown = [x.reshape(-1)[:summarize].tolist() for x in input_data]
    raise AssertionError(f"Assert failed: condition is false; data: {shown}")
