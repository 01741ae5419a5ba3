"""All-pairs composition against a dense float64 numpy reference and hand-derived values."""

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from compscope import HeadWeights, Meta, Rotary, read_scores
from compscope.api import scores
from compscope.errors import OptionError
from compscope.measures import PairSpectra, get_measure

ALL = ["frobenius", "tight", "overlap", "shared_dims", "bandwidth", "spectral", "read_gain"]


def model(L=3, H=4, G=2, r=3, d=9, V=40, seed=0, rotary=True) -> HeadWeights:
    g = torch.Generator().manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).float()  # noqa: E731
    rot = Rotary(2, torch.tensor([[0.9], [0.5], [0.2], [0.7]])[:L], "half") if rotary else None
    return HeadWeights(
        W_Q=rn(L, H, r, d), W_K=rn(L, G, r, d), W_V=rn(L, G, r, d), W_O=rn(L, H, d, r),
        b_Q=None, b_K=None, b_V=None, b_O=None, W_E=rn(d, V), W_pos=None, W_U=rn(V, d), b_U=None,
        kv_map=tuple(h // (H // G) for h in range(H)), attn_norm=None, final_norm=None, norm_placement="none",
        rotary=rot, positions="rotary" if rotary else "none", sliding_window=(None,) * L,
        meta=Meta("test", "test", "test", "float32", "float32"),
    )


def rot_matrix(theta: float, delta: float, r: int) -> np.ndarray:
    """R(δ) on a head of width r with one rotated pair (dims 0 and 1, rotate-half of dim 2)."""
    R = np.eye(r)
    c, s = np.cos(delta * theta), np.sin(delta * theta)
    R[:2, :2] = [[c, -s], [s, c]]
    return R


def dense_measures(A: np.ndarray, B: np.ndarray) -> dict:
    """Every measure from the dense matrices (NaN where a map is zero)."""
    sa, sb = np.linalg.svd(A, compute_uv=False), np.linalg.svd(B, compute_uv=False)
    U, s_a, _ = np.linalg.svd(A)
    _, s_b, Vt = np.linalg.svd(B)
    ra = int((s_a > s_a[0] * 1e-10).sum())
    rb = int((s_b > s_b[0] * 1e-10).sum())
    X = Vt[:rb] @ U[:, :ra]
    BA = B @ A
    k = min(ra, rb)
    sv = np.linalg.svd(BA, compute_uv=False)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = sv**2 / (sv**2).sum()
        p = p[p > 0]
        return {
            "frobenius": np.linalg.norm(BA) / (np.linalg.norm(A) * np.linalg.norm(B)),
            "tight": np.linalg.norm(BA) / np.sqrt((sa[:k] ** 2 * sb[:k] ** 2).sum()),
            "overlap": (X**2).sum() / ra,
            "shared_dims": (X**2).sum(),
            "bandwidth": np.exp(-(p * np.log(p)).sum()) if sv.any() else np.nan,
            "spectral": sv[0] / (sa[0] * sb[0]),
            "read_gain": np.linalg.norm(BA) / np.linalg.norm(A),
        }


def sqrtm(G):
    e, v = np.linalg.eigh(G)
    return (v * np.sqrt(e)) @ v.T, (v / np.sqrt(e)) @ v.T


def check_dense(hw, t, metric="identity", offset=0, measures=ALL, kinds="QKV", roots=None, own_reads=False):
    """Every pair's measures in ``t`` against dense float64 numpy matrices; returns the count.
    ``roots``: ``{layer: (G^{1/2}, G^{-1/2})}`` of a per-layer metric (then ``metric`` is not
    read): every factor of a pair takes the reader layer's, or with ``own_reads`` the writer's
    ``W_V`` its own layer's."""
    n = lambda x: x.double().numpy()  # noqa: E731
    d = hw.d_model
    if metric == "identity":
        S = Si = np.eye(d)
    elif metric == "embed":
        S, Si = sqrtm(n(hw.W_E) @ n(hw.W_E).T / hw.n_vocab)
    else:
        Si, S = sqrtm(n(hw.W_U).T @ n(hw.W_U) / hw.n_vocab)  # G = M^{-1}: G^{1/2} = M^{-1/2}
    checked = 0
    for l1 in range(hw.n_layers):
        for h1 in range(hw.n_heads):
            g1 = hw.kv_map[h1]
            for l2 in range(l1 + 1, hw.n_layers):
                if roots is not None:
                    S, Si = roots[l2]
                S1 = roots[l1][0] if own_reads else S
                A = Si @ n(hw.W_O[l1, h1]) @ n(hw.W_V[l1, g1]) @ S1
                R = np.eye(hw.d_head) if hw.rotary is None else rot_matrix(float(hw.rotary.inv_freq[l2, 0]), offset, hw.d_head)
                for h2 in range(hw.n_heads):
                    g2 = hw.kv_map[h2]
                    WQ, WK = n(hw.W_Q[l2, h2]) @ S, n(hw.W_K[l2, g2]) @ S
                    QK = WQ.T @ R.T @ WK  # W_Q^T R(-δ) W_K, R(-δ) = R(δ)^T
                    readers = {"Q": QK.T, "K": QK, "V": Si @ n(hw.W_O[l2, h2]) @ n(hw.W_V[l2, g2]) @ S}
                    for kind in kinds:
                        ref = dense_measures(A, readers[kind])
                        for m in measures:
                            got = float(t.dense(m, kind)[l1, h1, l2, h2])
                            want = 0.0 if np.isnan(ref[m]) else ref[m]  # a zero map: 0 by convention
                            assert got == pytest.approx(want, rel=1e-5, abs=1e-6), (m, kind, l1, h1, l2, h2)
                            checked += 1
    return checked


@pytest.mark.parametrize("metric", ["identity", "embed", "unembed"])
@pytest.mark.parametrize("offset", [0, 2])
def test_all_pairs_match_dense_reference(metric, offset):
    hw = model()
    t = scores(hw, "QKV", ALL, metric=metric, offset=offset, pairs="all", progress=False)
    assert check_dense(hw, t, metric, offset) == 3 * len(ALL) * (4 * 4 * 3)
    # same-layer and backward pairs are not computed
    f = t.dense("frobenius", "K")
    assert torch.isnan(f[1, :, 1]).all() and torch.isnan(f[2, :, 0]).all()


GRAM = ["frobenius", "tight", "overlap", "shared_dims"]


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("block,width", [(2, 2), (2, 3), (4, 8), (9, 9)])
def test_gram_tiles_match_dense_reference(block, width, precision):
    """Tiles of every size, ragged at the edge of d = 9, diagonal and off-diagonal (weight 2)."""
    hw = model(L=4, seed=1)
    t = scores(hw, "QKV", GRAM, offset=1, block=block, width=width, precision=precision, progress=False)
    assert check_dense(hw, t, offset=1, measures=GRAM) == 3 * 4 * (4 * 4 * 6)


def test_kinds_subset_and_order():
    """Any subset of kinds gives the same scores as all three."""
    hw = model(seed=4)
    full = scores(hw, "QKV", GRAM, progress=False)
    for kinds in ("K", "VQ", "QK"):
        part = scores(hw, kinds, GRAM, progress=False)
        assert part.kinds == list(kinds)
        for k in kinds:
            for m in GRAM:
                torch.testing.assert_close(part.dense(m, k), full.dense(m, k), equal_nan=True)


def test_ill_conditioned_and_rank_deficient_heads_take_the_qr_route():
    """A rank-deficient W_V, a zero head and a head with condition number 1e6 match the dense
    reference (ranks by the SVD tolerance) on both routes."""
    hw = model(rotary=False, seed=6)
    W_V, W_O = hw.W_V.clone(), hw.W_O.clone()
    W_V[0, 0, 2] = W_V[0, 0, 0] + W_V[0, 0, 1]  # layer 0, K/V head 0: rank 2
    W_O[1, 3] = 0  # layer 1, head 3 writes nothing
    W_O[0, 2, :, 0] *= 1e-6  # layer 0, head 2: condition number ~1e6
    hw = hw.replace(W_V=W_V, W_O=W_O)
    from compscope.engine.head_svd import _svd_cores

    t = scores(hw, "QKV", ALL, pairs="all", precision="float64", progress=False)
    assert check_dense(hw, t) == 3 * len(ALL) * (4 * 4 * 3)
    assert float(t.dense("overlap", "K")[0, 0, 1, 0]) <= 1.0
    assert torch.all(t.dense("frobenius", "V")[1, 3, 2] == 0)
    g = torch.randn(3, 3, 9, dtype=torch.float64)
    assert not _svd_cores(g @ g.mT, torch.zeros(3, 3, 3, dtype=torch.float64))[3].any()


def _cores_case(kind: str, t: float, d: int = 9):
    """Factors ``P, Q`` (``4 × d``) of one head whose only flaw is ``kind``, of size ``t``: ``'spectrum'``,
    ``M = PᵀQ`` with singular values ``(1, 0.5, 0.5, t)`` (``Q`` orthonormal rows, ``P Pᵀ`` turned by a Hadamard
    matrix so that its diagonal is even); ``'cholesky'``, ``Q``'s rows of norm 1 in two pairs at an angle, its
    Cholesky diagonal ``(1, t, 1, t)``, ``P`` its inverse-transpose (``PᵀQ`` the projection onto the rows, ``P Pᵀ``'s
    diagonal even); ``'gram'``, ``Q``'s Cholesky factor unit lower triangular with ``1/t`` below the diagonal in two
    places, ``P`` its inverse-transpose (``PᵀQ`` the projection again, ``P Pᵀ``'s diagonal ratio about ``t²``)."""
    g = torch.Generator().manual_seed(2)
    R = torch.linalg.qr(torch.randn(d, 4, generator=g, dtype=torch.float64))[0].T  # (4, d) orthonormal rows
    if kind == "spectrum":
        H = torch.tensor([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]], dtype=torch.float64) / 2
        return 3 * H @ torch.diag(torch.tensor([1.0, 0.5, 0.5, t], dtype=torch.float64)) @ R, 5 * R
    F = torch.eye(4, dtype=torch.float64)
    if kind == "cholesky":
        F[1, 0], F[1, 1], F[3, 2], F[3, 3] = (1 - t * t) ** 0.5, t, (1 - t * t) ** 0.5, t
    else:
        F[1, 0], F[3, 2] = 1 / t, 1 / t
    return 3 * torch.linalg.inv(F).mT @ R, 5 * F @ R  # (scaled: the bounds are ratios)


