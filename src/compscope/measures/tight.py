"""``tight`` (Turner & Strand): ``‖BA‖_F / sqrt(Σ_{i ≤ min(r_A, r_B)} a_(i)² b_(i)²)``.

The denominator is the largest ``‖BA‖_F`` any alignment of the two spectra can reach
(``X_ij²`` is doubly sub-stochastic, so ``Σ b_i² a_j² X_ij²`` peaks at the sorted pairing),
so ``tight ∈ [0, 1]`` and equals 1 iff the bases align with the orders agreeing.
"""

from __future__ import annotations

import torch

from . import Measure, register


def _tight(ba2, a, b):
    k = min(a.shape[-1], b.shape[-1])
    a_s = a.sort(-1, descending=True).values[..., :k]
    b_s = b.sort(-1, descending=True).values[..., :k]
    den = torch.einsum("...i,...i->...", a_s.pow(2), b_s.pow(2))  # broadcast pairs, no (pairs, r) temporary
    return torch.where(den > 0, (ba2.clamp_min(0) / den.clamp_min(1e-300)).sqrt(), torch.zeros_like(den))


register(Measure(
    name="tight",
    exact=lambda p: _tight(p.core().pow(2).sum((-1, -2)), p.a, p.b),
    from_gram=lambda g: _tight(g.ba2, g.a, g.b),
    range=(0.0, 1.0),
    doc="‖BA‖_F / sqrt(Σ_i a_(i)² b_(i)²), spectra sorted descending",
    satisfies=frozenset({"no_read", "monotone", "orthogonal_invariant", "identity", "padding", "scale", "split"}),
    fails={"full_read": "a full read with mismatched spectrum orders gives < 1"},
    gram_inputs=frozenset({"ba2"}),
))
