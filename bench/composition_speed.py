"""Benchmark: all-pairs composition vs TransformerLens and vs the matmul floor of each route.

    python bench/composition_speed.py [--repeats 3] [--shapes small,medium]

On random weights of GPT-2-small shape (12 x 12 heads, d_model 768, d_head 64) and
GPT-2-medium shape (24 x 16, 1024/64) it times, interleaved and repeated (medians, min-max):
TransformerLens's three ``all_composition_scores`` calls (when it is installed and fits);
compscope Q+K+V with (a) frobenius, frobenius_baselined, tight, overlap and (b) all measures
for all pairs; and the floor of each route: a plain dense float32 matmul with the FLOP count
of the products that route must form. It also reports the float32-vs-float64 difference.
Run it on an idle machine: it waits for the 1-minute load average to drop below 0.5.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import compscope
from compscope import HeadWeights, Meta

SHAPES = {"small": (12, 12, 768, 64), "medium": (24, 16, 1024, 64)}


def random_heads(L, H, d, r, seed=0) -> HeadWeights:
    g = torch.Generator().manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g) * 0.02  # noqa: E731
    return HeadWeights(
        W_Q=rn(L, H, r, d), W_K=rn(L, H, r, d), W_V=rn(L, H, r, d), W_O=rn(L, H, d, r),
        b_Q=None, b_K=None, b_V=None, b_O=None, W_E=rn(d, 1000), W_pos=None, W_U=None, b_U=None,
        kv_map=tuple(range(H)), attn_norm=None, final_norm=None, norm_placement="none",
        sliding_window=(None,) * L, meta=Meta("bench", "random", f"random {L}x{H} d{d}", "float32", "float32"),
    )


def wait_idle(limit: float = 0.5, timeout: float = 600) -> float:
    t0 = time.time()
    while os.getloadavg()[0] > limit and time.time() - t0 < timeout:
        time.sleep(5)
    return os.getloadavg()[0]


def matmul_floor(flops: float) -> float:
    """Seconds a dense float32 matmul of ``flops`` FLOPs takes here (measured, 2048² tiles)."""
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t = time.perf_counter()
    reps = 5
    for _ in range(reps):
        a @ b
    rate = 2 * n**3 * reps / (time.perf_counter() - t)
    return flops / rate, rate


def route_flops(L, H, d, r, kinds=3) -> dict:
    """FLOPs of the products each route forms (forward pairs only)."""
    N = L * H
    pairs = H * H * L * (L - 1) / 2
    D2 = d * (d + 1) / 2
    packs = 2 * N * d * d * r * (1 + kinds)  # V diag(w) Vᵀ, two per head: writers once, readers per kind
    gram = packs + kinds * 2 * 2 * pairs * D2  # ‖BA‖² and ‖X‖² products
    x = kinds * 2 * pairs * r * r * d  # every X
    return {"gram": gram, "X": x}


def timed(fn, repeats):
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def fmt(ts):
    return f"{statistics.median(ts):8.3f} s  [{min(ts):.3f}-{max(ts):.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shapes", default="small,medium")
    ap.add_argument("--no-wait", action="store_true")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}")
    if not args.no_wait:
        print(f"load after waiting: {wait_idle():.2f}")
    for shape in args.shapes.split(","):
        L, H, d, r = SHAPES[shape]
        hw = random_heads(L, H, d, r)
        fl = route_flops(L, H, d, r)
        floor_a, rate = matmul_floor(fl["gram"])
        floor_b, _ = matmul_floor(fl["gram"] + fl["X"])
        print(f"\n== GPT-2-{shape} shape: {L} layers x {H} heads, d_model {d}, d_head {r}; matmul {rate / 1e9:.0f} GFLOP/s")
        contenders = {
            "(a) gram measures, f32": lambda: compscope.scores(hw, "QKV", ["frobenius", "frobenius_baselined", "tight", "overlap"], precision="float32", progress=False),
            "(b) all measures, all pairs": lambda: compscope.scores(hw, "QKV", "all", pairs="all", precision="float32", progress=False),
        }
        try:
            import transformer_lens as tl

            cfg = tl.HookedTransformerConfig(n_layers=L, d_model=d, d_head=r, n_heads=H, n_ctx=64, d_vocab=100, act_fn="gelu", seed=0)
            model = tl.HookedTransformer(cfg)
            if shape == "small":
                contenders["TransformerLens Q+K+V"] = lambda: [model.all_composition_scores(k) for k in "QKV"]
        except ImportError:
            pass
        times = {k: [] for k in contenders}
        for _ in range(args.repeats):  # interleaved
            for k, fn in contenders.items():
                times[k] += timed(fn, 1)
        for k, ts in times.items():
            print(f"{k:<30} {fmt(ts)}")
        a = statistics.median(times["(a) gram measures, f32"])
        b = statistics.median(times["(b) all measures, all pairs"])
        print(f"floor (a) {floor_a:.3f} s -> ratio {a / floor_a:.2f}x;  floor (b) {floor_b:.3f} s -> ratio {b / floor_b:.2f}x")
        if "TransformerLens Q+K+V" in times:
            print(f"speed-up of (a) over TransformerLens: {statistics.median(times['TransformerLens Q+K+V']) / a:.1f}x")
        f32 = compscope.scores(hw, "K", ["frobenius", "overlap"], precision="float32", progress=False)
        f64 = compscope.scores(hw, "K", ["frobenius", "overlap"], precision="float64", progress=False)
        for m in ("frobenius", "overlap"):
            diff = (f32.dense(m, "K") - f64.dense(m, "K")).abs().nan_to_num().max()
            print(f"float32 vs float64, {m}: max abs difference {float(diff):.2e}")


if __name__ == "__main__":
    main()
