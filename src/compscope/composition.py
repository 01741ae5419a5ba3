"""All-pairs Q-, K- and V-composition, exact, from the factors (MATH.md).

For every writer ``h1`` in layer ``l1`` and reader ``h2`` in a later layer ``l2 > l1``
(same-layer and backward pairs are not computed), with ``A = W_OV^{h1}`` and

    kind Q: B = W_QK^{h2 T} = W_Kᵀ R(δ) W_Q      (reads through W_Q)
    kind K: B = W_QK^{h2}   = W_Qᵀ R(-δ) W_K     (reads through W_K)
    kind V: B = W_OV^{h2}   = W_O W_V            (reads through W_V)

(``δ`` the rotary offset, query minus key position; in whitened coordinates when a metric is
given). ``B_Q = B_Kᵀ``, so one SVD of each head's ``W_QK`` serves kinds Q and K, and one of
its ``W_OV`` serves writers and V-readers.

**SVDs from the factors.** For ``M = Pᵀ Q`` (``P, Q``: ``r × d``) with ``r × r`` Grams
``G_P = P Pᵀ``, ``G_Q = Q Qᵀ``: ``G_Q = F Fᵀ`` (Cholesky) makes ``F⁻¹ Q`` orthonormal and
``M = (Pᵀ F)(F⁻¹ Q)``; ``Fᵀ G_P F = W diag(σ²) Wᵀ`` (eigh) gives ``Uᵀ = diag(σ)⁻¹ Wᵀ Fᵀ P``
and ``Vᵀ = diag(σ)⁻¹ Uᵀ M``. Float64 Grams and ``r × r`` algebra, then one ``(r × r) @ (r ×
d)`` product per head and side: ``O(d r²)`` at matrix-multiply speed. The error grows like
``ε κ²``; heads with a condition number above 1e4 (or rank-deficient) take the QR route
(QR of each factor, SVD of the ``r × r`` core), whose tolerance ``σ_max · d · ε`` sets ``rank``.
With grouped-query attention the ``K`` and ``V`` factors (metric, rotation and Gram) are
computed once per K/V head and shared by its query heads; what follows differs per query head.

**Routes**, the cheapest exact one per measure:

- **gram** (frobenius, frobenius_baselined, tight, overlap, shared_dims): ``‖BA‖_F² =
  ⟨BᵀB, AAᵀ⟩_F = ⟨V_B diag(b²) V_Bᵀ, U_A diag(a²) U_Aᵀ⟩_F`` and ``‖X‖_F² = ⟨V_B V_Bᵀ, U_A
  U_Aᵀ⟩_F``: inner products of per-head ``d × d`` Grams, never formed whole. The Gram index
  ``(i, j)`` is cut into ``block`` rows by ``width`` columns; per row block ``p`` the tiles
  on the diagonal block (weight 1) and right of it (weight 2: the mirror image) are formed
  for every head at once (batched ``[U_p diag(σ²), U_p]ᵀ U_qᵀ``, ``2 block × r × width``),
  and all pairs of one tile are one matrix multiply. ``d (d + block)`` multiply-adds per pair
  and ``r d (d + block)`` per head and Gram, where every ``X`` would cost ``r² d`` per pair
  (the gram route is cheaper whenever ``d < 2 r²``: every real model). Reader layers (all
  kinds together, about 64 rows) are multiplied only by the writers of earlier layers.
- **X** (bandwidth, spectral, and every measure when ``pairs='all'``): ``X = V_Bᵀ U_A``. For
  ``pairs='all'`` one block matrix multiply per reader layer and kind, ``V_{l2}ᵀ U_{<l2}``
  (``(H r) × (n_w r)``, in writer chunks that fit ``max_memory``), read as per-pair ``r × r``
  blocks; ``‖BA‖_F²`` and ``‖X‖_F²`` come from the same blocks, so the gram route is skipped.
  Otherwise ``X`` for the top ``pairs`` pairs by ``frobenius``. The squared singular values
  of the core ``C = diag(b) X diag(a)`` are the eigenvalues of ``C Cᵀ`` (batched
  ``eigvalsh``, the batch split over torch's threads).

**Precision per step**: factor Grams, their Cholesky/eigh, spectra, ranks and per-pair
results in float64 always; bases, Gram tiles, tile products, ``X`` blocks and ``C Cᵀ`` in
``precision``, float32 by default (about half the time of float64). The gram route sums
``d²/2`` products of mixed sign, so a float32 ``‖BA‖_F²`` is off by up to about
``ε₃₂ ‖AAᵀ‖_F ‖BᵀB‖_F`` (and ``‖X‖_F²`` by ``ε₃₂ (r_A r_B)^{1/2}``): harmless for typical
scores (relative 1e-6 on GPT-2-shape random weights), fatal for near-zero ones. Pairs where
4× that bound exceeds 1e-4 of the value are recomputed from their ``X`` (single dot products,
no cancellation), which leaves float32 ~1e-7 absolute on each cosine: relative ~1e-6 at
frobenius 1e-3, ~1e-4 at 1e-5 (bench/RESULTS.md). ``precision='float64'``: exact to ~1e-12.

**Memory**: the bases (``n_heads · r · d`` numbers per side) plus tile buffers, ``X`` blocks
and baseline chunks chosen to fit ``max_memory`` (default a quarter of the available memory
of the device).

**Device**: everything from the factors on (factor Grams, SVDs, bases, tiles, ``X``, spectra)
runs on ``device``, CUDA when present unless told otherwise; weights are copied there one layer
and factor at a time, results come back to the CPU in float64, and the Haar baseline (``O(r²)``
per pair) stays on the CPU. Float32 products are kept in IEEE float32 (TF32 and other reduced
matmul precisions are switched off for the call), since the error bounds above assume it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .errors import OptionError
from .heads import HeadWeights
from .measures import GramStats, Measure, PairSpectra, get_measure
from .metrics import DEFAULT_RIDGE, Metric, get_metric
from .progress import progress_bar
from .results import ScoreTable

KINDS = ("Q", "K", "V")
DEFAULT_MEASURES = ("frobenius", "frobenius_baselined", "tight", "overlap", "shared_dims", "bandwidth", "spectral")
#: Relative size of the smallest eigenvalue of a factor Gram (σ_min²/σ_max²) below which a
#: head's SVD takes the QR route (Gram route error ~ ε κ²: 1e-8 at this bound).
_WELL_CONDITIONED = 1e-8
_F64 = torch.float64


@dataclass(frozen=True)
class Sides:
    """Singular pieces of one side of every head of some layers.

    ``rows: (layer, head, r, d)``: orthonormal rows ``U_Aᵀ`` (writers) or ``V_Bᵀ`` (readers),
    rows beyond the rank zero; ``spectrum: (layer, head, r)`` float64, descending, zero beyond
    the rank; ``rank: (layer, head)``."""

    rows: Tensor
    spectrum: Tensor
    rank: Tensor


def svd_from_factors(left: Tensor, right: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Batched thin SVD of ``left @ right`` (``(..., m, r) @ (..., r, n)``): ``U, S, V``."""
    q_l, r_l = torch.linalg.qr(left)
    q_r, r_r = torch.linalg.qr(right.transpose(-1, -2))
    u, s, vh = torch.linalg.svd(r_l @ r_r.transpose(-1, -2), full_matrices=False)
    return q_l @ u, s, q_r @ vh.transpose(-1, -2)


