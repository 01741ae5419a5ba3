"""What a traced forward pass costs with and without the unembedding.

Every data-based result (labels, interventions, the metrics estimated on data) reads only the
residual stream and the attention outputs, so the runner calls the base model and never computes
logits. This times ``Runner.trace`` (the base model, hooked) against the same trace through the
head model (which also computes the logits, as the runner did before), on the same batch of
token sequences, alternating, best of ``--reps``; and checks that both give the same residuals.

    python bench/trace_speed.py --model gemma3-270m
    python bench/trace_speed.py --model smollm2
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from compscope.data.runner import HFRunner, runner_for  # noqa: E402
from compscope.data.validate import verdict_sequences  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--sequences", type=int, default=16)
    ap.add_argument("--half", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    runner = runner_for(args.model)
    if not isinstance(runner, HFRunner):
        raise SystemExit(f"{args.model}: not a transformers model; nothing to compare")
    tokens = verdict_sequences(runner, args.sequences, args.half, 12345).tokens
    base = runner.body
    times = {"base model (the runner)": [], "head model (with logits)": []}
    traces = {}
    runner.trace(tokens)  # warm up, and the agreement check
    for _ in range(args.reps):
        for name, body in (("base model (the runner)", base), ("head model (with logits)", runner.model)):
            runner.body = body
            t0 = time.perf_counter()
            traces[name] = runner.trace(tokens)
            times[name].append(time.perf_counter() - t0)
    runner.body = base
    a, b = traces.values()
    same = all(torch.equal(x, y) for x, y in zip(a.resid + a.attn_out, b.resid + b.attn_out))
    print(f"{runner.hw.meta.name}: {tokens.shape[0]} sequences of {tokens.shape[1]} tokens, vocabulary "
          f"{runner.hw.n_vocab}, {torch.get_num_threads()} threads; best of {args.reps}")
    best = {k: min(v) for k, v in times.items()}
    for name, t in best.items():
        print(f"{name:<26} {t:7.3f} s")
    print(f"ratio (head / base)        {best['head model (with logits)'] / best['base model (the runner)']:7.2f}x; "
          f"residuals and attention outputs bitwise the same: {same}")


if __name__ == "__main__":
    main()
