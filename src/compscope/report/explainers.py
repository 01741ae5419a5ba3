"""The Python side of the report's geometry explainers: the same matrices the page builds, with
the measures computed by compscope itself, so page and package can be checked against each other.

The communication explainer has two heads with 1-D hidden layers talking through a 2-D
channel: head 1 reads ``w1`` and writes ``A = u1 w1ᵀ`` (it writes along ``u1``); head 2 reads
``B = u2 w2ᵀ`` (it reads along ``w2``). Angles in degrees from the first axis. Every measure of
the pair depends only on the angle between ``u1`` and ``w2`` (``|cos|`` for ``frobenius``,
``tight`` and ``spectral``, ``cos²`` for ``overlap`` and ``shared_dims``, 1 for ``bandwidth``
unless they are orthogonal); lengths cancel.
"""

from __future__ import annotations

import math

import torch

#: the fixed vectors of the communication explainer: what head 1 reads and what head 2 writes
READ_1 = (1.0, 0.0)
WRITE_2 = (0.0, 1.0)


def _unit(angle_deg: float, length: float = 1.0) -> torch.Tensor:
    t = math.radians(angle_deg)
    return torch.tensor([math.cos(t), math.sin(t)], dtype=torch.float64) * length


def channel_maps(write_angle: float, read_angle: float, write_length: float = 1.0, read_length: float = 1.0):
    """``(A, B)`` as ``LowRank`` 2 × 2 maps of rank 1 (module docstring)."""
    from ..core.lowrank import LowRank

    u1 = _unit(write_angle, write_length)[:, None]
    w2 = _unit(read_angle, read_length)[None, :]
    w1 = torch.tensor([READ_1], dtype=torch.float64)
    u2 = torch.tensor(WRITE_2, dtype=torch.float64)[:, None]
    return LowRank(u1, w1), LowRank(u2, w2)


def channel_measures(write_angle: float, read_angle: float, write_length: float = 1.0,
                     read_length: float = 1.0) -> dict[str, float]:
    """Every registered measure of the explainer's pair, as :func:`compscope.compose_pair`
    computes a pair (float64; the Haar baseline by the same seeded Monte Carlo)."""
    from ..analysis.pair import pair_spectra
    from ..measures import measures

    A, B = channel_maps(write_angle, read_angle, write_length, read_length)
    p = pair_spectra(A, B, baseline=True)
    return {name: float(m.exact(p)[0]) for name, m in measures().items()}


def rank1_baseline(d: int = 2) -> float:
    """``E[frobenius]`` of two rank-1 maps in ``d`` dimensions as compscope estimates it (the
    closed form is ``E|cos| = Γ(d/2) / (√π Γ((d+1)/2))``, ``2/π`` for ``d = 2``)."""
    from ..engine.baseline import expected_frobenius

    one = torch.ones(1, 1, dtype=torch.float64)
    return float(expected_frobenius(one, one, d)[0].reshape(-1)[0])


def polarizer(theta_deg: float) -> torch.Tensor:
    """The Jones matrix ``W_θ = u uᵀ``, ``u = (cos θ, sin θ)``: read and write along one line."""
    u = _unit(theta_deg)
    return torch.outer(u, u)


def polarizer_chain(angles_deg) -> torch.Tensor:
    """``W_{θ_n} … W_{θ_1}``: light through polarizers in the order given."""
    out = torch.eye(2, dtype=torch.float64)
    for a in angles_deg:
        out = polarizer(a) @ out
    return out


def explainer_json() -> dict:
    """What the page needs from Python: the baseline of the communication explainer."""
    return {"rank1_baseline_d2": rank1_baseline(2), "read_1": READ_1, "write_2": WRITE_2}
