"""float32 vs float64 on near-zero scores: where the Gram route's cancellation shows.

    .venv/bin/python bench/composition_precision.py

Random GPT-2-small-width heads (4 layers x 4 heads, d_model 768, d_head 64) whose writers
write into one half of the residual stream and whose V-readers read the other half, plus
noise of relative size ``eps`` (so V-composition scales like ``eps``), then the whole residual
stream rotated by a random orthogonal matrix (scores unchanged; the Grams become dense, as in
a real model). Prints, per ``eps``, the median score and the max |float32 - float64| of
``frobenius`` and ``overlap`` on both routes (Gram: the default measures; X: ``pairs='all'``).
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import compscope  # noqa: E402
from composition_speed import random_heads  # noqa: E402


def main() -> None:
    L, H, d, r = 4, 4, 768, 64
    hw = random_heads(L, H, d, r)
    g = torch.Generator().manual_seed(1)
    half = torch.zeros(d)
    half[: d // 2] = 1
    T = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
    print(f"{'eps':>7} {'route':>5} {'measure':>10} {'median':>9} {'max|f32-f64|':>13} {'max rel':>9}")
    for eps in (1e-1, 1e-2, 1e-3, 1e-4):
        noise = lambda *s: torch.randn(*s, generator=g) * 0.02 * eps  # noqa: E731
        W_O = (hw.W_O * half[None, None, :, None] + noise(*hw.W_O.shape)).double()
        W_V = (hw.W_V * (1 - half) + noise(*hw.W_V.shape)).double()
        h2 = hw.replace(W_O=(T @ W_O).float(), W_V=(W_V @ T.T).float())
        for route, kw in (("gram", {}), ("X", dict(measures="all", pairs="all"))):
            kw = {"measures": ["frobenius", "overlap"], **kw}
            a = compscope.scores(h2, "V", precision="float32", progress=False, **kw)
            b = compscope.scores(h2, "V", precision="float64", progress=False, **kw)
            for m in ("frobenius", "overlap"):
                x, y = a.dense(m, "V"), b.dense(m, "V")
                diff = (x - y).abs().nan_to_num()
                rel = ((x - y).abs() / y.abs()).nan_to_num()
                print(f"{eps:7.0e} {route:>5} {m:>10} {float(y.nanmedian()):9.2e} {float(diff.max()):13.1e} {float(rel.max()):9.1e}")


if __name__ == "__main__":
    main()
