"""Benchmark: K-composition, measures (a), on the 7B shape (32 layers x 32 heads, d_model 4096,
d_head 128) or the 70B shape (80 layers x 64 query heads, 8 K/V heads, d_model 8192, d_head
128), random weights.

    .venv/bin/python bench/composition_7b.py [--shape 7b|70b] [--dtype bfloat16] [--max-memory-gib 4]
        [--device cuda] [--precision float32|float64|tf32|bfloat16]

The ``HeadWeights`` are built directly (no embedding beyond a 1000-token ``W_E``; ``W_Q, W_K,
W_V, W_O`` in ``--dtype``, bfloat16 by default as in released checkpoints: 4.3 GB at 7B, 22.5
GB at 70B; drawn by ``--device``'s generator).
``compscope.scores(hw, 'K', [frobenius, frobenius_baselined, tight, overlap])`` runs once with
the default precision; reported: wall time, peak resident memory (``ru_maxrss`` and a thread
sampling ``VmRSS`` every 50 ms; the limit is 16 GiB), and the ratio to the floor: the FLOPs
of the products of the Gram route (``bench/composition_speed.py``'s count, K only) over the
rate of a dense float32 ``4096 x 4096`` matmul (``8192`` on CUDA; ``--rate-size`` another) timed
before and after in the same run, best of three each.
Waits (up to ``--wait`` s) for the 1-minute load average to drop below 0.5 first, and prints
the CPU time other processes used while it ran.

``--qk-norm`` gives every head a QK-norm (an RMSNorm per head, one gain per layer, as Gemma 3 and
Qwen3 have) and replaces it by its Jacobian at the isotropic point first
(``compscope.core.processing.linearise_qk_norm``, one layer at a time in float64): its time is
printed, and the peak memory covers it.
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
from composition_speed import check_device, MEASURES_A, matmul_rate, measured, random_heads, route_flops, wait_idle  # noqa: E402

#: name -> (layers, query heads, d_model, d_head, K/V heads)
SHAPES = {"7b": (32, 32, 4096, 128, 32), "70b": (80, 64, 8192, 128, 8)}


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
    ap.add_argument("--precision", default="float32", choices=["float32", "float64", "tf32", "bfloat16"],
                    help="compscope's product precision (default float32)")
    ap.add_argument("--shape", default="7b", help="7b, 70b, or L,H,d,r[,kv] for a quick trial")
    ap.add_argument("--qk-norm", action="store_true",
                    help="give the heads a per-head QK-norm and linearise it at the isotropic point before scoring")
    ap.add_argument("--rate-size", type=int, help="n of the n x n matmul that sets the floor's rate "
                    "(default 4096, 8192 on CUDA; a smaller one for a quick trial)")
    args = ap.parse_args()
    if args.rate_size is not None and args.rate_size < 1:
        ap.error(f"--rate-size {args.rate_size}: give 1 or more")
    check_device(args.device)
    if args.shape in SHAPES:
        L, H, d, r, kv = SHAPES[args.shape]
    else:
        L, H, d, r, *rest = (int(x) for x in args.shape.split(","))
        kv = rest[0] if rest else H
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; load average now {os.getloadavg()[0]:.2f}")
    ok, load = wait_idle(0.5, args.wait)
    print(f"load average before timing: {load:.2f}" + ("" if ok else f"  (NOT IDLE after {args.wait:.0f} s)"))
    sampler = RssSampler()
    sampler.start()
    cuda = torch.device(args.device).type == "cuda"
    t0 = time.perf_counter()
    hw = random_heads(L, H, d, r, dtype=getattr(torch, args.dtype), kv=kv, device=args.device)
    weights = sum(t.numel() * t.element_size() for t in (hw.W_Q, hw.W_K, hw.W_V, hw.W_O))
    name = args.shape.upper() if args.shape in SHAPES else "trial"
    print(f"{name} shape: {L} layers x {H} heads ({kv} K/V heads), d_model {d}, d_head {r}; weights {args.dtype}, "
          f"{weights / 2**30:.1f} GiB (drawn in {time.perf_counter() - t0:.0f} s); {H * H * L * (L - 1) // 2} forward pairs; "
          f"precision {args.precision}; device {torch.cuda.get_device_name(args.device) if cuda else 'cpu'}")
    if args.qk_norm:
        from compscope.core.heads import Norm
        from compscope.core.processing import linearise_qk_norm

        g = torch.Generator().manual_seed(1)
        gains = [Norm("rmsnorm", 1 + 0.1 * torch.randn(L, r, generator=g), None, 1e-6) for _ in range(2)]
        t0 = time.perf_counter()
        hw = linearise_qk_norm(hw.replace(qk_norm=tuple(gains)))
        print(f"linearise_qk_norm (isotropic point): {time.perf_counter() - t0:.1f} s; W_Q, W_K stay {hw.W_Q.dtype}")
    n = args.rate_size or (8192 if cuda else 4096)  # a GPU needs the larger product to reach its rate
    rate0 = max(matmul_rate(n, device=args.device) for _ in range(3))
    mm = None if args.max_memory_gib is None else int(args.max_memory_gib * 2**30)
    if cuda:
        torch.cuda.reset_peak_memory_stats(args.device)
    table, wall, others = measured(lambda: compscope.scores(hw, "K", MEASURES_A, max_memory=mm, device=args.device,
                                                            precision=args.precision))
    rate1 = max(matmul_rate(n, device=args.device) for _ in range(3))
    sampler.running = False
    sampler.join()
    peak = max(sampler.peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    rate = (rate0 + rate1) / 2
    fl = route_flops(L, H, d, r, kinds=1)["gram"]
    floor = fl / rate
    f = table.dense("frobenius", "K")
    print(f"time {wall:.1f} s ({wall / 60:.1f} min); other processes used {others:.2f} cores meanwhile")
    limit = f" (limit 16 GiB: {'met' if peak < 16 * 2**30 else 'NOT met'})" if args.shape == "7b" else " (the weights included)"
    print(f"peak RSS {peak / 2**30:.2f} GiB{limit}; "
          f"max_memory {'default' if mm is None else f'{args.max_memory_gib} GiB'}")
    if cuda:
        print(f"peak GPU memory allocated {torch.cuda.max_memory_allocated(args.device) / 2**30:.2f} GiB "
              f"of {torch.cuda.get_device_properties(args.device).total_memory / 2**30:.0f} GiB")
    print(f"dense float32 {n}^2 matmul {rate0 / 1e9:.0f} GFLOP/s before, {rate1 / 1e9:.0f} after; floor: {fl / 1e12:.2f} TFLOP -> "
          f"{floor:.1f} s; time / floor = {wall / floor:.2f} (the call ran at {floor / wall:.0%} of the float32 matmul rate)")
    print(f"frobenius: {int(torch.isfinite(f).sum())} pairs, mean {float(f.nanmean()):.4f} (1/sqrt(d) = {d**-0.5:.4f}), "
          f"max {float(f.nan_to_num(-1).max()):.4f}")


if __name__ == "__main__":
    main()
