"""Which true previous-token → induction K-pairs a measure × metric ranks low, and whether the
model's own direct path ranks them low too: the verdict's AUROC taken apart by writer and by reader.

The AUROC is the mean, over the true pairs, of the fraction of false pairs that score below
each (ties ½). Averaged over one writer's true pairs only, that fraction says how well *its*
pairs stand out; the weighted mean of the rows (weights: their pair counts) is the whole AUROC.
For each previous-token writer (and each induction reader) this prints that fraction by the
measure and by the K intervention (the ceiling's own share), beside the same fraction for the
head's other pairs (with readers that are not induction heads; writers that are not
previous-token heads): a row whose true and other pairs stand alike is a head the measure sees
nothing special in. The rows are :func:`compscope.data.validate.auroc_by_head`'s; in Python,
``compscope.validate(...).auroc_by_head(measure, metric)`` gives them as a table.

    compscope validate smollm2 --out verdict-smollm2
    python bench/verdict_pairs.py smollm2 verdict-smollm2 --measure overlap --metric embed
    python bench/verdict_pairs.py gemma3-270m verdict-gemma --measure read_gain --metric covariance --linearise-norms qk

``--linearise-norms`` scores the weights with the norms inside the heads' circuits replaced by
their mean Jacobian on natural text (as ``compscope validate --linearise-norms``; the labels and
interventions are the model's as it is, read from the folder); ``--linearise-qk-norm`` with QK-norm
replaced by its Jacobian at the isotropic point, from the weights alone (as ``compscope validate
--linearise-qk-norm``), and ``--linearise-qk-norm text`` at the second moment of what the heads
read on the metrics' text (as ``compscope validate --linearise-qk-norm text``).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from verdict_candidates import norms_argument, read_verdict, verdict_arguments, weights_to_score  # noqa: E402

from compscope.core.metrics import METRICS, ON_DATA, get_metric  # noqa: E402
from compscope.data.validate import auroc, auroc_by_head, by_head_lines, true_pairs  # noqa: E402
from compscope.defaults import SHRINKAGES  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402
from compscope.measures import MEASURES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verdict_arguments(ap)
    ap.add_argument("--measure", default="overlap", choices=list(MEASURES))
    ap.add_argument("--metric", default="embed", choices=list(METRICS))
    ap.add_argument("--shrinkage", choices=list(SHRINKAGES), default=None,
                    help="how a metric on data estimates each layer's G (MetricData(shrinkage=...); default "
                         "ledoit-wolf, the sample moment shrunk; none: the sample moment itself)")
    norms_argument(ap)
    args = ap.parse_args()
    if args.shrinkage and args.metric not in ON_DATA:
        ap.error(f"--shrinkage: {args.metric} is not estimated on data ({', '.join(ON_DATA)} are)")
    hw, previous, induction, effects = read_verdict(args.model, args.verdict)
    thresholds = (previous, induction, args.prev_threshold, args.induction_threshold)
    truth = true_pairs(*thresholds)
    weights, runner = weights_to_score(args, hw, runs=args.metric in ON_DATA)
    if args.metric in ON_DATA:
        from compscope.data.residual_moments import MetricData

        met = get_metric(args.metric, weights, model=runner, data=MetricData(shrinkage=args.shrinkage))
    else:
        met = get_metric(args.metric, weights)
    x = scores(weights, "K", [args.measure], met, pairs="all", progress=False).dense(args.measure, "K")
    n_false = int((torch.isfinite(x) & ~truth).sum())
    shrunk = "" if args.metric not in ON_DATA else ", Ledoit-Wolf" if args.shrinkage != "none" else ", sample moment"
    lin = {None: "", "isotropic": "; iso. qk", "text": "; G-point qk"}[args.linearise_qk_norm]
    lin += f"; lin. {args.linearise_norms.replace(',', '+')}" if args.linearise_norms else ""
    print(f"{hw.meta.name}: {args.measure} ({args.metric}{shrunk}{lin}), K-composition; {int(truth.sum())} true pairs "
          f"(previous-token >= {args.prev_threshold}, induction >= {args.induction_threshold}) against "
          f"{n_false} false; AUROC {auroc(x, truth):.3f}, the K interventions' {auroc(effects, truth):.3f}")
    print("share of the false pairs that each head's true pairs score above (their AUROC), and its other pairs "
          "(-: none)")
    print("\n".join(by_head_lines(auroc_by_head(x, effects, *thresholds))))


if __name__ == "__main__":
    main()
