"""The Gram route: ``‖BA‖_F²`` and ``‖X‖_F²`` of all pairs as inner products of per-head Grams.

For frobenius, frobenius_baselined, tight, overlap and shared_dims: ``‖BA‖_F² = ⟨BᵀB,
AAᵀ⟩_F = ⟨V_B diag(b²) V_Bᵀ, U_A diag(a²) U_Aᵀ⟩_F`` and ``‖X‖_F² = ⟨V_B V_Bᵀ, U_A U_Aᵀ⟩_F``:
inner products of per-head ``d × d`` Grams, never formed whole. The Gram index ``(i, j)`` is
cut into ``block`` rows by ``width`` columns; per row block ``p`` the tiles on the diagonal
block (weight 1) and right of it (weight 2: the mirror image) are formed for every head at
once (batched ``[U_p diag(σ²), U_p]ᵀ U_qᵀ``, ``2 block × r × width``), and all pairs of one
tile are one matrix multiply. ``d (d + block)`` multiply-adds per pair and ``r d (d +
block)`` per head and Gram, where every ``X`` would cost ``r² d`` per pair (the Gram route is
cheaper whenever ``d < 2 r²``: every real model). Readers go in groups of whole layers
(all kinds together, :func:`reader_groups`), each multiplied only by the writers of layers
before the group's last (the few backward products inside a group are discarded).

Float32 cancellation and its repair (:func:`refine_small`): each tile's products are summed
in float32 and the tiles in float64, but the route still sums ``d²/2`` float32 products of mixed
sign, so a float32 ``⟨P, Q⟩`` is off by about ``ε₃₂ ⟨diag P, diag Q⟩`` times a factor that grows
like the square root of a tile's terms (:func:`cancellation_scale`): harmless for typical scores
(relative ~4e-7 on SmolLM2, float32 against float64), fatal for near-zero ones. Pairs where the
margin :data:`SAFETY` ``· (block · width)^{1/2}`` on that scale exceeds 1e-4 of the value are
recomputed from their ``X`` (single dot products, no cancellation), which leaves float32 ~1e-7
absolute on each cosine: relative ~1e-6 at frobenius 1e-3, ~1e-4 at 1e-5 (bench/RESULTS.md).
``precision='float64'``: exact to ~1e-12.

Reduced product precision (opt-in, ``tile_dtype=torch.bfloat16``): the Gram tiles are formed
from bfloat16-rounded bases and stored in bfloat16, and the pair products take bfloat16
operands with float32 accumulation and output (``torch.mm(..., out_dtype=float32)`` on CUDA;
elsewhere the operands are widened first, which gives the same rounding). The errors this
adds are measured against float64 in ``bench/product_precision.py``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .head_svd import Sides
from .workspace import Workspace


def tile_ranges(d: int, size: int) -> list[tuple[int, int]]:
    """``[0, d)`` cut into ranges of ``size`` (the last one shorter)."""
    return [(i, min(d, i + size)) for i in range(0, d, size)]


#: Reader rows (layers × kinds × heads) per group, at most: larger groups run the pair products
#: nearer the matmul rate, but multiply the writers of a group's later layers into its earlier
#: layers too (discarded), so a group also spans at most 1/GROUP_SHARE of the reader layers
#: (those products then stay under about a tenth; bench/cpu_limits.py section 4b).
READER_ROWS, GROUP_SHARE = 144, 6


def layers_per_group(n_readers: int, per: int) -> int:
    """Reader layers per group, for ``n_readers`` reader layers of ``per`` rows each."""
    return max(1, min(round(READER_ROWS / per), round(n_readers / GROUP_SHARE)))


def reader_groups(readers: list[int], per: int, H: int) -> list[tuple[int, int, int]]:
    """Groups ``(r0, r1, n_cols)`` of consecutive reader layers ``readers`` (``per`` rows each,
    layer-major): rows ``[r0, r1)`` against the writer columns ``[0, n_cols)`` of every layer
    before the group's last (``H`` heads per writer layer)."""
    g = layers_per_group(len(readers), per)
    return [(i * per, min(len(readers), i + g) * per, readers[min(len(readers), i + g) - 1] * H) for i in range(0, len(readers), g)]


