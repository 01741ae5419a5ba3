"""``frobenius`` (A Mathematical Framework) and its Haar-baselined version.

``frobenius = ‖BA‖_F / (‖B‖_F ‖A‖_F)`` with ``‖BA‖_F² = Σ_ij b_i² X_ij² a_j²``.
Under uniformly random subspaces ``E[X_ij²] = 1/d``, so ``E[frobenius²] = 1/d`` exactly; the
expectation of ``frobenius`` itself (for the pair's own spectra) is estimated by a seeded
Monte Carlo over Haar-random ``X`` (see ``compscope.engine.baseline``), and
``frobenius_baselined = frobenius - E[frobenius]`` (can be negative).
"""

from __future__ import annotations

import torch

from . import GramStats, Measure, PairSpectra, register


def _frob_from(ba2, a, b):
    den = (a.pow(2).sum(-1) * b.pow(2).sum(-1)).sqrt()
    return torch.where(den > 0, ba2.clamp_min(0).sqrt() / den.clamp_min(1e-300), torch.zeros_like(den))


def frobenius_exact(p: PairSpectra):
    return _frob_from(p.core().pow(2).sum((-1, -2)), p.a, p.b)


def frobenius_gram(g: GramStats):
    return _frob_from(g.ba2, g.a, g.b)


FROBENIUS = register(Measure(
    name="frobenius",
    exact=frobenius_exact,
    from_gram=frobenius_gram,
    range=(0.0, 1.0),
    doc="‖BA‖_F / (‖B‖_F ‖A‖_F)",
    satisfies=frozenset({"no_read", "monotone", "orthogonal_invariant", "padding", "scale", "split"}),
    fails={
        "full_read": "equals 1 only for rank-one aligned maps: a flat rank-r read gives r^-1/2",
        "identity": "C(I, I) = d^-1/2",
    },
    gram_inputs=frozenset({"ba2"}),
))


def _baselined(value, expected):
    if expected is None:
        raise ValueError("frobenius_baselined needs the Haar expectation (GramStats.expected_frobenius)")
    return value - expected


register(Measure(
    name="frobenius_baselined",
    exact=lambda p: _baselined(frobenius_exact(p), p.expected_frobenius),
    from_gram=lambda g: _baselined(frobenius_gram(g), g.expected_frobenius),
    range=(-1.0, 1.0),
    doc="frobenius - E[frobenius | same spectra, Haar-random subspaces]",
    satisfies=frozenset({"orthogonal_invariant", "monotone", "scale", "split"}),
    fails={
        "no_read": "orthogonal subspaces give -E[frobenius] < 0",
        "full_read": "as frobenius, shifted",
        "identity": "C(I, I) = d^-1/2 - d^-1/2 = 0",
        "padding": "the baseline depends on d",
    },
    needs_baseline=True,
    gram_inputs=frozenset({"ba2"}),
))
