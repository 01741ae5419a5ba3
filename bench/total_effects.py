"""Direct path or every path? The K effect of a writer head through the whole model.

``compscope validate`` measures interventional composition on the direct path: ``h1``'s output is
mean-ablated in the residual ``h2`` reads and nowhere else. The label truth of the verdict (every
previous-token head before every induction head) also counts pairs that talk only through heads
and MLPs in between; this script asks how much of the gap between the direct-path ceiling and
the label truth those paths are. ``intervention_effects(..., paths='all')``: for each writer ``h1``
of ``MODEL`` the model runs again with ``h1``'s mean-ablation added to what its layer writes
(every later layer, attention and MLP, sees the change). Every later head ``h2`` then reads its
keys from that run's residual and its queries from the clean one, and the effect is the mean
total-variation distance between its clean and patched patterns (the K effect of the
specification, with the change propagated). One forward pass per writer, on the verdict's
intervention sequences; ``compscope intervene --paths all`` is the same on any model.

Printed: the label-truth AUROC (previous-token >= 0.4 before induction >= 0.3) of the direct-path
K effects saved in the verdict and of the total K effects, each true pair's two effects, and the
spread of the total effects over the other pairs.

    compscope validate smollm2 --out verdict-smollm2
    python bench/total_effects.py smollm2 verdict-smollm2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from compscope.data.intervene import intervention_effects  # noqa: E402
from compscope.data.runner import runner_for  # noqa: E402
from compscope.data.validate import auroc, true_pairs, verdict_sequences  # noqa: E402
from verdict_candidates import read_verdict  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("verdict", help="a folder written by compscope validate --out")
    ap.add_argument("--save", help="write the total K effects here (.pt, a plain tensor)")
    args = ap.parse_args()
    hw, previous, induction, direct = read_verdict(args.model, args.verdict)
    with open(os.path.join(args.verdict, "run.json")) as f:
        run = json.load(f)
    runner = runner_for(args.model, hw)
    tokens = verdict_sequences(runner, run["sequences"], run["half"], run["seed"]).tokens[:run["intervention_sequences"]]
    t0 = time.perf_counter()
    total = intervention_effects(runner, tokens, "K", paths="all").by_kind["K"]
    seconds = time.perf_counter() - t0
    if args.save:
        torch.save(total, args.save)
    truth = true_pairs(previous, induction, run["prev_threshold"], run["induction_threshold"])
    print(f"{hw.meta.name}: {int(truth.sum())} true K-pairs (previous-token >= {run['prev_threshold']}, induction >= "
          f"{run['induction_threshold']}); {tokens.shape[0]} sequences of {tokens.shape[1]} tokens; "
          f"{(hw.n_layers - 1) * hw.n_heads} writers in {seconds:.1f} s, peak resident memory "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"label-truth AUROC of the K effect, direct path (the verdict's): {auroc(direct, truth):.3f}")
    print(f"label-truth AUROC of the K effect, every path:                 {auroc(total, truth):.3f}")
    rows = sorted(((float(total[a, b, c, d]), float(direct[a, b, c, d]), f"{a}.{b}->{c}.{d}")
                   for a, b, c, d in truth.nonzero().tolist()), reverse=True)
    print("\ntrue pair     total K  direct K")
    for t, d, name in rows:
        print(f"{name:<12} {t:8.3f} {d:9.3f}")
    others = total[~truth & ~total.isnan()]
    print(f"\nother pairs: {others.numel()}, total K effect median {float(others.median()):.3f}, "
          f"99th percentile {float(others.quantile(0.99)):.3f}, max {float(others.max()):.3f}")


if __name__ == "__main__":
    main()
