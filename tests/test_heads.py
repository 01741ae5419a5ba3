"""HeadWeights, LowRank and Rotary against dense float64 numpy computations."""


import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from compscope import HeadWeights, LoadError, LowRank, Meta, Norm, Rotary, UnsupportedModelError, WeightError


def random_heads(L=2, H=4, G=2, r=3, d=8, V=11, rotary=False, seed=0) -> HeadWeights:
    g = torch.Generator().manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    rot = None
    if rotary:
        rot = Rotary(2, torch.tensor([[0.7], [0.3]])[:L], "half")
    return HeadWeights(
        W_Q=rn(L, H, r, d), W_K=rn(L, G, r, d), W_V=rn(L, G, r, d), W_O=rn(L, H, d, r),
        b_Q=None, b_K=None, b_V=None, b_O=None,
        W_E=rn(d, V), W_pos=None, W_U=rn(V, d), b_U=None,
        kv_map=tuple(h // (H // G) for h in range(H)),
        attn_norm=Norm("rmsnorm", rn(L, d), None, 1e-6), final_norm=None, norm_placement="pre",
        rotary=rot, positions="rotary" if rotary else "none",
        sliding_window=(None,) * L, meta=Meta("test", "test", "test", "float32", "float32"),
    )


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 9), r=st.integers(1, 5), n=st.integers(1, 9), seed=st.integers(0, 10**6))
def test_lowrank_matches_dense_svd(m, r, n, seed):
    g = torch.Generator().manual_seed(seed)
    left, right = torch.randn(m, r, generator=g, dtype=torch.float64), torch.randn(r, n, generator=g, dtype=torch.float64)
    lr = LowRank(left, right)
    dense = left.numpy() @ right.numpy()
    s_ref = np.linalg.svd(dense, compute_uv=False)[: min(m, r, n)]
    u, s, v = lr.svd()
    np.testing.assert_allclose(s.numpy()[: len(s_ref)], s_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose((u * s) @ v.T, dense, atol=1e-9)
    np.testing.assert_allclose(float(lr.norm("fro")), np.linalg.norm(dense), rtol=1e-10)
    np.testing.assert_allclose(float(lr.norm("spectral")), s_ref[0], rtol=1e-10)
    np.testing.assert_allclose(lr.T.dense().numpy(), dense.T)


def test_lowrank_product_and_shape_errors():
    a, b = LowRank(torch.ones(4, 2), torch.ones(2, 3)), LowRank(torch.ones(3, 1), torch.ones(1, 5))
    assert torch.equal((a @ b).dense(), a.dense() @ b.dense())
    with pytest.raises(ValueError, match="do not chain"):
        LowRank(torch.ones(4, 2), torch.ones(3, 3))


def test_head_circuits_are_the_factor_products():
    hw = random_heads()
    for layer in range(2):
        for h in range(4):
            g = h // 2  # two query heads per K/V head
            np.testing.assert_allclose(hw.W_OV(layer, h).dense(), hw.W_O[layer, h] @ hw.W_V[layer, g], rtol=1e-6)
            np.testing.assert_allclose(hw.W_QK(layer, h).dense(), hw.W_Q[layer, h].T @ hw.W_K[layer, g], rtol=1e-6)
    assert hw.kv_map == (0, 0, 1, 1)
    assert hw.n_attention_params() == 2 * (4 * 3 * 8 * 2 + 2 * 3 * 8 * 2)


def _rotation(p: float, theta: float) -> np.ndarray:
    """Rotary matrix for a 2-dim head (one pair), written out by hand."""
    c, s = np.cos(p * theta), np.sin(p * theta)
    return np.array([[c, -s], [s, c]])


@pytest.mark.parametrize("i,j", [(0, 0), (5, 2), (7, 0), (3, 3), (9, 8)])
def test_rotary_qk_circuit_at_offset(i, j):
    """x_q^T W_QK(δ = i - j) x_k equals the logit of rotated q at i and k at j."""
    hw = random_heads(L=1, H=2, G=1, r=2, d=5, rotary=True)
    theta = 0.7
    wq, wk = hw.W_Q[0, 1].double().numpy(), hw.W_K[0, 0].double().numpy()
    x, y = np.random.default_rng(0).normal(size=(2, 5))
    logit = (_rotation(i, theta) @ wq @ x) @ (_rotation(j, theta) @ wk @ y)
    got = x @ hw.W_QK(0, 1, offset=i - j).dense().double().numpy() @ y
    np.testing.assert_allclose(got, logit, rtol=1e-5)


def test_rotary_interleaved_equals_half_after_permutation():
    """Interleaved pairs (2i, 2i+1) are rotate-half pairs (i, i + n/2) after reordering dims."""
    x = torch.randn(3, 6, 8, dtype=torch.float64)
    f = torch.tensor([[1.0, 0.1, 0.01, 0.001]], dtype=torch.float64)
    half, inter = Rotary(8, f, "half"), Rotary(8, f, "interleaved")
    perm = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])  # half layout -> interleaved layout
    pos = torch.arange(6)
    torch.testing.assert_close(inter.rotate(x[..., perm], pos, 0), half.rotate(x, pos, 0)[..., perm])


