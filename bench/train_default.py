"""Benchmark: train the built-in default model from scratch and check it.

    python bench/train_default.py [--out runs/induction-2l] [--run EXISTING_RUN]

Runs the preset ``induction-2l`` exactly as ``compscope train --out DIR`` does, times it, and
prints: wall time (target: under 10 minutes on a 2-core CPU), the best layer-1 induction score
and layer-0 previous-token score on held-out repeated sequences (targets >= 0.5), the
in-context losses on the first and second copy, the induction-formation step, and whether the
final weights equal the model shipped in the package bit for bit. Then the ranges of
K-composition (identity metric) that the README's figure paragraph quotes: every pair at step
0, and at the last step the previous-token -> induction pairs and the pairs that never compose.
``--run`` reuses a finished run folder instead of training (no training time then).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from compscope.loading.builtin import DEFAULT_MODEL, resolve
from compscope.data.head_labels import label_heads
from compscope.toy import PRESETS, load_toy, repeated_random, train
from compscope.analysis.tracking import track


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="run folder (default: a temporary folder)")
    ap.add_argument("--run", help="a finished run folder to check instead of training")
    args = ap.parse_args()
    p = PRESETS[DEFAULT_MODEL]
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, torch {torch.__version__}, "
          f"{p.train.threads} training thread(s)")
    wall = None
    if args.run:
        out = Path(args.run)
    else:
        out = Path(args.out) if args.out else Path(tempfile.mkdtemp()) / DEFAULT_MODEL
        t0 = time.perf_counter()
        train(p.model, p.data, p.train, out, name=DEFAULT_MODEL)
        wall = time.perf_counter() - t0
    model, _ = load_toy(out / "final")
    labels = label_heads(model, repeated_random(256, 24, model.cfg.d_vocab, seed=2024))  # fresh held-out set
    ind, prev = labels.induction, labels.previous
    tr = track(out, "K", ["frobenius", "tight", "overlap"], ["identity"], progress=False)
    shipped = load_toy(resolve(DEFAULT_MODEL))[0].state_dict()
    same = all(torch.equal(v, shipped[k]) for k, v in model.state_dict().items())
    li, lp = int(ind[1].argmax()), int(prev[0].argmax())
    print(f"training time              {'(reused run, not timed)' if wall is None else f'{wall:.0f} s   (target < 600 s)'}")
    print(f"best induction head        1.{li}  score {float(ind[1, li]):.3f}   (target >= 0.5)")
    print(f"best previous-token head   0.{lp}  score {float(prev[0, lp]):.3f}   (target >= 0.5)")
    print(f"in-context loss            first copy {labels.loss_first:.3f}, second copy {labels.loss_second:.3f} nats")
    print(f"induction forms at step    {tr.formation_step()}")
    print(f"equals the shipped model   {'yes, bit for bit' if same else 'NO'}")
    print(f"run folder                 {out}")
    prev, ind = tr.roles()
    composing = {(l1, h1, l2, h2) for l1, h1 in prev for l2, h2 in ind if l1 < l2}
    never = {(0, h1, 1, h2) for h1 in range(model.cfg.n_heads) for h2 in range(model.cfg.n_heads) if (0, h1) not in prev}
    every = {(0, h1, 1, h2) for h1 in range(model.cfg.n_heads) for h2 in range(model.cfg.n_heads)}
    print("K-composition, identity metric (min-max):")
    for m in ("frobenius", "tight", "overlap"):
        rng = lambda pairs, i: (lambda v: f"{min(v):.2f}-{max(v):.2f}")([tr.series(m, "K", q)[i] for q in pairs])  # noqa: E731
        print(f"  {m:<10} step 0, every pair {rng(every, 0)};  step {tr.steps[-1]}: prev->induction {rng(composing, -1)}, "
              f"never composing {rng(never, -1)}")


if __name__ == "__main__":
    main()
