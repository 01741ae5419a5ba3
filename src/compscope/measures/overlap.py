"""``overlap = ‖X‖_F² / r_A``: the mean squared cosine of what A writes onto what B reads.

``X = V_Bᵀ U_A``; its squared singular values are ``cos² θ_k`` of the principal angles between
``col(A)`` and ``row(B)``, so ``overlap = Σ_k cos² θ_k / r_A``: 1 iff ``col(A) ⊆ row(B)``, 0 iff
they are orthogonal, smooth and monotone in every angle. Spectra do not enter.
"""

from __future__ import annotations

import torch

from . import Measure, register


def _overlap(x2, rank_a):
    return torch.where(rank_a > 0, x2 / rank_a.clamp_min(1), torch.zeros_like(x2))


register(Measure(
    name="overlap",
    exact=lambda p: _overlap(p.X.pow(2).sum((-1, -2)), p.rank_a.to(p.X.dtype)),
    from_gram=lambda g: _overlap(g.x2, g.rank_a.to(g.x2.dtype)),
    range=(0.0, 1.0),
    doc="‖X‖_F² / rank(A), X = V_Bᵀ U_A",
    satisfies=frozenset({"full_read", "no_read", "monotone", "orthogonal_invariant", "identity", "padding", "scale", "split"}),
    gram_inputs=frozenset({"x2"}),
))