def test_shape_mismatch_names_the_field():
    hw = random_heads()
    with pytest.raises(WeightError, match="W_O has shape"):
        hw.replace(W_O=torch.zeros(2, 4, 8, 2))
    with pytest.raises(WeightError, match="kv_map"):
        hw.replace(kv_map=(0, 1, 2, 3))
    import dataclasses

    for own in ((2,), (2, 3), (0, 1)):  # one count per layer (2), each dividing the 2 K/V heads held
        with pytest.raises(WeightError, match=r"meta.kv_heads_own"):
            hw.replace(meta=dataclasses.replace(hw.meta, kv_heads_own=own))
    assert hw.replace(meta=dataclasses.replace(hw.meta, kv_heads_own=(1, 2))).meta.kv_heads_own == (1, 2)


def test_norm_gain_offset():
    x = torch.randn(4, 6)
    w = torch.randn(1, 6)
    plain = Norm("rmsnorm", w + 1, None, 1e-6).apply(x, 0)
    gemma = Norm("rmsnorm", w, None, 1e-6, offset=1.0).apply(x, 0)
    torch.testing.assert_close(plain, gemma)
    ln = Norm("layernorm", None, None, 1e-5).apply(x, 0)
    torch.testing.assert_close(ln, torch.nn.functional.layer_norm(x, (6,), eps=1e-5))


def test_qk_norm_over_a_layer_by_hand():
    """Layer-wide QK-norm (OLMo-2) against hand values: two query heads of width 2 whose vectors are
    (3, 4) and (0, 0) share one RMS, sqrt((9 + 16) / 4) = 2.5, so the first becomes (1.2, 1.6) and
    not (3, 4) / sqrt(12.5) as per head; the keys' RMS runs over the distinct K heads only, each
    counted once however many query heads share it."""
    from compscope.core.attention import project

    hw = random_heads(L=1, H=2, G=1, r=2, d=2)
    eye = torch.eye(2)[None, None]
    ones = lambda n: torch.ones(1, n)  # noqa: E731
    hw = hw.replace(W_Q=torch.cat([eye, 0 * eye], 1), W_K=eye, attn_norm=None, norm_placement="none",
                    qk_norm=(Norm("rmsnorm", ones(4), None, 0.0), Norm("rmsnorm", ones(2), None, 0.0)),
                    qk_norm_scope="layer")
    x = torch.tensor([[[3.0, 4.0]]])  # (batch, seq, d)
    q = project(hw, 0, "Q", x)
    torch.testing.assert_close(q[0, :, 0], torch.tensor([[1.2, 1.6], [0.0, 0.0]]))
    k = project(hw, 0, "K", x)  # one K head shared by both queries: RMS over (3, 4) alone
    torch.testing.assert_close(k[0, :, 0], torch.tensor([[3.0, 4.0], [3.0, 4.0]]) / 12.5**0.5)
    per_head = hw.replace(qk_norm=(Norm("rmsnorm", ones(2), None, 0.0), Norm("rmsnorm", ones(2), None, 0.0)),
                          qk_norm_scope="head")
    torch.testing.assert_close(project(per_head, 0, "Q", x)[0, 0, 0], torch.tensor([3.0, 4.0]) / 12.5**0.5)
    with pytest.raises(WeightError, match=r"qk_norm \(q\) weight has shape \(1, 2\), expected \(1, 4\)"):
        per_head.replace(qk_norm_scope="layer")