def numerical_rank(s: Tensor, dims: int) -> Tensor:
    tol = s[..., :1] * dims * torch.finfo(s.dtype).eps
    return (s > tol).sum(-1)


def rotate_rows(w: Tensor, hw: HeadWeights, layer: int, offset: float) -> Tensor:
    """``R(offset) w`` for ``w: (..., r, n)`` of one layer (rows are head dims)."""
    if hw.rotary is None or offset == 0:
        return w
    pos = torch.tensor([float(offset)])
    return hw.rotary.rotate(w.transpose(-1, -2), pos, layer).transpose(-1, -2)


_POOL: dict[int, ThreadPoolExecutor] = {}


def _threaded(fn: Callable[[Tensor], Any], x: Tensor) -> Any:
    """``fn(x)`` for a batched LAPACK call, the batch split over torch's threads (torch runs
    a batch of small factorisations one after another on one core)."""
    n = torch.get_num_threads()
    if n < 2 or x.shape[0] < 4 * n or x.device.type != "cpu":
        return fn(x)
    pool = _POOL.get(n) or _POOL.setdefault(n, ThreadPoolExecutor(n, thread_name_prefix="compscope"))
    parts = list(pool.map(fn, x.tensor_split(n)))
    if isinstance(parts[0], Tensor):
        return torch.cat(parts)
    return tuple(torch.cat(p) for p in zip(*parts))


