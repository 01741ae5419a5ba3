"""How the previous-token → induction K-pair AUROC depends on the thresholds that define the truth.

``compscope validate`` calls a pair true when its writer's previous-token score is at least 0.4
and its reader's induction score at least 0.3 (the writer in an earlier layer). This script reads
a saved verdict back (nothing runs on data again) and, for a grid of both thresholds, prints the
number of true pairs (and of those the K interventions confirm, effect >= 0.05), the AUROC of the
K interventions themselves (the ceiling of a composition score), and the AUROC of the best
measure × metric among every measure under ``identity``, ``embed`` and ``unembed`` (the
``activations`` metric needs the model run on text: see ``compscope validate``), with
``frobenius`` (identity) and ``overlap`` (embed) beside it. A cell with no true pair prints ``-``.

    compscope validate smollm2 --out verdict-smollm2
    python bench/verdict_thresholds.py smollm2 verdict-smollm2
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from compscope.core.metrics import get_metric  # noqa: E402
from compscope.data.validate import auroc, confirmed_pairs, true_pairs  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402
from verdict_candidates import MEASURES, read_verdict  # noqa: E402


def weight_only(hw) -> dict:
    """``{(measure, metric): (L, H, L, H) K scores}`` of every measure under ``identity``, ``embed``
    and (with an unembedding) ``unembed``: the scores that need no data."""
    out = {}
    for name in ("identity", "embed") + (("unembed",) if hw.W_U is not None else ()):
        table = scores(hw, "K", list(MEASURES), get_metric(name, hw), pairs="all", progress=False)
        for m in MEASURES:
            out[m, name] = table.dense(m, "K")
    return out


def print_grid(previous, induction, effects, candidates: dict, prevs, inductions, effect_threshold: float) -> None:
    """One row per (previous-token, induction) threshold: the true pairs, the confirmed ones, the
    K interventions' AUROC, the best of ``candidates`` and two fixed ones (dashes with no true pair)."""
    print(f"{'prev >=':>7} {'ind >=':>6} {'true':>5} {'conf.':>5} {'ceiling':>8}  {'best measure x metric':<28} "
          f"{'AUROC':>6} {'frob. id':>8} {'overlap emb':>11}")
    for p in prevs:
        for i in inductions:
            truth = true_pairs(previous, induction, p, i)
            n = int(truth.sum())
            if n == 0:
                print(f"{p:7.2f} {i:6.2f} {0:5d} {'-':>5} {'-':>8}  {'-':<28} {'-':>6} {'-':>8} {'-':>11}")
                continue
            confirmed = int(confirmed_pairs(truth, effects, effect_threshold).sum())
            got = {k: auroc(x, truth) for k, x in candidates.items()}
            (m, met), best = max(got.items(), key=lambda kv: kv[1])
            print(f"{p:7.2f} {i:6.2f} {n:5d} {confirmed:5d} {auroc(effects, truth):8.3f}  {m + ', ' + met:<28} {best:6.3f} "
                  f"{got['frobenius', 'identity']:8.3f} {got['overlap', 'embed']:11.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("verdict", help="a folder written by compscope validate --out")
    ap.add_argument("--prev", type=float, nargs="+", default=[0.3, 0.4, 0.5, 0.6], help="previous-token thresholds")
    ap.add_argument("--induction", type=float, nargs="+", default=[0.2, 0.3, 0.4, 0.5], help="induction thresholds")
    ap.add_argument("--effect-threshold", type=float, default=0.05)
    args = ap.parse_args()
    hw, previous, induction, effects = read_verdict(args.model, args.verdict)
    candidates = weight_only(hw)
    print(f"{hw.meta.name}: AUROC of the true previous-token -> induction K-pairs, by the thresholds that define them "
          f"(confirmed: K effect >= {args.effect_threshold})\n")
    print_grid(previous, induction, effects, candidates, args.prev, args.induction, args.effect_threshold)


if __name__ == "__main__":
    main()
