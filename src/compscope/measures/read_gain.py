"""``read_gain = ‖BA‖_F / ‖A‖_F``: how strongly the reader responds to what the writer writes,
the writer's scale divided out and the reader's kept (``frobenius · ‖B‖_F``).

``‖BA‖_F² / ‖A‖_F² = Σ_j a_j² ‖B u_j‖² / Σ_j a_j²`` with ``‖B u_j‖² = Σ_i b_i² X_ij²``
(``u_j`` the writer's output directions): the reader's squared gain along each direction the
writer writes, averaged with the writer's weights ``a_j²``.
The normalised measures divide ``‖B‖`` out, so a reader whose logits barely move counts as
much as a sharp one; this one keeps it. Under a metric estimated on data the scale means
something: for independent ``x, y`` with second moment ``G``, ``E[(xᵀ W_QK y)²] =
‖G^{1/2} W_QK G^{1/2}‖_F²``, so in whitened coordinates a K reader's ``‖B‖_F`` is the root mean
square of its attention logit between two positions of the data, and ``read_gain`` the root mean
square change of that logit per unit (whitened) write along the writer's directions. Under
``identity`` it is in the units of the stored weights. A norm inside the reader's circuit that
rescales its query and key (QK-norm) takes that scale out of ``W_Q``, ``W_K``: there it is
meaningful only with the norm linearised (``linearise_norms``).

Axioms: 0 for a reader that reads nothing of ``A``, monotone in the principal angles,
orthogonally invariant (GL-invariant under a metric), ``C(I, I) = 1`` for every ``d``, blind to
zero padding and to how a head is split; not in ``[0, 1]`` and not invariant to the reader's
scale (``C(αA, βB) = |β| C(A, B)``), which is the point.
"""

from __future__ import annotations

import torch

from . import GramStats, Measure, PairSpectra, register


def _gain_from(ba2, a):
    den = a.pow(2).sum(-1)
    return torch.where(den > 0, (ba2.clamp_min(0) / den.clamp_min(1e-300)).sqrt(), torch.zeros_like(den))


def read_gain_exact(p: PairSpectra):
    return _gain_from(p.core().pow(2).sum((-1, -2)), p.a) * p.reader_scale()


def read_gain_gram(g: GramStats):
    return _gain_from(g.ba2, g.a) * g.reader_scale()


register(Measure(
    name="read_gain",
    exact=read_gain_exact,
    from_gram=read_gain_gram,
    range=(0.0, float("inf")),
    doc="‖BA‖_F / ‖A‖_F",
    satisfies=frozenset({"no_read", "monotone", "orthogonal_invariant", "identity", "padding", "split"}),
    fails={
        "full_read": "a full read gives the reader's gains averaged over the writer's directions, not 1",
        "scale": "C(αA, βB) = |β| C(A, B): the reader's scale is what it keeps",
    },
    gram_inputs=frozenset({"ba2"}),
))
