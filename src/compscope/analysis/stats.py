"""Statistics that compare rankings (of measures against data, of weights against activations), and\nthe random orthonormal draws the axiom battery and the gauge checks make."""

from __future__ import annotations

import torch
from torch import Tensor


def haar_orthonormal(n: int, k: int, g: torch.Generator) -> Tensor:
    """``n × k`` float64 with orthonormal columns, Haar-distributed (QR of a Gaussian, signs fixed
    by ``R``'s diagonal); ``k = n``: a random orthogonal matrix."""
    q, r = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))[None, :]


def ranks(x: Tensor) -> Tensor:
    """Ranks ``1..n`` of a 1-D tensor, float64; a run of tied values shares the mean of its ranks:
    ``rank(x_i) = #{x_j < x_i} + (#{x_j = x_i} + 1) / 2``. One sort."""
    order = x.argsort()
    _, run, count = torch.unique_consecutive(x[order], return_inverse=True, return_counts=True)
    end = count.cumsum(0).double()
    out = torch.empty(len(x), dtype=torch.float64)
    out[order] = ((end - count + 1 + end) / 2)[run]
    return out


def spearman(x: Tensor, y: Tensor) -> float:
    """Rank correlation of two equally shaped score tensors (NaNs dropped pairwise): Pearson's
    correlation of their :func:`ranks` (ties share a mean rank, so no tie is broken by position)."""
    x, y = x.flatten().double(), y.flatten().double()
    keep = torch.isfinite(x) & torch.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 2:
        return float("nan")
    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = (rx.norm() * ry.norm()).item()
    return float((rx @ ry) / den) if den > 0 else float("nan")
