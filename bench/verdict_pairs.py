"""Which true previous-token → induction K-pairs a measure × metric ranks low, and whether the
model's own direct path ranks them low too: the verdict's AUROC taken apart by writer and by reader.

The AUROC is the mean, over the true pairs, of the fraction of false pairs that score below
each (ties ½). Averaged over one writer's true pairs only, that fraction says how well *its*
pairs stand out; the weighted mean of the rows (weights: their pair counts) is the whole AUROC.
For each previous-token writer (and each induction reader) this prints that fraction by the
measure and by the K intervention (the ceiling's own share), beside the same fraction for the
head's other pairs (with readers that are not induction heads; writers that are not
previous-token heads): a row whose true and other pairs stand alike is a head the measure sees
nothing special in.

    compscope validate smollm2 --out verdict-smollm2
    python bench/verdict_pairs.py smollm2 verdict-smollm2 --measure overlap --metric embed
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from verdict_candidates import read_verdict  # noqa: E402

from compscope.core.metrics import METRICS, ON_DATA, get_metric  # noqa: E402
from compscope.data.validate import auroc, true_pairs  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402
from compscope.measures import MEASURES  # noqa: E402


def beaten(x: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """``(L, H, L, H)`` float64: for each finite pair of ``x``, the fraction of the false pairs
    (finite, not in ``truth``) that score below it, ties counted ½; NaN elsewhere."""
    x = x.double()
    fin = torch.isfinite(x)
    neg = x[fin & ~truth].sort().values
    if len(neg) == 0:
        return torch.full_like(x, float("nan"))
    v = x[fin]
    below = torch.searchsorted(neg, v, right=False)
    upto = torch.searchsorted(neg, v, right=True)
    out = torch.full_like(x, float("nan"))
    out[fin] = (below + 0.5 * (upto - below)).double() / len(neg)
    return out


def by_head(frac: torch.Tensor, truth: torch.Tensor, heads: torch.Tensor, side: str) -> list[tuple]:
    """``(head, n true, mean of frac over its true pairs, mean over its other pairs)`` for each
    head in ``heads: (L, H)`` bool, as writer (``side='writer'``) or as reader."""
    rows = []
    for layer, h in heads.nonzero().tolist():
        f, t = (frac[layer, h], truth[layer, h]) if side == "writer" else (frac[:, :, layer, h], truth[:, :, layer, h])
        other = ~t & torch.isfinite(f)
        rows.append((f"{layer}.{h}", int(t.sum()), _mean(f[t]), _mean(f[other])))
    return rows


def _f(v: float) -> str:
    return "-" if v != v else f"{v:.3f}"


def _mean(x: torch.Tensor) -> float:
    x = x[torch.isfinite(x)]
    return float(x.mean()) if len(x) else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("verdict", help="a folder written by compscope validate --out")
    ap.add_argument("--measure", default="overlap", choices=list(MEASURES))
    ap.add_argument("--metric", default="embed", choices=list(METRICS))
    ap.add_argument("--prev-threshold", type=float, default=0.4)
    ap.add_argument("--induction-threshold", type=float, default=0.3)
    args = ap.parse_args()
    hw, previous, induction, effects = read_verdict(args.model, args.verdict)
    truth = true_pairs(previous, induction, args.prev_threshold, args.induction_threshold)
    if args.metric in ON_DATA:
        from compscope.data.runner import runner_for

        met = get_metric(args.metric, hw, model=runner_for(args.model, hw, progress=False))
    else:
        met = get_metric(args.metric, hw)
    x = scores(hw, "K", [args.measure], met, pairs="all", progress=False).dense(args.measure, "K")
    x = torch.where(torch.isfinite(effects), x.double(), torch.nan)  # the pairs the verdict intervened on
    n_false = int((torch.isfinite(x) & ~truth).sum())
    print(f"{hw.meta.name}: {args.measure} ({args.metric}), K-composition; {int(truth.sum())} true pairs "
          f"(previous-token >= {args.prev_threshold}, induction >= {args.induction_threshold}) against "
          f"{n_false} false; AUROC {auroc(x, truth):.3f}, the K interventions' {auroc(effects, truth):.3f}")
    fx, fe = beaten(x, truth), beaten(effects, truth)
    print("share of the false pairs that each head's true pairs score above (their AUROC), and its other pairs "
          "(-: none)")
    for side, heads in (("writer", previous >= args.prev_threshold), ("reader", induction >= args.induction_threshold)):
        label = "previous" if side == "writer" else "induction"
        print(f"\n{side:<7} {label:>9} {'true':>5}  {'measure: true':>13} {'other':>6}  {'K effect: true':>14} {'other':>6}")
        score = previous if side == "writer" else induction
        for (head, n, mt, mo), (_, _, et, eo) in zip(by_head(fx, truth, heads, side), by_head(fe, truth, heads, side)):
            layer, h = map(int, head.split("."))
            print(f"{head:<7} {float(score[layer, h]):9.2f} {n:5d}  {_f(mt):>13} {_f(mo):>6}  {_f(et):>14} {_f(eo):>6}")


if __name__ == "__main__":
    main()