def gram_products(
    W: Sides, R_rows: Tensor, R_spectrum: Tensor, groups: list[tuple[int, int, int]], block: int, width: int, bar,
    want: tuple[str, ...] = ("ba2", "x2"), ws: Workspace | None = None, ticks: list[int] | None = None,
    tile_dtype: torch.dtype | None = None,
) -> dict[str, Tensor]:
    """``‖BA‖_F²`` (``'ba2'``) and/or ``‖X‖_F²`` (``'x2'``), as listed in ``want``, for readers
    ``R_rows: (n_r, r, d)`` (spectra ``(n_r, r)``) and writers ``W`` (flattened to ``(n_w, r,
    d)``). ``groups``: ``(r0, r1, n_cols)``: reader rows ``[r0, r1)`` need writer columns ``[0,
    n_cols)``. Tiles: Gram rows ``[p0, p0 + block)`` against the diagonal block (weight 1) and
    against column chunks of ``width`` right of it (weight 2, for the mirror image); the tiles
    of ``U diag(σ²) Uᵀ`` and ``U Uᵀ`` come from one product ``[U_p diag(σ²), U_p]ᵀ U_qᵀ`` (one
    half of it when only one is wanted). Scratch buffers from ``ws`` when given; ``bar``
    advances by ``ticks[i]`` after row block ``i`` (default 1). ``tile_dtype``: the dtype of
    the tiles and their products (default the bases'; bfloat16: see the module docstring).
    Returns ``(n_r, n_w)`` float64 tensors (0 outside the groups' columns) by name: each tile's
    products in the bases' dtype (float32 or float64), their sum over tiles in float64."""
    Wr, Ws = W.rows.flatten(0, 1), W.spectrum.flatten(0, 1)
    n_w, n_r, r, d, dtype = Wr.shape[0], R_rows.shape[0], Wr.shape[1], Wr.shape[-1], Wr.dtype
    tdtype = tile_dtype or dtype
    w2, r2 = Ws.square().to(dtype)[:, :, None], R_spectrum.square().to(dtype)[:, :, None]
    ws = ws or Workspace()
    new = lambda name, *shape: ws.take(name, shape, tdtype, Wr.device)  # noqa: E731
    # bfloat16 columns are cast per tile (about d / (2 block) passes over each side's bases) rather than
    # held as a second copy of the bases, which at 70B shape would not fit beside them on an 80 GB GPU
    cols = (lambda t: t) if tdtype == dtype else (lambda t: t.to(tdtype))  # noqa: E731
    out = {name: torch.zeros(n_r, n_w, dtype=torch.float64, device=Wr.device) for name in want}
    g = len(want)  # Grams per head: weighted (ba2) and/or unweighted (x2)
    m = max(r1 - r0 for r0, r1, _ in groups)
    if dtype == torch.float64:
        accumulate = lambda o, a, b, alpha: o.addmm_(a, b, alpha=alpha)  # noqa: E731
    else:  # each tile's products in float32, their sum over tiles in float64
        pbuf = ws.take("pair products", (m * n_w,), torch.float32, Wr.device)
        accumulate = lambda o, a, b, alpha: o.add_(_product(a, b, pbuf), alpha=alpha)  # noqa: E731
    size = g * block * max(block, width)
    wbuf, rbuf = new("writer tiles", n_w * size), new("reader tiles", m * size)
    wa, ra = new("writer operands", n_w, r, g * block), new("reader operands", n_r, r, g * block)
    for i_block, (p0, p1) in enumerate(tile_ranges(d, block)):
        bp = p1 - p0
        # left operands [diag(σ²) U_pᵀ, U_pᵀ] (or one of them): one product gives the tiles of every wanted Gram
        for i, name in enumerate(want):
            part = slice(i * bp, (i + 1) * bp)
            if name == "ba2":
                torch.mul(Wr[:, :, p0:p1], w2, out=wa[:, :, part])
                torch.mul(R_rows[:, :, p0:p1], r2, out=ra[:, :, part])
            else:
                wa[:, :, part] = Wr[:, :, p0:p1]
                ra[:, :, part] = R_rows[:, :, p0:p1]
        tiles = [(p0, p1, 1.0)] + [(q0 + p1, q1 + p1, 2.0) for q0, q1 in tile_ranges(d - p1, width)]
        for q0, q1, alpha in tiles:
            k = bp * (q1 - q0)
            wt = torch.bmm(wa[:, :, : g * bp].mT, cols(Wr[:, :, q0:q1]), out=wbuf[: g * n_w * k].view(n_w, g * bp, q1 - q0)).view(n_w, g, k)
            for r0, r1, nc in groups:
                if nc == 0:
                    continue
                mm = r1 - r0
                rt = torch.bmm(ra[r0:r1, :, : g * bp].mT, cols(R_rows[r0:r1, :, q0:q1]), out=rbuf[: g * mm * k].view(mm, g * bp, q1 - q0)).view(mm, g, k)
                for i, name in enumerate(want):
                    accumulate(out[name][r0:r1, :nc], rt[:, i], wt[:nc, i].T, alpha)
        bar.update(1 if ticks is None else ticks[i_block])
    return out


