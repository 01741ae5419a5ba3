"""How much a metric estimated on data depends on the data it is estimated on.

``compscope validate`` estimates ``activations``, ``covariance`` and their ``-own`` variants on
64 sequences of 128 tokens of standard-library docstrings, the windows picked with seed 12346.
This script reads a saved verdict back (its labels: nothing runs for them again), estimates one
such metric again on other windows of the text (other seeds) and on more or less of it
(``compscope.MetricData``), or on another text (``--corpus FILE``), or on repeated random
sequences like the labels' (``--repeats HALF``, other draws), and prints, for each, the label-truth AUROC of the true
previous-token → induction K-pairs (previous-token >= 0.4 before induction >= 0.3) of every
measure under it, then each measure's range over the seeds at each amount of text. The model
is loaded once; each estimate runs it over its text once.

    compscope validate gemma3-270m --out verdict-gemma
    python bench/metric_data_spread.py gemma3-270m verdict-gemma --metric covariance-own
    python bench/metric_data_spread.py gemma3-270m verdict-gemma --metric covariance-own --shrinkage none
    python bench/metric_data_spread.py gemma3-270m verdict-gemma --corpus licences.txt
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from compscope.core.metrics import ON_DATA, get_metric  # noqa: E402
from compscope.defaults import SHRINKAGES  # noqa: E402
from compscope.data.residual_moments import METRIC_SEED, MetricData, metric_data  # noqa: E402
from compscope.data.validate import auroc  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402
from verdict_candidates import MEASURES, truth_from_args, verdict_arguments  # noqa: E402


#: width of the data column (the words of 64 sequences of text, shrunk)
W = 96


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verdict_arguments(ap)
    ap.add_argument("--metric", default="covariance-own", choices=ON_DATA, help="the metric (default covariance-own)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[METRIC_SEED, 1, 2, 3],
                    help=f"seeds picking the text's windows (default {METRIC_SEED}, the verdict's, then 1 2 3)")
    ap.add_argument("--sequences", type=int, nargs="+", default=[16, 64, 256],
                    help="amounts of text, in sequences (default 16 64 256; 64 is the verdict's)")
    ap.add_argument("--length", type=int, default=None, help="tokens per sequence (default the metric's: 128, toys 64)")
    ap.add_argument("--shrinkage", default=None, choices=SHRINKAGES,
                    help="how each layer's G is estimated (default ledoit-wolf, compscope's: the sample moment "
                         "shrunk; none: the sample moment itself)")
    ap.add_argument("--corpus", metavar="FILE", default=None,
                    help="a UTF-8 text file to estimate on instead of the standard library's docstrings")
    ap.add_argument("--repeats", type=int, metavar="HALF", default=None,
                    help="estimate on repeated random sequences [t, t] with |t| = HALF instead of text: the kind of "
                         "sequences the labels are read on, other draws (the seeds)")
    args, hw, truth, runner = truth_from_args(ap)
    if args.repeats is not None and (args.corpus or args.length):
        ap.error("--repeats takes no --corpus or --length")
    print(f"{hw.meta.name}: label-truth AUROC of {int(truth.sum())} true K-pairs (previous-token >= "
          f"{args.prev_threshold}, induction >= {args.induction_threshold}) under {args.metric}, by the data it is "
          f"estimated on\n")
    print(f"{'data':<{W}}" + "".join(f"{m:>12}" for m in MEASURES))
    got: dict[int, list[dict[str, float]]] = {}
    for n in args.sequences:
        for seed in args.seeds:
            if args.repeats is None:
                data = MetricData(sequences=n, length=args.length, seed=seed, shrinkage=args.shrinkage, corpus=args.corpus)
                met, words = get_metric(args.metric, hw, model=runner, data=data), metric_data(runner, data)
            else:
                met, words = on_repeats(runner, hw, args.metric, n, args.repeats, seed,
                                        MetricData(shrinkage=args.shrinkage).estimate)
            table = scores(hw, "K", list(MEASURES), met, pairs="all", progress=False)
            row = {m: auroc(table.dense(m, "K"), truth) for m in MEASURES}
            got.setdefault(n, []).append(row)
            print(f"{words:<{W}}" + "".join(f"{row[m]:12.3f}" for m in MEASURES))
    print("\nrange over the seeds")
    for n, rows in got.items():
        spans = [f"{min(r[m] for r in rows):.3f}-{max(r[m] for r in rows):.3f}" for m in MEASURES]
        print(f"{f'{n} sequences':<{W}}" + "".join(f"{x:>12}" for x in spans))


def on_repeats(runner, hw, name: str, n: int, half: int, seed: int, shrinkage: str | None):
    """``(metric, words)``: the metric ``name`` estimated on ``n`` repeated random sequences
    ``[bos] t t`` of ``seed`` (drawn as the verdict draws its own, special tokens avoided);
    ``shrinkage`` as :func:`compscope.data.residual_moments.runner_second_moments` takes it."""
    from dataclasses import replace

    from compscope.core.metrics import activations
    from compscope.data.residual_moments import runner_second_moments
    from compscope.data.validate import verdict_sequences

    tokens = verdict_sequences(runner, n, half, seed).tokens
    G = runner_second_moments(runner, tokens, hw=hw, centred=name.startswith("covariance"), shrinkage=shrinkage)
    met = replace(activations(G, name=name), own_reads=name.endswith("-own"))
    words = f"{n} repeated random sequences [t, t], |t| = {half} (seed {seed})"
    return met, words + ("; Ledoit-Wolf shrinkage" if shrinkage == "ledoit-wolf" else "")


if __name__ == "__main__":
    main()
