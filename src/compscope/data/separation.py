"""How well a score of every head pair separates the true pairs from the rest: the label truth
(a previous-token writer before an induction reader), the AUROC with DeLong's standard error
(:func:`auroc_se`; of the gap between two scores' AUROCs on the same items, :func:`auroc_gap_se`),
and the AUROC taken apart by head (:func:`auroc_by_head`) or kept to comparisons between pairs
that share a head (:func:`auroc_within`)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..errors import OptionError

#: the columns of :func:`auroc_by_head`'s rows
BY_HEAD_COLUMNS = ("side", "layer", "head", "label", "true_pairs", "measure_true", "measure_other", "effect_true",
                   "effect_other")


def auroc(scores: Tensor, truth: Tensor) -> float:
    """The probability that a random true item scores above a random false one (ties count ½),
    over the entries where ``scores`` is finite; NaN without both classes."""
    return float(aurocs(scores, truth[None])[0])


def auroc_se(scores: Tensor, truth: Tensor) -> float:
    """DeLong's standard error of :func:`auroc`, over the entries where ``scores`` is finite: with the
    placement of each true item ``x_i`` among the ``n`` false ones, ``V₁(x_i) = #{y < x_i}/n`` (ties ½),
    and of each false item ``y_j`` among the ``m`` true ones, ``V₀(y_j) = #{x > y_j}/m``,
    ``SE² = var(V₁)/m + var(V₀)/n`` (sample variances). It treats the items as independent draws; head
    pairs that share a head are not, so it is a lower bound on the spread. NaN with fewer than two items
    of a class."""
    keep = torch.isfinite(scores)
    placed = _placements(scores[keep], truth[keep].bool())
    if placed is None:
        return math.nan
    (v1, v0), m, n = placed
    return math.sqrt(float(v1.var() / m + v0.var() / n))


def auroc_gap_se(a: Tensor, b: Tensor, truth: Tensor) -> float:
    """DeLong's standard error of ``auroc(a) − auroc(b)``, two scores of the same items, over the items where both
    are finite: with each score's placements ``V₁``, ``V₀`` (:func:`auroc_se`), ``SE² = var(V₁ᵃ − V₁ᵇ)/m +
    var(V₀ᵃ − V₀ᵇ)/n``; the two AUROCs' shared items make it smaller than either's own standard error where the
    scores rank alike. The same caveat as :func:`auroc_se`; NaN with fewer than two items of a class."""
    keep = torch.isfinite(a) & torch.isfinite(b)
    y = truth[keep].bool()
    pa, pb = _placements(a[keep], y), _placements(b[keep], y)
    if pa is None:
        return math.nan
    ((a1, a0), m, n), ((b1, b0), _, _) = pa, pb
    return math.sqrt(float((a1 - b1).var() / m + (a0 - b0).var() / n))


def _placements(scores: Tensor, truth: Tensor) -> tuple[tuple[Tensor, Tensor], int, int] | None:
    """``((V₁, V₀), m, n)`` of finite ``scores`` against the boolean ``truth``: each of the ``m`` true items' share of
    the ``n`` false ones below it and each false item's share of the true ones above it (ties ½), float64, from
    midranks across and within the classes; None with fewer than two items of a class."""
    from ..analysis.stats import ranks

    s = scores.double()
    m, n = int(truth.sum()), int((~truth).sum())
    if m < 2 or n < 2:
        return None
    r = ranks(s)  # an item's midrank less its midrank in its own class: the other class below it (ties ½)
    return ((r[truth] - ranks(s[truth])) / n, 1 - (r[~truth] - ranks(s[~truth])) / m), m, n


def aurocs(scores: Tensor, truths: Tensor) -> Tensor:
    """:func:`auroc` of ``scores`` against each of ``truths`` (stacked along the first dimension),
    float64, from one ranking: the Mann–Whitney U from the rank sum, ties at their mean rank (rank
    sums of half-integers are exact in float64). NaN where a truth lacks a class."""
    from ..analysis.stats import ranks

    keep = torch.isfinite(scores)
    r = ranks(scores[keep].double())
    y = truths[:, keep].double()
    n1 = y.sum(1)
    n0 = len(r) - n1
    a = (y @ r - n1 * (n1 + 1) / 2) / (n1 * n0)
    return torch.where((n1 > 0) & (n0 > 0), a, torch.nan)


def auroc_within(scores: Tensor, truth: Tensor, side: str = "reader") -> float:
    """:func:`auroc` of ``scores: (L, H, L, H)`` kept to the comparisons between pairs that share
    a reader (``side='reader'``) or a writer (``'writer'``): over every head with true and false
    pairs (finite scores) on that side, ``Σ_h U_h / Σ_h n₁ₕ n₀ₕ``, ``U_h`` the number of its (true,
    false) pairs in the right order (ties ½). Within readers it asks whether a reader's true writers
    score above its other writers, whatever the reader: a score that depends on the reader alone
    gets ½, and one that is another times a positive factor per reader gets that one's value. NaN
    without any such head."""
    u, n = _within_counts(*_by_shared_head(scores, truth, side))
    return float(u.sum() / n.sum()) if n.sum() else float("nan")


def comparisons(scored: Tensor, truth: Tensor, side: str | None = None) -> int:
    """How many (true, false) comparisons :func:`auroc` (``side=None``) or :func:`auroc_within`
    (``'reader'``, ``'writer'``) counts for a score of ``(L, H, L, H)`` finite where ``scored``:
    ``n₁ n₀``, or ``Σ_h n₁ₕ n₀ₕ`` over the shared heads."""
    scored, truth = scored.bool(), truth.bool()
    if side is None:
        return int((truth & scored).sum()) * int((~truth & scored).sum())
    x, t = _by_shared_head(scored, truth, side)
    fin = x > 0  # the mask, one row per shared head
    return int(((t & fin).sum(1) * (~t & fin).sum(1)).sum())


def _by_shared_head(scores: Tensor, truth: Tensor, side: str) -> tuple[Tensor, Tensor]:
    """``(x, t)``: ``scores`` (float64) and ``truth`` of ``(L, H, L, H)`` as ``(head, head)``, one row per
    head the compared pairs share (the reader's for ``side='reader'``, the writer's for ``'writer'``)."""
    if side not in ("reader", "writer"):
        raise OptionError(f"side={side!r}: expected 'reader' or 'writer'")
    n_heads = scores.shape[0] * scores.shape[1]
    x, t = scores.double().reshape(n_heads, n_heads), truth.bool().reshape(n_heads, n_heads)
    return (x.T, t.T) if side == "reader" else (x, t)


def _within_counts(x: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
    """Per row of ``x: (rows, n)`` (``t`` its truth): ``U`` (its true entries' wins over its false
    ones, finite entries only, ties ½) and ``n₁ n₀``, float64, zero in a row without both; what
    :func:`auroc_within` sums, rows being the shared heads. The work is that of ``n`` comparisons
    per true entry."""
    fin = torch.isfinite(x)
    pos, neg = fin & t, fin & ~t
    rows, cols = pos.nonzero(as_tuple=True)  # each true entry against its own row's false ones
    v, other, against = x[rows, cols][:, None], x[rows], neg[rows]
    wins = ((other < v) & against).sum(1) + 0.5 * ((other == v) & against).sum(1)
    u = torch.zeros(x.shape[0], dtype=torch.float64).index_add_(0, rows, wins.double())
    return u, pos.sum(1).double() * neg.sum(1).double()


def auroc_shares(scores: Tensor, truth: Tensor) -> Tensor:
    """``scores``' shape, float64: for each finite entry, the share of the false entries (finite,
    not in ``truth``) that score below it, ties ½; NaN elsewhere, and everywhere without a false
    entry. Its mean over the true entries is :func:`auroc`, so its mean over some of them (one
    head's pairs) is their share in it."""
    x = scores.double()
    fin = torch.isfinite(x)
    neg = x[fin & ~truth.bool()].sort().values
    out = torch.full_like(x, float("nan"))
    if len(neg):
        v = x[fin]
        below, upto = torch.searchsorted(neg, v), torch.searchsorted(neg, v, right=True)
        out[fin] = (below + 0.5 * (upto - below)).double() / len(neg)
    return out


def auroc_by_head(scores: Tensor, effects: Tensor | None, previous: Tensor, induction: Tensor,
                  prev_threshold: float, induction_threshold: float) -> list[dict]:
    """:func:`auroc` of ``scores: (L, H, L, H)`` against the label truth (:func:`true_pairs` of
    ``previous``, ``induction: (L, H)`` at the thresholds) taken apart by head: for each
    previous-token writer and each induction reader, the mean of :func:`auroc_shares` over its true
    pairs (``measure_true``; weighted by ``true_pairs`` the rows of a side average to the AUROC)
    and over its other pairs with a score (``measure_other``), and the same of the K ``effects``
    (``effect_true``, ``effect_other``; NaN without effects)."""
    truth = true_pairs(previous, induction, prev_threshold, induction_threshold)
    shares = {"measure": auroc_shares(scores, truth),
              "effect": auroc_shares(effects, truth) if effects is not None else torch.full_like(scores.double(), torch.nan)}
    rows = []
    for side, label, threshold in (("writer", previous, prev_threshold), ("reader", induction, induction_threshold)):
        for layer, head in (label >= threshold).nonzero().tolist():
            at = (layer, head) if side == "writer" else (slice(None), slice(None), layer, head)
            t = truth[at]
            row = {"side": side, "layer": layer, "head": head, "label": float(label[layer, head]), "true_pairs": int(t.sum())}
            for name, share in shares.items():
                row[f"{name}_true"], row[f"{name}_other"] = _mean(share[at][t]), _mean(share[at][~t])
            rows.append(row)
    return rows


def _mean(x: Tensor) -> float:
    """The mean of the finite entries of ``x``; NaN without any."""
    x = x[torch.isfinite(x)]
    return float(x.mean()) if len(x) else float("nan")


def by_head_lines(rows: list[dict]) -> list[str]:
    """:func:`auroc_by_head`'s rows as printed: a block per side (a blank line before each), the
    shares to 3 decimals (``-``: none)."""
    share = lambda v: "-" if v != v else f"{v:.3f}"  # noqa: E731
    lines, side = [], None
    for r in rows:
        if r["side"] != side:
            side = r["side"]
            label = "previous" if side == "writer" else "induction"
            lines += ["", f"{side:<7} {label:>9} {'true':>5}  {'measure: true':>13} {'other':>6}  {'K effect: true':>14} {'other':>6}"]
        name = f"{r['layer']}.{r['head']}"
        lines.append(f"{name:<7} {r['label']:9.2f} {r['true_pairs']:5d}  {share(r['measure_true']):>13} "
                     f"{share(r['measure_other']):>6}  {share(r['effect_true']):>14} {share(r['effect_other']):>6}")
    return lines


def true_pairs(previous: Tensor, induction: Tensor, prev_threshold: float, induction_threshold: float) -> Tensor:
    """``(L, H, L, H)`` bool: ``h1`` previous-token, ``h2`` induction, ``h1``'s layer before ``h2``'s."""
    t = (previous >= prev_threshold)[:, :, None, None] & (induction >= induction_threshold)[None, None]
    return t & forward_pairs(*previous.shape).isfinite()


#: how many standard errors from a threshold a head's label may lie and be called near it
NEAR = 2.0


def near_threshold(mean: Tensor, error: Tensor, threshold: float, side: str) -> list[list]:
    """``[[layer, head, label, standard error], ...]``: the heads whose label ``mean`` ``(L, H)`` lies
    within :data:`NEAR` standard errors ``error`` ``(L, H)`` of ``threshold``, among those that can be
    in a pair on their ``side`` (``'writer'``: not the last layer; ``'reader'``: not the first).
    A NaN error (one sequence) calls no head near."""
    close = (mean.double() - threshold).abs() <= NEAR * error.double()
    if side == "writer":
        close[-1] = False
    else:
        close[0] = False
    return [[l, h, float(mean[l, h]), float(error[l, h])] for l, h in close.nonzero().tolist()]


def near_heads(labels, prev_threshold: float, induction_threshold: float) -> dict[str, list]:
    """:func:`near_threshold` of an :class:`~compscope.data.head_labels.ActivationLabels`' previous-token
    heads (as writers) and induction heads (as readers), keyed ``'previous_token'`` and ``'induction'``."""
    return {key: near_threshold(labels.mean[key], labels.error[key], t, side)
            for key, t, side in (("previous_token", prev_threshold, "writer"), ("induction", induction_threshold, "reader"))}


#: most heads near a threshold whose every assignment to either side :func:`near_truths` builds
MAX_NEAR = 10


def near_truths(previous: Tensor, induction: Tensor, near: dict[str, list], prev_threshold: float,
                induction_threshold: float) -> Tensor | None:
    """``(2^k, L, H, L, H)`` bool: :func:`true_pairs` with each of the ``k`` heads of ``near``
    (:func:`near_threshold`'s lists, keyed ``'previous_token'`` and ``'induction'``) put on either
    side of its threshold, every assignment once (the first: the truth as it is, where each near
    head is on its own side). None for more than :data:`MAX_NEAR` such heads."""
    heads = [(key, l, h) for key in ("previous_token", "induction") for l, h, *_ in near.get(key, [])]
    if len(heads) > MAX_NEAR:
        return None
    base = {"previous_token": previous.double(), "induction": induction.double()}
    at = {"previous_token": prev_threshold, "induction": induction_threshold}
    out = []
    for bits in range(2 ** len(heads)):
        labels = {k: v.clone() for k, v in base.items()}
        for i, (key, l, h) in enumerate(heads):
            if bits >> i & 1:  # the other side of its threshold
                labels[key][l, h] = -math.inf if base[key][l, h] >= at[key] else at[key]
        out.append(true_pairs(labels["previous_token"], labels["induction"], prev_threshold, induction_threshold))
    return torch.stack(out)


def auroc_span(scores: Tensor, truths: Tensor) -> tuple[float, float]:
    """The lowest and highest of :func:`aurocs`; NaN where no truth has both classes."""
    a = aurocs(scores, truths)
    a = a[~a.isnan()]
    return (float(a.min()), float(a.max())) if len(a) else (math.nan, math.nan)


def confirmed_pairs(truth: Tensor, effects: Tensor, threshold: float) -> Tensor:
    """The true pairs whose interventional effect is at least ``threshold`` (NaN effects: not confirmed)."""
    return truth & (torch.nan_to_num(effects, nan=-math.inf) >= threshold)


def forward_pairs(n_layers: int, n_heads: int) -> Tensor:
    """``(L, H, L, H)`` float64: 0 on every earlier → later-layer pair, NaN elsewhere."""
    later = torch.triu(torch.ones(n_layers, n_layers, dtype=torch.bool), diagonal=1)[:, None, :, None]
    return torch.where(later, 0.0, torch.nan).double().expand(n_layers, n_heads, n_layers, n_heads)


def writer_pairs(previous: Tensor, like: Tensor) -> Tensor:
    """``(L, H, L, H)`` float64: every pair scored by its writer's ``previous`` score ``(L, H)``
    alone, where ``like`` (a pair table) is finite; NaN elsewhere."""
    return torch.where(torch.isfinite(like), previous.double()[:, :, None, None].expand_as(like), torch.nan)
