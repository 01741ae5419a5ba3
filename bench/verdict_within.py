"""How much of a label-truth AUROC is which heads, and how much is which pairs.

The AUROC of the previous-token → induction K-pairs compares every true pair with every other,
most of them pairs into other readers, from other writers. A score that puts every pair into a
sharp reader high wins those comparisons without knowing which writers that reader composes
with. Kept to the comparisons between pairs into the same reader
(:func:`compscope.data.validate.auroc_within`), the AUROC asks whether an induction head's
previous-token writers score above its other writers; within writers, whether a previous-token
head's induction readers score above its other readers. A score of the reader alone gets ½
within readers, and ``read_gain`` (``frobenius`` times the reader's own scale) gets exactly
``frobenius``'s there, under any metric.

For the K interventions (the ceiling) and every measure under ``identity`` and ``embed`` (with
``--on-data`` also the metrics estimated on text, shrunk by Ledoit-Wolf as by default, and with
``--shrinkage none`` each of them again with ``G`` the sample moment, ``NAME, sample``; ``--linearise-norms`` and ``--linearise-qk-norm`` as ``compscope validate`` has them) this prints the
three AUROCs, ranked by the first, and how many comparisons each counts.

    compscope validate smollm2 --out verdict-smollm2
    python bench/verdict_within.py smollm2 verdict-smollm2 --on-data
    python bench/verdict_within.py gemma3-270m verdict-gemma --on-data --linearise-norms qk
    python bench/verdict_within.py gemma3-270m verdict-gemma --on-data --shrinkage none
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from verdict_candidates import (MEASURES, data_arguments, linearised_words, metrics_to_score,  # noqa: E402
                                norms_argument, read_verdict, verdict_arguments, weights_to_score)

from compscope.data.separation import comparisons  # noqa: E402
from compscope.data.validate import auroc, auroc_within, true_pairs  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verdict_arguments(ap)
    data_arguments(ap)
    norms_argument(ap)
    args = ap.parse_args()
    hw, previous, induction, effects = read_verdict(args.model, args.verdict)
    truth = true_pairs(previous, induction, args.prev_threshold, args.induction_threshold)
    scored = torch.isfinite(effects)
    said = f"previous-token >= {args.prev_threshold}, induction >= {args.induction_threshold}"
    n = {side: comparisons(scored, truth, side) for side in (None, "reader", "writer")}
    if not n[None]:
        raise SystemExit(f"{args.verdict}: no true K-pair and other pair to compare ({said})")
    weights, runner = weights_to_score(args, hw, runs=args.on_data)
    metrics = metrics_to_score(args, weights, runner)
    rows = [("interventions (K effect)", "-", effects)]
    for name, met in metrics.items():
        table = scores(weights, "K", list(MEASURES), met, pairs="all", progress=False)
        rows += [(m, name, table.dense(m, "K")) for m in MEASURES]
    lin = linearised_words(args)
    print(f"{hw.meta.name}: {int(truth.sum())} true K-pairs ({said}){lin}; comparisons of a true pair with "
          f"another: {n[None]} in all, {n['reader']} into the same reader, {n['writer']} from the same writer\n")
    w = max(9, *(len(name) for name in metrics))
    print(f"{'score':<26} {'metric':<{w}} {'AUROC':>6} {'within readers':>15} {'within writers':>15}")
    out = [(cand, met, auroc(x, truth), auroc_within(x, truth, "reader"), auroc_within(x, truth, "writer"))
           for cand, met, x in rows]
    for cand, met, a, r, wr in sorted(out, key=lambda row: -round(row[2], 3)):
        print(f"{cand:<26} {met:<{w}} {a:6.3f} {r:15.3f} {wr:15.3f}")


if __name__ == "__main__":
    main()
