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


# ------------------------------------------------------------------ every structural check, by name
# random_heads(): L=2 layers, H=4 query heads on G=2 K/V heads, d_head r=3, d_model d=8, n_vocab 11
_Z = torch.zeros
_NAN, _INF = float("nan"), float("inf")


def _rms(width: int, eps: float = 1e-6, rows: int = 2, kind: str = "rmsnorm", offset: float = 0.0) -> Norm:
    return Norm(kind, torch.ones(rows, width), None, eps, offset)


def _not_finite(shape: tuple, at: tuple) -> torch.Tensor:
    """Ones with -inf at ``at`` and NaN at the last index: two values that are not finite."""
    t = torch.ones(shape)
    t[at] = float("-inf")
    t.view(-1)[-1] = float("nan")
    return t


def _latent(rank: int = 5, d: int = 8, b=None, eps: float = 1e-6):
    from compscope.core.heads import LatentNorm

    return LatentNorm(torch.ones(2, rank, d), b, eps)


def _relative(rows: int = 4, rows_k: int | None = None, buckets=(0, 0), **more) -> dict:
    """DeBERTa-style position queries and keys with ``rows`` relative-position rows."""
    return {"positions": "relative", "pos_Q": _Z(2, 4, rows, 3), "pos_K": _Z(2, 4, rows_k or rows, 3),
            "rel_buckets": buckets, **more}


def _rel_bias(n: int = 4, far: int = 8, shape=None, **more) -> dict:
    return {"positions": "relative", "rel_bias": _Z(*(shape or (2, 4, n))), "rel_bias_buckets": (n, far), **more}


def _alibi(slopes=None, **more) -> dict:
    return {"positions": "alibi", "alibi": torch.ones(4) if slopes is None else slopes, **more}


