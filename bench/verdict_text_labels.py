"""Does the label truth depend on the data its previous-token labels come from?

``compscope validate`` labels heads on repeated random token sequences ``[bos] t t``, text no
model was trained on. This script reads a saved verdict back, runs the model once more on natural
text (standard-library docstrings, tokenised with the model's own tokenizer; the residual
statistics' text, seed 12346, never the verdict's sequences; a toy model, which has no tokenizer,
gets held-out repeated sequences instead) and labels every head's previous-token score there: the
mean attention from position ``i`` to ``i − 1`` over ``i ≥ 1``, as on the repeats. It prints the
rank correlation of the two labellings over all heads and the heads either calls previous-token
heads, then the AUROC grid of ``verdict_thresholds.py`` with the truth's writers labelled on the
text (its readers stay those of the repeats: an induction score needs repeated tokens), the K
interventions as the ceiling and every measure under ``identity``, ``embed`` and ``unembed``.

    compscope validate smollm2 --out verdict-smollm2
    python bench/verdict_text_labels.py smollm2 verdict-smollm2
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from compscope.analysis.stats import spearman  # noqa: E402
from compscope.data.head_labels import previous_token_scores  # noqa: E402
from compscope.data.residual_moments import METRIC_SEED, metric_tokens, tokens_data  # noqa: E402
from compscope.data.runner import layer_state, runner_for  # noqa: E402
from verdict_candidates import read_verdict  # noqa: E402
from verdict_thresholds import print_grid, weight_only  # noqa: E402


@torch.no_grad()
def previous_on(runner, tokens: torch.Tensor, batch_size: int = 8) -> torch.Tensor:
    """``(L, H)`` float64: every head's mean attention from ``i`` to ``i − 1`` on ``tokens``."""
    hw = runner.weights_here()
    total, n = 0.0, 0
    for b0 in range(0, tokens.shape[0], batch_size):
        tok = tokens[b0 : b0 + batch_size]
        tr = runner.trace(tok)
        total = total + previous_token_scores([layer_state(hw, l, tr.resid[l]).pattern for l in range(hw.n_layers)]).cpu() * tok.shape[0]
        n += tok.shape[0]
    return total / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("verdict", help="a folder written by compscope validate --out")
    ap.add_argument("--sequences", type=int, default=32, help="text sequences to label on (default 32)")
    ap.add_argument("--length", type=int, default=128, help="tokens per sequence (default 128)")
    ap.add_argument("--seed", type=int, default=METRIC_SEED, help=f"which windows of the text (default {METRIC_SEED})")
    ap.add_argument("--prev", type=float, nargs="+", default=[0.3, 0.4, 0.5], help="previous-token thresholds")
    ap.add_argument("--induction", type=float, nargs="+", default=[0.3], help="induction thresholds")
    ap.add_argument("--effect-threshold", type=float, default=0.05)
    args = ap.parse_args()
    hw, previous, induction, effects = read_verdict(args.model, args.verdict)
    runner = runner_for(args.model, progress=False)
    tokens = metric_tokens(runner, args.sequences, args.length, args.seed)
    on_text = previous_on(runner, tokens).to(previous.dtype)
    L, H = previous.shape
    print(f"{hw.meta.name}: previous-token labels on {tokens_data(runner, args.sequences, args.length, args.seed)} "
          f"against those on the verdict's repeated random sequences\n")
    print(f"rank correlation over all {L * H} heads (Spearman): {spearman(previous.flatten(), on_text.flatten()):.2f}")
    low = min(args.prev)
    either = ((previous >= low) | (on_text >= low)).nonzero().tolist()
    print(f"heads either labels previous-token (>= {low}), sorted by the repeats' score:")
    print(f"{'head':>6} {'repeats':>8} {'text':>6}")
    for l, h in sorted(either, key=lambda lh: -float(previous[lh[0], lh[1]])):
        print(f"{l:>4}.{h:<1} {float(previous[l, h]):8.2f} {float(on_text[l, h]):6.2f}")
    print("\nthe truth with its writers labelled on the text (readers: the repeats' induction scores)")
    print_grid(on_text, induction, effects, weight_only(hw), args.prev, args.induction, args.effect_threshold)
    print("\nthe same with both labelled on the repeats (the verdict's own)")
    print_grid(previous, induction, effects, weight_only(hw), args.prev, args.induction, args.effect_threshold)


if __name__ == "__main__":
    main()
