"""How the previous-token → induction K-pair AUROC depends on the thresholds that define the truth.

``compscope validate`` calls a pair true when its writer's previous-token score is at least 0.4
and its reader's induction score at least 0.3 (the writer in an earlier layer). This script reads
a saved verdict back (the labels and interventions are not run again) and, for a grid of both
thresholds, prints the number of true pairs (and of those the K interventions confirm, effect >=
0.05), the AUROC of the K interventions themselves (the ceiling of a composition score), and the
AUROC of the best measure × metric among every measure under ``identity``, ``embed`` and
``unembed`` (and the metrics on data with ``--on-data``), with ``frobenius`` (identity) and
``overlap`` (embed) beside it. A row with no true pair, or no
other pair, prints ``-``.

``--on-data`` adds the metrics estimated on text to the candidates (the model runs once over it;
each layer's ``G`` shrunk by Ledoit-Wolf, as by default; with ``--shrinkage none`` each of them
again with ``G`` the sample moment, ``NAME, sample``), ``--linearise-norms``
(and ``--linearise-qk-norm``) scores the weights with the norms inside the heads' circuits
linearised (as ``compscope validate`` does), and ``--column MEASURE,METRIC`` adds a column for that candidate.

    compscope validate smollm2 --out verdict-smollm2
    python bench/verdict_thresholds.py smollm2 verdict-smollm2
    python bench/verdict_thresholds.py smollm2 verdict-smollm2 --on-data --column read_gain,covariance
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from compscope.core.metrics import get_metric  # noqa: E402
from compscope.data.validate import auroc, confirmed_pairs, forward_pairs, true_pairs  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402
from verdict_candidates import (MEASURES, data_arguments, data_metric_names, linearised_words,  # noqa: E402
                                metrics_to_score, norms_argument, read_verdict, weights_to_score)


def weight_only_names(hw) -> tuple[str, ...]:
    """The metrics that need no data: ``identity``, ``embed`` and (with an unembedding) ``unembed``."""
    return ("identity", "embed") + (("unembed",) if hw.W_U is not None else ())


def weight_only(hw, metrics: dict | None = None) -> dict:
    """``{(measure, metric): (L, H, L, H) K scores}`` of every measure under ``identity``, ``embed``
    and (with an unembedding) ``unembed``: the scores that need no data; and under each of
    ``metrics`` (``{name: Metric}``) given."""
    out = {}
    named = {name: get_metric(name, hw) for name in weight_only_names(hw)}
    for name, met in {**named, **(metrics or {})}.items():
        table = scores(hw, "K", list(MEASURES), met, pairs="all", progress=False)
        for m in MEASURES:
            out[m, name] = table.dense(m, "K")
    return out


#: the candidates every grid shows beside the best
FIXED = (("frobenius", "identity"), ("overlap", "embed"))


def print_grid(previous, induction, effects, candidates: dict, prevs, inductions, effect_threshold: float,
               columns=()) -> None:
    """One row per (previous-token, induction) threshold: the true pairs, the confirmed ones, the
    K interventions' AUROC, the best of ``candidates``, the :data:`FIXED` ones and those of
    ``columns`` (``(measure, metric)`` keys of ``candidates``); dashes with no true pair or no
    other pair."""
    shown = list(FIXED) + [c for c in columns if c not in FIXED]
    names = {("frobenius", "identity"): "frob. id", ("overlap", "embed"): "overlap emb"}
    heads = [names.get(c, f"{c[0]}, {c[1]}") for c in shown]
    later = forward_pairs(*previous.shape).isfinite()
    wb = max(28, *(len(f"{m}, {met}") for m, met in candidates))
    print(f"{'prev >=':>7} {'ind >=':>6} {'true':>5} {'conf.':>5} {'ceiling':>8}  {'best measure x metric':<{wb}} "
          f"{'AUROC':>6} " + " ".join(f"{h:>{max(8, len(h))}}" for h in heads))
    for p in prevs:
        for i in inductions:
            truth = true_pairs(previous, induction, p, i)
            n = int(truth.sum())
            if n == 0 or bool(truth[later].all()):  # nothing to compare
                print(f"{p:7.2f} {i:6.2f} {n:5d} {'-':>5} {'-':>8}  {'-':<{wb}} {'-':>6} "
                      + " ".join(f"{'-':>{max(8, len(h))}}" for h in heads))
                continue
            confirmed = int(confirmed_pairs(truth, effects, effect_threshold).sum())
            got = {k: auroc(x, truth) for k, x in candidates.items()}
            (m, met), best = max(got.items(), key=lambda kv: kv[1])
            print(f"{p:7.2f} {i:6.2f} {n:5d} {confirmed:5d} {auroc(effects, truth):8.3f}  {m + ', ' + met:<{wb}} {best:6.3f} "
                  + " ".join(f"{got[c]:{max(8, len(h))}.3f}" for c, h in zip(shown, heads)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("verdict", help="a folder written by compscope validate --out")
    ap.add_argument("--prev", type=float, nargs="+", default=[0.3, 0.4, 0.5, 0.6], help="previous-token thresholds")
    ap.add_argument("--induction", type=float, nargs="+", default=[0.2, 0.3, 0.4, 0.5], help="induction thresholds")
    ap.add_argument("--effect-threshold", type=float, default=0.05)
    data_arguments(ap)
    ap.add_argument("--column", action="append", default=[], metavar="MEASURE,METRIC",
                    help="a column for this measure x metric (repeatable), e.g. read_gain,covariance")
    norms_argument(ap)
    args = ap.parse_args()
    columns = [tuple(c.split(",", 1)) for c in args.column]
    hw, previous, induction, effects = read_verdict(args.model, args.verdict)
    metrics = weight_only_names(hw) + data_metric_names(args)
    unknown = [",".join(c) for c in columns if len(c) != 2 or c[0] not in MEASURES or c[1] not in metrics]
    if unknown:  # said by name, with what there is, before anything is scored
        ap.error(f"--column {unknown[0]}: not among the candidates (measures {', '.join(MEASURES)}; metrics "
                 f"{', '.join(metrics)})")
    weights, runner = weights_to_score(args, hw, runs=args.on_data)
    candidates = weight_only(weights, metrics_to_score(args, weights, runner, names=()))
    lin = linearised_words(args)
    print(f"{hw.meta.name}: AUROC of the true previous-token -> induction K-pairs, by the thresholds that define them "
          f"(confirmed: K effect >= {args.effect_threshold}){lin}\n")
    print_grid(previous, induction, effects, candidates, args.prev, args.induction, args.effect_threshold, columns)


if __name__ == "__main__":
    main()
