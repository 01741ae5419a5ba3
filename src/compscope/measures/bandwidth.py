"""``bandwidth``: how many independent channels a pair uses, and the unweighted count.

``bandwidth = exp(H(p))``, ``p_k = σ_k² / Σ σ²``, where ``σ`` are the singular values of
``diag(b) X diag(a)`` (the effective rank of ``BA``; 0 when ``BA = 0``; at most
``min(r_A, r_B)``). ``shared_dims = ‖X‖_F² = Σ cos² θ_k``: the expected number of shared
dimensions, spectra ignored.
"""

from __future__ import annotations

import torch

from . import Measure, register


def effective_rank(sigma: torch.Tensor) -> torch.Tensor:
    """``exp(H(p))``, ``p = σ² / Σ σ²`` over the last dimension (0 where every ``σ = 0``)."""
    return effective_rank_sq(sigma.pow(2))


def effective_rank_sq(s2: torch.Tensor) -> torch.Tensor:
    """:func:`effective_rank` from the squared singular values."""
    total = s2.sum(-1, keepdim=True)
    p = torch.where(total > 0, s2 / total.clamp_min(1e-300), torch.zeros_like(s2))
    h = -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1)
    return torch.where(total[..., 0] > 0, h.exp(), torch.zeros_like(h))


register(Measure(
    name="bandwidth",
    exact=lambda p: effective_rank_sq(p.sv2()),
    from_gram=None,
    range=(0.0, float("inf")),
    doc="exp(entropy of the normalised squared singular values of BA)",
    satisfies=frozenset({"no_read", "orthogonal_invariant", "padding", "scale", "split"}),
    fails={"full_read": "a count of channels, not a fraction", "identity": "C(I, I) = d", "monotone": "not a fraction of the read"},
))

register(Measure(
    name="shared_dims",
    exact=lambda p: p.X.pow(2).sum((-1, -2)),
    from_gram=lambda g: g.x2,
    range=(0.0, float("inf")),
    doc="‖X‖_F² = Σ_k cos² θ_k (unweighted bandwidth)",
    satisfies=frozenset({"no_read", "monotone", "orthogonal_invariant", "padding", "scale", "split"}),
    fails={"full_read": "equals rank(A), not 1", "identity": "C(I, I) = d"},
    gram_inputs=frozenset({"x2"}),
))
