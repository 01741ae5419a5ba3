"""Benchmark: K-composition, measures (a), on the 7B shape (32 layers x 32 heads, d_model 4096,
d_head 128), random weights.

    .venv/bin/python bench/composition_7b.py [--dtype bfloat16] [--max-memory-gib 4]

The ``HeadWeights`` are built directly (no embedding beyond a 1000-token ``W_E``; ``W_Q, W_K,
W_V, W_O`` in ``--dtype``, bfloat16 by default as in released 7B checkpoints: 4.3 GB).
``compscope.scores(hw, 'K', [frobenius, frobenius_baselined, tight, overlap])`` runs once with
the default precision; reported: wall time, peak resident memory (``ru_maxrss`` and a thread
sampling ``VmRSS`` every 50 ms; the limit is 16 GiB), and the ratio to the floor: the FLOPs
of the products of the Gram route (``bench/composition_speed.py``'s count, K only) over the
rate of a dense float32 ``4096 x 4096`` matmul timed before and after in the same run.
Waits (up to ``--wait`` s) for the 1-minute load average to drop below 0.5 first, and prints
the CPU time other processes used while it ran.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import compscope  # noqa: E402
from composition_speed import MEASURES_A, matmul_rate, measured, random_heads, route_flops, wait_idle  # noqa: E402

SHAPE = (32, 32, 4096, 128)


class RssSampler(threading.Thread):
    """Highest ``VmRSS`` of this process, sampled every ``interval`` seconds."""

    def __init__(self, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.interval, self.peak, self.running = interval, 0, True

    def run(self) -> None:
        while self.running:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        self.peak = max(self.peak, int(line.split()[1]) * 1024)
            time.sleep(self.interval)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--max-memory-gib", type=float, default=None, help="compscope's max_memory (default: its own)")
    ap.add_argument("--wait", type=float, default=900)
    ap.add_argument("--device", default="cpu", help="compscope's device and the floor's matmul (default cpu)")
    ap.add_argument("--shape", default=",".join(map(str, SHAPE)), help=argparse.SUPPRESS)  # for a quick trial
    args = ap.parse_args()
    L, H, d, r = (int(x) for x in args.shape.split(","))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; load average now {os.getloadavg()[0]:.2f}")
    ok, load = wait_idle(0.5, args.wait)
    print(f"load average before timing: {load:.2f}" + ("" if ok else f"  (NOT IDLE after {args.wait:.0f} s)"))
    sampler = RssSampler()
    sampler.start()
    hw = random_heads(L, H, d, r, dtype=getattr(torch, args.dtype))
    weights = sum(t.numel() * t.element_size() for t in (hw.W_Q, hw.W_K, hw.W_V, hw.W_O))
    print(f"{'7B' if (L, H, d, r) == SHAPE else 'trial'} shape: {L} layers x {H} heads, d_model {d}, d_head {r}; weights {args.dtype}, {weights / 2**30:.1f} GiB; "
          f"{H * H * L * (L - 1) // 2} forward pairs")
    rate0 = max(matmul_rate(device=args.device) for _ in range(3))
    mm = None if args.max_memory_gib is None else int(args.max_memory_gib * 2**30)
    table, wall, others = measured(lambda: compscope.scores(hw, "K", MEASURES_A, max_memory=mm, device=args.device))
    rate1 = max(matmul_rate(device=args.device) for _ in range(3))
    sampler.running = False
    sampler.join()
    peak = max(sampler.peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    rate = (rate0 + rate1) / 2
    fl = route_flops(L, H, d, r, kinds=1)["gram"]
    floor = fl / rate
    f = table.dense("frobenius", "K")
    print(f"time {wall:.1f} s ({wall / 60:.1f} min); other processes used {others:.2f} cores meanwhile")
    print(f"peak RSS {peak / 2**30:.2f} GiB (limit 16 GiB: {'met' if peak < 16 * 2**30 else 'NOT met'}); "
          f"max_memory {'default' if mm is None else f'{args.max_memory_gib} GiB'}")
    if torch.device(args.device).type == "cuda":
        print(f"peak GPU memory allocated {torch.cuda.max_memory_allocated(args.device) / 2**30:.2f} GiB")
    print(f"dense float32 matmul {rate0 / 1e9:.0f} GFLOP/s before, {rate1 / 1e9:.0f} after; floor: {fl / 1e12:.2f} TFLOP -> "
          f"{floor:.1f} s; time / floor = {wall / floor:.2f}")
    print(f"frobenius: {int(torch.isfinite(f).sum())} pairs, mean {float(f.nanmean()):.4f} (1/sqrt(d) = {d**-0.5:.4f}), "
          f"max {float(f.nan_to_num(-1).max()):.4f}")


if __name__ == "__main__":
    main()