def test_the_gram_routes_conditioning_checks_sit_at_their_bound():
    """``_svd_cores`` flags a head for the QR route when ``σ_min(M)²/σ_max(M)²``, the squared ratio of the
    smallest to the largest Cholesky diagonal entry of ``Q Qᵀ``, or the ratio of the smallest to the largest diagonal
    entry of ``P Pᵀ`` is at most 1e-8 (the route's error grows as their inverses do): a flaw of ``10^-3.5`` (squared
    1e-7) passes and one of ``10^-4.5`` (1e-9) does not, each case with the other checks passing; where a head
    passes, ``cu P`` and ``cv Q`` are orthonormal rows and ``(cu P)ᵀ diag(σ) (cv Q) = M`` to 1e-7 (the route's error,
    ``ε κ²``, is 2e-8 at the bound)."""
    from compscope.engine.head_svd import _svd_cores

    for kind in ("spectrum", "cholesky", "gram"):  # (the last two flaws: squares 0.5e-8 and 2e-8, a factor 2
        # from the bound either way, which the spectrum's second value, 0.25, would move by 4)
        for t, want in ((10**-3.5, True), (10**-4.5, False), (0.5e-8**0.5, False), (2e-8**0.5, True)):
            P, Q = _cores_case(kind, t)
            cu, cv, s, ok = _svd_cores((P @ P.mT)[None], (Q @ Q.mT)[None])
            assert bool(ok[0]) == want, (kind, t)
            if want:
                U, V = cu[0] @ P, cv[0] @ Q
                torch.testing.assert_close(U @ U.mT, torch.eye(4, dtype=torch.float64), atol=1e-7, rtol=0)
                torch.testing.assert_close(V @ V.mT, torch.eye(4, dtype=torch.float64), atol=1e-7, rtol=0)
                torch.testing.assert_close(U.mT @ torch.diag(s[0]) @ V, P.mT @ Q, atol=1e-7, rtol=0)
    P, Q = _cores_case("cholesky", 10**-3.5)  # (P and Q scaled by 3 and 5)
    assert torch.linalg.cholesky(Q @ Q.mT).diagonal().min() == pytest.approx(5 * 10**-3.5, rel=1e-6)
    assert torch.linalg.svdvals(P.mT @ Q)[:4].min() == pytest.approx(15.0)  # (its M is as good as can be)
    assert (P @ P.mT).diagonal().std() < 1e-6 * (P @ P.mT).diagonal().mean() and (Q @ Q.mT).diagonal().std() < 1e-12
    P, Q = _cores_case("spectrum", 10**-3.5)
    torch.testing.assert_close(torch.linalg.svdvals(P.mT @ Q)[:4], 15 * torch.tensor([1, 0.5, 0.5, 10**-3.5],
                                                                                  dtype=torch.float64))
    assert (P @ P.mT).diagonal().std() < 1e-9 and torch.linalg.cholesky(Q @ Q.mT).diagonal().min() > 5 - 1e-9
    P, Q = _cores_case("gram", 10**-3.5)
    gp = (P @ P.mT).diagonal()
    assert float(gp.min() / gp.max()) == pytest.approx(1e-7, rel=1e-6)
    torch.testing.assert_close(torch.linalg.cholesky(Q @ Q.mT).diagonal(), torch.full((4,), 5.0, dtype=torch.float64))
    assert torch.linalg.svdvals(P.mT @ Q)[:4].min() == pytest.approx(15.0)


def test_basis_rows_of_factors_below_float32s_normal_range_are_formed_exactly():
    """``_bases`` forms a head's rows ``coef P`` in float32; where ``P`` lies among float32's subnormals (entries
    of 1e-40 here, ``coef`` of 1e40 so that the rows are of order one: in float32 the coefficients would overflow)
    it multiplies ``coef`` by ``2^e`` and ``P`` by ``2^-e`` in float64 first: the rows equal the float64 product to
    float32's precision. Entries of order one take the plain route, with the same result."""
    from compscope.engine.head_svd import _bases

    g = torch.Generator().manual_seed(3)
    for scale in (1e-40, 1.0):
        P64 = torch.randn(2, 3, 5, generator=g, dtype=torch.float64) * scale
        coef = torch.randn(2, 3, 3, generator=g, dtype=torch.float64) / scale
        got = _bases(coef, P64.float(), lambda: P64, torch.empty(2, 3, 5))
        torch.testing.assert_close(got.double(), coef @ P64, rtol=1e-5, atol=1e-5)


