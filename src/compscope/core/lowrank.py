"""Low-rank factored matrices: ``M = left @ right`` with ``left: (m, r)``, ``right: (r, n)``.

Every head circuit is one: ``W_OV = W_O W_V`` (``d×r @ r×d``) and ``W_QK = W_Q^T W_K``.
Norms and singular values come from the factors (QR of each, SVD of the ``r × r`` core),
so a ``d × d`` matrix is formed only when :meth:`LowRank.dense` is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def svd_from_factors(left: Tensor, right: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Batched thin SVD of ``left @ right`` (``(..., m, r) @ (..., r, n)``): ``U, S, V``.
    ``left = Q_l R_l``, ``rightᵀ = Q_r R_r`` (QR), SVD of the ``r × r`` core ``R_l R_rᵀ``."""
    q_l, r_l = torch.linalg.qr(left)
    q_r, r_r = torch.linalg.qr(right.transpose(-1, -2))
    u, s, vh = torch.linalg.svd(r_l @ r_r.transpose(-1, -2), full_matrices=False)
    return q_l @ u, s, q_r @ vh.transpose(-1, -2)


def numerical_rank(s: Tensor, dims: int) -> Tensor:
    """Singular values ``s`` (descending) above ``s_max · dims · ε`` (of ``s``'s dtype)."""
    tol = s[..., :1] * dims * torch.finfo(s.dtype).eps
    return (s > tol).sum(-1)


@dataclass(frozen=True)
class LowRank:
    """``M = left @ right``; ``left: (m, r)``, ``right: (r, n)``."""

    left: Tensor
    right: Tensor

    def __post_init__(self) -> None:
        if self.left.ndim != 2 or self.right.ndim != 2 or self.left.shape[1] != self.right.shape[0]:
            raise ValueError(
                f"LowRank factors do not chain: left {tuple(self.left.shape)}, right {tuple(self.right.shape)}"
            )

    @property
    def shape(self) -> tuple[int, int]:
        return (self.left.shape[0], self.right.shape[1])

    @property
    def T(self) -> LowRank:  # noqa: N802 - matrix transpose, as in torch
        return LowRank(self.right.T, self.left.T)

    def dense(self) -> Tensor:
        """The full ``m × n`` matrix (only for small cases and tests)."""
        return self.left @ self.right

    def __matmul__(self, other: LowRank) -> LowRank:
        """``(L1 R1)(L2 R2) = L1 (R1 L2 R2)``: stays factored with the inner rank of ``self``."""
        return LowRank(self.left, (self.right @ other.left) @ other.right)

    def svd(self) -> tuple[Tensor, Tensor, Tensor]:
        """Thin SVD ``M = U diag(S) V^T`` from the factors (:func:`svd_from_factors`).
        Returns ``U (m,k), S (k,), V (n,k)``."""
        return svd_from_factors(self.left, self.right)

    def singular_values(self) -> Tensor:
        return self.svd()[1]

    def norm(self, kind: str = "fro") -> Tensor:
        """``'fro'`` (``‖M‖_F² = ⟨L^T L, R R^T⟩_F``) or ``'spectral'`` (largest singular value)."""
        if kind == "fro":
            return (self.left.T @ self.left * (self.right @ self.right.T)).sum().clamp_min(0).sqrt()
        if kind == "spectral":
            return self.singular_values()[0]
        raise ValueError(f"unknown norm {kind!r}; expected 'fro' or 'spectral'")
