"""The gauge check on real models: ``compscope.gauge_check`` with its defaults (every change, Q, K
and V, the default measures under identity and embed, float64) against the reference, one scoring
of the weights as loaded with the same options (what the check does before any change), timed in
the same run. Each model runs in its own process, so that its peak memory is its own.

    python bench/gauge_real.py                              # smollm2 and gemma3-270m
    python bench/gauge_real.py --models smollm2

Per model: the time of the reference and of the check, their ratio, the number of scorings the
check makes (one per change and metric, plus one per metric for each kind of base weights: as
loaded, folded), the check's time per scoring against the reference's, and the peak resident
memory after loading, after the reference and after the check. Both start cold: the vocabulary
products and the engine's buffers the reference kept are dropped before the check.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import compscope  # noqa: E402
from compscope.analysis import gauge as G  # noqa: E402
from compscope.core import vocab  # noqa: E402
from compscope.engine import workspace  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402
from compscope.measures import DEFAULT  # noqa: E402

METRICS = ("identity", "embed")


def _peak() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB -> MiB


def one(name: str) -> None:
    t = time.perf_counter()
    hw = compscope.load(name)
    t_load, p_load = time.perf_counter() - t, _peak()
    print(f"{hw.meta.name}: {hw.n_layers} layers x {hw.n_heads} heads, d_model {hw.d_model}, vocabulary "
          f"{hw.n_vocab}; {torch.get_num_threads()} threads, torch {torch.__version__}")
    t = time.perf_counter()
    for metric in METRICS:
        scores(hw, "QKV", DEFAULT, metric, pairs="all", precision="float64", ridge=0.0, progress=False)
    t_ref, p_ref = time.perf_counter() - t, _peak()
    vocab._KEPT.clear()  # the check starts as cold as the reference: no kept vocabulary product, no kept buffers
    workspace.release()
    t = time.perf_counter()
    rows, notes = G.gauge_check(hw, progress=False)
    t_check, p_check = time.perf_counter() - t, _peak()
    changes = list(dict.fromkeys((r.change, r.weights) for r in rows))
    n = len(changes) * len(METRICS) + len({w for _, w in changes}) * len(METRICS)
    per = t_check / (n / len(METRICS))
    print(f"  load                                   {t_load:7.1f} s")
    print(f"  reference: one scoring, {len(METRICS)} metrics        {t_ref:7.1f} s")
    print(f"  gauge_check: {len(changes)} changes ({', '.join(c for c, _ in changes)}), {n} scorings "
          f"{t_check:7.1f} s   ratio {t_check / t_ref:.1f}x; per scoring of {len(METRICS)} metrics "
          f"{per:.1f} s ({per / t_ref:.2f}x the reference)")
    print(f"  peak resident memory: after load {p_load:.0f} MiB, after the reference {p_ref:.0f} MiB, "
          f"after the check {p_check:.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["smollm2", "gemma3-270m"])
    ap.add_argument("--one", help=argparse.SUPPRESS)  # run one model in this process
    args = ap.parse_args()
    if args.one:
        one(args.one)
        return
    for m in args.models:
        sys.stdout.flush()
        subprocess.run([sys.executable, __file__, "--one", m], check=True)


if __name__ == "__main__":
    main()
