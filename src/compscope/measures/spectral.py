"""``spectral = ‖BA‖_2 / (‖B‖_2 ‖A‖_2)``: the strongest single channel, relative to the
strongest each map has: ``σ_max(diag(b) X diag(a)) / (b_max a_max)``."""

from __future__ import annotations

import torch

from . import Measure, PairSpectra, register


def _spectral(p: PairSpectra):
    top = p.sv2().amax(-1).clamp_min(0).sqrt().to(p.a.dtype)
    den = p.a.amax(-1) * p.b.amax(-1)
    return torch.where(den > 0, top / den.clamp_min(1e-300), torch.zeros_like(den))


register(Measure(
    name="spectral",
    exact=_spectral,
    from_gram=None,
    range=(0.0, 1.0),
    doc="‖BA‖_2 / (‖B‖_2 ‖A‖_2)",
    satisfies=frozenset({"no_read", "monotone", "orthogonal_invariant", "identity", "padding", "scale", "split"}),
    fails={"full_read": "1 only when the top directions align"},
))
