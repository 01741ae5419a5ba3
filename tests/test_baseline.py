"""The Haar baseline of ``frobenius`` (``compscope.engine.baseline``) against closed forms and independent draws.

``haar_cosines(d, r_b, r_a)`` draws ``X``, the top ``r_b`` rows of a uniformly random ``d × r_a`` orthonormal frame,
without drawing the frame (Bartlett's Wishart where ``d - r_b >= r_a``, the remaining Gaussian rows otherwise). The
entries of such a frame are those of a Haar orthogonal matrix, whose moments are known in closed form (Weingarten):
``E[X_ij²] = 1/d``, ``E[X_ij⁴] = 3/(d(d+2))``, ``E[X_ij² X_kj²] = E[X_ij² X_il²] = 1/(d(d+2))`` (two entries of one
column, or of one row: both a uniformly random unit vector's) and ``E[X_ij² X_kl²] = (d+1)/(d(d-1)(d+2))`` for
``i ≠ k``, ``j ≠ l``. ``expected_frobenius`` is the mean, with its standard error, of
``sqrt(Σ_ij b̂_i X_ij² â_j)`` (``â``, ``b̂``: the squared spectra scaled to sum 1) over those draws.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from compscope.engine.baseline import expected_frobenius, haar_cosines

#: (d, r_b, r_a): Bartlett's path (d - r_b >= r_a), the Gaussian rows' (0 < d - r_b < r_a), none left (r_b = d)
PATHS = [(7, 2, 3), (5, 3, 3), (3, 3, 2)]


def _per_sample_moments(X: np.ndarray) -> dict[str, np.ndarray]:
    """Per draw, the average over index choices of each fourth-moment product (and of ``X²``)."""
    n, rb, ra = X.shape
    s = X**2
    out = {"X²": s.mean((1, 2)), "X⁴": (s**2).mean((1, 2))}
    if rb > 1:  # two rows of one column
        col = np.einsum("nij,nkj->nik", s, s)
        out["same column"] = (col.sum((1, 2)) - np.einsum("nii->n", col)) / (rb * (rb - 1) * ra)
    if ra > 1:  # two columns of one row
        row = np.einsum("nij,nil->njl", s, s)
        out["same row"] = (row.sum((1, 2)) - np.einsum("njj->n", row)) / (ra * (ra - 1) * rb)
    if rb > 1 and ra > 1:  # other rows and other columns: all products, less those sharing a row or a column
        tot = s.sum((1, 2)) ** 2
        shared = (s.sum(2) ** 2).sum(1) + (s.sum(1) ** 2).sum(1) - (s**2).sum((1, 2))
        out["other row and column"] = (tot - shared) / (rb * (rb - 1) * ra * (ra - 1))
    return out


@pytest.mark.parametrize("d, r_b, r_a", PATHS)
def test_haar_cosines_have_the_moments_of_a_random_frame(d, r_b, r_a):
    """Each second and fourth moment of 100,000 draws within 5 standard errors of its closed form, on each of the
    sampling paths; with no dimension left (``r_b = d``), ``X`` has orthonormal columns exactly."""
    X = haar_cosines(d, r_b, r_a, n_samples=100_000, seed=3).numpy()
    assert X.shape == (100_000, r_b, r_a) and X.dtype == np.float64
    want = {"X²": 1 / d, "X⁴": 3 / (d * (d + 2)), "same column": 1 / (d * (d + 2)), "same row": 1 / (d * (d + 2)),
            "other row and column": (d + 1) / (d * (d - 1) * (d + 2))}
    got = _per_sample_moments(X)
    assert len(got) == 5
    for name, per in got.items():
        se = per.std(ddof=1) / np.sqrt(len(per))
        assert abs(per.mean() - want[name]) < 5 * se, (name, per.mean(), want[name], se)
    if r_b == d:
        np.testing.assert_allclose(X.transpose(0, 2, 1) @ X, np.broadcast_to(np.eye(r_a), (len(X), r_a, r_a)),
                                   atol=1e-10)
    assert np.linalg.norm(X, ord=2, axis=(1, 2)).max() <= 1 + 1e-10  # (rows of an orthonormal frame: a contraction)


def _spectra(r_a: int, r_b: int):
    """Writers and readers: generic spectra, a rank-one head, one scaled far below 1 (the same direction as a generic
    one), and a zero head."""
    g = torch.Generator().manual_seed(11)
    a = torch.rand(4, r_a, generator=g, dtype=torch.float64) + 0.1
    a[1, 1:] = 0  # rank one
    a[2] = a[0] * 1e-3  # far below 1: the same spectrum up to scale
    a[3] = 0
    b = torch.rand(5, r_b, generator=g, dtype=torch.float64) + 0.1
    b[1, :-1] = 0
    b[2] = b[0] * 1e-4
    b[4] = 0
    return a, b


@pytest.mark.parametrize("d, r_b, r_a, n", [(8, 3, 4, 3000), (5, 3, 4, 3000), (8, 3, 4, 2)])
def test_expected_frobenius_is_the_mean_and_standard_error_of_its_draws(d, r_b, r_a, n):
    """On the same draws as ``haar_cosines`` gives (same seed and count): the mean of ``sqrt(Σ b̂_i X_ij² â_j)`` and
    its sample standard error ``sd / sqrt(n)`` (``sd`` with ``n - 1``), per (reader, writer), in float64 numpy; a head
    scaled far below 1 as the same head unscaled, a zero head 0 with error 0. Readers taken one at a time (a budget
    of 1 element) or all at once give the same."""
    seed = 5
    a, b = _spectra(r_a, r_b)
    one_by_one = expected_frobenius(a, b, d, n_samples=n, seed=seed, max_elements=1)  # (first: no earlier buffers)
    mean, se = expected_frobenius(a, b, d, n_samples=n, seed=seed)
    X = haar_cosines(d, r_b, r_a, n_samples=n, seed=seed).numpy()
    a2, b2 = a.numpy() ** 2, b.numpy() ** 2
    ah = np.divide(a2, a2.sum(1, keepdims=True), out=np.zeros_like(a2), where=a2.sum(1, keepdims=True) > 0)
    bh = np.divide(b2, b2.sum(1, keepdims=True), out=np.zeros_like(b2), where=b2.sum(1, keepdims=True) > 0)
    f = np.sqrt(np.einsum("ri,nij,wj->nrw", bh, X**2, ah))  # (n, readers, writers)
    want_mean, want_se = f.mean(0), f.std(0, ddof=1) / np.sqrt(n)
    for got_mean, got_se in ((mean, se), one_by_one):
        assert got_mean.shape == got_se.shape == (5, 4) and got_mean.dtype == torch.float64
        np.testing.assert_allclose(got_mean.numpy(), want_mean, rtol=2e-6, atol=0)
        np.testing.assert_allclose(got_se.numpy(), want_se, rtol=2e-5, atol=1e-12)
    assert (mean[4] == 0).all() and (se[4] == 0).all() and (mean[:, 3] == 0).all() and (se[:, 3] == 0).all()
    torch.testing.assert_close(mean[:, 2], mean[:, 0], rtol=1e-6, atol=0)
    torch.testing.assert_close(mean[2], mean[0], rtol=1e-6, atol=0)
    assert (se[:4, :3] > 0).all()


@pytest.mark.parametrize("d, r_b, r_a", [(10, 3, 4), (5, 3, 4)])
def test_expected_frobenius_agrees_with_frames_drawn_by_qr(d, r_b, r_a):
    """Against an independent Monte Carlo: ``X`` the top rows of ``Q`` from numpy's QR of a Gaussian ``d × r_a``
    matrix (other draws, another generator); the two means within 5 of their combined standard errors, pair by pair,
    on both of ``haar_cosines``' paths."""
    n = 20_000
    a, b = _spectra(r_a, r_b)
    mean, se = expected_frobenius(a[:2], b[:2], d, n_samples=n, seed=2)
    rng = np.random.default_rng(123)
    Q = np.linalg.qr(rng.standard_normal((n, d, r_a)))[0]
    X2 = Q[:, :r_b] ** 2
    a2, b2 = a[:2].numpy() ** 2, b[:2].numpy() ** 2
    f = np.sqrt(np.einsum("ri,nij,wj->nrw", b2 / b2.sum(1, keepdims=True), X2, a2 / a2.sum(1, keepdims=True)))
    qr_mean, qr_se = f.mean(0), f.std(0, ddof=1) / np.sqrt(n)
    assert (np.abs(mean.numpy() - qr_mean) < 5 * np.sqrt(se.numpy() ** 2 + qr_se**2)).all(), (mean, qr_mean)
