"""The Gram route: ``‖BA‖_F²`` and ``‖X‖_F²`` of all pairs as inner products of per-head Grams.

For frobenius, frobenius_baselined, tight, overlap and shared_dims: ``‖BA‖_F² = ⟨BᵀB,
AAᵀ⟩_F = ⟨V_B diag(b²) V_Bᵀ, U_A diag(a²) U_Aᵀ⟩_F`` and ``‖X‖_F² = ⟨V_B V_Bᵀ, U_A U_Aᵀ⟩_F``:
inner products of per-head ``d × d`` Grams, never formed whole. The Gram index ``(i, j)`` is
cut into ``block`` rows by ``width`` columns; per row block ``p`` the tiles on the diagonal
block (weight 1) and right of it (weight 2: the mirror image) are formed for every head at
once (batched ``[U_p diag(σ²), U_p]ᵀ U_qᵀ``, ``2 block × r × width``), and all pairs of one
tile are one matrix multiply. ``d (d + block)`` multiply-adds per pair and ``r d (d +
block)`` per head and Gram, where every ``X`` would cost ``r² d`` per pair (the Gram route is
cheaper whenever ``d < 2 r²``: every real model). Reader layers (all kinds together, about 64
rows) are multiplied only by the writers of earlier layers.

Float32 cancellation and its repair (:func:`refine_small`): the route sums
``d²/2`` products of mixed sign, so a float32 ``‖BA‖_F²`` is off by up to about
``ε₃₂ ‖AAᵀ‖_F ‖BᵀB‖_F`` (and ``‖X‖_F²`` by ``ε₃₂ (r_A r_B)^{1/2}``): harmless for typical
scores (relative 1e-6 on GPT-2-shape random weights), fatal for near-zero ones. Pairs where
4× that bound exceeds 1e-4 of the value are recomputed from their ``X`` (single dot products,
no cancellation), which leaves float32 ~1e-7 absolute on each cosine: relative ~1e-6 at
frobenius 1e-3, ~1e-4 at 1e-5 (bench/RESULTS.md). ``precision='float64'``: exact to ~1e-12.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .head_svd import Sides


def tile_ranges(d: int, size: int) -> list[tuple[int, int]]:
    """``[0, d)`` cut into ranges of ``size`` (the last one shorter)."""
    return [(i, min(d, i + size)) for i in range(0, d, size)]


def gram_products(
    W: Sides, R_rows: Tensor, R_spectrum: Tensor, groups: list[tuple[int, int, int]], block: int, width: int, bar,
) -> tuple[Tensor, Tensor]:
    """``‖BA‖_F²`` and ``‖X‖_F²`` for readers ``R_rows: (n_r, r, d)`` (spectra ``(n_r, r)``) and
    writers ``W`` (flattened to ``(n_w, r, d)``). ``groups``: ``(r0, r1, n_cols)``: reader rows
    ``[r0, r1)`` need writer columns ``[0, n_cols)``. Tiles: Gram rows ``[p0, p0 + block)``
    against the diagonal block (weight 1) and against column chunks of ``width`` right of it
    (weight 2, for the mirror image); the tiles of ``U diag(σ²) Uᵀ`` and ``U Uᵀ`` come from
    one product ``[U_p diag(σ²), U_p]ᵀ U_qᵀ``. Returns two ``(n_r, n_w)`` tensors (0 outside the groups' columns)."""
    Wr, Ws = W.rows.flatten(0, 1), W.spectrum.flatten(0, 1)
    n_w, n_r, r, d, dtype = Wr.shape[0], R_rows.shape[0], Wr.shape[1], Wr.shape[-1], Wr.dtype
    w2, r2 = Ws.square().to(dtype)[:, :, None], R_spectrum.square().to(dtype)[:, :, None]
    new = lambda *shape: torch.empty(shape, dtype=dtype, device=Wr.device)  # noqa: E731
    ba2, x2 = new(n_r, n_w).zero_(), new(n_r, n_w).zero_()
    m = max(r1 - r0 for r0, r1, _ in groups)
    size = 2 * block * max(block, width)
    wbuf, rbuf = new(n_w * size), new(m * size)
    wa, ra = new(n_w, r, 2 * block), new(n_r, r, 2 * block)
    for p0, p1 in tile_ranges(d, block):
        bp = p1 - p0
        # left operands [diag(σ²) U_pᵀ, U_pᵀ]: one product gives the tiles of both Grams
        torch.mul(Wr[:, :, p0:p1], w2, out=wa[:, :, :bp])
        wa[:, :, bp : 2 * bp] = Wr[:, :, p0:p1]
        torch.mul(R_rows[:, :, p0:p1], r2, out=ra[:, :, :bp])
        ra[:, :, bp : 2 * bp] = R_rows[:, :, p0:p1]
        tiles = [(p0, p1, 1.0)] + [(q0 + p1, q1 + p1, 2.0) for q0, q1 in tile_ranges(d - p1, width)]
        for q0, q1, alpha in tiles:
            k = bp * (q1 - q0)
            wt = torch.bmm(wa[:, :, : 2 * bp].mT, Wr[:, :, q0:q1], out=wbuf[: 2 * n_w * k].view(n_w, 2 * bp, q1 - q0)).view(n_w, 2, k)
            for r0, r1, nc in groups:
                if nc == 0:
                    continue
                mm = r1 - r0
                rt = torch.bmm(ra[r0:r1, :, : 2 * bp].mT, R_rows[r0:r1, :, q0:q1], out=rbuf[: 2 * mm * k].view(mm, 2 * bp, q1 - q0)).view(mm, 2, k)
                ba2[r0:r1, :nc].addmm_(rt[:, 0], wt[:nc, 0].T, alpha=alpha)
                x2[r0:r1, :nc].addmm_(rt[:, 1], wt[:nc, 1].T, alpha=alpha)
        bar.update(1)
    return ba2, x2


def refine_small(W: Sides, R_rows: Tensor, R_spectrum: Tensor, R_rank: Tensor, ba2: Tensor, x2: Tensor,
                  groups: list[tuple[int, int, int]], H: int, budget: int, tol: float = 1e-4, safety: float = 4.0) -> int:
    """Recompute from ``X`` the float32 Gram-route values that cancellation may have spoiled.

    A float32 inner product of two Grams is off by up to about ``ε₃₂ ‖AAᵀ‖_F ‖BᵀB‖_F``
    (measured on random heads: median 0.2–0.4, max 1.8 of that for d = 768 … 4096); where
    ``safety`` times this bound exceeds ``tol · ‖BA‖_F²`` (or, for
    ``‖X‖_F²``, ``safety · ε₃₂ (r_A r_B)^{1/2}`` exceeds ``tol · ‖X‖_F²``), the pair's ``X =
    V_Bᵀ U_A`` is formed (float32, no cancellation: its entries are single dot products) and
    both values are replaced. Updates ``ba2``, ``x2`` in place; returns the number of pairs."""
    Wr = W.rows.flatten(0, 1)
    a, rank_a = W.spectrum.flatten(0, 1), W.rank.flatten()
    eps = safety * torch.finfo(torch.float32).eps / tol
    err_n = eps * torch.outer(R_spectrum.pow(2).norm(dim=-1), a.pow(2).norm(dim=-1))
    err_p = eps * torch.outer(R_rank.double(), rank_a.double()).sqrt()
    bad = torch.zeros_like(ba2, dtype=torch.bool)
    for r0, r1, nc in groups:
        bad[r0:r1, :nc] = (ba2[r0:r1, :nc].double() < err_n[r0:r1, :nc]) | (x2[r0:r1, :nc].double() < err_p[r0:r1, :nc])
    idx = bad.nonzero()
    r, d = Wr.shape[1], Wr.shape[2]
    step = max(1, min(1024, budget // max(1, 2 * r * d * Wr.element_size())))
    for i in range(0, len(idx), step):
        ri, wi = idx[i : i + step, 0], idx[i : i + step, 1]
        X = torch.bmm(R_rows[ri], Wr[wi].mT)
        x2[ri, wi] = X.square().sum((-1, -2)).to(x2.dtype)
        C = X * R_spectrum[ri].to(X.dtype)[:, :, None] * a[wi].to(X.dtype)[:, None, :]
        ba2[ri, wi] = C.square().sum((-1, -2)).to(ba2.dtype)
    return len(idx)


def choose_block(d: int, r: int, n_w: int, n_r: int, m: int, esize: int, budget: int) -> int:
    """Tile size: 64 (128 from d = 2048 on), halved until the tile buffers of
    ``gram_products`` (tiles of ``width = 2 · block``, left operands) fit ``budget``."""
    block = 128 if d >= 2048 else 64
    while block > 8 and (2 * (n_w + m) * block * 2 * block + (n_w + n_r) * r * 2 * block) * esize > budget:
        block //= 2
    return min(block, d)