def test_x_route_in_small_chunks_and_top_pairs():
    """A tiny memory budget (one writer per X block), one of three writers per block (4 heads x 3 x 3 float32
    numbers each: the last layer's 8 writers in blocks of 3, 3 and 2), the top-k route and the Gram route
    (``frobenius_baselined`` too: pairs='all' reads ``‖BA‖²`` off the X blocks) agree with pairs='all'."""
    hw = model(seed=7)
    ref = scores(hw, "QKV", "all", pairs="all", progress=False)
    gram = scores(hw, "QKV", GRAM + ["frobenius_baselined"], progress=False)
    small = scores(hw, "QKV", "all", pairs="all", max_memory=1, progress=False)
    three = scores(hw, "QKV", "all", pairs="all", max_memory=3 * 4 * 3 * 3 * 4, progress=False)
    top = scores(hw, "QKV", ["frobenius", "bandwidth", "spectral"], pairs=5, progress=False)
    for k in "QKV":
        for m in ref.measures:
            torch.testing.assert_close(small.dense(m, k), ref.dense(m, k), equal_nan=True, rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(three.dense(m, k), ref.dense(m, k), equal_nan=True, rtol=1e-6, atol=1e-6)
        for m in gram.measures:
            torch.testing.assert_close(gram.dense(m, k), ref.dense(m, k), equal_nan=True, rtol=1e-5, atol=1e-6)
        for m in ("bandwidth", "spectral"):
            got = top.dense(m, k)
            ok = torch.isfinite(got)
            assert int(ok.sum()) == 5
            torch.testing.assert_close(got[ok], ref.dense(m, k)[ok], rtol=1e-6, atol=1e-6)
            best = torch.nan_to_num(ref.dense("frobenius", k), nan=-1).flatten().topk(5).indices
            assert ok.flatten()[best].all()


def _pair(a, b, X, d):
    a, b, X = (torch.as_tensor(v, dtype=torch.float64) for v in (a, b, X))
    return PairSpectra(a, b, X, d, (a > 0).sum())


@pytest.mark.parametrize("r,d", [(1, 5), (4, 16), (8, 64)])
def test_hand_derived_aligned_and_orthogonal(r, d):
    flat = np.ones(r)
    aligned = _pair(flat, flat, np.eye(r), d)
    assert float(get_measure("frobenius").exact(aligned)) == pytest.approx(r**-0.5)
    assert float(get_measure("tight").exact(aligned)) == pytest.approx(1.0)
    assert float(get_measure("overlap").exact(aligned)) == pytest.approx(1.0)
    assert float(get_measure("bandwidth").exact(aligned)) == pytest.approx(r)
    ortho = _pair(flat, flat, np.zeros((r, r)), d)
    for m in ALL:
        assert float(get_measure(m).exact(ortho)) == 0.0


def test_bandwidth_counts_singular_values_within_rounding_as_zero():
    """Singular values of the core at or below ``ε √(d r) a_max b_max`` (``r = max(r_A, r_B)``, ε of
    ``X``'s dtype) are rounding and count as 0: a core of two such values has bandwidth 0, of two
    values 1.2 times that floor 2. ``r_B = 8 > r_A = 2`` and a batch of 20 pairs, so that ``r`` is the
    larger rank of the pair (not the smaller, nor the batch size)."""
    d, a, b = 16, np.ones(2), np.ones(8)
    floor = np.finfo(np.float64).eps * math.sqrt(d * 8)
    for scale, want in ((0.75, 0.0), (1.2, 2.0)):
        X = np.tile(scale * floor * np.eye(8, 2), (20, 1, 1))
        got = get_measure("bandwidth").exact(_pair(a, b, X, d))
        assert got.shape == (20,)
        torch.testing.assert_close(got, torch.full((20,), want, dtype=torch.float64), rtol=1e-12, atol=0)


def test_the_baselined_frobenius_needs_the_haar_expectation():
    """``frobenius_baselined`` subtracts ``E[frobenius]``, which the engine fills in: a pair handed to it
    without one is an error naming what is missing, not ``frobenius`` minus nothing."""
    pair = _pair(np.ones(2), np.ones(2), np.eye(2), 8)
    with pytest.raises(ValueError, match="needs the Haar expectation"):
        get_measure("frobenius_baselined").exact(pair)


def test_the_haar_baseline_is_drawn_only_for_a_measure_that_needs_it(monkeypatch):
    """The Monte Carlo expectation (``O(r²)`` draws per pair) is computed for ``frobenius_baselined``
    alone: the other measures score without it."""
    import compscope.engine.baseline as baseline

    drawn = []
    real = baseline.expected_frobenius
    monkeypatch.setattr(baseline, "expected_frobenius", lambda *a, **k: drawn.append(1) or real(*a, **k))
    hw = model()
    others = [m for m in ALL if m != "frobenius_baselined"]
    scores(hw, "QKV", others, progress=False)
    assert drawn == []
    scores(hw, "K", ["frobenius_baselined"], baseline_samples=8, progress=False)
    assert drawn


@pytest.mark.parametrize("d", [4, 16, 100])
def test_identity_pair(d):
    ident = _pair(np.ones(d), np.ones(d), np.eye(d), d)
    expect = {"frobenius": d**-0.5, "tight": 1.0, "overlap": 1.0, "spectral": 1.0, "bandwidth": d, "shared_dims": d}
    for m, v in expect.items():
        assert float(get_measure(m).exact(ident)) == pytest.approx(v), m


def test_expected_frobenius_squared_is_one_over_d():
    """Seeded simulation: with Haar-random subspaces E[frobenius²] = 1/d, whatever the spectra."""
    from compscope.engine.baseline import haar_cosines

    d, r = 32, 4
    X = haar_cosines(d, r, r, n_samples=4000, seed=1)
    a = torch.tensor([3.0, 1.0, 0.5, 0.1], dtype=torch.float64)
    b = torch.tensor([1.0, 1.0, 0.2, 0.0], dtype=torch.float64)
    f2 = (b[:, None] ** 2 * X**2 * a[None, :] ** 2).sum((-1, -2)) / ((a**2).sum() * (b**2).sum())
    se = float(f2.std() / len(f2) ** 0.5)
    assert abs(float(f2.mean()) - 1 / d) < 4 * se


@pytest.mark.parametrize("n_samples", [1, 2, 50])
def test_expected_frobenius_and_its_standard_error_are_the_draws_mean_and_spread(n_samples):
    """``expected_frobenius`` against the same seeded draws in float64 numpy: for each pair, the mean of
    ``sqrt(Σ b_i² X_ij² a_j² / (Σ a² Σ b²))`` and its standard error ``std(ddof=1) / sqrt(n)``; from one draw the mean
    is that draw and the standard error NaN (one draw has no spread). Readers taken a few at a time give the same."""
    from compscope.engine.baseline import expected_frobenius, haar_cosines

    d, g = 16, torch.Generator().manual_seed(4)
    a, b = torch.rand(5, 3, generator=g, dtype=torch.float64), torch.rand(4, 2, generator=g, dtype=torch.float64)
    X2 = haar_cosines(d, 2, 3, n_samples=n_samples, seed=7).numpy() ** 2  # (S, r_b, r_a)
    a2, b2 = a.numpy() ** 2, b.numpy() ** 2
    f = np.sqrt(np.einsum("ri,sij,wj->srw", b2, X2, a2) / (b2.sum(1)[None, :, None] * a2.sum(1)[None, None, :]))
    mean, se = expected_frobenius(a, b, d, n_samples=n_samples, seed=7)
    np.testing.assert_allclose(mean.numpy(), f.mean(0), rtol=1e-5)
    if n_samples == 1:
        assert torch.isnan(se).all()
    else:
        np.testing.assert_allclose(se.numpy(), f.std(0, ddof=1) / np.sqrt(n_samples), rtol=1e-3)
    chunked = expected_frobenius(a, b, d, n_samples=n_samples, seed=7, max_elements=n_samples * 5)
    torch.testing.assert_close(chunked, (mean, se), rtol=1e-6, atol=0, equal_nan=True)  # (float32 sums, reordered)


def test_baselined_is_frobenius_minus_expectation_and_centred_on_random_heads():
    hw = model(L=2, H=6, G=6, r=2, d=12, rotary=False, seed=3)
    t = scores(hw, "K", ["frobenius", "frobenius_baselined"], progress=False)
    f, fb = t.dense("frobenius", "K"), t.dense("frobenius_baselined", "K")
    ok = torch.isfinite(f)
    assert ok.sum() == 36
    diff = (f - fb)[ok]
    assert (diff > 0).all() and (diff < 1).all()  # the expectation is a positive number below 1
    assert abs(float(fb[ok].mean())) < 0.1  # random heads sit near their baseline


def test_embed_metric_is_gauge_invariant():
    """Transforming the whole model by a random invertible T leaves every measure unchanged."""
    hw = model(rotary=False, seed=5)
    g = torch.Generator().manual_seed(9)
    T = torch.randn(hw.d_model, hw.d_model, generator=g, dtype=torch.float64) + 3 * torch.eye(hw.d_model, dtype=torch.float64)
    Ti = torch.linalg.inv(T)
    f = lambda x: x.double()  # noqa: E731
    moved = hw.replace(
        W_Q=(f(hw.W_Q) @ Ti).float(), W_K=(f(hw.W_K) @ Ti).float(), W_V=(f(hw.W_V) @ Ti).float(),
        W_O=(T @ f(hw.W_O)).float(), W_E=(T @ f(hw.W_E)).float(), W_U=(f(hw.W_U) @ Ti).float(),
    )
    a = scores(hw, "QKV", ALL, metric="embed", pairs="all", ridge=0.0, progress=False)
    b = scores(moved, "QKV", ALL, metric="embed", pairs="all", ridge=0.0, progress=False)
    raw = scores(moved, "QKV", ["frobenius"], progress=False)
    for m in ALL:
        for k in "QKV":
            torch.testing.assert_close(a.dense(m, k), b.dense(m, k), rtol=1e-4, atol=1e-5, equal_nan=True)
    ref = scores(hw, "QKV", ["frobenius"], progress=False)
    assert not torch.allclose(torch.nan_to_num(raw.dense("frobenius", "K")), torch.nan_to_num(ref.dense("frobenius", "K")), atol=1e-3)


def test_a_table_read_with_measure_and_kind_swapped_says_so():
    """``dense(measure, kind)`` and ``top(kind, measure)`` take them in different orders; a swap is
    named with the call meant, a pair the table lacks with what it has."""
    t = scores(model(), "K", ["frobenius", "tight"], progress=False)
    with pytest.raises(OptionError, match=r"measure='K', kind='tight'; .* did you mean measure='tight', kind='K'\?"):
        t.top("tight", "K")
    with pytest.raises(OptionError, match=r"did you mean measure='frobenius', kind='K'\?"):
        t.dense("K", "frobenius")
    with pytest.raises(OptionError) as e:
        t.dense("overlap", "K")
    assert "did you mean" not in str(e.value) and "have [('frobenius', 'K'), ('tight', 'K')]" in str(e.value)
    assert t.top("K", "tight", 1)[0][4] == float(t.dense("tight", "K").nan_to_num(-1).max())


def test_table_round_trip(tmp_path):
    hw = model()
    t = scores(hw, "QK", ["frobenius", "overlap"], progress=False)
    from compscope.results.table import read_scores

    for suffix in (".csv", ".parquet"):
        pytest.importorskip("pandas")
        if suffix == ".parquet":
            pytest.importorskip("pyarrow")
        p = t.save(tmp_path / f"s{suffix}")
        back = read_scores(p, shape=(hw.n_layers, hw.n_heads))
        for key, v in t.values.items():
            torch.testing.assert_close(back.values[key], v, equal_nan=True, rtol=1e-12, atol=1e-12)
    df = t.to_pandas()
    assert list(df.columns[:8]) == ["measure", "metric", "kind", "src_layer", "src_head", "dst_layer", "dst_head", "value"]
    assert len(df) == 2 * 2 * (4 * 4 * 3)
    assert [tuple(r) for r in df[df.columns[:8]].itertuples(index=False)] == list(t.rows())  # the row-by-row reference
    assert df.src_layer.dtype.kind == "i" and df.value.dtype == "float64"
    import pandas as pd

    import compscope

    assert pd.read_parquet(tmp_path / "s.parquet").attrs["compscope"] == compscope.__version__  # what computed it


def test_a_table_records_the_ridge_its_metric_was_regularised_with(tmp_path):
    """``info['ridge']``: 0 under the identity (no ``G``, nothing regularised), the specification's default
    1e-6 under ``embed``, the one passed otherwise; kept through a Parquet file with ``G``'s condition numbers."""
    hw = model()
    identity = scores(hw, "K", ["frobenius"], progress=False)
    assert identity.info["ridge"] == 0
    assert scores(hw, "K", ["frobenius"], metric="embed", progress=False).info["ridge"] == 1e-6
    t = scores(hw, "K", ["frobenius"], metric="embed", ridge=1e-3, progress=False)
    assert t.info["ridge"] == 1e-3
    pytest.importorskip("pyarrow")
    back = read_scores(t.save(tmp_path / "s.parquet")).info
    assert back["ridge"] == 1e-3 and back["condition"] == t.info["condition"]  # with G's condition numbers
    no_g = read_scores(identity.save(tmp_path / "i.parquet")).info
    assert no_g["ridge"] == 0 and no_g["condition"] == {}


def test_a_ridge_given_where_it_would_change_nothing_is_refused_not_ignored(tmp_path):
    """The identity metric has no ``G``: a ridge given with it is refused (0, what it holds, passes), by the engine,
    ``compscope.scores``, ``compscope.compose_pair`` and ``track`` (where no tracked metric has a ``G``; with one,
    each metric with a ``G`` takes it). A ``Metric`` built already holds its ridge: another is refused. With a
    Gram matrix the ridge regularises it: condition ``(4 + λ)/(1/4 + λ)``, ``λ = r·tr(G)/d``, by hand."""
    import dataclasses

    import compscope
    from compscope.analysis.tracking import track
    from compscope.core.metrics import embed, from_gram
    from compscope.engine.composition import scores as engine_scores
    from compscope.loading.formats import native

    hw = model()
    for call in (lambda: engine_scores(hw, "K", ["frobenius"], "identity", ridge=0.1, progress=False),
                 lambda: compscope.scores(hw, "K", ["frobenius"], ridge=0.1, progress=False),
                 lambda: compscope.compose_pair(hw, "0.0", "1.0", "K", "identity", ridge=0.1)):
        with pytest.raises(OptionError, match=r"^ridge=0\.1: the identity metric has no G to regularise"):
            call()
    assert compscope.scores(hw, "K", ["frobenius"], ridge=0.0, progress=False).info["ridge"] == 0
    built = embed(hw)  # the default ridge, 1e-6
    with pytest.raises(OptionError, match=r"^ridge=0\.001: the metric 'embed' given was built with ridge 1e-06"):
        compscope.scores(hw, "K", ["frobenius"], built, ridge=1e-3, progress=False)
    same = compscope.scores(hw, "K", ["frobenius"], built, ridge=1e-6, progress=False)
    torch.testing.assert_close(same.dense("frobenius", "K"), scores(hw, "K", ["frobenius"], "embed", progress=False)
                               .dense("frobenius", "K"), rtol=0, atol=0, equal_nan=True)  # NaN: no pair
    G = torch.diag(torch.tensor([4.0, 1 / 4] + [1.0] * 7, dtype=torch.float64))
    lam = 0.5 * float(G.trace()) / 9
    t = compscope.scores(hw, "K", ["frobenius"], G, ridge=0.5, progress=False)
    assert t.info["ridge"] == 0.5
    assert t.info["condition"]["None"][1] == pytest.approx((4 + lam) / (0.25 + lam), rel=1e-12)
    pair = {r: compscope.compose_pair(hw, "0.0", "1.0", "K", G, ridge=r).measures["frobenius"] for r in (0.5, None)}
    assert pair[0.5] == pytest.approx(compscope.compose_pair(hw, "0.0", "1.0", "K", from_gram("custom", G, ridge=0.5))
                                      .measures["frobenius"], rel=1e-12)
    assert pair[0.5] != pytest.approx(pair[None], rel=1e-3)  # the ridge reached the pair
    native.save(hw, tmp_path / "revs" / "rev-step1")
    with pytest.raises(OptionError, match=r"^ridge=0\.1: the identity metric has no G to regularise"):
        track(tmp_path / "revs", "K", ["frobenius"], "identity", ridge=0.1, progress=False)
    from compscope.core.metrics import identity

    for metrics in (["identity", "embed"], [identity(), "embed"]):  # the identity by name or built: no ridge
        both = track(tmp_path / "revs", "K", ["frobenius"], metrics, ridge=1e-3, progress=False)
        assert [tab.info["ridge"] for tab in both.tables[0]] == [0, 1e-3]
    mine = dataclasses.replace(built, name="mine")
    with pytest.raises(OptionError, match=r"^ridge=0\.001: the metric 'mine' given was built with ridge 1e-06"):
        track(tmp_path / "revs", "K", ["frobenius"], ["embed", mine], ridge=1e-3, progress=False)


def test_activation_metric_per_layer_matches_dense_and_refuses_missing_layers():
    """A per-layer G is used for the reader's layer; a layer without one is an error, not identity."""
    from compscope import OptionError
    from compscope.core.metrics import activations

    hw = model(rotary=False, seed=2)
    g = torch.Generator().manual_seed(4)
    Gs = {l: (lambda M: M @ M.T / hw.d_model + torch.eye(hw.d_model, dtype=torch.float64))(torch.randn(hw.d_model, hw.d_model, generator=g, dtype=torch.float64)) for l in (1, 2)}
    t = scores(hw, "V", ["frobenius"], metric=activations(Gs, ridge=0.0), progress=False)
    n = lambda x: x.double().numpy()  # noqa: E731
    S, Si = sqrtm(Gs[2].numpy())
    A = Si @ n(hw.W_O[0, 1]) @ n(hw.W_V[0, hw.kv_map[1]]) @ S
    B = Si @ n(hw.W_O[2, 3]) @ n(hw.W_V[2, hw.kv_map[3]]) @ S
    assert float(t.dense("frobenius", "V")[0, 1, 2, 3]) == pytest.approx(dense_measures(A, B)["frobenius"], rel=1e-6)
    # X-route measures of the top pairs (bases per (writer, reader) layer) equal the dense reference
    top = scores(hw, "V", ["bandwidth", "spectral", "shared_dims"], metric=activations(Gs, ridge=0.0), pairs=9, progress=False)
    got = top.dense("spectral", "V")
    assert int(torch.isfinite(got).sum()) == 9 and torch.isfinite(got[:, :, 1]).any() and torch.isfinite(got[:, :, 2]).any()
    for l1, h1, l2, h2 in torch.isfinite(got).nonzero().tolist():
        S, Si = sqrtm(Gs[l2].numpy())
        A = Si @ n(hw.W_O[l1, h1]) @ n(hw.W_V[l1, hw.kv_map[h1]]) @ S
        B = Si @ n(hw.W_O[l2, h2]) @ n(hw.W_V[l2, hw.kv_map[h2]]) @ S
        ref = dense_measures(A, B)
        for m in ("bandwidth", "spectral", "shared_dims"):
            assert float(top.dense(m, "V")[l1, h1, l2, h2]) == pytest.approx(ref[m], rel=1e-5), (m, l1, h1, l2, h2)
    with pytest.raises(OptionError, match="no G for layer 2"):
        scores(hw, "V", ["frobenius"], metric=activations({1: Gs[1]}), progress=False)


def _layer_grams(hw, seed):
    g = torch.Generator().manual_seed(seed)
    d = hw.d_model
    return {l: (lambda M: M @ M.T / d + 0.5 * torch.eye(d, dtype=torch.float64))(torch.randn(d, d, generator=g, dtype=torch.float64))
            for l in range(hw.n_layers)}


@pytest.mark.parametrize("own_reads", [False, True])
def test_a_per_layer_metric_whitens_the_writer_input_by_the_reader_or_its_own_layer(own_reads):
    """Per-layer ``G_l``, every pair, kind and measure against dense numpy: the writer's
    ``G_{l2}^{-1/2} W_O W_V G^{1/2}`` with the reader's ``G_{l2}`` or (``own_reads``) its own
    ``G_{l1}``; :func:`compose_pair` agrees with the engine; the two choices differ."""
    import dataclasses

    from compscope.analysis.pair import compose_pair
    from compscope.core.metrics import activations

    hw = model(L=4, seed=3)
    Gs = _layer_grams(hw, 6)
    met = dataclasses.replace(activations(Gs, ridge=0.0), own_reads=own_reads)
    # on the CPU: compose_pair's float64 against the engine's float32 at 1e-6 (tests/test_device.py holds CUDA to the CPU)
    t = scores(hw, "QKV", ALL, metric=met, offset=1, pairs="all", progress=False, device="cpu")
    roots = {l: sqrtm(G.numpy()) for l, G in Gs.items()}
    assert check_dense(hw, t, offset=1, roots=roots, own_reads=own_reads) == 3 * len(ALL) * (4 * 4 * 6)
    for kind in "QKV":
        rep = compose_pair(hw, (1, 2), (3, 0), kind, met, offset=1)
        for m in ALL:
            assert rep.measures[m] == pytest.approx(float(t.dense(m, kind)[1, 2, 3, 0]), rel=1e-6, abs=1e-9), (kind, m)
    other = scores(hw, "K", ["frobenius"], metric=dataclasses.replace(met, own_reads=not own_reads), progress=False)
    f, g = t.dense("frobenius", "K"), other.dense("frobenius", "K")
    assert not torch.allclose(f[0, :, 1], g[0, :, 1], rtol=1e-3) and not torch.allclose(f[1, :, 3], g[1, :, 3], rtol=1e-3)
    same = {l: Gs[0] for l in Gs}  # one G for every layer: nothing to choose
    a, b = (scores(hw, "K", ["frobenius"], metric=dataclasses.replace(activations(same, ridge=0.0), own_reads=o),
                   progress=False).dense("frobenius", "K") for o in (False, True))
    torch.testing.assert_close(a, b, equal_nan=True)


def test_a_gram_matrix_of_ones_own_is_a_metric():
    """``metric=G`` (a tensor, an array, a ``(layer, d, d)`` stack or ``{layer: G}``) scores every
    pair as dense numpy whitened by that ``G`` does, recorded as ``custom`` (or the name given to
    :func:`compscope.metric_from_gram`); a ``G`` that does not fit the model is named, not passed to
    the engine."""
    import compscope
    from compscope import OptionError
    from compscope.core.metrics import from_gram

    hw = model(L=3, seed=5)
    Gs = _layer_grams(hw, 9)
    one = scores(hw, "QKV", ALL, metric=Gs[1].numpy(), ridge=0.0, offset=1, pairs="all", progress=False)
    assert one.metric == "custom"
    import hashlib  # which G: recorded with the scores, the same for the same values however given

    digest = hashlib.sha256(b"None:(9, 9);" + Gs[1].numpy().tobytes()).hexdigest()[:16]
    assert one.info["metric_data"] == f"G given as a matrix (SHA-256 {digest})"
    assert scores(hw, "K", ["frobenius"], metric=Gs[2], progress=False).info["metric_data"] != one.info["metric_data"]
    S, Si = sqrtm(Gs[1].numpy())
    assert check_dense(hw, one, offset=1, roots={l: (S, Si) for l in range(3)}) == 3 * len(ALL) * (4 * 4 * 3)
    stack = torch.stack([Gs[l] for l in range(3)])
    per_layer = scores(hw, "QKV", ALL, metric=stack, ridge=0.0, offset=1, pairs="all", progress=False)
    assert check_dense(hw, per_layer, offset=1, roots={l: sqrtm(G.numpy()) for l, G in Gs.items()}) == 3 * len(ALL) * (4 * 4 * 3)
    as_dict = scores(hw, "K", ["tight"], metric=compscope.metric_from_gram(Gs, name="mine", ridge=0.0), offset=1,
                     progress=False)
    assert as_dict.metric == "mine"
    grad = scores(hw, "K", ["tight"], metric={l: G.clone().requires_grad_() for l, G in Gs.items()}, ridge=0.0, offset=1,
                  progress=False)  # a G that needs a gradient (it once reached the engine's out= products)
    torch.testing.assert_close(grad.dense("tight", "K"), per_layer.dense("tight", "K"), equal_nan=True)
    torch.testing.assert_close(as_dict.dense("tight", "K"), per_layer.dense("tight", "K"), equal_nan=True)
    with pytest.raises(OptionError, match=r"metric 'custom': G is 5 x 5, but test's residual stream has d_model 9"):
        scores(hw, "K", ["frobenius"], metric=torch.eye(5), progress=False)
    with pytest.raises(OptionError, match=r"metric 'g': G is 5 x 5"):  # a Metric built by hand is checked too
        compscope.api.compose_pair(hw, (0, 0), (1, 0), "K", metric=from_gram("g", torch.eye(5)))
    with pytest.raises(OptionError, match=r"a G for layer 7, but test has layers 0..2"):
        scores(hw, "K", ["frobenius"], metric={7: Gs[0]}, progress=False)
    with pytest.raises(OptionError, match=r"must be square, got \(9, 4\)"):
        scores(hw, "K", ["frobenius"], metric=torch.ones(9, 4), progress=False)
    with pytest.raises(OptionError, match=r"shape \(9,\); expected \(d, d\)"):
        scores(hw, "K", ["frobenius"], metric=np.ones(9), progress=False)
    with pytest.raises(OptionError, match=r"unknown metric <float>; .* or a Gram matrix of your own"):
        scores(hw, "K", ["frobenius"], metric=1.5, progress=False)
    g = torch.Generator().manual_seed(4)
    A = torch.randn(9, 9, generator=g, dtype=torch.float64)
    with pytest.raises(OptionError, match=r"metric custom: G is not symmetric \(‖G − Gᵀ‖/‖G‖ = 1\.\d\)"):
        scores(hw, "K", ["frobenius"], metric=A, progress=False)  # a matrix, not a Gram matrix
    with pytest.raises(OptionError, match=r"metric custom: G has a negative eigenvalue \(-\d"):
        scores(hw, "K", ["frobenius"], metric=A + A.T, progress=False)
    X = torch.randn(9, 4, generator=g).float()  # rank 4 in float32: its rounding is not refused (the ridge regularises)
    assert torch.isfinite(scores(hw, "K", ["frobenius"], metric=X @ X.T, progress=False).dense("frobenius", "K")[0, :, 1]).all()


def test_a_gram_matrix_file_is_a_metric_named_after_it(tmp_path, capsys):
    """``metric='cov.npy'`` / ``'cov.safetensors'`` (one G, a stack, or one tensor per layer named by
    its layer) scores as the same G given in Python, named after the file, its values' SHA-256
    recorded; unreadable files, pickles and names of registered metrics are refused by name."""
    from safetensors.torch import save_file

    from compscope import OptionError, load
    from compscope.cli.main import main

    hw = model(L=3, seed=5)
    Gs = _layer_grams(hw, 9)
    want = scores(hw, "K", ["frobenius", "tight"], metric=Gs, ridge=0.0, offset=1, progress=False)
    np.save(tmp_path / "cov.npy", torch.stack([Gs[l] for l in range(3)]).numpy())
    save_file({str(l): G.contiguous() for l, G in Gs.items()}, str(tmp_path / "per-layer.safetensors"))
    for f in ("cov.npy", "per-layer.safetensors"):
        got = scores(hw, "K", ["frobenius", "tight"], metric=str(tmp_path / f), ridge=0.0, offset=1, progress=False)
        assert got.metric == f.rsplit(".", 1)[0]
        for m in ("frobenius", "tight"):
            torch.testing.assert_close(got.dense(m, "K"), want.dense(m, "K"), rtol=0, atol=0, equal_nan=True)
    digest = want.info["metric_data"].rsplit("(", 1)[1]  # the values' SHA-256: the same however given
    assert got.info["metric_data"] == f"G given as the file per-layer.safetensors ({digest}"
    np.save(tmp_path / "one.npy", Gs[0].numpy())
    save_file({"G": Gs[0].float()}, str(tmp_path / "one32.safetensors"))
    a, b = (scores(hw, "K", ["frobenius"], metric=str(tmp_path / f), progress=False).dense("frobenius", "K")
            for f in ("one.npy", "one32.safetensors"))
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7, equal_nan=True)  # float32 on file: its rounding
    np.save(tmp_path / "embed.npy", Gs[0].numpy())
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "junk.npy").write_text("junk")
    save_file({"a": Gs[0].contiguous(), "b": Gs[1].contiguous()}, str(tmp_path / "two.safetensors"))
    for f, needle in (("none.npy", "no such file"), ("embed.npy", "named like the metric 'embed'"),
                      ("obj.npy", "Object arrays cannot be loaded when allow_pickle=False"),
                      ("junk.npy", "not a .npy file"), ("two.safetensors", "2 tensors, not named by their layers (a, b)")):
        with pytest.raises(OptionError, match=re.escape(f"metric {tmp_path / f}: ") + ".*" + re.escape(needle)):
            scores(hw, "K", ["frobenius"], metric=str(tmp_path / f), progress=False)
    assert main(["scores", "--kinds", "K", "--measure", "frobenius", "--top", "1", "--metric", str(tmp_path / "emb.npy")]) == 2
    assert "no such file" in capsys.readouterr().err
    # a file that does not fit the model is named by its path (not only the metric's name, its stem)
    assert main(["scores", "--kinds", "K", "--measure", "frobenius", "--top", "1", "--metric", str(tmp_path / "one.npy")]) == 2
    assert f"metric 'one' (the file {tmp_path / 'one.npy'}): G is 9 x 9, but induction-2l" in capsys.readouterr().err
    toy = load("induction-2l")
    E, P = toy.W_E.double(), toy.W_pos.double()
    np.save(tmp_path / "emb.npy", (E @ E.T / E.shape[1] + P @ P.T / P.shape[1]).numpy())  # embed's G, by hand
    assert main(["scores", "--kinds", "K", "--measure", "frobenius", "--top", "1", "--metric", str(tmp_path / "emb.npy")]) == 0
    mine = capsys.readouterr().out.splitlines()
    assert main(["scores", "--kinds", "K", "--measure", "frobenius", "--top", "1", "--metric", "embed"]) == 0
    theirs = capsys.readouterr().out.splitlines()
    assert mine[1] == theirs[1] and ", with G given as the file emb.npy (SHA-256 " in mine[0]  # embed's scores


