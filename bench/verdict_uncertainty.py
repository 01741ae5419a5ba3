"""How uncertain is a label-truth AUROC? Standard errors for the previous-token → induction K-pairs.

Reads a verdict saved by ``compscope validate MODEL --out DIR`` (the activation labels and the K
interventions; the model runs only with ``--on-data``, ``--linearise-norms`` or ``--linearise-qk-norm
text``) and scores every pair with each measure under the weight-only metrics ``identity`` and ``embed``; with
``--on-data`` also under the metrics estimated on natural text (``activations``, ``covariance``
and their ``-own`` variants, each layer's ``G`` shrunk by Ledoit-Wolf as by default; ``--shrinkage
none`` adds each again with the sample moment: the model runs once over the text; the bootstrap below draws heads,
the moments stay those of the whole text). For each score, and for the K interventions (the
ceiling), it prints the AUROC against the label truth (previous-token >= 0.4 before induction
>= 0.3, or the thresholds given) with two measures of its uncertainty:

- the Hanley–McNeil standard error, ``sqrt((A(1−A) + (n₁−1)(Q₁−A²) + (n₀−1)(Q₂−A²)) / (n₁ n₀))``,
  ``Q₁ = A/(2−A)``, ``Q₂ = 2A²/(1+A)``, with ``n₁`` true and ``n₀`` other pairs, which treats the
  pairs as independent, and DeLong's, from the pairs' placements among the other class
  (``compscope.data.separation.auroc_se``, the ``auroc_se`` of ``verdict.csv``), independent pairs too;
- a bootstrap over heads: the model's heads drawn with replacement (``--reps`` times, ``--seed``),
  every pair of drawn heads in order of layers scored again; pairs that share a head move together,
  as they do in the model. The 2.5% and 97.5% quantiles of the AUROC over the draws (draws without
  a true pair, or with nothing else, are left out and counted). Every score sees the same draws,
  so the last column compares each with the best measure × metric paired, draw by draw: the 95%
  interval of ``AUROC(best) − AUROC(score)`` (an interval above 0: the best is better on these
  heads, not by chance of which heads the model has).

    compscope validate smollm2 --out verdict-smollm2
    python bench/verdict_uncertainty.py smollm2 verdict-smollm2
    python bench/verdict_uncertainty.py gemma3-270m verdict-gemma --on-data
    python bench/verdict_uncertainty.py gemma3-270m verdict-gemma --on-data --shrinkage none
    python bench/verdict_uncertainty.py gemma3-270m verdict-gemma --on-data --linearise-norms qk

``--within reader`` (or ``writer``) asks the same of the AUROC kept to the comparisons between
pairs into the same reader (from the same writer: ``compscope.data.validate.auroc_within``), in the
estimate and in every draw (a head drawn twice is two readers); the Hanley–McNeil error, which
counts independent pairs, is not given then.

    python bench/verdict_uncertainty.py smollm2 verdict-smollm2 --on-data --within reader

``--linearise-norms`` scores the weights with the norms inside the heads' circuits replaced by
their mean Jacobian on natural text (as ``compscope validate --linearise-norms``), and
``--linearise-qk-norm`` with QK-norm replaced by its Jacobian at the isotropic point, from the
weights alone (as ``compscope validate --linearise-qk-norm``), or with ``--linearise-qk-norm text``
at the second moment of what the heads read on the metrics' text (as ``compscope validate
--linearise-qk-norm text``: the model runs once over the text, which the metrics on data share); the
labels and the interventions are the model's as it is.

    python bench/verdict_uncertainty.py gemma3-270m verdict-gemma --linearise-qk-norm
    python bench/verdict_uncertainty.py gemma3-270m verdict-gemma --on-data --linearise-qk-norm text
"""

from __future__ import annotations

import argparse
import math
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from compscope.data.separation import auroc_se  # noqa: E402
from compscope.data.validate import auroc, auroc_within, true_pairs  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402
from verdict_candidates import (MEASURES, data_arguments, linearised_words, metrics_to_score,  # noqa: E402
                                norms_argument, read_verdict, verdict_arguments, weights_to_score)


QUANTILES = torch.tensor([0.025, 0.975], dtype=torch.float64)


def hanley_mcneil(a: float, n1: int, n0: int) -> float:
    """Standard error of an AUROC ``a`` from ``n1`` positives and ``n0`` negatives (independent items)."""
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    return math.sqrt((a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0))


def separation(score: torch.Tensor, truth: torch.Tensor, ok: torch.Tensor, within: str | None) -> float:
    """The AUROC of ``score`` against ``truth`` (both ``(n, n)`` over flattened heads) over the
    pairs ``ok``: of all of them, or kept to those that share the reader or the writer
    (``within``); NaN without both classes to compare."""
    if within is None:
        t = truth[ok]
        return float("nan") if t.all() or not t.any() else auroc(score[ok], t)
    n = score.shape[0]
    x = torch.where(ok, score, torch.nan).reshape(1, n, 1, n)  # one layer of n heads: every pair counts
    return auroc_within(x, truth.reshape(1, n, 1, n), within)


