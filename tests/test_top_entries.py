"""Ranking the strongest entries (``results.table.top_entries``): largest first, NaN never, and
ties (equal up to float32 rounding, as heads sharing a K/V head score) in index order whatever
the rounding did."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from compscope.results.table import TIE, top_entries


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 45), st.integers(0, 2**31 - 1))
def test_distinct_values_come_largest_first_and_nan_never(size, n, seed):
    rng = np.random.default_rng(seed)
    vals = rng.permutation(size).astype(np.float64) * 0.01 - 0.1  # distinct, spaced far above the tie tolerance
    nan = rng.random(size) < 0.3
    vals[nan] = np.nan
    t = torch.tensor(vals).reshape(1, size)
    finite = [(i, v) for i, v in enumerate(vals) if not np.isnan(v)]
    want = sorted(finite, key=lambda iv: -iv[1])[:n]
    got = top_entries(t, n)
    assert [(c[1], v) for c, v in got] == want


def test_ties_within_float32_rounding_are_taken_in_index_order():
    base = torch.tensor([0.1, 0.3884, 0.2, 0.3884, 0.3884, 0.05], dtype=torch.float64)
    for noise in ([0, 3e-8, 0, -2e-8, 1e-8, 0], [0, -3e-8, 0, 2e-8, 0, 0], [0, 0, 0, 0, 0, 0]):
        t = (base + torch.tensor(noise, dtype=torch.float64)).reshape(2, 3)
        got = top_entries(t, 4)
        assert [c for c, _ in got] == [(0, 1), (1, 0), (1, 1), (0, 2)], noise
        # a tie cut by n: the lowest indices of the run are the ones kept
        assert [c for c, _ in top_entries(t, 2)] == [(0, 1), (1, 0)], noise


def test_values_further_apart_than_the_tolerance_keep_their_order():
    gap = 10 * TIE
    t = torch.tensor([1.0 - gap, 1.0, 1.0 - 2 * gap], dtype=torch.float64)
    assert [c for c, _ in top_entries(t, 3)] == [(1,), (0,), (2,)]


def test_all_equal_and_more_asked_than_finite():
    t = torch.zeros(2, 2)
    assert [c for c, _ in top_entries(t, 3)] == [(0, 0), (0, 1), (1, 0)]
    t = torch.tensor([float("nan"), 2.0, float("nan"), 1.0])
    assert top_entries(t, 10) == [((1,), 2.0), ((3,), 1.0)]
    assert top_entries(torch.full((3,), float("nan")), 2) == []


def test_heads_sharing_a_kv_head_rank_in_head_order():
    """K-composition ``overlap`` reads the row space of ``W_K``: the query heads of one K/V group
    score the same, and rank by head index."""
    import compscope
    from test_heads import random_heads

    hw = random_heads(L=2, H=4, G=2, seed=3)
    t = compscope.scores(hw, kinds="K", measures=["overlap"], progress=False)
    x = t.dense("overlap", "K")
    top = t.top("K", "overlap", 8)
    for (a, b, c, h, v), (a2, b2, c2, h2, v2) in zip(top, top[1:]):
        if abs(v - v2) <= TIE * float(x[torch.isfinite(x)].abs().max()):
            assert (a, b, c, h) < (a2, b2, c2, h2)
    # each writer's two readers of one group are tied, so appear as neighbours in head order
    firsts = [p[:4] for p in top[:2]]
    assert firsts[0][:3] == firsts[1][:3] and firsts[0][3] + 1 == firsts[1][3] and firsts[0][3] % 2 == 0