#: The two SVDs per head, ``M = Pᵀ Q``: (side given by U, side given by V, factor P, factor Q).
#: ``W_OV = W_O W_V``: writers read ``U``, V-readers ``V``. ``B_K = W_Qᵀ (R(-δ) W_K)``:
#: K-readers read its row space ``V``, Q-readers (``B_Q = B_Kᵀ``) its column space ``U``.
_CIRCUITS = (("W", "V", "O", "V"), ("Q", "K", "Q", "K"))


def _svd_cores(Gp: Tensor, Gq: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The ``r × r`` part of the thin SVDs ``M = Pᵀ Q = U diag(σ) Vᵀ`` of a batch of heads
    from the float64 Grams ``Gp = P Pᵀ``, ``Gq = Q Qᵀ``: ``Uᵀ = cu P``, ``Vᵀ = cv Q``.

    With ``Q Qᵀ = F Fᵀ`` (Cholesky), ``Q̂ = F⁻¹ Q`` has orthonormal rows and ``M = (Pᵀ F) Q̂``;
    ``Fᵀ Gp F = W diag(σ²) Wᵀ`` (eigh) gives ``cu = diag(σ)⁻¹ Wᵀ Fᵀ`` and
    ``cv = diag(σ)⁻¹ cu Gp`` (``Vᵀ = diag(σ)⁻¹ Uᵀ M``).
    Returns ``cu, cv, σ`` (descending) and ``ok``: false for heads whose ``M``, ``P`` or ``Q``
    has a condition number above 1e4 (the error grows like ε κ²) or is rank-deficient."""
    F, info = torch.linalg.cholesky_ex(Gq)
    mu, W = _threaded(torch.linalg.eigh, F.mT @ Gp @ F)
    mu, W = mu.flip(-1), W.flip(-1)  # descending
    s = mu.clamp_min(0).sqrt()
    fd = torch.diagonal(F, dim1=-2, dim2=-1).abs()
    gp = torch.diagonal(Gp, dim1=-2, dim2=-1)
    ok = (info == 0) & (mu[:, -1] > _WELL_CONDITIONED * mu[:, 0]) & (fd.amin(-1) ** 2 > _WELL_CONDITIONED * fd.amax(-1) ** 2)
    ok &= gp.amin(-1) > _WELL_CONDITIONED * gp.amax(-1)
    s_ok = torch.where(ok[:, None], s, 1.0)[:, :, None]
    cu = W.mT @ F.mT / s_ok
    cv = cu @ Gp / s_ok  # Vᵀ = diag(σ)⁻¹ Uᵀ M = diag(σ)⁻¹ cu P Pᵀ Q (error ~ ε κ² as well)
    return cu, cv, s, ok


def _factor(hw: HeadWeights, metric: Metric, layer_metric: int | None, layer: int, name: str, offset: float,
            out: Tensor, shared: bool = False) -> Tensor:
    """One factor of one layer in whitened coordinates, ``(head, r, d)`` per query head:
    ``Q`` (``W_Q G^{1/2}``), ``K`` (``R(-δ) W_K G^{1/2}``), ``V``, ``O`` (``W_Oᵀ G^{-1/2}``);
    ``shared``: ``K`` and ``V`` per K/V head (GQA: once for all the query heads that share
    it). Written into ``out`` (whose dtype and device it takes), or the stored weights
    themselves when they need no change."""
    s, si = metric.for_layer(layer_metric if layer_metric is not None else -1)
    w = hw.W_O[layer].mT if name == "O" else {"Q": hw.W_Q, "K": hw.W_K, "V": hw.W_V}[name][layer]
    m = si if name == "O" else s
    rot = name == "K" and hw.rotary is not None and offset != 0
    changed = m is not None or rot
    if changed:  # metric and rotation once per stored (K/V) head
        w = w.to(out.device, _F64)
        w = w if m is None else w @ m.to(out.device)
        w = rotate_rows(w, hw, layer, -offset) if rot else w
    if name in "KV" and not shared and list(hw.kv_map) != list(range(hw.n_kv_heads)):
        return out.copy_(w[torch.tensor(hw.kv_map, device=w.device)])
    if not changed and w.dtype == out.dtype and w.device == out.device:
        return w
    return out[: w.shape[0]].copy_(w)  # into a reused buffer: no page faults


def head_sides(
    hw: HeadWeights, sides: tuple[str, ...], metric: Metric, offset: float, layers: dict[str, range],
    dtype: torch.dtype, layer_metric: int | None = None, out: dict[str, Tensor] | None = None,
    device: torch.device | str = "cpu",
) -> dict[str, Sides]:
    """Writer (``'W'``) and reader (``'Q'``, ``'K'``, ``'V'``) sides for ``layers[side]``: one
    SVD of ``W_OV`` serves ``W`` and ``V``, one of ``W_QK`` serves ``Q`` and ``K`` (see
    ``_CIRCUITS``). Float64 Grams layer by layer, the ``r × r`` cores of all heads batched,
    then the bases ``cu P`` and ``cv Q`` layer by layer in ``dtype``; heads that are not
    well-conditioned take the QR route. ``out[side]``: optional ``(layer, head, r, d)``
    buffer for the rows. Everything is computed and returned on ``device``."""
    H, r, d = hw.n_heads, hw.d_head, hw.d_model
    res = {}
    for side in sides:
        if side not in ("W",) + KINDS:
            raise OptionError(f"unknown kind {side!r}; kinds: Q, K, V")
        n = len(layers[side])
        buf = out[side] if out and side in out else torch.empty(n, H, r, d, dtype=dtype, device=device)
        res[side] = Sides(buf, torch.zeros(n, H, r, dtype=_F64, device=device), torch.zeros(n, H, dtype=torch.long, device=device))
    at = {side: {l: i for i, l in enumerate(layers[side])} for side in sides}
    wants = lambda layer, c: tuple(sd in res and layer in at[sd] for sd in c[:2])  # noqa: E731
    jobs = [(layer, c) for layer in sorted(set().union(*(layers[s] for s in sides))) for c in _CIRCUITS if any(wants(layer, c))]
    work = {dt: (torch.empty(H, r, d, dtype=dt, device=device), torch.empty(H, r, d, dtype=dt, device=device)) for dt in {_F64, dtype}}
    factor = lambda layer, name, dt, i=0, shared=False: _factor(hw, metric, layer_metric, layer, name, offset, work[dt][i], shared)  # noqa: E731
    Gp = torch.empty(len(jobs), H, r, r, dtype=_F64, device=device)
    Gq = torch.empty_like(Gp)
    kv = torch.tensor(hw.kv_map, device=device)
    for j, (layer, c) in enumerate(jobs):
        P, Q = factor(layer, c[2], _F64), factor(layer, c[3], _F64, 1, True)  # Q: K or V, per K/V head
        torch.bmm(P, P.mT, out=Gp[j])
        if Q.shape[0] == H and list(hw.kv_map) == list(range(H)):
            torch.bmm(Q, Q.mT, out=Gq[j])
        else:
            Gq[j] = (Q @ Q.mT)[kv]
    cu, cv, s, ok = (t.unflatten(0, (len(jobs), H)) for t in _svd_cores(Gp.flatten(0, 1), Gq.flatten(0, 1)))
    for j, (layer, c) in enumerate(jobs):
        sj, rj = s[j].clone(), torch.full((H,), r, dtype=torch.long, device=device)
        bad = (~ok[j]).nonzero().flatten()
        if len(bad):  # QR route: robust for ill-conditioned and rank-deficient heads
            U, sb, V = svd_from_factors(factor(layer, c[2], _F64)[bad].mT, factor(layer, c[3], _F64, 1)[bad])
            rb = numerical_rank(sb, d)
            keep = (torch.arange(sb.shape[-1], device=sb.device)[None, :] < rb[:, None]).to(_F64)
            sj[bad] = 0
            sj[bad, : sb.shape[-1]] = sb * keep
            rj[bad] = rb
        for sd, want, coef, name, basis in ((c[0], wants(layer, c)[0], cu, c[2], 0), (c[1], wants(layer, c)[1], cv, c[3], 1)):
            if not want:
                continue
            i = at[sd][layer]
            rows = res[sd].rows[i]
            torch.bmm(coef[j].to(dtype), factor(layer, name, dtype), out=rows)
            if len(bad):
                Bt = ((U, V)[basis] * keep[:, None, :]).mT
                rows[bad] = 0
                rows[bad, : Bt.shape[1]] = Bt.to(dtype)
            res[sd].spectrum[i] = sj
            res[sd].rank[i] = rj
    return res


def _memory_budget(max_memory: int | None, device: torch.device) -> int:
    if max_memory is not None:
        return int(max_memory)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0] // 4
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable"))
    except (OSError, StopIteration):
        avail = 8 << 30
    return avail // 4


def _blocks(d: int, size: int) -> list[tuple[int, int]]:
    return [(i, min(d, i + size)) for i in range(0, d, size)]


def _gram_products(
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
    for p0, p1 in _blocks(d, block):
        bp = p1 - p0
        # left operands [diag(σ²) U_pᵀ, U_pᵀ]: one product gives the tiles of both Grams
        torch.mul(Wr[:, :, p0:p1], w2, out=wa[:, :, :bp])
        wa[:, :, bp : 2 * bp] = Wr[:, :, p0:p1]
        torch.mul(R_rows[:, :, p0:p1], r2, out=ra[:, :, :bp])
        ra[:, :, bp : 2 * bp] = R_rows[:, :, p0:p1]
        tiles = [(p0, p1, 1.0)] + [(q0 + p1, q1 + p1, 2.0) for q0, q1 in _blocks(d - p1, width)]
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


def _refine_small(W: Sides, R_rows: Tensor, R_spectrum: Tensor, R_rank: Tensor, ba2: Tensor, x2: Tensor,
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


def _core_sv2(C: Tensor, out: Tensor | None = None) -> Tensor:
    """Squared singular values of the cores ``C: (n, r_B, r_A)`` (``diag(b) X diag(a)``),
    descending: eigenvalues of ``C Cᵀ`` (or ``Cᵀ C``, the smaller; into ``out`` if given)."""
    G = torch.bmm(C, C.mT, out=out) if C.shape[-2] <= C.shape[-1] else torch.bmm(C.mT, C, out=out)
    return _threaded(torch.linalg.eigvalsh, G).flip(-1).clamp_min(0).to(_F64)


def _choose_block(d: int, r: int, n_w: int, n_r: int, m: int, esize: int, budget: int) -> int:
    """Tile size: 64 (128 from d = 2048 on), halved until the tile buffers of
    ``_gram_products`` (tiles of ``width = 2 · block``, left operands) fit ``budget``."""
    block = 128 if d >= 2048 else 64
    while block > 8 and (2 * (n_w + m) * block * 2 * block + (n_w + n_r) * r * 2 * block) * esize > budget:
        block //= 2
    return min(block, d)


def scores(
    model,
    kinds: str = "QKV",
    measures: tuple[str, ...] | list[str] | str = ("frobenius", "frobenius_baselined", "tight", "overlap"),
    metric: str | Metric = "identity",
    *,
    offset: float = 0.0,
    pairs: str | int = 256,
    precision: str = "float32",
    ridge: float = DEFAULT_RIDGE,
    baseline_samples: int = 256,
    seed: int = 0,
    max_memory: int | None = None,
    progress: bool = True,
    block: int | None = None,
    width: int | None = None,
    device: str | torch.device | None = None,
) -> ScoreTable:
    """Composition scores of every (earlier writer, later reader) head pair.

    ``kinds``: any of ``'Q'``, ``'K'``, ``'V'``. ``measures``: names from
    ``compscope.measures.measures()`` (``'all'`` for every one). ``metric``: ``'identity'``,
    ``'embed'``, ``'unembed'`` or a ``Metric``. ``pairs``: for X-route measures, ``'all'`` or
    the number of top pairs by ``frobenius`` per kind (others NaN). ``precision``: dtype of
    the large products (``'float32'``, the default: see the module docstring for its error;
    ``'float64'``: exact to ~1e-12, about half the speed). ``max_memory``: bytes for tiles
    and blocks (the per-head bases come on top). ``block``, ``width``: Gram tile rows and
    columns (default from ``d`` and ``max_memory``). ``device``: where to compute (``'cpu'``,
    ``'cuda'``, ``'cuda:1'``; default CUDA when available, else the CPU)."""
    from .loading import load

    hw = model if isinstance(model, HeadWeights) else load(model)
    names = list(DEFAULT_MEASURES) if measures == "all" else [measures] if isinstance(measures, str) else list(measures)
    ms = [get_measure(n) for n in names]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise OptionError(f"kinds={kinds!r}: use letters from 'QKV'")
    kinds = "".join(dict.fromkeys(kinds))
    if pairs != "all" and not (isinstance(pairs, int) and pairs > 0):
        raise OptionError(f"pairs={pairs!r}: use 'all' or a positive number of top pairs")
    dtype = {"float64": torch.float64, "float32": torch.float32}.get(precision)
    if dtype is None:
        raise OptionError(f"precision={precision!r}: use 'float32' or 'float64'")
    met = get_metric(metric, hw, ridge)
    dev = resolve_device(device)
    budget = _memory_budget(max_memory, dev)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # IEEE float32: the error bounds assume it
    try:
        return _scores(hw, kinds, ms, met, dev, budget, offset, pairs, dtype, baseline_samples, seed, progress, block, width)
    finally:
        torch.set_float32_matmul_precision(previous)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device``: CUDA when available for ``None``, else the CPU; an
    ``OptionError`` for devices that are not there or that the engine does not support."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise OptionError(f"device={device!r}: not a device name ({e}); use 'cpu' or 'cuda'") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise OptionError(f"device={device!r}: torch sees no CUDA device here (torch {torch.__version__}); use 'cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise OptionError(f"device={device!r}: there are {torch.cuda.device_count()} CUDA devices")
    elif dev.type != "cpu":
        raise OptionError(f"device={device!r}: the engine runs on 'cpu' or 'cuda'")
    return dev


def _scores(hw: HeadWeights, kinds: str, ms: list[Measure], met: Metric, dev: torch.device, budget: int,
            offset: float, pairs: str | int, dtype: torch.dtype, baseline_samples: int, seed: int, progress: bool,
            block: int | None, width: int | None) -> ScoreTable:
    """The body of :func:`scores`, options checked."""
    L, H, r, d = hw.n_layers, hw.n_heads, hw.d_head, hw.d_model
    per_layer_metric = not met.is_identity and None not in met.sqrt
    gram_ms = [m for m in ms if m.from_gram is not None]
    x_ms = [m for m in ms if m.from_gram is None]
    all_x = bool(x_ms) and pairs == "all"
    need_gram = not all_x and bool(gram_ms or x_ms)
    baseline = any(m.needs_baseline for m in ms)
    # reader layers sharing one metric: all of them, or one group per layer
    groups = [[l2] for l2 in range(1, L)] if per_layer_metric else [list(range(1, L))] if L > 1 else []
    nan = lambda *shape: torch.full(shape, float("nan"), dtype=_F64)  # noqa: E731
    ba2, x2 = {k: nan(L, H, L, H) for k in kinds}, {k: nan(L, H, L, H) for k in kinds}
    expected = {k: nan(L, H, L, H) for k in kinds} if baseline else None
    xval = {(m.name, k): nan(L, H, L, H) for m in x_ms for k in kinds}
    # spectra per pair, broadcastable to (L, H, L, H, r): writer (L, H, 1, 1, r), reader (1, 1, L, H, r)
    full = (L, H, L, H) if per_layer_metric else (L, H, 1, 1)
    a = torch.zeros(*full, r, dtype=_F64)
    rank_a = torch.zeros(full, dtype=torch.long)
    b = {k: torch.zeros(*((L, H, L, H) if per_layer_metric else (1, 1, L, H)), r, dtype=_F64) for k in kinds}
    bases: dict[str, Sides] = {}
    bar = progress_bar(0, "composition", enabled=progress)
    for readers in groups:
        lmax, K = readers[-1], len(kinds)
        wl, rl = range(0, lmax), range(readers[0], lmax + 1)
        rbuf = torch.empty(len(readers), K, H, r, d, dtype=dtype, device=dev)  # reader rows ordered (layer, kind, head)
        sd = head_sides(hw, ("W",) + tuple(kinds), met, offset, {"W": wl, **{k: rl for k in kinds}}, dtype,
                        readers[0] if per_layer_metric else None, out={k: rbuf[:, i] for i, k in enumerate(kinds)}, device=dev)
        W = sd["W"]
        spec = {side: sd[side].spectrum.cpu() for side in sd}
        W_rank = W.rank.cpu()
        if per_layer_metric:
            (l2,) = readers
            a[:l2, :, l2], rank_a[:l2, :, l2] = spec["W"][:, :, None], W_rank[:, :, None]
            for k in kinds:
                b[k][:, :, l2] = spec[k][0][None]
        else:
            a[:lmax, :, 0, 0], rank_a[:lmax, :, 0, 0] = spec["W"], W_rank
            for k in kinds:
                b[k][0, 0, rl.start :] = spec[k]
            bases = sd
        if baseline:
            from .baseline import expected_frobenius

            for k in kinds:
                for j, l2 in enumerate(readers):
                    e, _ = expected_frobenius(spec["W"][:l2].flatten(0, 1), spec[k][j], d, baseline_samples, seed)
                    expected[k][:l2, :, l2] = e.view(H, l2, H).permute(1, 2, 0)
        if need_gram:
            per = K * H
            g = max(1, round(64 / per))  # reader layers per product: about 64 rows
            rg = [(i * per, min(len(readers), i + g) * per, readers[min(len(readers), i + g) - 1] * H) for i in range(0, len(readers), g)]
            n_w = len(wl) * H
            blk = block or _choose_block(d, r, n_w, len(readers) * per, max(r1 - r0 for r0, r1, _ in rg), torch.finfo(dtype).bits // 8, budget)
            bar.total += len(_blocks(d, blk))
            rspec = torch.stack([sd[k].spectrum for k in kinds], 1).flatten(0, 2)
            b_, x_ = _gram_products(W, rbuf.flatten(0, 2), rspec, rg, blk, width or 2 * blk, bar)
            if dtype == torch.float32:
                rrank = torch.stack([sd[k].rank for k in kinds], 1).flatten()
                _refine_small(W, rbuf.flatten(0, 2), rspec, rrank, b_, x_, rg, H, budget)
            b_ = b_.to("cpu", _F64).view(len(readers), K, H, len(wl), H)
            x_ = x_.to("cpu", _F64).view(len(readers), K, H, len(wl), H)
            for i, k in enumerate(kinds):
                for j, l2 in enumerate(readers):
                    ba2[k][:l2, :, l2] = b_[j, i, :, :l2].permute(1, 2, 0)
                    x2[k][:l2, :, l2] = x_[j, i, :, :l2].permute(1, 2, 0)
        if all_x:
            bar.total += len(readers) * K
            for k in kinds:
                for j, l2 in enumerate(readers):
                    e = None if expected is None else expected[k][:l2, :, l2]
                    _x_all(W, sd[k], j, l2, budget, x_ms, {m.name: xval[(m.name, k)] for m in x_ms}, ba2[k], x2[k], e, d)
                    bar.update(1)
    bar.close()
    values = {}
    for k in kinds:
        stats = GramStats(ba2[k], x2[k], a, b[k], rank_a, d, None if expected is None else expected[k])
        for m in gram_ms:
            values[(m.name, k)] = _only_forward(m.from_gram(stats).expand(L, H, L, H), L)
        if x_ms and not all_x and groups:
            frob = _only_forward(get_measure("frobenius").from_gram(stats), L)
            flat = torch.nan_to_num(frob, nan=-1.0).flatten()
            n = min(int(pairs), int(torch.isfinite(frob).sum()))
            sel = torch.stack(torch.unravel_index(flat.topk(n).indices, frob.shape), -1)
            X, s = _x_pairs(hw, met, offset, k, sel, per_layer_metric, bases, dtype, dev)
            e = None if expected is None else _at_pairs(expected[k], sel)
            p = PairSpectra(_at_pairs(a, sel), _at_pairs(b[k], sel), X, d, _at_pairs(rank_a, sel), e, core_sv2=s)
            for m in x_ms:
                xval[(m.name, k)][sel[:, 0], sel[:, 1], sel[:, 2], sel[:, 3]] = m.exact(p).to(_F64)
    values.update(xval)
    order = {(m.name, k): values[(m.name, k)] for k in kinds for m in ms}
    return ScoreTable.from_dense(order, hw, met, offset=offset)


def _x_all(W: Sides, R: Sides, j: int, l2: int, budget: int, x_ms: list[Measure], out: dict[str, Tensor],
           ba2: Tensor, x2: Tensor, expected: Tensor | None, d: int, chunk_bytes: int = 4 << 20) -> None:
    """Every ``X`` of reader layer ``l2`` (index ``j`` in ``R``) against writer layers ``< l2``:
    ``V_{l2}ᵀ U_{<l2}`` in writer chunks of about ``chunk_bytes`` (cache-sized; at most
    ``budget``), each one matrix multiply into a reused buffer. Fills ``[:l2, :, l2]`` of
    ``ba2``, ``x2`` and of each X-route measure's ``out``."""
    H, r = R.rows.shape[1], R.rows.shape[2]
    Vt = R.rows[j].reshape(H * r, -1)
    b = R.spectrum[j]  # (H, r)
    Ut = W.rows[:l2].flatten(0, 1)  # (n, r, d)
    a, rank = W.spectrum[:l2].flatten(0, 1), W.rank[:l2].flatten()
    n, dt = Ut.shape[0], Ut.dtype
    step = max(1, min(n, min(budget, chunk_bytes) // (H * r * r * Ut.element_size())))
    size = H * step * r * r  # buffers reused by every chunk (fresh large tensors cost page faults)
    xbuf, pbuf, cbuf, gbuf = (torch.empty(size, dtype=dt, device=Ut.device) for _ in range(4))
    res = {k: torch.empty(H, n, dtype=_F64, device=Ut.device) for k in ["ba2", "x2"] + [m.name for m in x_ms]}
    e = None if expected is None else expected.flatten(0, 1).T.to(Ut.device)  # (H, n)
    bw = b.to(dt)[:, None, :, None]
    for c0 in range(0, n, step):
        c1, c = min(n, c0 + step), min(n, c0 + step) - c0
        k = H * c * r * r
        Xm = torch.mm(Vt, Ut[c0:c1].flatten(0, 1).T, out=xbuf[:k].view(H * r, c * r))
        X = pbuf[:k].view(H, c, r, r).copy_(Xm.view(H, r, c, r).permute(0, 2, 1, 3))  # (H, c, r_B, r_A)
        res["x2"][:, c0:c1] = torch.linalg.vector_norm(X, dim=(-2, -1)).square()
        C = torch.mul(X, a[c0:c1].to(dt)[None, :, None, :], out=cbuf[:k].view(H, c, r, r)).mul_(bw)  # diag(b) X diag(a)
        res["ba2"][:, c0:c1] = torch.linalg.vector_norm(C, dim=(-2, -1)).square()
        pa, pb = a[None, c0:c1].expand(H, c, r).reshape(-1, r), b[:, None].expand(H, c, r).reshape(-1, r)
        p = PairSpectra(pa, pb, X.view(-1, r, r), d, rank[None, c0:c1].expand(H, c).reshape(-1),
                        None if e is None else e[:, c0:c1].reshape(-1), core_sv2=_core_sv2(C.view(-1, r, r), gbuf[:k].view(-1, r, r)))
        for m in x_ms:
            res[m.name][:, c0:c1] = m.exact(p).to(_F64).view(H, c)
    ba2[:l2, :, l2] = res.pop("ba2").view(H, l2, H).permute(1, 2, 0).cpu()
    x2[:l2, :, l2] = res.pop("x2").view(H, l2, H).permute(1, 2, 0).cpu()
    for name, v in res.items():
        out[name][:l2, :, l2] = v.view(H, l2, H).permute(1, 2, 0).cpu()


def _x_pairs(hw, met, offset, kind, sel, per_layer_metric, bases, dtype, device, chunk: int = 4096) -> tuple[Tensor, Tensor]:
    """``X`` and the core's squared singular values for the pairs ``sel: (n, 4)``, on the CPU."""
    Xs, ss = [], []
    for i in range(0, len(sel), chunk):
        s = sel[i : i + chunk].to(device)
        if per_layer_metric:  # bases depend on the reader layer
            ws, rs = [], []
            for l1, h1, l2, h2 in s.tolist():
                sd = head_sides(hw, ("W", kind), met, offset, {"W": range(l1, l1 + 1), kind: range(l2, l2 + 1)}, dtype, l2,
                                device=device)
                ws.append((sd["W"].rows[0, h1], sd["W"].spectrum[0, h1]))
                rs.append((sd[kind].rows[0, h2], sd[kind].spectrum[0, h2]))
            UA, a = (torch.stack(t) for t in zip(*ws))
            VB, b = (torch.stack(t) for t in zip(*rs))
        else:
            W, R = bases["W"], bases[kind]
            UA, a = W.rows[s[:, 0], s[:, 1]], W.spectrum[s[:, 0], s[:, 1]]
            VB, b = R.rows[s[:, 2] - 1, s[:, 3]], R.spectrum[s[:, 2] - 1, s[:, 3]]
        X = VB @ UA.mT
        Xs.append(X.cpu())
        ss.append(_core_sv2(X * b.to(X.dtype)[:, :, None] * a.to(X.dtype)[:, None, :]).cpu())
    return torch.cat(Xs), torch.cat(ss)


def _at_pairs(t: Tensor, sel: Tensor) -> Tensor:
    """``t[l1, h1, l2, h2]`` for ``sel: (n, 4)``; ``t`` may be broadcast in its writer
    (``(1, 1, L, H, ...)``) or reader (``(L, H, 1, 1, ...)``) dimensions."""
    i = [sel[:, j] if t.shape[j] > 1 else torch.zeros_like(sel[:, j]) for j in range(4)]
    return t[i[0], i[1], i[2], i[3]]


def _only_forward(t: Tensor, L: int) -> Tensor:
    keep = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)  # l1 < l2
    return torch.where(keep[:, None, :, None], t, torch.full_like(t, float("nan")))