def head_bootstrap(scores: list[torch.Tensor], truth: torch.Tensor, layer: torch.Tensor, draws: list[torch.Tensor],
                   within: str | None = None) -> torch.Tensor:
    """``(score, draw)`` float64: :func:`separation` of each of ``scores`` against ``truth`` (all
    ``(n, n)`` over flattened heads) on each draw of heads, over the drawn pairs whose writer's
    layer is before the reader's (found once per draw for every score); NaN where a draw has
    nothing to compare (no true pair or no other pair; within a side, no head of it with both)."""
    out = torch.empty(len(scores), len(draws), dtype=torch.float64)
    for j, idx in enumerate(draws):
        ok, t = layer[idx][:, None] < layer[idx][None, :], truth[idx[:, None], idx]
        for i, score in enumerate(scores):
            out[i, j] = separation(score[idx[:, None], idx], t, ok, within)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verdict_arguments(ap)
    ap.add_argument("--reps", type=int, default=1000, help="bootstrap draws (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    data_arguments(ap)
    ap.add_argument("--within", choices=["reader", "writer"], default=None,
                    help="the AUROC kept to comparisons between pairs into the same reader (or from the same "
                         "writer), in the estimate and in every draw; no Hanley-McNeil or DeLong SE then")
    norms_argument(ap)
    args = ap.parse_args()
    hw, previous, induction, effects = read_verdict(args.model, args.verdict)
    L, H = hw.n_layers, hw.n_heads
    n = L * H
    truth = true_pairs(previous, induction, args.prev_threshold, args.induction_threshold)
    later = torch.isfinite(effects)
    n1, n0 = int(truth.sum()), int((later & ~truth).sum())
    said = f"previous-token >= {args.prev_threshold}, induction >= {args.induction_threshold}"
    if not n1 or not n0:  # no AUROC to be uncertain about: said, not a traceback
        raise SystemExit(f"{args.verdict}: {n1} true K-pairs ({said}) and {n0} others; an AUROC needs both "
                         "(--prev-threshold, --induction-threshold)")
    if args.within and math.isnan(auroc_within(torch.where(later, 0.0, torch.nan), truth, args.within)):
        raise SystemExit(f"{args.verdict}: no {args.within} has both a true K-pair ({said}) and another pair; "
                         f"an AUROC within {args.within}s needs one")
    layer = torch.arange(L).repeat_interleave(H)
    g = torch.Generator().manual_seed(args.seed)
    draws = [torch.randint(n, (n,), generator=g) for _ in range(args.reps)]
    candidates = [("interventions (K effect)", "-", effects)]
    weights, runner = weights_to_score(args, hw, runs=args.on_data, progress=True)
    metrics = metrics_to_score(args, weights, runner)
    for name, met in metrics.items():
        table = scores(weights, "K", list(MEASURES), met, pairs="all", progress=False)
        candidates += [(m, name, table.dense(m, "K").double()) for m in MEASURES]
    lin = linearised_words(args)
    inside = "" if args.within is None else f" {'into' if args.within == 'reader' else 'from'} one {args.within}"
    kept_to = "" if args.within is None else f"; AUROC within {args.within}s (comparisons of pairs{inside})"
    print(f"{hw.meta.name}: {n1} true K-pairs ({said}) among {n1 + n0} pairs{kept_to}; "
          f"bootstrap over the {n} heads, {args.reps} draws (seed {args.seed}){lin}\n")
    w = max(9, *(len(name) for name in metrics))
    print(f"{'score':<26} {'metric':<{w}} {'AUROC':>6} {'SE (H-M)':>9} {'SE (DeLong)':>12} {'bootstrap SD':>13} "
          f"{'bootstrap 95%':>16} {'best minus it, 95%':>20}")
    rows = []
    truth_flat = truth.reshape(n, n)
    every = torch.ones(n, n, dtype=torch.bool)  # the NaNs of a score keep its pairs in order of layers
    flat = [s.reshape(n, n) for _, _, s in candidates]
    boot = head_bootstrap(flat, truth_flat, layer, draws, args.within)
    for (cand, met, _), s, b in zip(candidates, flat, boot):
        a = separation(s, truth_flat, every, args.within)
        se = hanley_mcneil(a, n1, n0) if args.within is None else math.nan
        delong = auroc_se(s.flatten(), truth_flat.flatten()) if args.within is None else math.nan
        kept = b[~b.isnan()]
        if not len(kept):
            raise SystemExit(f"no draw of the {n} heads held both true and other pairs{inside} in {args.reps}; "
                             "more --reps")
        lo, hi = torch.quantile(kept, QUANTILES).tolist()
        rows.append((cand, met, a, se, delong, float(kept.std()), lo, hi, len(b) - len(kept), b))
    rows.sort(key=lambda r: -r[2] if r[2] == r[2] else math.inf)  # a score with nothing to compare: last
    best = next(r for r in rows if r[1] != "-")  # the best measure x metric
    for cand, met, a, se, delong, sd, lo, hi, empty, b in rows:
        if cand == best[0] and met == best[1]:
            paired = "best"
        else:
            d = torch.nanquantile(best[9] - b, QUANTILES).tolist()  # over the draws both have
            paired = f"[{d[0]:+.3f}, {d[1]:+.3f}]"
        se, delong = ("-" if math.isnan(x) else f"{x:.3f}" for x in (se, delong))
        print(f"{cand:<26} {met:<{w}} {a:6.3f} {se:>9} {delong:>12} {sd:13.3f}   [{lo:.3f}, {hi:.3f}] {paired:>20}")
    empties = {r[8] for r in rows}
    print(f"\ndraws without both true and other pairs{inside}, left out: {', '.join(str(e) for e in sorted(empties))}")


if __name__ == "__main__":
    main()
