"""Statistics that compare rankings: of measures against data, of weights against activations."""

from __future__ import annotations

import torch
from torch import Tensor


def spearman(x: Tensor, y: Tensor) -> float:
    """Rank correlation of two equally shaped score tensors (NaNs dropped pairwise)."""
    x, y = x.flatten().double(), y.flatten().double()
    keep = torch.isfinite(x) & torch.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 2:
        return float("nan")
    rx, ry = x.argsort().argsort().double(), y.argsort().argsort().double()
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = (rx.norm() * ry.norm()).item()
    return float((rx @ ry) / den) if den > 0 else float("nan")