def test_weights_that_need_a_gradient_score_as_their_values(recwarn):
    """A hand-built model whose tensors require a gradient (a training loop's) scores exactly as
    its detached values, in the engine (it once failed in an ``out=`` product) and pair by pair."""
    from compscope.api import compose_pair

    hw = model(L=3, seed=2)
    live = hw.replace(W_Q=hw.W_Q.clone().requires_grad_(), W_V=hw.W_V.clone().requires_grad_(),
                      W_O=hw.W_O.clone().requires_grad_())
    a = scores(live, "QKV", ALL, pairs="all", offset=1, progress=False)
    b = scores(hw, "QKV", ALL, pairs="all", offset=1, progress=False)
    for m in ALL:
        for k in "QKV":
            torch.testing.assert_close(a.dense(m, k), b.dense(m, k), rtol=0, atol=0, equal_nan=True)
    assert compose_pair(live, (0, 1), (2, 3), "V", offset=1).measures == compose_pair(hw, (0, 1), (2, 3), "V", offset=1).measures
    assert not [w for w in recwarn if "requires_grad" in str(w.message)]


def test_reading_own_layers_metric_is_gauge_invariant():
    """``x → T x`` moves every ``G_l → T G_l Tᵀ``; with each reading factor in its own layer's
    ``G`` every measure of every pair stays the same."""
    import dataclasses

    from compscope.core.metrics import activations

    hw = model(rotary=False, L=4, seed=7)
    Gs = _layer_grams(hw, 2)
    g = torch.Generator().manual_seed(11)
    T = torch.randn(hw.d_model, hw.d_model, generator=g, dtype=torch.float64) + 3 * torch.eye(hw.d_model, dtype=torch.float64)
    Ti = torch.linalg.inv(T)
    f = lambda x: x.double()  # noqa: E731
    moved = hw.replace(W_Q=(f(hw.W_Q) @ Ti).float(), W_K=(f(hw.W_K) @ Ti).float(), W_V=(f(hw.W_V) @ Ti).float(),
                       W_O=(T @ f(hw.W_O)).float())
    own = lambda G: dataclasses.replace(activations(G, ridge=0.0), own_reads=True)  # noqa: E731
    a = scores(hw, "QKV", ALL, metric=own(Gs), pairs="all", progress=False)
    b = scores(moved, "QKV", ALL, metric=own({l: T @ G @ T.T for l, G in Gs.items()}), pairs="all", progress=False)
    for m in ALL:
        for k in "QKV":
            torch.testing.assert_close(a.dense(m, k), b.dense(m, k), rtol=1e-4, atol=1e-5, equal_nan=True)


