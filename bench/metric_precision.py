"""Time of the default measures on real models, per metric and precision of the large products.

    .venv/bin/python bench/metric_precision.py [--repeats 3] [--models smollm2,gemma3-270m] [--metrics identity,embed,unembed]

Per model and weight-only metric: ``compscope.scores(hw, 'QKV')`` (the Gram route's default
measures) once to warm up (the metric's Gram is cached then), then ``precision='float32'`` and
``'float64'`` interleaved, ``--repeats`` times each; prints the median and min–max seconds, how
many pairs ``gram_route.refine_small`` recomputed from ``X`` in float32 (of all pairs the Gram
route computed, over the three kinds: the table's ``info['refined']``), and the largest relative difference between the two precisions'
``frobenius``, ``tight`` and ``overlap`` (``frobenius_baselined``, a difference, can be near 0).
"""

from __future__ import annotations

import argparse
import statistics
import time

import compscope
from compscope.core.metrics import get_metric


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", default="smollm2,gemma3-270m", help="built-in names or paths, comma-separated")
    ap.add_argument("--metrics", default="identity,embed,unembed", help="weight-only metrics, comma-separated")
    args = ap.parse_args()
    print(f"{'model':24s} {'metric':9s} {'float32 s':>22s} {'float64 s':>22s} {'refined':>17s} {'max rel diff':>12s}")
    for name in filter(None, args.models.split(",")):
        hw = compscope.load(name)
        for metric in filter(None, args.metrics.split(",")):
            if metric == "unembed" and hw.W_U is None:
                continue
            met = get_metric(metric, hw)
            compscope.scores(hw, "QKV", metric=met, progress=False)  # warm-up
            times = {"float32": [], "float64": []}
            tables = {}
            for _ in range(args.repeats):
                for p in times:
                    t = time.perf_counter()
                    tables[p] = compscope.scores(hw, "QKV", metric=met, precision=p, progress=False)
                    times[p].append(time.perf_counter() - t)
            refined = [sum(c) for c in zip(*tables["float32"].info["refined"].values())]
            lo, hi = tables["float32"], tables["float64"]
            diff = max(float(((lo.values[key] - v).abs() / v.abs()).nan_to_num().max())
                       for key, v in hi.values.items() if key[0] != "frobenius_baselined")  # a difference: near 0
            cell = lambda ts: f"{statistics.median(ts):6.2f} [{min(ts):.2f}–{max(ts):.2f}]"  # noqa: E731
            print(f"{hw.meta.name:24s} {metric:9s} {cell(times['float32']):>22s} {cell(times['float64']):>22s} "
                  f"{refined[0]:7d}/{refined[1]:<9d} {diff:12.1e}", flush=True)


if __name__ == "__main__":
    main()
