"""The Haar baseline of ``frobenius``: its expectation when the writer's and reader's spectra
are kept and their subspaces are drawn uniformly at random.

By invariance, ``X = V_Bᵀ U_A`` is then distributed as the top ``r_B`` rows of a Haar-random
``d × r_A`` orthonormal frame (QR of a Gaussian matrix, signs fixed). ``E[X_ij²] = 1/d``
makes ``E[frobenius²] = 1/d`` exact; ``E[frobenius]`` is estimated by a seeded Monte Carlo
over ``n_samples`` draws shared by all pairs (standard error ``≈ sd / sqrt(n_samples)``,
returned alongside).
"""

from __future__ import annotations

import torch
from torch import Tensor


def haar_cosines(d: int, r_b: int, r_a: int, n_samples: int = 256, seed: int = 0) -> Tensor:
    """``(n_samples, r_b, r_a)`` draws of ``X`` for uniformly random subspaces (float64)."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n_samples, d, r_a, generator=g, dtype=torch.float64)
    q, r = torch.linalg.qr(z)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
    return q[:, :r_b, :]


def expected_frobenius(a: Tensor, b: Tensor, d: int, n_samples: int = 256, seed: int = 0) -> tuple[Tensor, Tensor]:
    """``E[frobenius]`` and its Monte-Carlo standard error for every (reader, writer) pair.

    ``a: (n_writers, r_A)``, ``b: (n_readers, r_B)`` spectra; returns ``(n_readers, n_writers)``."""
    Y = haar_cosines(d, b.shape[-1], a.shape[-1], n_samples, seed).pow(2)  # (S, rB, rA)
    a2, b2 = a.to(torch.float64).pow(2), b.to(torch.float64).pow(2)
    s = torch.einsum("ri,sij,wj->srw", b2, Y, a2)  # ‖BA‖_F² per sample
    den = (b2.sum(-1)[:, None] * a2.sum(-1)[None, :]).sqrt().clamp_min(1e-300)
    f = s.clamp_min(0).sqrt() / den
    return f.mean(0), f.std(0) / n_samples**0.5
