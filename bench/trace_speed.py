"""What a traced forward pass costs with and without the unembedding.

Every data-based result (labels, interventions, the metrics estimated on data) reads only the
residual stream and the attention outputs, so the runner calls the base model and never computes
logits. This times ``Runner.trace`` (the base model, hooked) against the same trace through the
head model (which also computes the logits, as the runner did before), on the same batch of
token sequences, alternating, best of ``--reps``; and checks that both give the same residuals.

``--changed LAYERS``: also a changed run as every path makes one (``trace(..., add={l: δ},
clean=)``, the layers before ``l`` left out) for a writer in each layer given, with the last layer
run and left out (``last=False``: the readers read residuals only, the last layer's input),
alternating, best of ``--reps``, and whether the residuals are the same.

    python bench/trace_speed.py --model gemma3-270m
    python bench/trace_speed.py --model smollm2 --changed 3,16,27
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
    ap.add_argument("--changed", type=lambda v: [int(x) for x in v.split(",")], default=[], metavar="LAYERS",
                    help="writer layers whose changed run is timed with the last layer run and left out")
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
    if args.changed:
        changed_runs(runner, tokens, args.changed, args.reps)


def changed_runs(runner, tokens, layers: list[int], reps: int) -> None:
    """A changed run for a writer in each of ``layers``: the last layer run, and left out."""
    clean = runner.trace(tokens)
    L = runner.hw.n_layers
    g = torch.Generator().manual_seed(0)
    for l1 in layers:
        if not 0 <= l1 < L - 1:
            raise SystemExit(f"--changed: {l1} is not a writer layer of {runner.hw.meta.name} (0..{L - 2})")
        add = {l1: 0.1 * torch.randn(*tokens.shape, runner.hw.d_model, generator=g)}
        times = {True: [], False: []}
        runs = {}
        for _ in range(reps):
            for last in (True, False):
                t0 = time.perf_counter()
                runs[last] = runner.trace(tokens, add=add, clean=clean, last=last)
                times[last].append(time.perf_counter() - t0)
        same = all(torch.equal(a, b) for a, b in zip(runs[True].resid, runs[False].resid))
        print(f"changed at layer {l1:<3} layers {l1}..{L - 1} run {min(times[True]):7.3f} s, the last left out "
              f"{min(times[False]):7.3f} s ({min(times[True]) / min(times[False]):.2f}x); residuals bitwise the same: {same}")


if __name__ == "__main__":
    main()
