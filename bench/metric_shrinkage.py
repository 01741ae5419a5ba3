"""How the metrics estimated on data depend on how each layer's ``G`` is regularised.

A metric estimated on data whitens by ``G^{-1/2}``, so the directions in which the residual barely
varies on the text are magnified most, and their estimate is the noisiest (``d`` of 576 or 640
against 8,192 positions that are far from independent). ``compscope`` adds a ridge ``λ I`` with
``λ = ridge · tr(G)/d`` (default ``ridge = 1e-6``: almost none); ``G + λ I`` is, up to a scale no
measure sees, ``(1 − ρ) G + ρ (tr G/d) I`` with ``ρ = ridge / (1 + ridge)``: shrinkage toward a
multiple of the identity. This script reads a saved verdict back (its labels), estimates each
metric once, and prints the label-truth AUROC of the true previous-token → induction K-pairs of
every measure under it for a grid of ridges, and with the Ledoit–Wolf estimate, whose intensity
each layer's own data give (``MetricData(shrinkage='ledoit-wolf')``, compscope's default; no
label is looked at),
with the range of those intensities, as ridges.

    compscope validate gemma3-270m --out verdict-gemma
    python bench/metric_shrinkage.py gemma3-270m verdict-gemma
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from compscope.core.metrics import DEFAULT_RIDGE, ON_DATA, get_metric  # noqa: E402
from compscope.data.residual_moments import MetricData  # noqa: E402
from compscope.data.validate import auroc  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402
from verdict_candidates import MEASURES, truth_from_args, verdict_arguments  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verdict_arguments(ap)
    ap.add_argument("--metric", action="append", choices=ON_DATA,
                    help="a metric estimated on data (repeatable; default covariance-own, covariance)")
    ap.add_argument("--ridges", type=float, nargs="+", default=[DEFAULT_RIDGE, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0],
                    help=f"ridges, as multiples of tr(G)/d (default {DEFAULT_RIDGE:g}, compscope's, to 10)")
    ap.add_argument("--sequences", type=int, default=None, help="text to estimate on, in sequences (default the metric's)")
    ap.add_argument("--seed", type=int, default=None, help="which windows of the text (default the metric's)")
    args, hw, truth, runner = truth_from_args(ap)
    plain = MetricData(sequences=args.sequences, seed=args.seed, shrinkage="none")  # the sample moment, ridged
    shrunk = MetricData(sequences=args.sequences, seed=args.seed, shrinkage="ledoit-wolf")  # compscope's default
    print(f"{hw.meta.name}: label-truth AUROC of {int(truth.sum())} true K-pairs (previous-token >= "
          f"{args.prev_threshold}, induction >= {args.induction_threshold}), by how G is regularised\n")
    print(f"{'metric':<16} {'G':<34}" + "".join(f"{m:>11}" for m in MEASURES))
    for name in args.metric or ["covariance-own", "covariance"]:
        for ridge in args.ridges:
            met = get_metric(name, hw, ridge, model=runner, data=plain)  # the model runs once: its sums are kept
            _row(name, f"ridge {ridge:g}", met, hw, truth)
        met = get_metric(name, hw, model=runner, data=shrunk)
        _row(name, "Ledoit-Wolf" + met.data.split("Ledoit-Wolf shrinkage")[1], met, hw, truth)
    print(f"\nestimated on {get_metric(name, hw, model=runner, data=plain).data}")


def _row(name: str, how: str, met, hw, truth) -> None:
    table = scores(hw, "K", list(MEASURES), met, pairs="all", progress=False)
    print(f"{name:<16} {how:<34}" + "".join(f"{auroc(table.dense(m, 'K'), truth):11.3f}" for m in MEASURES), flush=True)


if __name__ == "__main__":
    main()
