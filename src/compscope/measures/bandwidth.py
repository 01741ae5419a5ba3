"""``bandwidth``: how many independent channels a pair uses, and the unweighted count.

``bandwidth = exp(H(p))``, ``p_k = σ_k² / Σ σ²``, where ``σ`` are the singular values of
``diag(b) X diag(a)`` (the effective rank of ``BA``; 0 when ``BA = 0``; at most
``min(r_A, r_B)``). ``shared_dims = ‖X‖_F² = Σ cos² θ_k``: the expected number of shared
dimensions, spectra ignored.

The effective rank does not depend on the scale of ``σ``, so rounding noise in a core that is
zero in exact arithmetic (``col(A) ⊥ row(B)``) would count as channels. Singular values at or
below the rounding error of the core are therefore counted as 0, like a numerical rank: ``X``'s
entries are dot products of length ``d`` in ``X``'s dtype, so ``‖ΔX‖_2 ≲ ε √(d r)`` and
``σ_k ≤ ε √(d r) · a_max · b_max`` (``r = max(r_A, r_B)``) cannot be told from 0. This is the
rounding of the computation: a product that is tiny but real in the stored weights (say,
orthogonal only to bfloat16 precision) keeps its channels.
"""

from __future__ import annotations

import math

import torch

from . import Measure, PairSpectra, register


def effective_rank_sq(s2: torch.Tensor) -> torch.Tensor:
    """The effective rank ``exp(H(p))`` from squared singular values ``s2 = σ²``: ``p = σ² / Σ σ²`` over the
    last dimension (0 where every ``σ = 0``)."""
    total = s2.sum(-1, keepdim=True)
    p = torch.where(total > 0, s2 / total.clamp_min(1e-300), torch.zeros_like(s2))
    h = -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1)
    return torch.where(total[..., 0] > 0, h.exp(), torch.zeros_like(h))


def _bandwidth(p: PairSpectra) -> torch.Tensor:
    s2 = p.sv2()
    eps = torch.finfo(p.X.dtype).eps * math.sqrt(p.d * max(p.X.shape[-2:]))
    floor = (eps * p.a.amax(-1) * p.b.amax(-1)).pow(2).to(s2.dtype)[..., None]
    return effective_rank_sq(torch.where(s2 > floor, s2, torch.zeros_like(s2)))


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

register(Measure(
    name="bandwidth",
    exact=_bandwidth,
    from_gram=None,
    range=(0.0, float("inf")),
    doc="exp(entropy of the normalised squared singular values of BA)",
    satisfies=frozenset({"no_read", "orthogonal_invariant", "padding", "scale", "split"}),
    fails={"full_read": "a count of channels, not a fraction", "identity": "C(I, I) = d", "monotone": "a scale-free count: 0 while col(A) ⊥ row(B), its full value as soon as A turns (not continuous)"},
))
