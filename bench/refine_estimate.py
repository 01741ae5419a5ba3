"""How far float32 Gram-route values are off, against the estimate that decides which get refined.

    .venv/bin/python bench/refine_estimate.py                     # real models and random heads (~15 min)
    .venv/bin/python bench/refine_estimate.py --models "" --random 768   # one random shape (seconds)

For every pair the float32 Gram route computes, before :func:`refine_small` repairs it: the
float32 value ``v`` (``‖BA‖_F²`` and ``‖X‖_F²``), the exact value ``x`` for the same float32
bases (float64 ``X = V_Bᵀ U_A``, pair by pair), and two scales of its error: the engine's
``c = ⟨diag P, diag Q⟩`` (:func:`compscope.engine.gram_route.cancellation_scale`) and the
Frobenius product ``‖P‖_F ‖Q‖_F`` (the rule before it). Prints, per model × metric:

* ``max err/εc√K``: the largest ``|v − x| / (ε₃₂ c √K)`` over all pairs, and over the pairs
  whose relative error ``|v − x| / x`` exceeds 1e-5 (the ones near the 1e-4 tolerance), where
  ``K = block · width`` is the number of terms one tile product sums;
* how many pairs each rule flags (``margin · ε₃₂ · scale > 1e-4 · v``: the engine's,
  ``SAFETY · √K`` on ``c``; the rule before it, 4 on the Frobenius product), how many are
  truly off by more than 1e-4, and how many of those the engine's rule misses;
* after the repair, the largest relative difference of ``frobenius`` and ``overlap`` between
  ``precision='float32'`` and ``'float64'`` (end to end).

``bench/metric_precision.py`` times the two precisions.

Random heads: ``L = 4`` layers of ``H = 8`` heads, ``d_head = 64`` (128 from ``d = 2048``),
each factor's columns scaled by ``exp(-k / τ)`` (``τ = 2``: a few directions dominate, as
under the ``embed`` metric; ``flat``: none), writers in one half and readers in the other half
of a randomly rotated residual stream plus noise ``1e-3`` (near-zero scores: cancellation).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import compscope  # noqa: E402
import compscope.engine.composition as engine  # noqa: E402
from compscope.core.metrics import get_metric  # noqa: E402
from compscope.engine.gram_route import SAFETY, cancellation_scale  # noqa: E402
from composition_speed import random_heads  # noqa: E402

EPS, TOL = torch.finfo(torch.float32).eps, 1e-4


def record(into: list):
    """A stand-in for the engine's ``refine_small`` that first records, per pair, the value,
    the exact value and both scales, then repairs as the engine does."""
    real = engine.refine_small

    def wrapped(W, R_rows, R_spectrum, values, groups, budget, terms, **kw):
        root = math.sqrt(terms)
        Wr, a = W.rows.flatten(0, 1).cpu().double(), W.spectrum.flatten(0, 1).cpu().double()
        R, b = R_rows.cpu().double(), R_spectrum.cpu().double()
        rank_a = W.rank.flatten().cpu().double()
        rank_b = (R_spectrum > 0).sum(-1).cpu().double()  # rows beyond the rank have spectrum 0
        for name in values:
            c = cancellation_scale(W, R_rows, R_spectrum, name).cpu()
            if name == "ba2":
                fro = torch.outer(b.square().norm(dim=-1), a.square().norm(dim=-1))
            else:
                fro = torch.outer(rank_b, rank_a).sqrt()
            for r0, r1, nc in groups:
                for i in range(r0, r1):
                    X = torch.einsum("kd,wjd->wkj", R[i], Wr[:nc])  # (writer, r_B, r_A), float64
                    if name == "ba2":
                        X = X * b[i][None, :, None] * a[:nc, None, :]
                    exact = X.square().sum((1, 2))
                    v = values[name][i, :nc].cpu().double()
                    into.append(torch.stack([v, exact, c[i, :nc] * root, fro[i, :nc]], 1))
        return real(W, R_rows, R_spectrum, values, groups, budget, terms, **kw)

    return wrapped


def random_case(d: int, tau: float | None, seed: int = 0) -> compscope.HeadWeights:
    """Random heads as the module docstring says (``tau`` None: flat spectra)."""
    L, H, r = 4, 8, 64 if d < 2048 else 128
    hw = random_heads(L, H, d, r, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    decay = torch.ones(r, dtype=torch.float64) if tau is None else torch.exp(-torch.arange(r, dtype=torch.float64) / tau)
    half = (torch.arange(d) < d // 2).double()
    T = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
    noise = lambda t: 0.02 * 1e-3 * torch.randn(t.shape, generator=g, dtype=torch.float64)  # noqa: E731
    W_O = T @ ((hw.W_O.double() * decay) * half[:, None] + noise(hw.W_O))
    reads = {n: ((getattr(hw, n).double() * decay[:, None]) * (1 - half) + noise(getattr(hw, n))) @ T.T
             for n in ("W_Q", "W_K", "W_V")}
    return hw.replace(W_O=W_O.float(), **{n: t.float() for n, t in reads.items()})


def one(label: str, hw, metric) -> None:
    rows: list = []
    engine.refine_small, real = record(rows), engine.refine_small
    try:
        lo = compscope.scores(hw, "QKV", ["frobenius", "overlap"], metric=metric, precision="float32", progress=False)
    finally:
        engine.refine_small = real
    hi = compscope.scores(hw, "QKV", ["frobenius", "overlap"], metric=metric, precision="float64", progress=False)
    v, x, c, fro = torch.cat(rows).unbind(1)  # c: the scale times √K
    keep = x > 0
    v, x, c, fro = v[keep], x[keep], c[keep], fro[keep]
    err = (v - x).abs()
    near = err / x > 1e-5
    off = err / x > TOL
    new = SAFETY * EPS * c > TOL * v
    old = 4 * EPS * fro > TOL * v
    ratio = err / (SAFETY * EPS * c)
    after = max(float(((lo.dense(m, k) - hi.dense(m, k)).abs() / hi.dense(m, k).abs()).nan_to_num().max())
                for m in ("frobenius", "overlap") for k in "QKV")
    n = len(v)
    print(f"{label:34s} {n:7d} {float(ratio.max()):7.3f} {float(ratio[near].max()) if near.any() else math.nan:7.3f} "
          f"{int(off.sum()):6d} {int(old.sum()) / n:7.1%} {int(new.sum()) / n:7.1%} {int((off & ~new).sum()):6d} "
          f"{after:9.1e}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="smollm2,gemma3-270m,minilm", help="built-in names or paths, comma-separated")
    ap.add_argument("--metrics", default="identity,embed,unembed", help="weight-only metrics, comma-separated")
    ap.add_argument("--random", default="768,2048,4096", help="d_model of the random cases, comma-separated")
    args = ap.parse_args()
    print(f"margin {SAFETY:g}·√K on ε₃₂·c (the engine's rule), 4 on ε₃₂·‖P‖‖Q‖ (the rule before); "
          "pairs: ‖BA‖² and ‖X‖² of every forward pair and kind")
    print(f"{'case':34s} {'pairs':>7s} {'err/(margin·εc)':>15s} {'>1e-4':>6s} {'old flags':>7s} {'new flags':>7s} "
          f"{'missed':>6s} {'after':>9s}")
    print(f"{'':34s} {'':7s} {'all':>7s} {'>1e-5':>7s}")
    for d in filter(None, args.random.split(",")):
        for tau in (None, 2.0):
            one(f"random d={d} {'flat' if tau is None else 'tau=2'}", random_case(int(d), tau), "identity")
    for name in filter(None, args.models.split(",")):
        hw = compscope.load(name)
        for metric in filter(None, args.metrics.split(",")):
            if metric == "unembed" and hw.W_U is None:
                continue
            one(f"{hw.meta.name} {metric}", hw, get_metric(metric, hw))


if __name__ == "__main__":
    main()
