"""The whole verdict on a real model (default SmolLM2-135M): ``compscope.validate`` with its defaults
(64 sequences for the labels, 16 of them for the interventions, every measure of every pair under
identity, embed, activations and covariance), with the wall time and the peak memory of the process.

    python bench/validate_real.py                 # smollm2
    python bench/validate_real.py --model gemma3-270m
    python bench/validate_real.py --model gemma3-270m --with-logits   # the runner as it was before 2026-11-25
    python bench/validate_real.py --writers 16 --full   # interventions on layer 16 only, then the whole verdict
    python bench/validate_real.py --profile 20   # also where the time goes: compscope's 20 largest by cumulative time

``--with-logits``: the transformers model runs as its head model, which also computes the logits
that nothing reads (the runner calls the base model), for the comparison in bench/RESULTS.md.
``--writers``: the verdict with the interventions on those writers only (``validate --writers``);
with ``--full`` the whole verdict runs after it in the same process, and the ratio of the two wall
times is printed (the model is loaded for each, so both include loading it; the first also pays the
imports, so the ratio is if anything understated).
``--profile N``: the verdict runs under ``cProfile`` (slower than without: read the shares, not the
wall time), and compscope's N functions with the largest cumulative time are printed after it.
``validate`` holds every other call, so its cumulative time is the run's; where it is not (seen on
Python 3.12 on a GPU machine, whose cProfile runs on ``sys.monitoring`` and there counted an entry's
cumulative time above the run's total), a line says so: read the ``tottime`` column then.

Prints the time, the peak resident memory, and the verdict as ``compscope validate --top 3``
prints it (the truth, the ceiling and the writer baseline, the best three measure x metric rows by
K AUROC, the head rankings from the weights with each content).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import compscope  # noqa: E402
from compscope.cli.common import writers  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--with-logits", action="store_true", help="run the head model (computing logits), as before")
    ap.add_argument("--writers", help="intervene on these writers only: LAYER.HEAD, LAYER or A-B (as validate reads it)")
    ap.add_argument("--full", action="store_true", help="with --writers: then the whole verdict, and the ratio")
    ap.add_argument("--profile", type=int, metavar="N", help="run under cProfile; print compscope's N largest by cumulative time")
    args = ap.parse_args()
    if args.full and not args.writers:
        ap.error("--full compares with a verdict on --writers; give --writers")
    walls = []
    for chosen in [writers(args.writers) if args.writers else None] + ([None] if args.full else []):
        t0 = time.perf_counter()
        model = args.model
        if args.with_logits:
            from compscope.data.runner import runner_for

            model = runner_for(args.model, progress=False)
            model.body = model.model
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        v = compscope.data.validate.validate(model, progress=False, writers=chosen)
        walls.append(time.perf_counter() - t0)
        if profiler is not None:
            profiler.disable()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
        what = "with its defaults" if chosen is None else f"with --writers {args.writers}"
        print(f"{v.model}: compscope.validate {what}, {torch.get_num_threads()} threads, torch {torch.__version__}")
        print(f"wall time              {walls[-1]:7.1f} s")
        print(f"peak resident memory   {peak:7.0f} MiB" + (" (the process so far)" if len(walls) > 1 else ""))
        print(v.format(top=3))
        print()
        if profiler is not None:
            import pstats

            print(f"under cProfile: compscope's {args.profile} functions with the largest cumulative time")
            stats = pstats.Stats(profiler)
            stats.sort_stats("cumulative").print_stats(r"compscope", args.profile)
            held = max((ct for (f, _, name), (_, _, _, ct, _) in stats.stats.items()
                        if name == "validate" and f.endswith("validate.py")), default=0.0)
            if held < 0.9 * stats.total_tt:
                print(f"cProfile's cumulative times do not add up here: validate holds {held:.1f} s of the "
                      f"run's {stats.total_tt:.1f} s (seen on Python 3.12, whose cProfile runs on sys.monitoring); "
                      "read the tottime column")
    if len(walls) == 2:
        print(f"the whole verdict takes {walls[1] / walls[0]:.1f}x the time of the one on --writers {args.writers}")


if __name__ == "__main__":
    main()