def test_a_metric_from_a_gram_matrix_and_from_its_inverse():
    """``from_gram``: ``sqrt² = G`` and ``sqrt · inv_sqrt = I`` (no ridge); with ``invert`` the
    roots are those of ``G⁻¹``; a NaN in G is named."""
    from compscope import OptionError
    from compscope.core.metrics import from_gram

    g = torch.Generator().manual_seed(8)
    M = torch.randn(6, 6, generator=g, dtype=torch.float64)
    G = M @ M.T + torch.eye(6, dtype=torch.float64)
    m = from_gram("g", G, ridge=0.0)
    s, si = m.for_layer(3)
    torch.testing.assert_close(s @ s, G, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(s @ si, torch.eye(6, dtype=torch.float64), rtol=1e-12, atol=1e-12)
    s, si = from_gram("g", G, ridge=0.0, invert=True).for_layer(0)
    torch.testing.assert_close(s @ s, torch.linalg.inv(G), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(si @ si, G, rtol=1e-10, atol=1e-10)
    with pytest.raises(OptionError, match="metric bad: G has NaN"):
        from_gram("bad", G.clone().fill_diagonal_(float("nan")))


def _complementary_halves(seed: int, reads_all: tuple[int, ...] = ()) -> HeadWeights:
    """3 layers of 4 heads (``r = 8``, ``d = 64``), writers in one half of a rotated residual stream
    and V-readers in the other (1e-4 outside; the layers in ``reads_all`` read all of it)."""
    L, H, r, d = 3, 4, 8, 64
    g = torch.Generator().manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    half = (torch.arange(d) < d // 2).double()
    T = torch.linalg.qr(rn(d, d))[0]
    W_O = T @ (rn(L, H, d, r) * half[:, None] + 1e-4 * rn(L, H, d, r))
    W_V = (rn(L, H, r, d) * (1 - half) + 1e-4 * rn(L, H, r, d)) @ T.T
    for l in reads_all:
        W_V[l] = rn(H, r, d) @ T.T
    return model(L=L, H=H, G=H, r=r, d=d, rotary=False).replace(W_O=W_O.float(), W_V=W_V.float())


@pytest.mark.parametrize("dense_share", [0, 4, 10**9])
def test_float32_near_zero_scores_are_refined_from_x(dense_share, monkeypatch, tmp_path):
    """Writers and V-readers in complementary halves of a rotated residual stream: scores
    ~1e-4 of the usual. The float32 Gram route alone loses them to cancellation; the pairs it
    flags are recomputed from X, so float32 stays within 1e-3 (relative) of float64 (the
    rounding of the float32 bases: ~1e-7 absolute on each cosine); pair by pair
    (``DENSE_SHARE = 0``), or a reader's pairs all at once wherever one is flagged (``10**9``), or as
    the engine chooses."""
    from compscope.engine import gram_route

    monkeypatch.setattr(gram_route, "DENSE_SHARE", dense_share)
    hw, (L, H) = _complementary_halves(11), (3, 4)
    lo = scores(hw, "V", GRAM, precision="float32", progress=False)
    hi = scores(hw, "V", GRAM, precision="float64", progress=False)
    f = hi.dense("frobenius", "V")
    assert float(f.nanmedian()) < 1e-3  # near zero: float32 Grams alone would be off by ~100%
    n, of = lo.info["refined"]["V"]  # the table says how many it recomputed: here every pair
    assert (n, of) == (H * H * L * (L - 1) // 2,) * 2 and "refined" not in hi.info
    assert read_scores(lo.save(tmp_path / "lo.parquet")).info["refined"] == {"V": (n, of)}
    for m in GRAM:
        torch.testing.assert_close(lo.dense(m, "V"), hi.dense(m, "V"), rtol=1e-3, atol=0, equal_nan=True)


@pytest.mark.parametrize("block, width", [(8, 24), (16, None)])
def test_the_refinement_margin_counts_the_terms_of_one_tile_product(block, width, monkeypatch):
    """The engine hands ``refine_small`` the terms one tile product sums, ``block · width`` (``width``
    by default twice ``block``): the margin's ``terms^{1/2}`` (the tests above fix the rule itself)."""
    from compscope.engine import composition

    seen = []
    real = composition.refine_small

    def spy(*args, terms, **kwargs):
        seen.append(terms)
        return real(*args, terms=terms, **kwargs)

    monkeypatch.setattr(composition, "refine_small", spy)
    scores(_complementary_halves(11), "V", GRAM, precision="float32", block=block, width=width, progress=False)
    assert seen and set(seen) == {block * (width or 2 * block)}


def test_refinement_counts_add_up_over_the_reader_groups_of_a_per_layer_metric():
    """A per-layer metric scores each reader layer apart (one group each), and the table's count of
    recomputed pairs adds up over the groups: every writer in one half of a rotated residual stream,
    layer 1's V-readers reading all of it (scores of the usual size: none recomputed, 16 pairs
    looked at), layer 2's only the other half (near zero: all 32 pairs recomputed): (32, 48).
    The values still match float64."""
    hw, (L, H, d) = _complementary_halves(12, reads_all=(1,)), (3, 4, 64)
    stack = torch.stack([torch.eye(d, dtype=torch.float64) * (1 + l) for l in range(L)])  # one G per layer
    lo = scores(hw, "V", GRAM, metric=stack, ridge=0.0, precision="float32", progress=False)
    hi = scores(hw, "V", GRAM, metric=stack, ridge=0.0, precision="float64", progress=False)
    assert lo.info["refined"] == {"V": (2 * H * H, 3 * H * H)}
    for m in GRAM:
        torch.testing.assert_close(lo.dense(m, "V"), hi.dense(m, "V"), rtol=1e-3, atol=0, equal_nan=True)


def test_top_pairs_that_cover_every_pair_are_not_called_partial():
    """``pairs=N`` computes the X-route measures of the top N pairs per kind by frobenius; the
    table says so (``info['partial']``: N of all) only while N is short of all of them. 3 layers of
    4 heads: 48 pairs per kind."""
    hw = model(L=3)
    short = scores(hw, "K", ["bandwidth"], pairs=47, progress=False)
    assert short.info["partial"] == {"bandwidth": (47, 48)}
    assert int(torch.isfinite(short.dense("bandwidth", "K")).sum()) == 47
    all_x = scores(hw, "K", ["bandwidth", "tight"], pairs="all", progress=False)
    assert "partial" not in all_x.info and "refined" not in all_x.info  # 'all': every measure from X, no Gram route
    for n in (48, 1000):
        every = scores(hw, "K", ["bandwidth"], pairs=n, progress=False)
        assert "partial" not in every.info and every.info["refined"] == {"K": (0, 48)}
        torch.testing.assert_close(every.dense("bandwidth", "K"), all_x.dense("bandwidth", "K"),
                                   rtol=1e-5, atol=1e-6, equal_nan=True)  # float32 bases, by two routes


def test_top_pairs_under_a_per_layer_metric_match_every_pair():
    """Under a metric with one G per layer the top pairs' bases are made per (writer layer, reader
    layer): their bandwidth and spectral equal those of ``pairs='all'`` (a block product per reader
    layer) pair by pair, for 20 of the 48 pairs of each kind."""
    hw = model(L=3, seed=3)
    Gs = _layer_grams(hw, 9)
    stack = torch.stack([Gs[l] for l in range(3)])
    every = scores(hw, "QKV", ["bandwidth", "spectral"], metric=stack, ridge=0.0, offset=1, pairs="all", progress=False)
    top = scores(hw, "QKV", ["bandwidth", "spectral"], metric=stack, ridge=0.0, offset=1, pairs=20, progress=False)
    for m in ("bandwidth", "spectral"):
        for k in "QKV":
            t, e = top.dense(m, k), every.dense(m, k)
            chosen = torch.isfinite(t)
            assert int(chosen.sum()) == 20 and {int(l) for l in chosen.nonzero()[:, 0]} == {0, 1}, (m, k)
            torch.testing.assert_close(t[chosen], e[chosen], rtol=1e-5, atol=1e-6)


def test_a_one_layer_model_scores_no_pair():
    """One layer: no (earlier writer, later reader) pair. ``compscope.scores`` says so; the engine
    itself gives NaN for every measure of every kind, on both routes, and computes or recomputes no
    Gram-route pair."""
    from compscope.engine.composition import scores as engine_scores

    hw = model(L=1)
    with pytest.raises(OptionError, match="test: one layer, so no head pair composes"):
        scores(hw, "K", progress=False)
    for pairs in (256, "all"):
        t = engine_scores(hw, "QKV", "all", pairs=pairs, progress=False)
        for m in t.measures:
            for k in "QKV":
                d = t.dense(m, k)
                assert d.shape == (1, 4, 1, 4) and bool(d.isnan().all()), (m, k, pairs)
    assert engine_scores(hw, "QKV", GRAM, progress=False).info["refined"] == {k: (0, 0) for k in "QKV"}


def test_random_heads_need_no_refinement():
    """Typical scores are far above float32's cancellation bound: nothing is recomputed."""
    g = torch.Generator().manual_seed(2)
    L, H, r, d = 3, 4, 32, 512
    rn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    hw = model(L=L, H=H, G=H, r=r, d=d, rotary=False).replace(W_Q=rn(L, H, r, d), W_K=rn(L, H, r, d), W_V=rn(L, H, r, d), W_O=rn(L, H, d, r))
    pairs = H * H * L * (L - 1) // 2
    assert scores(hw, "QKV", GRAM, progress=False).info["refined"] == {k: (0, pairs) for k in "QKV"}


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(2, 12), st.floats(0.1, 10.0), st.integers(0, 2**31))
def test_the_cancellation_scale_is_the_gram_diagonals_product_and_bounds_the_hadamard_norm(n, r, d, tau, seed):
    """``cancellation_scale`` is ``⟨diag BᵀB, diag AAᵀ⟩`` of the dense Grams (numpy, float64),
    and, both Grams being positive semi-definite, at least ``‖BᵀB ∘ AAᵀ‖_F``; likewise
    unweighted (``x2``: the projections)."""
    from compscope.engine.gram_route import cancellation_scale
    from compscope.engine.head_svd import Sides

    g = np.random.default_rng(seed)

    def side(m):
        rows = np.stack([np.linalg.qr(g.standard_normal((d, d)))[0][:, :min(r, d)].T for _ in range(m)])  # (m, r', d)
        spec = np.sort(np.exp(-g.uniform(0, tau, (m, rows.shape[1]))), axis=1)[:, ::-1].copy()
        return rows, spec

    (wr, ws), (rr, rs) = side(n), side(n + 1)
    W = Sides(torch.tensor(wr, dtype=torch.float32)[None], torch.tensor(ws)[None], torch.full((1, n), wr.shape[1]),
              torch.ones(1, n, dtype=torch.float64))
    for name, weigh in (("ba2", True), ("x2", False)):
        got = cancellation_scale(W, torch.tensor(rr, dtype=torch.float32), torch.tensor(rs), name).numpy()
        rows32 = lambda x: x.astype(np.float32).astype(np.float64)  # noqa: E731  (the float32 rows the engine holds)
        gram = lambda u, s: rows32(u).T @ np.diag(s**2 if weigh else np.ones_like(s)) @ rows32(u)  # noqa: E731
        for i in range(n + 1):
            Q = gram(rr[i], rs[i])
            for j in range(n):
                P = gram(wr[j], ws[j])
                np.testing.assert_allclose(got[i, j], np.diag(P) @ np.diag(Q), rtol=1e-5, atol=1e-12)
                assert np.linalg.norm(P * Q) <= got[i, j] * (1 + 1e-5) + 1e-12


@pytest.mark.parametrize("budget", [1 << 30, 500])
@pytest.mark.parametrize("dense_share", [0, 10**9])
@pytest.mark.parametrize("groups", [[(0, 4, 3)], [(0, 2, 2), (2, 4, 3)]])
def test_refinement_recomputes_exactly_the_pairs_under_the_margin(dense_share, groups, budget, monkeypatch):
    """``refine_small`` flags a pair where a value is below ``SAFETY · terms^{1/2} · ε₃₂ / tol ·
    ⟨diag P, diag Q⟩`` (for ``ba2`` or ``x2``), replaces both its values by ``‖diag(b) X diag(a)‖²``
    and ``‖X‖²`` from ``X = V_Bᵀ U_A`` (numpy, float64, of the float32 rows), and leaves the others
    as they were; per reader row it returns how many it flagged. Values set 5% either side of the
    margin (numpy's), pair by pair or a reader's pairs all at once; one group of readers, or two
    (rows 0-1 against writer columns 0-1 only: column 2 is outside, never flagged nor touched); a large
    memory budget, or 500 bytes (X of two pairs at a time pair by pair; of two or three readers at once)."""
    from compscope.engine import gram_route
    from compscope.engine.head_svd import Sides

    monkeypatch.setattr(gram_route, "DENSE_SHARE", dense_share)
    g = np.random.default_rng(4)
    n_w, n_r, r, d, terms = 3, 4, 3, 10, 200
    orth = lambda m: np.stack([np.linalg.qr(g.standard_normal((d, d)))[0][:, :r].T for _ in range(m)])  # noqa: E731
    wr, rr = orth(n_w).astype(np.float32), orth(n_r).astype(np.float32)
    ws, rs = np.sort(g.uniform(0.1, 1, (n_w, r)))[:, ::-1].copy(), np.sort(g.uniform(0.1, 1, (n_r, r)))[:, ::-1].copy()
    W = Sides(torch.tensor(wr)[None], torch.tensor(ws)[None], torch.full((1, n_w), r),
              torch.ones(1, n_w, dtype=torch.float64))
    w64, r64 = wr.astype(np.float64), rr.astype(np.float64)
    margin, exact = {}, {}
    for name, weigh in (("ba2", True), ("x2", False)):
        dP = np.stack([(w64[j] ** 2 * (ws[j, :, None] ** 2 if weigh else 1)).sum(0) for j in range(n_w)])  # diag AAᵀ
        dQ = np.stack([(r64[i] ** 2 * (rs[i, :, None] ** 2 if weigh else 1)).sum(0) for i in range(n_r)])  # diag BᵀB
        margin[name] = gram_route.SAFETY * np.sqrt(terms) * np.finfo(np.float32).eps / 1e-4 * (dQ @ dP.T)
    X = np.einsum("ikd,jld->ijkl", r64, w64)  # (reader, writer, r_B, r_A)
    exact["x2"] = (X**2).sum((2, 3))
    exact["ba2"] = ((rs[:, None, :, None] * X * ws[None, :, None, :]) ** 2).sum((2, 3))
    low = {"ba2": np.array([[1, 0, 0], [1, 1, 1], [0, 0, 0], [0, 1, 0]], bool),
           "x2": np.array([[0, 0, 1], [0, 0, 0], [0, 0, 0], [0, 1, 0]], bool)}
    values = {k: torch.tensor(margin[k] * np.where(low[k], 0.95, 1.05)) for k in low}
    before = {k: v.clone() for k, v in values.items()}
    per_row = gram_route.refine_small(W, torch.tensor(rr), torch.tensor(rs), values, groups, budget, terms)
    inside = np.zeros((n_r, n_w), bool)
    for r0, r1, nc in groups:
        inside[r0:r1, :nc] = True
    flagged = (low["ba2"] | low["x2"]) & inside
    assert per_row.tolist() == flagged.sum(1).tolist() == ([2, 3, 0, 1] if len(groups) == 1 else [1, 2, 0, 1])
    for k in low:
        np.testing.assert_allclose(values[k].numpy()[flagged], exact[k][flagged], rtol=1e-5)
        assert torch.equal(values[k][torch.tensor(~flagged)], before[k][torch.tensor(~flagged)])


def test_dominated_spectra_are_not_refined_for_nothing():
    """Heads whose factors' columns fall off like ``exp(-k/2)`` (a few directions dominate, as
    under the ``embed`` metric), at typical, not near-zero, scores: at most 1 in 20 pairs is
    recomputed, and float32 is within the repair's tolerance, 1e-4 (relative), of float64. (The rule before,
    ``4 ε₃₂ ‖AAᵀ‖_F ‖BᵀB‖_F > 1e-4 ‖BA‖²``, flagged most of these pairs: it is loose by about
    ``d`` on such Grams.)"""
    g = torch.Generator().manual_seed(5)
    L, H, r, d = 3, 4, 32, 512
    fall = torch.exp(-torch.arange(r) / 2.0)
    rn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    hw = model(L=L, H=H, G=H, r=r, d=d, rotary=False).replace(
        W_Q=rn(L, H, r, d) * fall[:, None], W_K=rn(L, H, r, d) * fall[:, None], W_V=rn(L, H, r, d) * fall[:, None],
        W_O=rn(L, H, d, r) * fall)
    lo = scores(hw, "QKV", GRAM, precision="float32", progress=False)
    hi = scores(hw, "QKV", GRAM, precision="float64", progress=False)
    pairs = H * H * L * (L - 1) // 2
    refined = lo.info["refined"]
    assert {k: of for k, (_, of) in refined.items()} == {k: pairs for k in "QKV"}
    assert sum(n for n, _ in refined.values()) <= 3 * pairs // 20, refined
    for key, v in lo.values.items():
        torch.testing.assert_close(v, hi.values[key], rtol=1e-4, atol=0, equal_nan=True)


def test_tiny_memory_budget_shrinks_tiles_not_results():
    hw = model(seed=8)
    ref = scores(hw, "QKV", GRAM + ["frobenius_baselined"], progress=False)
    small = scores(hw, "QKV", GRAM + ["frobenius_baselined"], max_memory=1, progress=False)
    for key, v in ref.values.items():
        torch.testing.assert_close(small.values[key], v, equal_nan=True, rtol=1e-6, atol=1e-7)


def test_memory_budget_is_a_quarter_of_the_free_memory_on_any_device(monkeypatch):
    """Without ``max_memory``: a quarter of what ``free_memory`` says (on CUDA the device's free memory
    and torch's cached memory; stubbed here, so no GPU is touched), 8 GiB assumed where it is unreadable;
    ``max_memory`` as given."""
    from compscope.engine import plan

    asked = []
    for free, want in ((40 << 30, 10 << 30), (7, 1), (None, 2 << 30)):
        monkeypatch.setattr(plan, "free_memory", lambda device, free=free: asked.append(device.type) or free)
        for dev in ("cuda", "cpu"):
            assert plan.memory_budget(None, torch.device(dev)) == want
        assert plan.memory_budget(12345, torch.device("cuda")) == 12345
        assert plan.memory_budget(2.5, torch.device("cpu")) == 2 and plan.memory_budget(0.5, torch.device("cpu")) == 1
    assert asked == ["cuda", "cpu"] * 3


def test_the_tile_size_is_the_largest_whose_buffers_fit_the_budget():
    """Readers 1-3 of 4 layers, 4 heads, r = 3, d = 64, Q, K and V (12 rows a layer), float32: one reader layer a
    row group (fewer than 6 layers), rows [0, 12), [12, 24), [24, 36) against the 4, 8, 12 writer heads before
    each. A tile of size b takes 4 (2 (n_w + m) b 2b + (n_w + n_r) r 2b) bytes with n_w = 12 writers, n_r = 36
    readers, m = 12 rows: 96 b² + 288 b floats, 430,080 bytes at b = 32, 116,736 at 16; from 64 down (128 from
    d = 2048 on), halved until it fits, never below 8, nor above d."""
    from compscope.engine.plan import plan_groups

    hw = model(L=4, H=4, G=4, r=3, d=64)
    for budget, blk in ((10**9, 64), (430_080, 32), (430_079, 16), (116_736, 16), (116_735, 8), (1, 8)):
        for dtype, scale in ((torch.float32, 1), (torch.float64, 2)):  # (8-byte floats: twice the bytes)
            (g,) = plan_groups(hw, [[1, 2, 3]], "QKV", ("ba2",), False, None, dtype, budget * scale)
            assert g.rg == [(0, 12, 4), (12, 24, 8), (24, 36, 12)] and g.blk == blk, (budget, dtype, g.blk)
    (g,) = plan_groups(hw, [[1, 2, 3]], "QKV", ("ba2",), False, 24, torch.float32, 1)
    assert g.blk == 24  # a tile size asked for is taken as it is
    for d, blk in ((2048, 128), (2047, 64), (40, 40)):  # from 128 where d >= 2048; never wider than d
        (g,) = plan_groups(model(L=2, H=1, G=1, r=3, d=d), [[1]], "K", ("ba2",), False, None, torch.float32, 10**9)
        assert g.blk == blk, (d, g.blk)
    # progress ticks of the row blocks [p0, p1): (p1 - p0)(d - p0) per Gram times 48 heads' r = 3 columns and the
    # 12·4 + 12·8 + 12·12 = 288 pairs, in units of one head SVD, 2 r² d H = 4608: 4096 · 432 / 4608 = 384 for one
    # 64-wide block; 192 and 96 for two 32-wide ones; twice as many for two Grams
    (no_gram,) = plan_groups(hw, [[1, 2, 3]], "QKV", (), False, None, torch.float32, 10**9)
    for budget, want, ticks in ((10**9, ("ba2",), [384]), (430_080, ("ba2",), [192, 96]),
                                (430_080, ("ba2", "x2"), [384, 192])):
        (g,) = plan_groups(hw, [[1, 2, 3]], "QKV", want, False, None, torch.float32, budget)
        assert g.ticks == ticks and g.units == no_gram.units + sum(ticks), (g.ticks, g.units, no_gram.units)


def test_gqa_key_value_factors_are_computed_once_per_kv_head(monkeypatch):
    """With 4 query heads on 2 K/V heads, the K and V factors that feed the factor Grams come
    per K/V head (2 rows), and the scores still match the dense reference."""
    from compscope.engine import head_svd

    seen = []
    inner = head_svd._factor

    def spy(hw, metric, layer_metric, layer, name, offset, out, shared=False):
        w = inner(hw, metric, layer_metric, layer, name, offset, out, shared)
        seen.append((name, shared, w.shape[0]))
        return w

    monkeypatch.setattr(head_svd, "_factor", spy)
    hw = model(seed=7)
    assert hw.n_heads == 4 and hw.n_kv_heads == 2
    t = scores(hw, "QKV", GRAM, metric="embed", offset=1, progress=False)
    assert check_dense(hw, t, "embed", offset=1, measures=GRAM) == 3 * 4 * (4 * 4 * 3)
    shared = {(n, k) for n, s, k in seen if s}
    assert shared == {("K", 2), ("V", 2)}
    assert all(k == 4 for n, s, k in seen if not s)


@settings(max_examples=30, deadline=None, derandomize=True)  # CI must not be flaky; 500 random examples passed
@given(L=st.integers(2, 4), H=st.sampled_from([1, 2, 4]), gqa=st.booleans(), r=st.integers(2, 5), d=st.integers(3, 12),
       seed=st.integers(0, 10**6), offset=st.sampled_from([0, 1, 2.5]), metric=st.sampled_from(["identity", "embed", "unembed"]),
       block=st.integers(1, 12), width=st.integers(1, 12), pairs=st.sampled_from(["all", 1000]),
       measures=st.lists(st.sampled_from(ALL), min_size=1, max_size=4, unique=True))
def test_engine_matches_dense_reference_on_random_shapes(L, H, gqa, r, d, seed, offset, metric, block, width, pairs, measures):
    """Any shape (d_model below d_head included: rank-deficient heads), GQA or not, rotary
    offset, metric, tile size and route: every measure of every pair equals the dense float64
    numpy reference."""
    G = H // 2 if gqa and H > 1 else H
    hw = model(L=L, H=H, G=G, r=r, d=d, V=3 * d, seed=seed, rotary=offset != 0)
    t = scores(hw, "QKV", measures, metric=metric, offset=offset, pairs=pairs, precision="float64", block=block, width=width,
               progress=False)
    assert check_dense(hw, t, metric, offset, measures=measures) == 3 * len(measures) * H * H * L * (L - 1) // 2


@pytest.mark.parametrize("measures,want", [(["frobenius"], ("ba2",)), (["tight", "frobenius_baselined"], ("ba2",)),
                                           (["overlap"], ("x2",)), (["shared_dims", "frobenius"], ("ba2", "x2")),
                                           (["bandwidth"], ("ba2",))])
def test_only_the_grams_the_measures_read_are_formed(monkeypatch, measures, want):
    """frobenius, frobenius_baselined and tight read ‖BA‖² only; overlap and shared_dims ‖X‖²
    only; X-route measures rank their top pairs by ‖BA‖². Values equal those of a full run."""
    from compscope.engine import composition

    seen = []
    inner = composition.gram_products
    monkeypatch.setattr(composition, "gram_products", lambda *a, **k: seen.append(a[-1]) or inner(*a, **k))
    hw = model(L=4, seed=9)
    t = scores(hw, "QKV", measures, pairs=5, progress=False)
    assert seen == [want]
    full = scores(hw, "QKV", ["frobenius", "frobenius_baselined", "tight", "overlap", "shared_dims", "bandwidth"], pairs=5,
                  progress=False)
    for key, v in t.values.items():
        torch.testing.assert_close(v, full.values[key], rtol=1e-6, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("rows", [1, 12, 24, 1000])
def test_reader_group_sizes_do_not_change_scores(monkeypatch, rows):
    """One reader layer per group, several, or all: the same scores as the dense reference
    (12 reader rows per layer here: 3 kinds × 4 heads)."""
    from compscope.engine import gram_route

    monkeypatch.setattr(gram_route, "READER_ROWS", rows)
    monkeypatch.setattr(gram_route, "GROUP_SHARE", 1)  # groups may span every reader layer
    hw = model(L=4, seed=3)
    t = scores(hw, "QKV", GRAM, offset=1, block=3, progress=False)
    assert check_dense(hw, t, offset=1, measures=GRAM) == 3 * 4 * (4 * 4 * 6)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_bandwidth_of_an_orthogonal_pair_is_zero_on_both_routes(precision):
    """Writer 0.0 writes only into dims 0-3; V-reader 1.1 reads only dims 5-8: BA = 0, and
    bandwidth (effective rank of rounding noise otherwise) is 0; the other pairs are unchanged."""
    hw = model(L=2, rotary=False)
    W_O, W_V = hw.W_O.clone(), hw.W_V.clone()
    W_O[0, 0, 4:] = 0
    W_V[1, hw.kv_map[1], :, :5] = 0
    # a random rotation of the residual basis, so that BA = 0 is rounding noise, not exact zeros;
    # float64 weights, so that the stored maps are orthogonal to float64 precision
    T = torch.linalg.qr(torch.randn(hw.d_model, hw.d_model, generator=torch.Generator().manual_seed(7), dtype=torch.float64))[0]
    hw = hw.replace(W_O=T @ W_O.double(), W_V=W_V.double() @ T.T, W_Q=hw.W_Q.double(), W_K=hw.W_K.double())
    for pairs in ("all", 50):
        t = scores(hw, "V", ["bandwidth", "frobenius"], pairs=pairs, precision=precision, progress=False)
        assert float(t.dense("frobenius", "V")[0, 0, 1, 1]) < 1e-6
        assert float(t.dense("bandwidth", "V")[0, 0, 1, 1]) == 0.0
        assert float(t.dense("bandwidth", "V")[0, 1, 1, 1]) > 0.5


def test_read_gain_by_hand():
    """``read_gain = ‖BA‖_F / ‖A‖_F`` on maps small enough to do by hand: a reader ``diag(2, 5, 0, 0)``
    reading a writer ``3 u uᵀ``. Along ``e1`` it is the reader's gain 2; along ``(e1 + e2)/√2``,
    ``‖B u‖ = √((4 + 25)/2)``; orthogonal to what the reader reads, 0. The writer's scale drops out,
    the reader's stays (×10 gives ×10); frobenius divides it out again: ``read_gain / ‖B‖_F``."""
    from compscope.analysis.pair import pair_spectra
    from compscope.core.lowrank import LowRank
    from compscope.measures import get_measure

    f64 = dict(dtype=torch.float64)
    reader = LowRank(torch.tensor([[2.0, 0], [0, 5], [0, 0], [0, 0]], **f64), torch.eye(4, **f64)[:2])
    gain, frob = get_measure("read_gain"), get_measure("frobenius")

    def writer(u, scale=3.0):
        u = torch.tensor(u, **f64)[:, None]
        u = u / u.norm()
        return LowRank(scale * u, u.T)

    for u, want in (([1, 0, 0, 0], 2.0), ([1, 1, 0, 0], math.sqrt(14.5)), ([0, 0, 1, 1], 0.0)):
        p = pair_spectra(writer(u), reader)
        assert float(gain.exact(p)[0]) == pytest.approx(want, abs=1e-12)
        assert float(gain.exact(pair_spectra(writer(u, 0.01), reader))[0]) == pytest.approx(want, abs=1e-12)
        louder = LowRank(10 * reader.left, reader.right)
        assert float(gain.exact(pair_spectra(writer(u), louder))[0]) == pytest.approx(10 * want, abs=1e-11)
        assert float(frob.exact(p)[0]) == pytest.approx(want / math.sqrt(29), abs=1e-12)


def test_a_reader_spectrum_divided_by_its_top_reads_as_the_readers_own_in_both_forms():
    """The engine divides a reader's spectrum by its largest value and passes that value as ``b_top``: every
    measure, in its exact form (``PairSpectra``) and its Gram form (``GramStats``, with ``‖BA‖_F²`` and ``‖X‖_F²``
    of the divided spectrum), then gives what it gives on the reader's own spectrum; ``read_gain`` there is
    ``‖diag(b) X diag(a)‖_F / ‖a‖`` by hand, the one measure that keeps the reader's scale."""
    from compscope.measures import GramStats

    g = torch.Generator().manual_seed(5)
    d, r = 9, 3
    X = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0][:r, :r]  # cosines, (r_B, r_A)
    a, b = torch.tensor([2.0, 0.5, 0.25], dtype=torch.float64), torch.tensor([7.0, 3.0, 0.1], dtype=torch.float64)
    top = b[0]
    rank_a, e = torch.tensor(r), torch.tensor(0.1, dtype=torch.float64)  # e: a baseline for frobenius_baselined
    own = PairSpectra(a, b, X, d, rank_a, expected_frobenius=e)
    cut = PairSpectra(a, b / top, X, d, rank_a, expected_frobenius=e, b_top=top)
    core = (b / top)[:, None] * X * a[None, :]
    gram = GramStats(core.pow(2).sum(), X.pow(2).sum(), a, b / top, rank_a, d, e, b_top=top)
    for name in ALL + ["frobenius_baselined"]:
        m = get_measure(name)
        want = m.exact(own)
        torch.testing.assert_close(m.exact(cut), want, rtol=1e-12, atol=0, msg=name)
        if m.from_gram is not None:
            torch.testing.assert_close(m.from_gram(gram), want, rtol=1e-12, atol=0, msg=name)
    by_hand = math.sqrt(sum((b[i] * X[i, j] * a[j]) ** 2 for i in range(r) for j in range(r)) / (4 + 0.25 + 0.0625))
    assert float(get_measure("read_gain").exact(cut)) == pytest.approx(by_hand, rel=1e-12)
