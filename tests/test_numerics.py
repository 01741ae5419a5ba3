"""Numerical robustness: every measure finite and right for weights from 1e-30 to 1e30, one huge
entry, zero, rank-1 and duplicated heads, float16 and bfloat16 storage, against dense float64
numpy (``check_dense``: rel 1e-5, abs 1e-6 per value)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from compscope.api import scores
from compscope.engine import batch_eig
from test_composition import ALL, check_dense, model

MEASURES = ALL + ["frobenius_baselined"]


def scaled(hw, q=0, k=0, v=0, o=0):
    """``hw`` with ``W_Q, W_K, W_V, W_O`` times ``10**q``, ``10**k``, ``10**v``, ``10**o``."""
    s = lambda e: torch.tensor(10.0**e, dtype=torch.float64)  # noqa: E731
    f = lambda w, e: (w.double() * s(e)).to(w.dtype)  # noqa: E731
    return hw.replace(W_Q=f(hw.W_Q, q), W_K=f(hw.W_K, k), W_V=f(hw.W_V, v), W_O=f(hw.W_O, o), step="scaled")


class ReaderScaleOut:
    """``t`` with ``read_gain`` divided by the reader's scale ``10**(q+k)`` (Q, K: ``W_QK``) or
    ``10**(v+o)`` (V: ``W_OV``): the one measure that keeps the reader's scale, compared with the
    unscaled model's like the scale-invariant ones (to ``check_dense``'s relative tolerance)."""

    def __init__(self, t, q=0, k=0, v=0, o=0):
        self.t, self.factor = t, {"Q": 10.0 ** (q + k), "K": 10.0 ** (q + k), "V": 10.0 ** (v + o)}

    def dense(self, measure, kind):
        x = self.t.dense(measure, kind)
        return x / self.factor[kind] if measure == "read_gain" else x


def finite_everywhere(t):
    for (m, k), v in t.values.items():
        forward = torch.triu(torch.ones(v.shape[0], v.shape[0], dtype=torch.bool), 1)[:, None, :, None].expand_as(v)
        assert torch.isfinite(v[forward]).all(), (m, k)


@pytest.mark.parametrize("route", [dict(), dict(pairs="all"), dict(precision="float64")])
@pytest.mark.parametrize("exp", [-30, -15, -6, 0, 3, 10, 19, 30])
def test_scores_are_scale_invariant_from_1e_minus_30_to_1e30(exp, route):
    """Every factor times 10**exp: the scores of the unscaled model (dense float64 reference).
    Before, float32 overflowed to NaN from singular-value products of about 1e19 on, gave 0.0
    for frobenius at 1e-6, and the batched eigen-solver failed from a·b ≈ 5e10 on."""
    hw = model(seed=1)
    t = scores(scaled(hw, exp, exp, exp, exp), measures=MEASURES, progress=False, **route)
    finite_everywhere(t)
    assert check_dense(hw, ReaderScaleOut(t, exp, exp, exp, exp)) > 0


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(-30, 30), min_size=4, max_size=4), st.integers(0, 3))
def test_each_factor_scaled_independently(exps, seed):
    hw = model(seed=seed, L=2)
    t = scores(scaled(hw, *exps), measures=MEASURES, pairs="all", progress=False)
    finite_everywhere(t)
    check_dense(hw, ReaderScaleOut(t, *exps))


def test_one_huge_entry_is_finite_and_matches_float64():
    """One corrupted weight of 1e26 in a writer: finite, and equal to dense float64 on the same
    weights (where that writer is numerically rank 1)."""
    hw = model(seed=2)
    W_O = hw.W_O.clone()
    W_O[0, 1, 2, 0] = 1e26
    bad = hw.replace(W_O=W_O, step="corrupt")
    for route in (dict(), dict(pairs="all")):
        t = scores(bad, measures=MEASURES, progress=False, **route)
        finite_everywhere(t)
        check_dense(bad, t)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_heads_match_float64_of_the_same_weights(dtype):
    hw = model(seed=3)
    half = hw.replace(W_Q=hw.W_Q.to(dtype), W_K=hw.W_K.to(dtype), W_V=hw.W_V.to(dtype), W_O=hw.W_O.to(dtype), step="half")
    for route in (dict(), dict(pairs="all")):
        t = scores(half, measures=MEASURES, progress=False, **route)
        finite_everywhere(t)
        check_dense(half, t)  # check_dense reads the float16/bfloat16 weights in float64


def test_zero_rank_one_and_duplicated_heads():
    """A zero writer and a zero reader score 0 on every measure; rank-1 heads and a head that
    duplicates another match the dense reference, and duplicates score alike (to float32 rounding)."""
    hw = model(seed=4, H=4, G=4)
    g = torch.Generator().manual_seed(9)
    W_O, W_V, W_Q, W_K = hw.W_O.clone(), hw.W_V.clone(), hw.W_Q.clone(), hw.W_K.clone()
    W_O[0, 0] = 0  # zero writer
    W_V[1, 3] = 0  # zero V-reader (and writer)
    W_V[0, 2] = torch.outer(torch.randn(3, generator=g), torch.randn(9, generator=g))  # rank-1 writer
    W_Q[2, 1] = torch.outer(torch.randn(3, generator=g), torch.randn(9, generator=g))  # rank-1 Q/K reader
    for W in (W_O, W_Q):
        W[:, 3] = W[:, 2]  # head 3 duplicates head 2 (Q and O; K and V below)
    W_K[:, 3], W_V[:, 3] = W_K[:, 2], W_V[:, 2]
    W_V[1, 3] = 0
    hw = hw.replace(W_O=W_O, W_V=W_V, W_Q=W_Q, W_K=W_K, step="edited")
    for route in (dict(), dict(pairs="all")):
        t = scores(hw, measures=MEASURES, progress=False, **route)
        finite_everywhere(t)
        check_dense(hw, t)
        for m in MEASURES:
            for k in "QKV":
                v = t.dense(m, k)
                assert (v[0, 0, 1:] == 0).all(), (m, k)  # the zero writer
                # duplicates alike to float32 rounding (bit-equal on some CPUs; on others the batched
                # products round two equal rows of a batch differently, by about one ulp)
                close = dict(rtol=1e-6, atol=1e-7, equal_nan=True, msg=lambda e: f"{m} {k}: {e}")
                torch.testing.assert_close(v[0, 2, 2], v[0, 3, 2], **close)  # duplicated writers
                torch.testing.assert_close(v[0, :, 2, 2], v[0, :, 2, 3], **close)  # duplicated readers
            assert (t.dense(m, "V")[0, :, 1, 3] == 0).all(), m  # the zero V-reader


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("exp", [-30, -10, 0, 10, 18, 30])
def test_batched_eigenvalues_at_any_scale(exp, dtype):
    """The batched solver scales each matrix by a power of two first: right where entries of
    1e30 squared overflowed float32 before."""
    g = torch.Generator().manual_seed(exp + 40)
    C = torch.randn(20, 12, 12, generator=g, dtype=torch.float64)
    M = C @ C.mT
    ref = torch.linalg.eigvalsh(M)
    got = batch_eig.eigvalsh((M * 10.0**exp).to(dtype)).double() / 10.0**exp
    eps = torch.finfo(dtype).eps
    assert torch.isfinite(got).all()
    assert ((got - ref).abs().amax(-1) <= 64 * eps * ref.abs().amax(-1)).all()
