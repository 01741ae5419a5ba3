"""Does the label truth depend on the data its labels come from?

``compscope validate`` labels heads on repeated random token sequences ``[bos] t t``, text no
model was trained on. This script reads a saved verdict back, runs the model once more on natural
text (standard-library docstrings, tokenised with the model's own tokenizer; the residual
statistics' text, seed 12346, never the verdict's sequences; a toy model, which has no tokenizer,
gets held-out repeated sequences instead) and labels every head there:

- previous-token: the mean attention from position ``i`` to ``i − 1`` over ``i ≥ 1``, as on the
  repeats;
- induction: at each position ``i`` whose token occurred before, the attention from ``i`` to the
  tokens that followed its earlier copies (every ``j + 1`` with ``x_j = x_i``, ``j < i − 1``, ``j``
  after the BOS token), summed, averaged over those positions. On ``[t, t]`` the second copy's
  positions give the repeats' induction label (plus any token repeated inside ``t``); on text a
  token has many earlier copies that predict nothing, and the scores run lower.

It prints the rank correlation of the two labellings over all heads and the heads either calls a
previous-token or induction head, then AUROC grids as ``verdict_thresholds.py`` prints them (the
K interventions as the ceiling, every measure under ``identity``, ``embed`` and ``unembed``):
the truth's writers labelled on the text and its readers on the repeats; both on the text (at
lower induction thresholds: see above); and both on the repeats, the verdict's own.

    compscope validate smollm2 --out verdict-smollm2
    python bench/verdict_text_labels.py smollm2 verdict-smollm2
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from compscope.analysis.stats import spearman  # noqa: E402
from compscope.data.head_labels import text_labels  # noqa: E402
from compscope.data.residual_moments import METRIC_SEED, metric_tokens, tokens_data  # noqa: E402
from compscope.data.runner import runner_for  # noqa: E402
from verdict_candidates import read_verdict  # noqa: E402
from verdict_thresholds import print_grid, weight_only  # noqa: E402


def labels_on(runner, tokens: torch.Tensor, batch_size: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """``(previous_token, induction)``, each ``(L, H)`` float64, of every head on ``tokens``
    (``compscope.data.head_labels.text_labels``, as ``validate --text-labels``)."""
    got = text_labels(runner, tokens, batch_size, progress=False)
    return got.previous_token, got.induction


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("verdict", help="a folder written by compscope validate --out")
    ap.add_argument("--sequences", type=int, default=32, help="text sequences to label on (default 32)")
    ap.add_argument("--length", type=int, default=128, help="tokens per sequence (default 128)")
    ap.add_argument("--seed", type=int, default=METRIC_SEED, help=f"which windows of the text (default {METRIC_SEED})")
    ap.add_argument("--prev", type=float, nargs="+", default=[0.3, 0.4, 0.5], help="previous-token thresholds")
    ap.add_argument("--induction", type=float, nargs="+", default=[0.3], help="induction thresholds on the repeats")
    ap.add_argument("--text-induction", type=float, nargs="+", default=[0.1, 0.2, 0.3],
                    help="induction thresholds on the text (default 0.1 0.2 0.3)")
    ap.add_argument("--effect-threshold", type=float, default=0.05)
    ap.add_argument("--list-induction", type=float, default=0.2,
                    help="list the heads with an induction label at least this on either data (default 0.2)")
    args = ap.parse_args()
    hw, previous, induction, effects = read_verdict(args.model, args.verdict)
    runner = runner_for(args.model, progress=False)
    tokens = metric_tokens(runner, args.sequences, args.length, args.seed)
    prev_text, ind_text = (x.to(previous.dtype) for x in labels_on(runner, tokens))
    L, H = previous.shape
    print(f"{hw.meta.name}: labels on {tokens_data(runner, args.sequences, args.length, args.seed)} against those on "
          f"the verdict's repeated random sequences\n")
    print(f"rank correlation over all {L * H} heads (Spearman): previous-token {spearman(previous.flatten(), prev_text.flatten()):.2f}, "
          f"induction {spearman(induction.flatten(), ind_text.flatten()):.2f}")
    p_low, i_low = min(args.prev), args.list_induction
    either = ((previous >= p_low) | (prev_text >= p_low) | (induction >= i_low) | (ind_text >= i_low)).nonzero().tolist()
    print(f"heads either labels previous-token (>= {p_low}) or induction (>= {i_low}), by layer:")
    print(f"{'head':>6} {'previous-token:':>15} {'repeats':>7} {'text':>6}   {'induction:':>10} {'repeats':>7} {'text':>6}")
    for l, h in sorted(either):
        print(f"{l:>4}.{h:<1} {'':>15} {float(previous[l, h]):7.2f} {float(prev_text[l, h]):6.2f}   {'':>10} "
              f"{float(induction[l, h]):7.2f} {float(ind_text[l, h]):6.2f}")
    candidates = weight_only(hw)
    print("\nthe truth with its writers labelled on the text, its readers on the repeats")
    print_grid(prev_text, induction, effects, candidates, args.prev, args.induction, args.effect_threshold)
    print("\nthe truth with both labelled on the text")
    print_grid(prev_text, ind_text, effects, candidates, args.prev, args.text_induction, args.effect_threshold)
    print("\nthe truth with both labelled on the repeats (the verdict's own)")
    print_grid(previous, induction, effects, candidates, args.prev, args.induction, args.effect_threshold)


if __name__ == "__main__":
    main()
