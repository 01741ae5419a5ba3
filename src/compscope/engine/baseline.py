"""The Haar baseline of ``frobenius``: its expectation when the writer's and reader's spectra
are kept and their subspaces are drawn uniformly at random.

By invariance, ``X = V_Bᵀ U_A`` is then distributed as the top ``r_B`` rows of a Haar-random
``d × r_A`` orthonormal frame. ``E[X_ij²] = 1/d`` makes ``E[frobenius²] = 1/d`` exact;
``E[frobenius]`` is estimated by a seeded Monte Carlo over ``n_samples`` draws shared by all
pairs (standard error ``≈ sd / sqrt(n_samples)``, returned alongside).

Sampling without the ``d × r_A`` frame: for Gaussian ``G = [G_1; G_2]`` (``G_1``: ``r_B × r_A``)
the frame ``Q = G R⁻¹`` (``GᵀG = RᵀR``, ``R`` upper triangular with positive diagonal: the QR
factor with signs fixed) is Haar, and its top rows are ``X = G_1 R⁻¹``. Only ``GᵀG = G_1ᵀG_1 +
W`` is needed, where ``W = G_2ᵀG_2 ~ Wishart(d - r_B, I)`` is drawn by Bartlett's decomposition
``W = T Tᵀ`` (``T`` lower triangular, ``T_ii² ~ χ²(d - r_B - i + 1)``, ``T_ij ~ N(0, 1)`` below
the diagonal): ``O(r²)`` draws per sample instead of ``d r``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from torch import Tensor


def haar_cosines(d: int, r_b: int, r_a: int, n_samples: int = 256, seed: int = 0) -> Tensor:
    """``(n_samples, r_b, r_a)`` draws of ``X`` for uniformly random subspaces (float64)."""
    return _haar_cosines(d, r_b, r_a, n_samples, seed).clone()


@lru_cache(maxsize=4)
def _haar_cosines(d: int, r_b: int, r_a: int, n_samples: int, seed: int) -> Tensor:
    rng = np.random.default_rng(seed)
    g1 = torch.from_numpy(rng.standard_normal((n_samples, r_b, r_a)))
    df = d - r_b
    if df >= r_a:  # Bartlett: W = T Tᵀ
        t = np.tril(rng.standard_normal((n_samples, r_a, r_a)), -1)
        idx = np.arange(r_a)
        t[:, idx, idx] = np.sqrt(rng.chisquare(df - idx, size=(n_samples, r_a)))
        t = torch.from_numpy(t)
        w = t @ t.mT
    else:  # too few remaining dimensions for a nonsingular Wishart: draw G_2 itself
        g2 = torch.from_numpy(rng.standard_normal((n_samples, max(df, 0), r_a)))
        w = g2.mT @ g2
    R = torch.linalg.cholesky(g1.mT @ g1 + w, upper=True)
    return torch.linalg.solve_triangular(R, g1, upper=True, left=False)


@lru_cache(maxsize=4)
def _haar_squares(d: int, r_b: int, r_a: int, n_samples: int, seed: int) -> Tensor:
    """``X_ij²`` of :func:`haar_cosines`' draws, in float32 (read-only: cached)."""
    return _haar_cosines(d, r_b, r_a, n_samples, seed).pow(2).float()


def expected_frobenius(
    a: Tensor, b: Tensor, d: int, n_samples: int = 256, seed: int = 0, max_elements: int = 1 << 20
) -> tuple[Tensor, Tensor]:
    """``E[frobenius]`` and its Monte-Carlo standard error for every (reader, writer) pair.

    ``a: (n_writers, r_A)``, ``b: (n_readers, r_B)`` spectra; returns ``(n_readers, n_writers)``
    float64. Per sample ``‖BA‖_F² = Σ_ij b_i² X_ij² a_j²`` is a sum of non-negative terms, so it
    is formed in float32 (relative error ~1e-7, far below the Monte-Carlo error), and the
    variance from the deviations from the mean (not ``E[f²] - m²``, which cancels where the draws
    barely differ), NaN from one draw (no spread to estimate); readers are taken in chunks of at most
    ``max_elements`` sample × pair entries."""
    Y = _haar_squares(d, b.shape[-1], a.shape[-1], n_samples, seed)  # (S, rB, rA)
    a2, b2 = _unit_rows(a.to(torch.float64).pow(2)), _unit_rows(b.to(torch.float64).pow(2))  # frobenius = sqrt(Σ b²X²a²)
    a2t = a2.float().T.contiguous()
    mean = torch.empty(b.shape[0], a.shape[0], dtype=torch.float64)
    se = torch.full_like(mean, float("nan"))
    step = max(1, max_elements // max(1, n_samples * a.shape[0]))
    for i in range(0, b.shape[0], step):
        z = torch.matmul(b2[i : i + step].float(), Y)  # (S, chunk, rA)
        f = torch.matmul(z, a2t).clamp_min_(0).sqrt_()  # (S, chunk, n_writers): frobenius per sample
        m = f.mean(0)
        mean[i : i + step] = m.double()
        if n_samples > 1:  # (two passes: no cancellation)
            var = f.sub_(m).pow_(2).mean(0).double() * n_samples / (n_samples - 1)
            se[i : i + step] = (var / n_samples).sqrt()
    return mean, se


def _unit_rows(w: Tensor) -> Tensor:
    """Rows scaled to sum 1 (zero rows stay zero)."""
    s = w.sum(-1, keepdim=True)
    return torch.where(s > 0, w / s.clamp_min(1e-300), torch.zeros_like(w))