def _rotary(dim: int = 2, freq=None, style: str = "half") -> dict:
    freq = torch.full((2, dim // 2), 0.5) if freq is None else freq
    return {"positions": "rotary", "rotary": Rotary(dim, freq, style)}


REFUSED = {  # changes to random_heads() -> what the error says (a regular expression)
    "W_Q not 4-D": ({"W_Q": _Z(2, 4, 3)}, r"W_Q must be \(layer, head, d_head, d_model\), got \(2, 4, 3\)"),
    "W_K not 4-D": ({"W_K": _Z(2, 3, 8)}, r"W_K must be \(layer, kv_head, d_head, d_model\), got \(2, 3, 8\)"),
    "W_V d_model": ({"W_V": _Z(2, 2, 3, 7)}, r"W_V has shape \(2, 2, 3, 7\), expected \(2, 2, 3, 8\)"),
    "b_O": ({"b_O": _Z(2, 7)}, r"b_O has shape \(2, 7\), expected \(2, 8\)"),
    "W_G": ({"W_G": _Z(2, 2, 3, 8)}, r"W_G has shape \(2, 2, 3, 8\), expected \(2, 4, 3, 8\)"),
    "W_E d_model": ({"W_E": _Z(7, 11)}, r"W_E has shape \(7, 11\), expected \(8, n_vocab\)"),
    "W_E 1-D": ({"W_E": _Z(8)}, r"W_E has shape \(8,\)"),
    "W_pos d_model": ({"W_pos": _Z(7, 5)}, r"W_pos has shape \(7, 5\), expected \(8, n_ctx\)"),
    "W_pos 1-D": ({"W_pos": _Z(8)}, r"W_pos has shape \(8,\)"),
    "W_U d_model": ({"W_U": _Z(11, 7)}, r"W_U has shape \(11, 7\), expected \(n_vocab, 8\)"),
    "W_U 1-D": ({"W_U": _Z(8)}, r"W_U has shape \(8,\)"),
    "b_U length": ({"b_U": _Z(10)}, r"b_U has shape \(10,\), expected \(n_vocab,\)"),
    "b_U without W_U": ({"W_U": None, "b_U": _Z(11)}, r"b_U has shape \(11,\)"),
    "b_G without W_G": ({"b_G": _Z(2, 4, 3)}, "b_G without W_G"),
    "kv_map short": ({"kv_map": (0, 0, 1)}, r"kv_map \(0, 0, 1\) does not map 4 query heads onto 2 K/V heads"),
    "kv_map past G": ({"kv_map": (0, 0, 1, 2)}, "does not map 4 query heads"),
    "kv_map negative": ({"kv_map": (0, 0, 1, -1)}, "does not map 4 query heads"),
    "kv_map bool": ({"kv_map": (0, 0, 1, True)}, "does not map 4 query heads"),
    "sinks shape": ({"sinks": _Z(4)}, r"sinks has shape \(4,\), expected \(2, 4\)"),
    "sinks NaN": ({"sinks": torch.tensor([[float("-inf"), _NAN, 0, 0], [0, 0, 0, 0]])},  # -inf: no sink there
                  r"sinks has 1 NaN/Inf values \(the first at index \(0, 1\)\)"),
    "sinks +inf": ({"sinks": torch.full((2, 4), _INF)}, "sinks has 8 NaN/Inf values"),
    "W_Q -inf and NaN": ({"W_Q": _not_finite((2, 4, 3, 8), (1, 2, 0, 5))},
                         r"test: W_Q has 2 NaN/Inf values \(the first at index \(1, 2, 0, 5\)\)"),
    "qk_norm_layers short": ({"qk_norm": (_rms(3), _rms(3)), "qk_norm_layers": (True,)},
                             r"qk_norm_layers \(True,\): expected one true or false per layer \(2\)"),
    "qk_norm_layers not bool": ({"qk_norm": (_rms(3), _rms(3)), "qk_norm_layers": (True, 1)},
                                r"qk_norm_layers \(True, 1\): expected one true or false"),
    "qk_norm_layers alone": ({"qk_norm_layers": (True, False)}, "qk_norm_layers without qk_norm"),
    "sliding_window short": ({"sliding_window": (None,)}, "sliding_window lists 1 layers, model has 2"),
    "sliding_window 0": ({"sliding_window": (None, 0)},
                         r"sliding_window \(None, 0\): each entry must be None or a positive integer"),
    "sliding_window bool": ({"sliding_window": (None, True)}, "each entry must be None or a positive integer"),
    "norm_placement": ({"norm_placement": "mid"}, "norm_placement 'mid' / positions 'none': expected pre/post/none"),
    "positions": ({"positions": "absolute"}, "norm_placement 'pre' / positions 'absolute'"),
    "alibi without slopes": ({"positions": "alibi"}, "positions 'alibi' without ALiBi slopes"),
    "slopes without alibi": ({"alibi": torch.ones(4)}, "positions 'none' with ALiBi slopes"),
    "alibi shape": (_alibi(torch.ones(3)), r"alibi has shape \(3,\), expected \(4,\): one slope per query head"),
    "alibi negative": (_alibi(torch.tensor([1.0, 0.5, 0.0, -0.1])), "alibi has NaN, infinite or negative slopes"),
    "alibi NaN": (_alibi(torch.tensor([1.0, 0.5, _NAN, 0.1])), "alibi has NaN, infinite or negative slopes"),
    "alibi with rotary": (_alibi(rotary=Rotary(2, torch.full((2, 1), 0.5))), "alibi and rotary positions together"),
    "causal not bool": ({"causal": 1}, "causal 1: expected true or false"),
    "first_layer_unnormed not bool": ({"first_layer_unnormed": 1}, "first_layer_unnormed 1: expected true or false"),
    "first_layer_unnormed, no placement": ({"first_layer_unnormed": True, "norm_placement": "none"},
                                           "norm placement 'none', an attention norm"),
    "first_layer_unnormed, no norm": ({"first_layer_unnormed": True, "attn_norm": None},
                                      "norm placement 'pre', no attention norm"),
    "attn_scale negative": ({"attn_scale": -0.5},
                            r"attn_scale -0.5: expected a finite number >= 0 \(0: d_head \*\* -0.5\)"),
    "attn_scale NaN": ({"attn_scale": _NAN}, "attn_scale nan"),
    "attn_scale bool": ({"attn_scale": True}, "attn_scale True"),
    "attn_softcap 0": ({"attn_softcap": 0.0}, "attn_softcap 0.0: expected None or a finite number > 0"),
    "attn_softcap inf": ({"attn_softcap": _INF}, "attn_softcap inf"),
    "norm kind": ({"final_norm": _rms(8, kind="batchnorm", rows=1)},
                  "final_norm: norm kind 'batchnorm', expected 'layernorm' or 'rmsnorm'"),
    "norm eps": ({"attn_norm": _rms(8, eps=-1e-6)}, "attn_norm: eps -1e-06 is not a finite number >= 0"),
    "norm offset": ({"attn_out_norm": _rms(8, offset=_NAN)}, "attn_out_norm: offset nan is not a finite number$"),
    "v_norm kind": ({"v_norm": _rms(3, kind="groupnorm")}, "v_norm: norm kind 'groupnorm'"),
    "v_norm width": ({"v_norm": _rms(8)}, r"v_norm weight has shape \(2, 8\), expected \(2, 3\)"),
    "v_norm bias": ({"v_norm": Norm("layernorm", None, _Z(1, 3), 1e-5)},
                    r"v_norm bias has shape \(1, 3\), expected \(2, 3\)"),
    "qk_norm count": ({"qk_norm": (_rms(3),)}, r"qk_norm holds 1 norms, expected 2 \(q and k\)"),
    "qk_norm scope": ({"qk_norm": (_rms(3), _rms(3)), "qk_norm_scope": "model"},
                      "qk_norm_scope 'model': expected 'head' or 'layer'"),
    "qk_norm kind": ({"qk_norm": (_rms(3), _rms(3, kind="l2"))}, r"qk_norm \(k\): norm kind 'l2'"),
    "qk_norm q width": ({"qk_norm": (_rms(6), _rms(3))},
                        r"qk_norm \(q\) weight has shape \(2, 6\), expected \(2, 3\) or \(2, 12\) \(scope 'head'\)"),
    "qk_norm k width": ({"qk_norm": (_rms(3), _rms(12))},
                        r"qk_norm \(k\) weight has shape \(2, 12\), expected \(2, 3\) or \(2, 6\)"),
    "qk_norm layer width": ({"qk_norm": (_rms(3), _rms(6)), "qk_norm_scope": "layer"},
                            r"qk_norm \(q\) weight has shape \(2, 3\), expected \(2, 12\) \(scope 'layer'\)"),
    "qk_norm rows": ({"qk_norm": (_rms(3, rows=1), _rms(3))}, r"qk_norm \(q\) weight has shape \(1, 3\)"),
    "qk_norm 1-D": ({"qk_norm": (Norm("rmsnorm", torch.ones(3), None, 1e-6), _rms(3))},
                    r"qk_norm \(q\) weight has shape \(3,\)"),
    "qk_norm bias": ({"qk_norm": (_rms(3), Norm("layernorm", None, _Z(2, 5), 1e-5))},
                     r"qk_norm \(k\) bias has shape \(2, 5\)"),
    "qk_norm weight and bias": ({"qk_norm": (Norm("layernorm", torch.ones(2, 3), _Z(2, 12), 1e-5), _rms(3))},
                                r"qk_norm \(q\): weight \(2, 3\) and bias \(2, 12\) differ in shape"),
    "rotary dim 0": (_rotary(0, torch.ones(2, 0)), r"rotary dim 0: expected a positive even integer <= d_head 3"),
    "rotary dim odd": (_rotary(1, torch.ones(2, 1)), "rotary dim 1"),
    "rotary dim past d_head": (_rotary(4), "rotary dim 4"),
    "rotary dim float": (_rotary(2.0, torch.ones(2, 1)), "rotary dim 2.0"),
    "rotary style": (_rotary(style="spiral"), "rotary style 'spiral': expected 'half' or 'interleaved'"),
    "rotary inv_freq shape": (_rotary(2, torch.ones(1, 1)), r"rotary inv_freq has shape \(1, 1\), expected \(2, 1\)"),
    "rotary inv_freq negative": (_rotary(2, torch.tensor([[0.5], [-0.5]])),
                                 "rotary inv_freq has NaN, infinite or negative"),
    "rotary inv_freq inf": (_rotary(2, torch.tensor([[0.5], [_INF]])), "rotary inv_freq has NaN, infinite or negative"),
    "q_latent W": ({"q_latent": _latent(d=7)}, r"q_latent.W has shape \(2, 5, 7\), expected \(2, rank, 8\)"),
    "kv_latent W layers": ({"kv_latent": _latent().mapped(lambda W: W[:1])}, r"kv_latent.W has shape \(1, 5, 8\)"),
    "q_latent not a LatentNorm": ({"q_latent": _rms(8)}, r"q_latent.W has shape \(\)"),
    "q_latent W not a tensor": ({"q_latent": _latent().mapped(lambda W: W.numpy())},
                                r"q_latent.W has shape \(2, 5, 8\)"),
    "kv_latent b": ({"kv_latent": _latent(b=_Z(2, 4))}, r"kv_latent.b has shape \(2, 4\), expected \(2, 5\)"),
    "q_latent eps 0": ({"q_latent": _latent(eps=0.0)}, "q_latent.eps 0.0: expected a finite number > 0"),
    "kv_latent_from negative": ({"kv_latent_from": -1},
                                r"kv_latent_from -1: expected a key dim from 0 to d_head \(3\)"),
    "kv_latent_from past d_head": ({"kv_latent_from": 4}, "kv_latent_from 4"),
    "pos_Q without relative": ({"pos_Q": _Z(2, 4, 4, 3)}, "positions 'none' with position queries or keys"),
    "relative without anything": ({"positions": "relative"}, "positions 'relative' without position queries, keys"),
    "pos_Q odd rows": (_relative(3), r"pos_Q has shape \(2, 4, 3, 3\), expected \(2, 4, 2k, 3\)"),
    "pos_K d_head": ({**_relative(), "pos_K": _Z(2, 4, 4, 2)}, r"pos_K has shape \(2, 4, 4, 2\)"),
    "pos_Q heads": ({**_relative(), "pos_Q": _Z(2, 2, 4, 3)}, r"pos_Q has shape \(2, 2, 4, 3\)"),
    "pos_Q not a tensor": ({**_relative(), "pos_Q": _Z(2, 4, 4, 3).numpy()},
                           r"pos_Q has shape \(2, 4, 4, 3\), expected"),
    "pos_Q rows 0": (_relative(0), r"pos_Q has shape \(2, 4, 0, 3\)"),
    "pos_Q and pos_K rows": (_relative(4, 6), "pos_Q and pos_K have 4 and 6 relative-position rows"),
    "rel_buckets a list": ({"rel_buckets": [0, 0]}, r"rel_buckets \[0, 0\]: expected \(bucket size, max position\)"),
    "rel_buckets half set": (_relative(buckets=(2, 0)),
                             r"rel_buckets \(2, 0\): expected \(bucket size, max position\)"),
    "rel_buckets negative": (_relative(buckets=(-2, -4)), r"rel_buckets \(-2, -4\): expected \(bucket size"),
    "rel_buckets rows": (_relative(4, buckets=(3, 8)),
                         r"rel_buckets \(3, 8\): 3 buckets each side need 2 x 3 relative-position rows in pos_Q "
                         r"and pos_K, not \[4\]"),
    "rel_buckets size 1": (_relative(2, buckets=(1, 8)), "log-spaced buckets need a bucket size >= 2"),
    "rel_buckets max position": (_relative(8, buckets=(4, 3)), r"rel_buckets \(4, 3\): log-spaced buckets"),
    "relative with rotary": (_relative(rotary=Rotary(2, torch.full((2, 1), 0.5))),
                             "position queries and keys .* with QK-norm, rotary"),
    "relative with W_pos": (_relative(W_pos=_Z(8, 5)), "position queries and keys .* learned absolute positions"),
    "relative with QK-norm": (_relative(qk_norm=(_rms(3), _rms(3))),
                              "a model has one kind of positions, and its queries no norm"),
    "rel_bias without buckets": ({"positions": "relative", "rel_bias": _Z(2, 4, 4)},
                                 r"rel_bias_buckets \(0, 0\): expected"),
    "buckets without rel_bias": ({"rel_bias_buckets": (4, 8)},
                                 r"rel_bias_buckets \(4, 8\): expected .* \(0, 0\) without"),
    "rel_bias shape": (_rel_bias(shape=(2, 4, 6)),
                       r"rel_bias has shape \(2, 4, 6\), expected \(2, 4, 4\): one bias per layer, head and bucket"),
    "rel_bias odd": (_rel_bias(5), r"rel_bias_buckets \(5, 8\): expected an even number of buckets >= 4"),
    "rel_bias 2 buckets": (_rel_bias(2), r"rel_bias_buckets \(2, 8\)"),
    "rel_bias near": (_rel_bias(8, 2),
                      r"rel_bias_buckets \(8, 2\): expected .* a max distance above a quarter of them"),
    "rel_bias with alibi": (_rel_bias(alibi=torch.ones(4)), "positions 'relative' with ALiBi slopes"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_field_set_wrong_is_refused_by_name(case):
    """Every structural check of HeadWeights refuses the field it guards with a WeightError that
    names it (and, where it has one, the shape it expected), never an error from deep inside torch."""
    changes, message = REFUSED[case]
    with pytest.raises(WeightError, match=message):
        random_heads().replace(**changes)


ACCEPTED = {  # the edge each check allows (one step past it is refused above)
    "sinks -inf: a layer without a sink": {"sinks": torch.tensor([[0.0] * 4, [float("-inf")] * 4])},
    "sliding_window 1": {"sliding_window": (None, 1)},
    "alibi slope 0": _alibi(torch.tensor([1.0, 0.5, 0.25, 0.0])),
    "attn_scale 0 (d_head ** -0.5)": {"attn_scale": 0},
    "attn_softcap tiny": {"attn_softcap": 1e-3},
    "norm eps 0": {"attn_norm": _rms(8, eps=0.0)},
    "first_layer_unnormed": {"first_layer_unnormed": True},
    "qk_norm per head side by side": {"qk_norm": (_rms(12), _rms(6))},
    "qk_norm over the layer": {"qk_norm": (_rms(12), _rms(6)), "qk_norm_scope": "layer",
                               "qk_norm_layers": (False, True)},
    "rotary dim 2 of 3": _rotary(2, torch.tensor([[0.0], [0.5]])),
    "kv_latent_from d_head": {"kv_latent_from": 3, "kv_latent": _latent(b=_Z(2, 5))},
    "relative, 2 rows": _relative(2),
    "relative, buckets at the edge": _relative(8, buckets=(4, 4)),
    "rel_bias at the edge": _rel_bias(4, 2),
    "kv_map onto one K/V head": {"kv_map": (1, 1, 1, 1)},
    "one K/V head": {"W_K": _Z(2, 1, 3, 8), "W_V": _Z(2, 1, 3, 8), "kv_map": (0, 0, 0, 0)},
    "b_U": {"b_U": _Z(11)},
    "qk_norm, a bias and no gain": {"qk_norm": (Norm("layernorm", None, _Z(2, 3), 1e-5), _rms(3))},
    "relative, bucket size 2": _relative(4, buckets=(2, 3)),
}


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_the_edge_a_check_allows_is_accepted(case):
    hw = random_heads().replace(**ACCEPTED[case])
    for name, value in ACCEPTED[case].items():
        assert getattr(hw, name) is value


def test_sizes_and_scale_by_hand():
    """Every size read off the factors' shapes (each size different, so no two axes can stand in for
    each other), and the logit scale: ``attn_scale``, or ``d_head ** -0.5`` where it is 0."""
    hw = random_heads(L=3, H=4, G=2, r=5, d=6, V=7)
    assert (hw.n_layers, hw.n_heads, hw.n_kv_heads, hw.d_head, hw.d_model, hw.n_vocab) == (3, 4, 2, 5, 6, 7)
    assert hw.scale == 5 ** -0.5
    assert hw.replace(attn_scale=0.25).scale == 0.25


def test_qk_norm_per_head_by_hand():
    """Which side's QK-norm has a gain per head, stored side by side as ``(L, heads * d_head)``: neither
    without QK-norm or with one over the whole layer; with one per head, the side whose rows are wider
    than ``d_head`` (its gain or, without one, its bias)."""
    hw = random_heads()  # H = 4 query heads, G = 2 K/V heads, d_head 3
    layer = Norm("layernorm", None, _Z(2, 3), 1e-5)
    assert hw.qk_norm_per_head == (False, False)
    assert hw.replace(qk_norm=(_rms(3), _rms(3))).qk_norm_per_head == (False, False)
    assert hw.replace(qk_norm=(_rms(3), _rms(6))).qk_norm_per_head == (False, True)
    assert hw.replace(qk_norm=(_rms(12), layer)).qk_norm_per_head == (True, False)
    assert hw.replace(qk_norm=(layer, Norm("layernorm", None, _Z(2, 6), 1e-5))).qk_norm_per_head == (False, True)
    assert hw.replace(qk_norm=(_rms(12), _rms(6)), qk_norm_scope="layer").qk_norm_per_head == (False, False)


def test_all_finite_by_kind_of_tensor():
    """Integer, boolean and ``meta`` tensors hold no NaN; a float sum that overflows falls back to
    the full check; complex and float8 tensors are read too."""
    from compscope.core.heads import all_finite

    assert all_finite(torch.tensor([2**62, 2**62]))  # an integer sum that wraps is still finite
    assert all_finite(torch.zeros(3, dtype=torch.int64, device="meta"))
    assert all_finite(torch.zeros(3, device="meta"))
    assert all_finite(torch.tensor([True, False]))
    assert all_finite(torch.tensor([3e38, 3e38]))  # the sum overflows to inf; each value is finite
    assert not all_finite(torch.tensor([3e38, float("inf")]))
    assert not all_finite(torch.tensor([float("inf"), float("-inf")]))  # the sum is NaN
    assert not all_finite(torch.tensor([1 + 0j, complex(0, float("nan"))]))
    for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        assert all_finite(torch.full((4,), 3.0).to(dt))
        assert not all_finite(torch.tensor([1.0, float("nan")]).to(dt))


def test_norm_apply_and_describe_by_hand():
    """``layernorm``: ``(x − mean) / sqrt(var + eps) · (offset + w) + b``; ``rmsnorm`` without centring;
    each layer its own row (numpy, float64)."""
    x = np.array([1.0, 2.0, 4.0, 9.0])
    w = np.array([[0.5, 1.0, 2.0, -1.0], [1.5, 0.0, 1.0, 3.0]])
    b = np.array([[0.1, 0.2, 0.3, 0.4], [-1.0, 0.0, 1.0, 2.0]])
    ln = Norm("layernorm", torch.tensor(w), torch.tensor(b), 1e-5, offset=1.0)
    c = x - x.mean()
    want = c / np.sqrt((c**2).mean() + 1e-5) * (1 + w[1]) + b[1]
    np.testing.assert_allclose(ln.apply(torch.tensor(x), 1).numpy(), want, rtol=1e-6)
    rms = Norm("rmsnorm", torch.tensor(w), None, 1e-6)
    want = x / np.sqrt((x**2).mean() + 1e-6) * w[0]
    np.testing.assert_allclose(rms.apply(torch.tensor(x), 0).numpy(), want, rtol=1e-6)
    assert ln.apply(torch.tensor(x), 1).dtype == torch.float64 and rms.gain(1).tolist() == w[1].tolist()
    assert ln.describe() == "layernorm, eps=1e-05, gain=1+w, bias"
    assert Norm("rmsnorm", torch.tensor(w), None, 1e-6, 0.5).describe() == "rmsnorm, eps=1e-06, gain=0.5+w"
    assert Norm("layernorm", None, torch.tensor(b), 1e-5).describe() == "layernorm, eps=1e-05, no gain, bias"
    assert rms.describe() == "rmsnorm, eps=1e-06" and rms.gain(0).tolist() == w[0].tolist()


def test_same_device_reads_cuda_without_an_index_as_the_current_one(monkeypatch):
    """``cuda`` is ``cuda:<current>`` (the current device asked of torch only then); otherwise torch's
    equality (no GPU needed: the current device is set here)."""
    from compscope.core.heads import same_device

    dev = torch.device
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert same_device(dev("cpu"), dev("cpu")) and not same_device(dev("cpu"), dev("meta"))
    assert not same_device(dev("cuda"), dev("cpu")) and not same_device(dev("cpu"), dev("cuda:1"))
    assert same_device(dev("cuda"), dev("cuda:1")) and same_device(dev("cuda:1"), dev("cuda"))
    assert not same_device(dev("cuda"), dev("cuda:0")) and not same_device(dev("cuda:0"), dev("cuda"))
    assert same_device(dev("cuda"), dev("cuda")) and not same_device(dev("cuda:0"), dev("cuda:1"))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert same_device(dev("cuda"), dev("cuda:0"))


def test_logits_scaled_and_soft_capped_by_hand():
    """``scale · q·k``, and where the model caps them ``c · tanh(scale · q·k / c)``."""
    qk = torch.tensor([-30.0, 0.0, 2.0, 30.0], dtype=torch.float64)
    hw = random_heads()  # d_head 3
    torch.testing.assert_close(hw.logits(qk), qk / np.sqrt(3))
    capped = hw.replace(attn_scale=0.5, attn_softcap=4.0).logits(qk)
    want = [4 * np.tanh(-15 / 4), 0.0, 4 * np.tanh(1 / 4), 4 * np.tanh(15 / 4)]
    torch.testing.assert_close(capped, torch.tensor(want, dtype=torch.float64))


@pytest.mark.parametrize("style", ["half", "interleaved"])
def test_partial_rotary_by_hand(style):
    """Rotary on the first 4 of 6 dims, on a 4-D ``(batch, head, seq, d_head)`` input: pair ``k`` (dims
    ``k, k + 2`` in the half layout, ``2k, 2k + 1`` interleaved) at position ``p`` turns by ``p · f_k``
    (numpy, float64); the last 2 dims pass unchanged."""
    f = np.array([0.9, 0.2])
    x = np.random.default_rng(1).normal(size=(2, 3, 5, 6))
    pos = np.array([0.0, 1.0, 2.0, 7.0, -3.0])
    want = x.copy()
    for k in range(2):
        i, j = (k, k + 2) if style == "half" else (2 * k, 2 * k + 1)
        for t, p in enumerate(pos):
            c, s = np.cos(p * f[k]), np.sin(p * f[k])
            want[..., t, i] = c * x[..., t, i] - s * x[..., t, j]
            want[..., t, j] = s * x[..., t, i] + c * x[..., t, j]
    rot = Rotary(4, torch.tensor(f[None]), style)
    got = rot.rotate(torch.tensor(x), torch.tensor(pos), 0)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert rot.describe() == f"rotary dim=4 ({style}), base freq 0.9"


def test_latent_norm_scale_and_map_by_hand():
    """``s(x) = (mean_i c_i² + eps)^(-1/2)`` with ``c = W x + b`` of the layer asked for (numpy, float64;
    float32 for float32 inputs), and ``mapped(read)`` the same norm reading through ``read``."""
    from compscope.core.heads import LatentNorm

    rng = np.random.default_rng(2)
    W, b, x = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3)), rng.normal(size=(5, 4))
    lat = LatentNorm(torch.tensor(W), torch.tensor(b), 0.5)
    c = x @ W[1].T + b[1]
    np.testing.assert_allclose(lat.scale(1, torch.tensor(x)).numpy(), ((c**2).mean(-1) + 0.5) ** -0.5, rtol=1e-12)
    assert lat.scale(1, torch.tensor(x, dtype=torch.float32)).dtype == torch.float32
    T = rng.normal(size=(4, 4))
    moved = LatentNorm(torch.tensor(W), None, 0.5).mapped(lambda w: w @ torch.tensor(T))
    assert moved.b is None and moved.eps == 0.5
    c = x @ (W[0] @ T).T
    np.testing.assert_allclose(moved.scale(0, torch.tensor(x)).numpy(), ((c**2).mean(-1) + 0.5) ** -0.5, rtol=1e-12)
    assert lat.mapped(lambda w: w.float()).b.dtype == torch.float32  # the bias follows W's dtype


def test_parameter_count_and_kv_heads_by_query_head():
    """``n_attention_params`` counts Q, K, V, O, the gate and every bias given (2 layers, 4 query heads
    on 2 K/V heads, d_head 3, d_model 8: 192 + 96 + 96 + 192 by hand); ``kv_expanded`` gives each query
    head its K/V head's rows (query heads 0, 1 read K/V head 0; 2, 3 read 1)."""
    hw = random_heads()
    assert hw.n_attention_params() == 576
    gated = hw.replace(b_O=torch.ones(2, 8), W_G=torch.ones(2, 4, 3, 8), b_Q=torch.ones(2, 4, 3))
    assert gated.n_attention_params() == 576 + 16 + 192 + 24
    wk = hw.kv_expanded("W_K")
    assert wk.shape == (2, 4, 3, 8) and hw.kv_expanded("b_K") is None
    for h, g in enumerate((0, 0, 1, 1)):
        assert torch.equal(wk[:, h], hw.W_K[:, g])


def test_replace_records_a_step_and_a_note_once():
    hw = random_heads()
    assert hw.replace(W_Q=hw.W_Q * 2).meta == hw.meta  # no step, no note: the record as it was
    done = hw.replace(step="fold_norm", note="gains folded").replace(step="center_writing", note="gains folded")
    assert done.meta.processing == ("fold_norm", "center_writing") and done.meta.notes == ("gains folded",)


def test_to_moves_a_latent_norm_and_leaves_the_absent_parts_absent():
    """``to('meta')`` (tests/test_device.py moves the norms, rotary and extra embeddings of real
    families) also moves multi-head latent attention's norms, keeping a missing bias, gain or norm
    missing."""
    from compscope.core.heads import LatentNorm

    hw = random_heads().replace(q_latent=LatentNorm(torch.ones(2, 5, 8), None, 1e-6),
                                kv_latent=LatentNorm(torch.ones(2, 5, 8), torch.zeros(2, 5, dtype=torch.float64), 1e-6),
                                qk_norm=(_rms(3), Norm("layernorm", None, torch.zeros(2, 3), 1e-5)))
    moved = hw.to("meta")
    for lat in (moved.q_latent.W, moved.kv_latent.W, moved.kv_latent.b, moved.qk_norm[1].bias):
        assert lat.device.type == "meta"
    assert moved.kv_latent.b.dtype == torch.float64 and moved.q_latent.eps == 1e-6
    assert moved.q_latent.b is None and moved.qk_norm[1].weight is None
    assert moved.final_norm is None and moved.v_norm is None and moved.rotary is None and moved.b_Q is None


def test_the_norm_each_layer_reads_through():
    """Pre-LN heads read ``attn_norm``'s output, post-LN ones the residual as it is (normed already);
    a first layer marked ``first_layer_unnormed`` reads the residual itself, the later ones the norm."""
    from compscope.core.attention import input_norm, layer_input_norm

    hw = random_heads()
    assert input_norm(hw) is hw.attn_norm
    assert layer_input_norm(hw, 0) is hw.attn_norm and layer_input_norm(hw, 1) is hw.attn_norm
    first = hw.replace(first_layer_unnormed=True)
    assert layer_input_norm(first, 0) is None and layer_input_norm(first, 1) is first.attn_norm
    post = hw.replace(norm_placement="post")
    assert input_norm(post) is None and layer_input_norm(post, 0) is None and layer_input_norm(post, 1) is None


def test_same_reads_by_each_part_of_the_norm():
    """Two sets of weights read the same from a residual when their input norms agree in kind, eps,
    offset, gain and bias (equal values, not the same object), or neither has one."""
    from compscope.core.attention import same_reads

    w, b = torch.ones(2, 8), torch.zeros(2, 8)
    hw = random_heads().replace(attn_norm=Norm("layernorm", w, b, 1e-5))
    assert same_reads(hw, hw.replace(attn_norm=Norm("layernorm", w.clone(), b.clone(), 1e-5)))
    for other in (Norm("layernorm", None, b, 1e-5), Norm("layernorm", w, None, 1e-5), Norm("layernorm", w * 2, b, 1e-5),
                  Norm("rmsnorm", w, b, 1e-5), Norm("layernorm", w, b, 1e-6), Norm("layernorm", w, b, 1e-5, 1.0)):
        assert not same_reads(hw, hw.replace(attn_norm=other)) and not same_reads(hw.replace(attn_norm=other), hw)
    post = hw.replace(norm_placement="post")
    assert same_reads(post, post.replace(attn_norm=None)) and not same_reads(hw, post) and not same_reads(post, hw)


def test_a_layers_pattern_without_positions_given_reads_them_as_0_to_n():
    """``attention_pattern_and_values`` with no positions places the tokens at ``0..n−1``: on a rotary model its
    pattern is the one with those positions given, not the one with every token at 0 (no rotation at all)."""
    from compscope.core.attention import attention_pattern_and_values

    hw = random_heads(rotary=True)
    resid = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    pattern, v = attention_pattern_and_values(hw, 1, resid)
    given, v_given = attention_pattern_and_values(hw, 1, resid, torch.arange(5))
    torch.testing.assert_close(pattern, given, rtol=0, atol=0)
    torch.testing.assert_close(v, v_given, rtol=0, atol=0)
    unrotated, _ = attention_pattern_and_values(hw, 1, resid, torch.zeros(5, dtype=torch.long))
    assert (pattern - unrotated).abs().max() > 1e-3


@pytest.mark.parametrize("causal", [True, False])
def test_attention_pattern_by_hand(causal):
    """``softmax(scale · q·k)`` over the keys a query sees (numpy, float64): behind it or at it in a causal
    model, every key in an encoder, and within a layer's window ``|i − j| < w`` where it has one; no
    windows given (``sliding_window=()``) is full attention in every layer."""
    from compscope.core.attention import attend

    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(1, 4, 5, 3)), rng.normal(size=(1, 4, 5, 3))
    hw = random_heads().replace(causal=causal)
    i, j = np.arange(5)[:, None], np.arange(5)[None, :]
    for windows, layer, w in (((None, None), 0, None), ((), 1, None), ((None, 2), 1, 2), ((3, None), 0, 3)):
        seen = (j <= i if causal else np.ones((5, 5), bool)) & (np.abs(i - j) < w if w else True)
        logits = np.where(seen, q @ k.transpose(0, 1, 3, 2) / np.sqrt(3), -np.inf)
        want = np.exp(logits - logits.max(-1, keepdims=True))
        want /= want.sum(-1, keepdims=True)
        got = attend(hw.replace(sliding_window=windows), layer, torch.tensor(q), torch.tensor(k))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-15)