def test_qk_norm_rows_per_head_by_hand():
    """Scope 'head' with one gain row per head side by side (StableLM): head 0 of width 2 with
    vector (3, 4) and RMS 12.5^1/2 is scaled by its own gains (2, 10), head 1 by (1, 1); which norm
    has rows per head is reported for queries and keys apart; a gain per head beside one bias for
    every head is refused by name."""
    from compscope.core.attention import project

    hw = random_heads(L=1, H=2, G=1, r=2, d=2)
    eye = torch.eye(2)[None, None]
    own = Norm("layernorm", torch.tensor([[2.0, 10.0, 1.0, 1.0]]), None, 0.0)
    shared = Norm("layernorm", torch.ones(1, 2), None, 0.0)
    hw = hw.replace(W_Q=torch.cat([eye, eye], 1), W_K=eye, attn_norm=None, norm_placement="none",
                    qk_norm=(own, shared), qk_norm_scope="head")
    assert hw.qk_norm_per_head == (True, False)
    q = project(hw, 0, "Q", torch.tensor([[[3.0, 4.0]]]))
    z = torch.tensor([-1.0, 1.0])  # (3, 4) LayerNorm-ed: mean 3.5 removed, divided by 0.5
    torch.testing.assert_close(q[0, :, 0], torch.stack([z * torch.tensor([2.0, 10.0]), z]))
    with pytest.raises(WeightError, match=r"qk_norm \(q\): weight \(1, 4\) and bias \(1, 2\) differ in shape"):
        hw.replace(qk_norm=(Norm("layernorm", own.weight, torch.zeros(1, 2), 0.0), shared))
    assert hw.replace(qk_norm=(shared, shared)).qk_norm_per_head == (False, False)


def test_alibi_slopes_by_hand():
    """Press et al.'s slopes: 2^(-8h/n) for n a power of two; otherwise those of the largest power
    of two below n, then every other slope of twice that many heads."""
    from compscope.core.heads import alibi_slopes

    assert alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]
    assert alibi_slopes(1).tolist() == [2.0**-8]
    assert alibi_slopes(6).tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert alibi_slopes(3).tolist() == [2.0**-4, 2.0**-8, 2.0**-2]
    with pytest.raises(ValueError, match="n_heads 0"):
        alibi_slopes(0)


def test_alibi_bias_by_hand_and_its_slopes_checked():
    """One head, d_head 1, all queries and keys zero: the logits are the bias −m (i − j) alone,
    so the pattern of query i over keys j ≤ i is ∝ exp(−m (i − j)). Slopes without ALiBi
    positions, of the wrong length, negative, or beside rotary are refused by name."""
    from test_composition import model as small
    from compscope.core.attention import attend

    hw = small(L=1, H=2, G=1, r=3, d=9, rotary=False).replace(positions="alibi", alibi=torch.tensor([0.5, 2.0]))
    q = torch.zeros(1, 2, 4, 3)
    pattern = attend(hw, 0, q, q)[0]
    for h, m in enumerate((0.5, 2.0)):
        for i in range(4):
            w = np.exp(-m * (i - np.arange(i + 1)))
            np.testing.assert_allclose(pattern[h, i, : i + 1].numpy(), w / w.sum(), rtol=1e-6)
            assert float(pattern[h, i, i + 1 :].abs().sum()) == 0.0
    for change, needle in [(dict(positions="none"), "without ALiBi|with ALiBi slopes"),
                           (dict(alibi=torch.tensor([0.5])), r"alibi has shape \(1,\), expected \(2,\)"),
                           (dict(alibi=torch.tensor([0.5, -1.0])), "negative slopes"),
                           (dict(alibi=torch.tensor([0.5, float("nan")])), "NaN")]:
        with pytest.raises(WeightError, match=needle):
            hw.replace(**change)
    with pytest.raises(WeightError, match="alibi and rotary"):
        small(L=1, H=2, G=1).replace(positions="alibi", alibi=torch.tensor([0.5, 2.0]))
    with pytest.raises(WeightError, match="with ALiBi slopes"):
        small(L=1, H=2, G=1, rotary=False).replace(alibi=torch.tensor([0.5, 2.0]))


