"""How much does a label-truth AUROC move with the sequences the labels are read on?

The verdict labels every head on 64 seeded repeated random sequences ``[bos] t t`` (seed 12345),
and its truth (previous-token >= 0.4 before induction >= 0.3) depends on those labels: heads near
a threshold come and go with the sequences. This script labels the heads again on the same number
of sequences drawn with other seeds (``compscope validate --seed``), scores every pair once with
each measure × metric (the weights do not change with the seed; a metric on data is estimated
once, on its own text), and prints for each seed the true pairs, the previous-token and induction
heads they come from, each candidate's AUROC, and the heads that join or leave the first seed's
truth, with their labels; then each candidate's lowest, median and highest AUROC over the seeds,
its lowest and highest AUROC over the first seed's heads near a threshold put on either side
(``auroc_near_low``, ``auroc_near_high`` of ``compscope validate``'s ``verdict.csv``), and how
many seeds reach ``--goal``. No interventions run: the label-truth
AUROC needs none. The first seed, 12345 unless ``--seeds`` says otherwise, is the verdict's: its
row is what ``compscope validate`` prints. A last row, ``pooled``, labels the heads on every seed's
sequences together (the mean of the seeds' labels: each seed has as many sequences, of one length),
and gives each head that joins or leaves the first seed's truth there, or whose pooled label lies
within two standard errors of its threshold (``near``), its pooled label ± the standard error over
seeds (their standard deviation over ``√seeds``).

    python bench/verdict_seeds.py smollm2 --goal 0.97
    python bench/verdict_seeds.py gemma3-270m --linearise-qk-norm text --goal 0.90

``--linearise-norms`` and ``--linearise-qk-norm`` (``isotropic`` or ``text``) score the weights as
``compscope validate`` does with them; the labels are always the model's as it is.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import compscope  # noqa: E402
from compscope.data.head_labels import activation_labels  # noqa: E402
from compscope.data.sequences import HALF  # noqa: E402
from compscope.data.separation import auroc_span, near_heads, near_threshold, near_truths  # noqa: E402
from compscope.data.validate import auroc, true_pairs, verdict_sequences  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402
from compscope.core.metrics import ON_DATA, get_metric  # noqa: E402
from compscope.defaults import SEED  # noqa: E402
from verdict_candidates import linearised_words, norms_argument, threshold_arguments, weights_to_score  # noqa: E402


def seeds(text: str) -> list[int]:
    try:
        out = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seeds as integers separated by commas") from None
    if len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"{text!r}: a seed given twice")
    return out


def heads(mask: torch.Tensor) -> set[tuple[int, int]]:
    """The ``(layer, head)`` where an ``(L, H)`` mask holds."""
    return {(layer, head) for layer, head in mask.nonzero().tolist()}


def changes(sides: tuple[set, set], first: tuple[set, set], scores: tuple[torch.Tensor, torch.Tensor],
            errors: tuple[torch.Tensor, torch.Tensor] | None = None) -> str:
    """The previous-token and induction heads of a truth that ``first``'s lacks (``+``) or has (``-``),
    each with its label ``scores`` (previous-token, induction: ``(L, H)``) on these sequences, and
    ``± errors`` (same shapes) where given."""
    parts = []
    for i, (name, now, then, label) in enumerate(zip(("previous-token", "induction"), sides, first, scores)):
        pm = (lambda a, b: "") if errors is None else (lambda a, b: f" ± {errors[i][a, b]:.3f}")  # noqa: E731
        moved = ([f"+{a}.{b} ({label[a, b]:.3f}{pm(a, b)})" for a, b in sorted(now - then)]
                 + [f"-{a}.{b} ({label[a, b]:.3f}{pm(a, b)})" for a, b in sorted(then - now)])
        if moved:
            parts.append(f"{name} {' '.join(moved)}")
    return "; ".join(parts)


def near(scores: tuple[torch.Tensor, torch.Tensor], errors: tuple[torch.Tensor, torch.Tensor],
         thresholds: tuple[float, float]) -> str:
    """The heads whose previous-token or induction label (``scores``, ``(L, H)``) lies within two
    ``errors`` of its threshold (:func:`~compscope.data.separation.near_threshold`: writers not in
    the last layer, readers not in the first): ``near: induction 23.1 (0.299 ± 0.002)``; empty if none."""
    parts = []
    for name, label, err, t, side in zip(("previous-token", "induction"), scores, errors, thresholds, ("writer", "reader")):
        close = near_threshold(label, err, t, side)  # as validate finds them: writers, readers
        if close:
            parts.append(f"{name} " + " ".join(f"{a}.{b} ({v:.3f} ± {e:.3f})" for a, b, v, e in close))
    return f"near: {'; '.join(parts)}" if parts else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--seeds", type=seeds, default=[SEED, *range(1, 10)],
                    help=f"the seeds of the labels' sequences (default {SEED}, the verdict's, then 1-9)")
    ap.add_argument("--sequences", type=int, default=64, help="sequences a seed (default 64, the verdict's)")
    ap.add_argument("--half", type=int, default=None, help="|t| (default 32, the verdict's, cut to the model's context)")
    ap.add_argument("--measure", action="append", dest="measures",
                    help="repeatable (default read_gain, frobenius, overlap)")
    ap.add_argument("--metric", action="append", dest="metrics", help="repeatable (default identity, covariance)")
    threshold_arguments(ap)
    ap.add_argument("--goal", type=float, default=None, help="count the seeds whose AUROC reaches this")
    norms_argument(ap)
    args = ap.parse_args()
    measures = args.measures or ["read_gain", "frobenius", "overlap"]
    names = args.metrics or ["identity", "covariance"]
    hw = compscope.load(args.model)
    on_data = any(n in ON_DATA for n in names)
    weights, runner = weights_to_score(args, hw, runs=True)  # the labels run the model in any case
    try:
        half, _ = runner.repeat_half(args.half, HALF)
    except compscope.CompscopeError as e:
        raise SystemExit(f"--half: {e}") from None
    dense = {}
    try:
        for name in names:
            met = get_metric(name, weights, model=runner) if name in ON_DATA else get_metric(name, weights)
            table = scores(weights, "K", measures, met, pairs="all", progress=False)
            for m in measures:
                dense[m, name] = table.dense(m, "K").double()
    except compscope.CompscopeError as e:  # an unknown measure or metric: said, not a traceback
        raise SystemExit(str(e)) from None
    what = f"{args.sequences} repeated random sequences [t, t], |t| = {half}"
    print(f"{hw.meta.name}: label truth (previous-token >= {args.prev_threshold}, induction >= "
          f"{args.induction_threshold}) on {what} a seed; K-composition{linearised_words(args)}"
          + ("; metrics on data estimated once" if on_data else "") + "\n")
    columns = [f"{m}, {n}" for m, n in dense]
    w = max(len(c) for c in columns)
    print(f"{'seed':>6} {'true':>5} {'prev.':>5} {'ind.':>5}  " + "  ".join(f"{c:>{w}}" for c in columns)
          + f"  the truth's heads against seed {args.seeds[0]}'s")
    got = {key: [] for key in dense}
    first = None
    each = []  # per seed: (previous-token, induction) labels, (L, H)

    def line(name, prev, ind, errors=None, keep=None):
        nonlocal first
        truth = true_pairs(prev, ind, args.prev_threshold, args.induction_threshold)
        sides = (heads(truth.flatten(2).any(-1)), heads(truth.flatten(0, 1).any(0)))  # writers, readers
        first = first or sides
        row = []
        for key, x in dense.items():
            a = auroc(x, truth)  # NaN without both true and other pairs
            if keep is not None:
                keep[key].append(a)
            row.append(f"{a:>{w}.3f}")
        said = [changes(sides, first, (prev, ind), errors)]
        if errors is not None:
            said.append(near((prev, ind), errors, (args.prev_threshold, args.induction_threshold)))
        print(f"{name:>6} {int(truth.sum()):>5} {len(sides[0]):>5} {len(sides[1]):>5}  " + "  ".join(row)
              + f"  {'; '.join(filter(None, said))}".rstrip(), flush=True)

    spans = None  # the first seed's: each candidate's AUROC over its near heads on either side
    for seed in args.seeds:
        labels = activation_labels(runner, verdict_sequences(runner, args.sequences, half, seed), 16, False)
        each.append((labels.previous_token, labels.induction))
        line(str(seed), *each[-1], keep=got)
        if spans is None:
            close = near_heads(labels, args.prev_threshold, args.induction_threshold)
            truths = near_truths(*each[-1], close, args.prev_threshold, args.induction_threshold)
            spans = {key: auroc_span(x, truths) if truths is not None else (math.nan, math.nan)
                     for key, x in dense.items()}
    if len(each) > 1:
        stacked = [torch.stack(t) for t in zip(*each)]  # (seeds, L, H) per label
        line("pooled", *(t.mean(0) for t in stacked), errors=tuple(t.std(0) / len(each) ** 0.5 for t in stacked))
    print()
    goal = f"  seeds >= {args.goal}" if args.goal is not None else ""
    print(f"{'candidate':<{w}}  {'lowest':>6} {'median':>6} {'highest':>7}  {'near, seed ' + str(args.seeds[0]):>17}{goal}")
    for (m, n), values in got.items():
        kept = [v for v in values if v == v]
        if not kept:
            print(f"{m + ', ' + n:<{w}}  no seed gave true and other pairs")
            continue
        reach = f"  {sum(v >= args.goal for v in kept)} of {len(kept)}" if args.goal is not None else ""
        span = "{:.3f}-{:.3f}".format(*spans[m, n])
        print(f"{m + ', ' + n:<{w}}  {min(kept):6.3f} {statistics.median(kept):6.3f} {max(kept):7.3f}  {span:>17}{reach}")


if __name__ == "__main__":
    main()
