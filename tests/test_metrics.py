"""A Gram matrix's roots as a metric takes them (``compscope.core.metrics.from_gram``), worked out by
hand: the ridge ``λ = ridge · tr(G)/d`` on a clamped spectrum, ``G^{±1/2}`` on ``G``'s own
eigenvectors, the condition numbers before and after, the inverted form of ``unembed``, the
rounding a Gram matrix may carry and what is refused beyond it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from compscope.core.metrics import GRAM_TOLERANCE, from_gram
from compscope.errors import OptionError

from test_composition import sqrtm


def _rotation(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q


def test_roots_of_a_rank_deficient_gram_matrix_take_the_ridge_by_hand():
    """``G = Q diag(4, 0, 1) Qᵀ`` with ridge 0.1: ``λ = 0.1 · 5/3``, so ``G^{1/2} = Q diag(√(4 + λ), √λ, √(1 + λ)) Qᵀ``,
    ``G^{-1/2}`` the same with reciprocals; the raw condition is infinite (an eigenvalue of 0), the
    regularised one ``(4 + λ)/λ = 25``."""
    Q = _rotation(3, 0)
    lam = 0.1 * 5 / 3
    e = torch.tensor([4 + lam, lam, 1 + lam], dtype=torch.float64)
    G = Q @ torch.diag(torch.tensor([4.0, 0.0, 1.0], dtype=torch.float64)) @ Q.T
    met = from_gram("g", G, ridge=0.1)
    torch.testing.assert_close(met.sqrt[None], Q @ torch.diag(e.sqrt()) @ Q.T, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(met.inv_sqrt[None], Q @ torch.diag(e.rsqrt()) @ Q.T, rtol=1e-12, atol=1e-12)
    raw, cond = met.condition[None]
    assert raw == math.inf and cond == pytest.approx(25.0, rel=1e-12)
    assert met.ridge == 0.1 and met.sqrt[None].dtype == torch.float64
    default = from_gram("g", G)
    lam = 1e-6 * 5 / 3  # the specification's default ridge, 1e-6
    assert default.ridge == 1e-6 and default.condition[None][1] == pytest.approx((4 + lam) / lam, rel=1e-6)


def test_roots_of_a_definite_gram_matrix_without_a_ridge_and_inverted():
    """``G = Q diag(9, 4, 1/4) Qᵀ``, ridge 0: the roots are ``Q diag(3, 2, 1/2) Qᵀ`` and its inverse,
    both conditions 36; ``invert`` (``G⁻¹``, as ``unembed`` takes it) swaps the two roots. A rank-one
    ``G = v vᵀ`` with a ridge is a metric (one eigenvalue above 0 is enough), also where the other two are 0
    exactly."""
    Q = _rotation(3, 1)
    G = Q @ torch.diag(torch.tensor([9.0, 4.0, 0.25], dtype=torch.float64)) @ Q.T
    root = Q @ torch.diag(torch.tensor([3.0, 2.0, 0.5], dtype=torch.float64)) @ Q.T
    met = from_gram("g", G, ridge=0.0)
    torch.testing.assert_close(met.sqrt[None], root, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(met.inv_sqrt[None], torch.linalg.inv(root), rtol=1e-12, atol=1e-12)
    assert met.condition[None] == pytest.approx((36.0, 36.0), rel=1e-12)
    inv = from_gram("g", G, ridge=0.0, invert=True)
    torch.testing.assert_close(inv.sqrt[None], met.inv_sqrt[None], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(inv.inv_sqrt[None], met.sqrt[None], rtol=1e-12, atol=1e-12)
    v = torch.tensor([[1.0], [2.0], [2.0]], dtype=torch.float64)  # |v|² = 9, λ = 1e-3 · 9/3
    one = from_gram("g", v @ v.T, ridge=1e-3)
    lam = 3e-3
    assert one.condition[None] == (math.inf, pytest.approx((9 + lam) / lam, rel=1e-9))
    exact = from_gram("g", torch.diag(torch.tensor([0.0, 0.0, 9.0], dtype=torch.float64)), ridge=1e-3)  # zeros exactly
    assert exact.condition[None] == (math.inf, pytest.approx((9 + lam) / lam, rel=1e-12))


def test_a_gram_matrix_may_carry_rounding_and_no_more():
    """Asymmetry up to ``GRAM_TOLERANCE · ‖G‖`` (here ‖G‖ = 1000·√3, so the tolerance is relative) is
    rounding: the roots are those of ``(G + Gᵀ)/2``; twice that is refused. A negative eigenvalue down
    to ``−GRAM_TOLERANCE`` times the largest is rounding too (clamped to 0 before the ridge); twice
    that is refused. A zero ``G`` is refused as such, whatever the ridge, and a singular one without a
    ridge."""
    d = 3
    G = 1000.0 * torch.eye(d, dtype=torch.float64)
    size = float(G.norm())
    skew = torch.zeros(d, d, dtype=torch.float64)
    skew[0, 1], skew[1, 0] = 1.0, -1.0  # ‖skew − skewᵀ‖ = 2√2
    step = GRAM_TOLERANCE * size / (2 * math.sqrt(2))
    kept = from_gram("g", G + 0.9 * step * skew, ridge=0.0)
    torch.testing.assert_close(kept.sqrt[None], math.sqrt(1000.0) * torch.eye(d, dtype=torch.float64), rtol=1e-12,
                               atol=0)
    with pytest.raises(OptionError, match=r"metric g: G is not symmetric \(‖G − Gᵀ‖/‖G‖ = 0\.0002\)"):
        from_gram("g", G + 2 * step * skew, ridge=0.0)
    Q = _rotation(3, 2)
    near = Q @ torch.diag(torch.tensor([-0.9 * GRAM_TOLERANCE * 50, 1.0, 50.0], dtype=torch.float64)) @ Q.T
    met = from_gram("g", near, ridge=0.01)
    lam = 0.01 * 51 / 3  # the negative eigenvalue counts as 0 in the trace too
    e = torch.tensor([lam, 1 + lam, 50 + lam], dtype=torch.float64)
    torch.testing.assert_close(met.sqrt[None], Q @ torch.diag(e.sqrt()) @ Q.T, rtol=1e-9, atol=1e-12)
    assert met.condition[None] == (math.inf, pytest.approx((50 + lam) / lam, rel=1e-9))
    far = Q @ torch.diag(torch.tensor([-2 * GRAM_TOLERANCE * 50, 1.0, 50.0], dtype=torch.float64)) @ Q.T
    with pytest.raises(OptionError, match=r"metric g: G has a negative eigenvalue \(-0\.01, the largest 50\)"):
        from_gram("g", far, ridge=0.01)
    for ridge in (0.0, 0.1):
        with pytest.raises(OptionError, match="metric g: G is zero or negative definite"):
            from_gram("g", torch.zeros(d, d), ridge=ridge)
    with pytest.raises(OptionError, match="metric g: G is zero or negative definite"):
        from_gram("g", -torch.eye(d), ridge=0.1)
    with pytest.raises(OptionError, match="metric g: G is singular; pass a positive ridge"):
        from_gram("g", torch.diag(torch.tensor([1.0, 0.0, 2.0])), ridge=0.0)


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_embed_and_unembed_metrics_are_their_gram_matrices_by_hand(positions):
    """``embed``: ``G = Σ_t e_t e_tᵀ / n_vocab (+ Σ_p p_p p_pᵀ / n_ctx)`` over the toy's own embedding rows
    (and learned position rows); ``unembed``: ``G = (Σ_t u_t u_tᵀ / n_vocab)⁻¹`` over its unembedding rows.
    Without a ridge their roots are those of these matrices, computed here in numpy; a model without an
    unembedding has no ``unembed`` metric."""
    from dataclasses import replace

    from compscope.core.metrics import embed, unembed
    from compscope.toy.model import ToyConfig, ToyTransformer

    cfg = ToyConfig(n_layers=1, n_heads=1, d_model=4, d_head=2, d_vocab=7, n_ctx=5, positions=positions)
    m = ToyTransformer(cfg, seed=1)
    E = m.W_E.detach().double().numpy()  # (vocab, d)
    G = E.T @ E / 7
    if positions == "learned":
        P = m.W_pos.detach().double().numpy()  # (n_ctx, d)
        G = G + P.T @ P / 5
    hw = m.head_weights()
    np.testing.assert_allclose(embed(hw, ridge=0.0).sqrt[None].numpy(), sqrtm(G)[0], rtol=1e-6, atol=1e-9)
    U = m.W_U.detach().double().numpy()  # (vocab, d)
    met = unembed(hw, ridge=0.0)
    np.testing.assert_allclose(met.sqrt[None].numpy(), sqrtm(U.T @ U / 7)[1], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(met.inv_sqrt[None].numpy(), sqrtm(U.T @ U / 7)[0], rtol=1e-6, atol=1e-9)
    with pytest.raises(OptionError, match="metric 'unembed': .* has no unembedding"):
        unembed(replace(hw, W_U=None, b_U=None))


def test_a_metric_of_ones_own_names_layers_0_to_the_last_and_counts_once():
    """A ``{layer: G}`` fits a model of L layers for layers ``0 … L − 1`` only (layer ``L`` and ``−1`` are
    named as out of range); the same metric given twice counts once, a name given twice counts once,
    and two different metrics under one name are refused (one's own named like a registered one too)."""
    from compscope.core.metrics import distinct_metrics, get_metric, metric_from_gram
    from compscope.toy.model import ToyConfig, ToyTransformer

    hw = ToyTransformer(ToyConfig(n_layers=3, n_heads=1, d_model=4, d_head=2, d_vocab=7, n_ctx=5), seed=0).head_weights()
    G = torch.eye(4, dtype=torch.float64)
    assert sorted(get_metric({0: G, 1: G, 2: G}, hw).sqrt) == [0, 1, 2]
    for layer in (3, -1):
        with pytest.raises(OptionError, match=rf"a G for layer {layer}, but toy\S* has layers 0\.\.2"):
            get_metric({layer: G}, hw)
    met = metric_from_gram(G, name="mine")
    assert distinct_metrics([met, "embed", met, "embed"]) == [met, "embed"]
    with pytest.raises(OptionError, match="two different metrics are named 'mine'"):
        distinct_metrics([met, metric_from_gram(2 * G, name="mine")])
    with pytest.raises(OptionError, match="two different metrics are named 'embed'"):  # one's own beside the registered
        distinct_metrics(["embed", metric_from_gram(G, name="embed")])