def _product(a: Tensor, b: Tensor, buf: Tensor) -> Tensor:
    """``a b`` in float32 (into ``buf`` where it can): for reduced-precision ``a, b``, with float32
    accumulation (``out_dtype`` on CUDA; the operands widened elsewhere, which rounds the same)."""
    if a.dtype != torch.float32 and a.device.type == "cuda":
        return torch.mm(a, b, out_dtype=torch.float32)
    out = buf[: a.shape[0] * b.shape[1]].view(a.shape[0], b.shape[1])
    return torch.mm(a.float(), b.float(), out=out)


def block_flops(d: int, block: int, r: int, n_heads: int, n_pairs: int, grams: int) -> list[float]:
    """Multiply-adds of :func:`gram_products` per row block (for a progress bar): forming the
    tiles of ``grams`` Grams of ``n_heads`` heads, and ``n_pairs`` pairs' products."""
    return [grams * (p1 - p0) * (d - p0) * (n_heads * r + n_pairs) for p0, p1 in tile_ranges(d, block)]


#: a reader row with at least 1/DENSE_SHARE of its pairs flagged has all of them recomputed in one
#: matrix product (its ``X`` against every writer at once: no gathering of rows, a matmul's rate);
#: the others pair by pair
DENSE_SHARE = 4

#: :func:`refine_small`'s margin on ``ε₃₂ ⟨diag P, diag Q⟩``, per square root of the terms one tile
#: product sums (``block · width``: its accumulation grows like their square root). Measured
#: (bench/refine_estimate.py): the float32 error reaches at most 0.34 of this margin on random heads
#: with a few dominant directions (d = 768 … 4096), 0.16 on SmolLM2, Gemma 3 and MiniLM.
SAFETY = 1.0


def gram_diagonals(rows: Tensor, spectrum: Tensor | None, chunk: int = 16) -> Tensor:
    """The diagonal of each head's Gram ``U diag(σ²) Uᵀ``, ``Σ_k σ_k² U_ki²`` (``spectrum`` None:
    of ``U Uᵀ``, ``Σ_k U_ki²``), for ``rows: (n, r, d)`` (``Uᵀ``) and ``spectrum: (n, r)``:
    ``(n, d)`` float64, ``chunk`` heads at a time (one squared copy of theirs at a time)."""
    n, d = rows.shape[0], rows.shape[-1]
    out = torch.empty(n, d, dtype=torch.float64, device=rows.device)
    for i in range(0, n, chunk):
        sq = rows[i : i + chunk].square()
        if spectrum is None:
            out[i : i + chunk] = sq.sum(1)
        else:
            out[i : i + chunk] = torch.bmm(spectrum[i : i + chunk, None, :].to(sq.device, sq.dtype).square(), sq)[:, 0]
    return out


def cancellation_scale(W: Sides, R_rows: Tensor, R_spectrum: Tensor, name: str) -> Tensor:
    """``⟨diag BᵀB, diag AAᵀ⟩`` (``'ba2'``; ``'x2'``: of ``V_B V_Bᵀ`` and ``U_A U_Aᵀ``) of every
    (reader, writer) pair: ``(n_r, n_w)`` float64. It bounds ``‖P ∘ Q‖_F`` of the two Grams ``P,
    Q`` (positive semi-definite, so ``P_ij² ≤ P_ii P_jj``): the size of the sum of their
    entries' independent rounding errors, which :func:`refine_small` scales by ``ε₃₂``."""
    Wr, a = W.rows.flatten(0, 1), W.spectrum.flatten(0, 1)
    weighted = name == "ba2"
    dA = gram_diagonals(Wr, a if weighted else None)
    dB = gram_diagonals(R_rows, R_spectrum if weighted else None)
    return dB @ dA.T


