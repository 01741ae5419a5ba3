"""The data side with the model in 16 bits (``--model-dtype``) against float32: how far every
head's activation labels and every pair's interventional effect move, relative to their largest
value, with the time and peak memory of each run (default SmolLM2-135M from its GGUF file).

    python bench/model_dtype.py                                  # smollm2: bfloat16 and float16 against float32
    python bench/model_dtype.py --model PATH --dtypes bfloat16 --kinds K --sequences 4

The model is read once per dtype; compscope's recomputation stays float32 in every run.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from compscope.data.head_labels import activation_labels  # noqa: E402
from compscope.data.intervene import intervention_effects  # noqa: E402
from compscope.data.runner import RUN_DTYPES, runner_for  # noqa: E402
from compscope.data.sequences import repeats  # noqa: E402
from composition_speed import check_device  # noqa: E402


def run(model: str, dtype: str, args) -> tuple[dict, float]:
    """Every label and every kind's effects of ``model`` run in ``dtype``, and the seconds taken."""
    t0 = time.perf_counter()
    runner = runner_for(model, progress=False, device=args.device, dtype=dtype)
    reps = repeats(args.sequences, args.half, runner.hw.n_vocab, args.seed, runner.bos)
    labels = activation_labels(runner, reps, progress=False)
    fx = intervention_effects(runner, reps.tokens, args.kinds, progress=False)
    out = {**{f"label {k}": v for k, v in labels.mean.items()}, **{f"effect {k}": v for k, v in fx.by_kind.items()}}
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"], choices=[d for d in RUN_DTYPES if d != "float32"])
    ap.add_argument("--kinds", default="QKV")
    ap.add_argument("--sequences", type=int, default=8)
    ap.add_argument("--half", type=int, default=32)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    check_device(args.device)
    ref, secs = run(args.model, "float32", args)
    print(f"{args.model}: {args.sequences} repeated random sequences, |t| = {args.half}, kinds {args.kinds}, "
          f"device {args.device}, torch {torch.__version__}")
    print(f"float32    {secs:6.1f} s   (reference)")
    for dtype in args.dtypes:
        got, secs = run(args.model, dtype, args)
        rel = {}
        for key, a in ref.items():
            scale = float(a.nan_to_num().abs().max())
            rel[key] = float((got[key] - a).nan_to_num().abs().max()) / max(scale, 1e-30)
        print(f"{dtype:<10} {secs:6.1f} s   largest change / largest value: "
              + "  ".join(f"{k} {v:.2%}" for k, v in rel.items()))
    print(f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB (all runs)")


if __name__ == "__main__":
    main()
