"""Product precisions against float64 on the same weights: error and time.

    .venv/bin/python bench/product_precision.py [--shape small|7b|L,H,d,r[,kv]] [--device cuda] [--kinds K]

Random weights (``composition_speed.random_heads``, float32) of GPT-2-small shape by default, or
the 7B shape. ``compscope.scores`` of ``frobenius, frobenius_baselined, tight, overlap,
shared_dims`` for ``--kinds`` with each ``precision`` (``float64``, the reference;
``float32``, the default; the opt-in ``tf32`` and ``bfloat16``), each timed once after a
warm-up call on a small model (so CUDA start-up is not counted). Prints per precision and
measure the largest absolute difference from float64, the largest relative one, and the
99th percentile of the relative one (the ⌈0.99 n⌉-th smallest), over all forward pairs; and the dense ``n x n`` matmul
rate of float32, TF32 and bfloat16 on the device, for scale.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import compscope  # noqa: E402
from composition_7b import SHAPES as LARGE  # noqa: E402
from composition_speed import check_device, SHAPES, matmul_rate, random_heads  # noqa: E402

MEASURES = ["frobenius", "frobenius_baselined", "tight", "overlap", "shared_dims"]
PRECISIONS = ["float64", "float32", "tf32", "bfloat16"]


def shape_of(text: str) -> tuple[int, int, int, int, int]:
    if text in SHAPES:
        L, H, d, r = SHAPES[text][1]
        return L, H, d, r, H
    if text in LARGE:
        return LARGE[text]
    L, H, d, r, *kv = (int(x) for x in text.split(","))
    return L, H, d, r, kv[0] if kv else H


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="small")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--kinds", default="K")
    args = ap.parse_args()
    check_device(args.device)
    L, H, d, r, kv = shape_of(args.shape)
    dev = args.device
    cuda = torch.device(dev).type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    print(f"torch {torch.__version__}; device {torch.cuda.get_device_name(dev) if cuda else 'cpu'}; "
          f"shape {L} layers x {H} heads ({kv} K/V), d_model {d}, d_head {r}; kinds {args.kinds}")
    n = 8192 if cuda else 512  # a CPU without bfloat16 units takes a minute over one 2048² bfloat16 product
    print("dense matmul rate: " + ", ".join(f"{k} {matmul_rate(n, dev, k) / 1e12:.1f} TFLOP/s" for k in ("float32", "tf32", "bfloat16")))
    small = random_heads(2, 4, 128, 32, seed=1)
    hw = random_heads(L, H, d, r, kv=kv, device=dev)
    tables, times = {}, {}
    for p in PRECISIONS:
        compscope.scores(small, args.kinds, MEASURES, precision=p, device=dev, progress=False)  # warm-up
        sync()
        t = time.perf_counter()
        tables[p] = compscope.scores(hw, args.kinds, MEASURES, precision=p, device=dev, progress=False)
        sync()
        times[p] = time.perf_counter() - t
    ref = tables["float64"]
    print(f"\n{'precision':>9} {'time s':>7}  {'measure':>19} {'max |diff|':>10} {'max rel':>9} {'p99 rel':>9}")
    for p in PRECISIONS:
        for i, m in enumerate(MEASURES):
            diff, rel = [], []
            for k in args.kinds:
                x, y = tables[p].dense(m, k), ref.dense(m, k)
                keep = torch.isfinite(y)
                diff.append((x - y)[keep].abs())
                rel.append(((x - y).abs() / y.abs())[keep & (y != 0)])
            dd, rr = torch.cat(diff), torch.cat(rel)
            t = f"{times[p]:7.2f}" if i == 0 else " " * 7
            print(f"{p if i == 0 else '':>9} {t}  {m:>19} {float(dd.max()):10.1e} {float(rr.max()):9.1e} "
                  f"{float(rr.kthvalue(max(1, math.ceil(0.99 * rr.numel()))).values):9.1e}")


if __name__ == "__main__":
    main()