def refine_small(W: Sides, R_rows: Tensor, R_spectrum: Tensor, values: dict[str, Tensor],
                 groups: list[tuple[int, int, int]], budget: int, terms: int, tol: float = 1e-4) -> Tensor:
    """Recompute from ``X`` the float32 Gram-route values that cancellation may have spoiled.

    A float32 inner product ``⟨P, Q⟩`` of two Grams, each tile's ``terms`` products summed in
    float32 and the tiles in float64 (:func:`gram_products`), is off by about ``ε₃₂ ‖P ∘ Q‖_F``
    (the entries' rounding errors, summed) times a factor that grows like ``terms^{1/2}`` (the
    accumulation), and ``‖P ∘ Q‖_F ≤ ⟨diag P, diag Q⟩`` (:func:`cancellation_scale`). Where
    ``SAFETY · terms^{1/2} · ε₃₂ ⟨diag P, diag Q⟩`` exceeds ``tol`` times the value
    (``‖BA‖_F²`` or ``‖X‖_F²``), the pair's ``X = V_Bᵀ U_A`` is formed (float32, no
    cancellation: its entries are single dot products) and the values are replaced. ``values``:
    :func:`gram_products`'s ``'ba2'`` and/or ``'x2'``, updated in place; returns, per reader row,
    the number of its pairs recomputed (int64, on the CPU)."""
    Wr = W.rows.flatten(0, 1)
    a = W.spectrum.flatten(0, 1)
    eps = SAFETY * math.sqrt(terms) * torch.finfo(torch.float32).eps / tol
    bound = {name: (eps * cancellation_scale(W, R_rows, R_spectrum, name)).to(values[name].device) for name in values}
    some = next(iter(values.values()))
    bad = torch.zeros_like(some, dtype=torch.bool)
    for r0, r1, nc in groups:
        for name, err in bound.items():
            bad[r0:r1, :nc] |= values[name][r0:r1, :nc].double() < err[r0:r1, :nc]
    per_row = bad.sum(1).cpu()
    r, d = Wr.shape[1], Wr.shape[2]
    for r0, r1, nc in groups:  # reader rows with at least 1/DENSE_SHARE of their pairs flagged: every pair at once
        if nc == 0:
            continue
        rows = r0 + (bad[r0:r1, :nc].sum(1) * DENSE_SHARE >= nc).nonzero().flatten()
        per = max(1, budget // max(1, 2 * r * nc * r * Wr.element_size()))  # X (squared in place), twice over for headroom
        for i in range(0, len(rows), per):
            ri = rows[i : i + per]
            X = (R_rows[ri].flatten(0, 1) @ Wr[:nc].flatten(0, 1).mT).view(len(ri), r, nc, r)  # (reader, r_B, writer, r_A)
            X2 = X.square_()
            new = {}
            if "x2" in values:
                new["x2"] = X2.sum((1, 3))
            if "ba2" in values:  # Σ_ik b_i² X_ik² a_k²
                bx = torch.bmm(R_spectrum[ri].to(X2.dtype).square()[:, None, :], X2.flatten(2)).view(len(ri), nc, r)
                new["ba2"] = (bx * a[:nc].to(X2.dtype).square()).sum(-1)
            sel = bad[ri, :nc]
            for name, v in new.items():
                values[name][ri, :nc] = torch.where(sel, v.to(some.dtype), values[name][ri, :nc])
            bad[ri, :nc] = False
    idx = bad.nonzero()  # the rest, pair by pair
    step = max(1, min(1024, budget // max(1, 2 * r * d * Wr.element_size())))
    for i in range(0, len(idx), step):
        ri, wi = idx[i : i + step, 0], idx[i : i + step, 1]
        X = torch.bmm(R_rows[ri], Wr[wi].mT)
        if "x2" in values:
            values["x2"][ri, wi] = X.square().sum((-1, -2)).to(some.dtype)
        if "ba2" in values:
            C = X * R_spectrum[ri].to(X.dtype)[:, :, None] * a[wi].to(X.dtype)[:, None, :]
            values["ba2"][ri, wi] = C.square().sum((-1, -2)).to(some.dtype)
    return per_row


def choose_block(d: int, r: int, n_w: int, n_r: int, m: int, esize: int, budget: int) -> int:
    """Tile size: 64 (128 from d = 2048 on), halved until the tile buffers of
    ``gram_products`` (tiles of ``width = 2 · block``, left operands) fit ``budget``."""
    block = 128 if d >= 2048 else 64
    while block > 8 and (2 * (n_w + m) * block * 2 * block + (n_w + n_r) * r * 2 * block) * esize > budget:
        block //= 2
    return min(block, d)