def test_yarn_frequencies_and_attention_factor_by_hand():
    """YaRN over 4 pairs, base 500, original context 4096, factor 4, not truncated: pair ``i`` turns
    ``4096 f_i / 2π`` times over the original context; the ramp runs between the pair indices that
    turn 32 times and once, ``c(b) = 8 ln(4096 / 2πb) / (2 ln 500)``, so a pair at ramp ``t`` takes
    ``f (1 − t) + t f / 4``. Its attention factor is ``0.1 ln 4 + 1`` unless given, and with
    DeepSeek's ``mscale = mscale_all_dim`` it is 1."""
    import math

    from compscope.loading.families.base import YARN_TYPES, inv_freq, rope_attention_factor

    s = {"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0, "original_max_position_embeddings": 4096,
         "truncate": False}
    c = lambda b: 8 * math.log(4096 / (2 * math.pi * b)) / (2 * math.log(500))  # noqa: E731
    low, high = c(32), c(1)
    base = [500.0 ** (-2 * i / 8) for i in range(4)]
    ramp = [min(max((i - low) / (high - low), 0.0), 1.0) for i in range(4)]
    want = [f * (1 - t) + t * f / 4 for f, t in zip(base, ramp)]
    assert ramp[0] == ramp[1] == 0 and 0 < ramp[2] < ramp[3] < 1  # kept, kept, two in between
    np.testing.assert_allclose(inv_freq(8, s, "t", kinds=YARN_TYPES).numpy(), want, rtol=1e-12)
    rounded = [min(max((i - math.floor(low)) / (math.ceil(high) - math.floor(low)), 0.0), 1.0) for i in range(4)]
    np.testing.assert_allclose(inv_freq(8, {**s, "truncate": True}, "t", kinds=YARN_TYPES).numpy(),
                               [f * (1 - t) + t * f / 4 for f, t in zip(base, rounded)], rtol=1e-12)
    assert rope_attention_factor(s, "t") == pytest.approx(0.1 * math.log(4) + 1, rel=1e-12)
    assert rope_attention_factor({**s, "attention_factor": 2.0}, "t") == 2.0
    assert rope_attention_factor({**s, "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 0.707}, "t") == 1.0
    assert rope_attention_factor({"rope_type": "linear", "factor": 4.0}, "t") == 1.0
    with pytest.raises(UnsupportedModelError, match="rope type .yarn. is not supported"):
        inv_freq(8, s, "t")  # a family that does not fold the attention factor


def test_attention_sinks_by_hand():
    """Two heads with sink logits 0 and ln 3, all logits 0: query i spreads ``1 / (i + 1 + e^s)`` on
    each of its ``i + 1`` keys, the rest going to the sink; a sink shape other than (layer, head)
    is refused by name; the card says the sinks are there; the relative previous-token score over a
    window of 64 logits 0 (queries zero) is ``1 / (64 + e^s)``."""
    import math

    from test_composition import model as small
    from compscope.analysis.circuits import rotary_previous
    from compscope.core.attention import attend
    from compscope.core.card import card_rows

    hw = small(L=1, H=2, G=1, rotary=False).replace(positions="alibi", alibi=torch.zeros(2),
                                                      sinks=torch.tensor([[0.0, math.log(3.0)]]))
    q = torch.zeros(1, 2, 4, 3)
    pattern = attend(hw, 0, q, q)[0]
    for h, e_s in enumerate((1.0, 3.0)):
        for i in range(4):
            np.testing.assert_allclose(pattern[h, i, : i + 1].numpy(), [1 / (i + 1 + e_s)] * (i + 1), rtol=1e-6)
    with pytest.raises(WeightError, match=r"sinks has shape \(2,\), expected \(1, 2\)"):
        hw.replace(sinks=torch.zeros(2))
    assert "a learned logit per head, 0 to 1.1" in dict(card_rows(hw))["attention sinks"]
    blind = hw.replace(W_Q=torch.zeros_like(hw.W_Q))  # every logit 0 (no rotation, slopes 0)
    np.testing.assert_allclose(rotary_previous(blind)[0].numpy(), [1 / 65, 1 / 67], rtol=1e-6)


def test_longrope_frequencies_and_attention_factor_by_hand():
    """LongRoPE within the original context: each frequency divided by its short factor; queries and
    keys times ``sqrt(1 + ln(c) / ln(n))`` with ``c`` the context over the original ``n`` (given as
    ``factor``, or the ratio of the two lengths; a factor that disagrees with the ratio is refused,
    transformers 4 and 5 taking different ones); short factors of the wrong length are refused."""
    import math

    from compscope.loading.families.base import YARN_TYPES, inv_freq, rope_attention_factor

    s = {"rope_type": "longrope", "rope_theta": 700.0, "short_factor": [1.0, 1.5, 2.0, 4.0],
         "long_factor": [2.0, 3.0, 4.0, 8.0], "original_max_position_embeddings": 32, "max_position_embeddings": 128}
    want = [700.0 ** (-2 * i / 8) / x for i, x in enumerate(s["short_factor"])]
    np.testing.assert_allclose(inv_freq(8, s, "t", kinds=YARN_TYPES).numpy(), want, rtol=1e-12)
    assert rope_attention_factor(s, "t") == pytest.approx(math.sqrt(1 + math.log(4) / math.log(32)), rel=1e-12)
    assert rope_attention_factor({**s, "factor": 4.0}, "t") == pytest.approx(math.sqrt(1 + math.log(4) / math.log(32)))
    assert rope_attention_factor({**s, "max_position_embeddings": 32}, "t") == 1.0  # no extension: factor 1
    with pytest.raises(UnsupportedModelError, match="factor 2 and context ratio 4"):
        rope_attention_factor({**s, "factor": 2.0}, "t")
    with pytest.raises(LoadError, match="'short_factor' = .* is not 4 positive numbers"):
        inv_freq(8, {**s, "short_factor": [1.0, 2.0]}, "t", kinds=YARN_TYPES)
