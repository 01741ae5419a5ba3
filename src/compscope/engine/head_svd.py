"""Thin SVDs of every head's ``W_OV`` and ``W_QK`` from their factors, for the composition engine.

For ``M = Pᵀ Q`` (``P, Q``: ``r × d``) with ``r × r`` Grams
``G_P = P Pᵀ``, ``G_Q = Q Qᵀ``: ``G_Q = F Fᵀ`` (Cholesky) makes ``F⁻¹ Q`` orthonormal and
``M = (Pᵀ F)(F⁻¹ Q)``; ``Fᵀ G_P F = W diag(σ²) Wᵀ`` (eigh) gives ``Uᵀ = diag(σ)⁻¹ Wᵀ Fᵀ P``
and ``Vᵀ = diag(σ)⁻¹ Uᵀ M``. Float64 Grams and ``r × r`` algebra, then one ``(r × r) @ (r ×
d)`` product per head and side: ``O(d r²)`` at matrix-multiply speed. The error grows like
``ε κ²``; heads with a condition number above 1e4 (or rank-deficient) take the QR route
(QR of each factor, SVD of the ``r × r`` core), whose tolerance ``σ_max · d · ε`` sets ``rank``.
With grouped-query attention the ``K`` and ``V`` factors (metric, rotation and Gram) are
computed once per K/V head and shared by its query heads; what follows differs per query head.

The engine needs, per head, the orthonormal rows of one side of each circuit (``U_Aᵀ`` of a
writer, ``V_Bᵀ`` of a reader of kind Q, K or V) and its spectrum: :func:`head_sides`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import OptionError
from ..core.factors import KINDS, layer_factor
from ..core.heads import HeadWeights
from ..core.lowrank import numerical_rank, svd_from_factors
from ..core.metrics import Metric
from .threads import threaded
from .workspace import Workspace

#: Relative size of the smallest eigenvalue of a factor Gram (σ_min²/σ_max²) below which a
#: head's SVD takes the QR route (Gram route error ~ ε κ²: 1e-8 at this bound).
_WELL_CONDITIONED = 1e-8
_F64 = torch.float64
#: Heads per batch of ``r × r`` core factorisations (temporaries of ~64 · r² float64 each).
_CORE_CHUNK = 64


@dataclass(frozen=True)
class Sides:
    """Singular pieces of one side of every head of some layers.

    ``rows: (layer, head, r, d)``: orthonormal rows ``U_Aᵀ`` (writers) or ``V_Bᵀ`` (readers),
    rows beyond the rank zero; ``spectrum: (layer, head, r)`` float64, descending, zero beyond
    the rank, divided by its largest value (this keeps every product in range); ``rank: (layer,
    head)``; ``top: (layer, head)`` float64, that largest value (0 for a zero map), for the measures
    that keep a map's scale (``read_gain``)."""

    rows: Tensor
    spectrum: Tensor
    rank: Tensor
    top: Tensor


#: The two SVDs per head, ``M = Pᵀ Q``: (side given by U, side given by V, factor P, factor Q).
#: ``W_OV = W_O W_V``: writers read ``U``, V-readers ``V``. ``B_K = W_Qᵀ (R(-δ) W_K)``:
#: K-readers read its row space ``V``, Q-readers (``B_Q = B_Kᵀ``) its column space ``U``.
_CIRCUITS = (("W", "V", "O", "V"), ("Q", "K", "Q", "K"))


def _wants(sides: tuple[str, ...], layers: dict[str, range], layer: int, circuit: tuple[str, ...]) -> tuple[bool, bool]:
    """Whether the ``U`` side and the ``V`` side of ``circuit`` in ``layer`` are wanted."""
    return tuple(sd in sides and layer in layers[sd] for sd in circuit[:2])


def svd_jobs(sides: tuple[str, ...], layers: dict[str, range]) -> list[tuple[int, tuple[str, str, str, str]]]:
    """The (layer, circuit) SVDs :func:`head_sides` computes for ``sides`` and ``layers``."""
    return [(layer, c) for layer in sorted(set().union(*(layers[s] for s in sides))) for c in _CIRCUITS
            if any(_wants(sides, layers, layer, c))]


def _svd_cores(Gp: Tensor, Gq: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The ``r × r`` part of the thin SVDs ``M = Pᵀ Q = U diag(σ) Vᵀ`` of a batch of heads
    from the float64 Grams ``Gp = P Pᵀ``, ``Gq = Q Qᵀ``: ``Uᵀ = cu P``, ``Vᵀ = cv Q``.

    With ``Q Qᵀ = F Fᵀ`` (Cholesky), ``Q̂ = F⁻¹ Q`` has orthonormal rows and ``M = (Pᵀ F) Q̂``;
    ``Fᵀ Gp F = W diag(σ²) Wᵀ`` (eigh) gives ``cu = diag(σ)⁻¹ Wᵀ Fᵀ`` and
    ``cv = diag(σ)⁻¹ cu Gp`` (``Vᵀ = diag(σ)⁻¹ Uᵀ M``).
    Returns ``cu, cv, σ`` (descending) and ``ok``: false for heads whose ``M``, ``P`` or ``Q``
    has a condition number above 1e4 (the error grows like ε κ²) or is rank-deficient.
    On CUDA the ``r × r`` problems are solved on the CPU (LAPACK over torch's threads) and the
    results sent back: a GPU solves a batch of ``eigh`` above 32 × 32 one matrix at a time,
    which took seconds at the 7B shape (``bench/RESULTS.md``, "CUDA")."""
    if Gp.device.type != "cpu":
        return tuple(t.to(Gp.device) for t in _svd_cores(Gp.cpu(), Gq.cpu()))
    F, info = torch.linalg.cholesky_ex(Gq)
    mu, W = threaded(torch.linalg.eigh, F.mT @ Gp @ F)
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


def _bases(coef: Tensor, P: Tensor, P64, out: Tensor) -> Tensor:
    """``coef P`` into ``out`` (its dtype): the heads' basis rows from their ``r × r`` coefficients
    (float64) and the factor ``P`` in ``out``'s dtype. Where ``P`` leaves that dtype's normal range
    (weights whitened by a metric of large or small scale overflow float32, or fall to its
    subnormals), it is taken in float64 (``P64()``) scaled by a power of two, ``(coef·2ᵉ)(P·2⁻ᵉ)``,
    which is exact; the rows themselves are of order one."""
    top = P.abs().amax()
    if out.dtype == _F64 or (torch.isfinite(top) and top > torch.finfo(out.dtype).tiny * 2.0 ** 24):
        return torch.bmm(coef.to(out.dtype), P, out=out)
    P = P64()
    e = 2.0 ** torch.floor(torch.log2(P.abs().amax()))
    return torch.bmm((coef * e).to(out.dtype), (P / e).to(out.dtype), out=out)


def _factor(hw: HeadWeights, metric: Metric, layer_metric: int | None, layer: int, name: str, offset: float,
            out: Tensor, shared: bool = False) -> Tensor:
    """Factor ``name`` of one layer (:func:`compscope.core.factors.layer_factor`: whitened, and
    rotated for ``K``), ``(head, r, d)`` per query head, or per K/V head with ``shared`` (GQA:
    transformed once for all the query heads that share it). Written into ``out`` (whose dtype
    and device it takes), or the stored weights themselves when they need no change."""
    m = metric.for_factor(name, layer, layer_metric if layer_metric is not None else -1)
    # m is this factor's own matrix (G^{-1/2} for O, G^{1/2} otherwise); layer_factor reads the one it needs
    w = layer_factor(hw, layer, name, sqrt=m, inv_sqrt=m, offset=offset, per_kv=True, device=out.device)
    if name in "KV" and not shared and list(hw.kv_map) != list(range(hw.n_kv_heads)):
        return out.copy_(w[torch.tensor(hw.kv_map, device=w.device)])
    if w.dtype == out.dtype:
        return w
    return out[: w.shape[0]].copy_(w)  # into a reused buffer: no page faults


def head_sides(
    hw: HeadWeights, sides: tuple[str, ...], metric: Metric, offset: float, layers: dict[str, range],
    dtype: torch.dtype, layer_metric: int | None = None, out: dict[str, Tensor] | None = None,
    device: torch.device | str = "cpu", bar=None, ws: Workspace | None = None,
) -> dict[str, Sides]:
    """Writer (``'W'``) and reader (``'Q'``, ``'K'``, ``'V'``) sides for ``layers[side]``: one
    SVD of ``W_OV`` serves ``W`` and ``V``, one of ``W_QK`` serves ``Q`` and ``K`` (see
    ``_CIRCUITS``). Float64 Grams layer by layer, the ``r × r`` cores of all heads batched,
    then the bases ``cu P`` and ``cv Q`` layer by layer in ``dtype``; heads that are not
    well-conditioned take the QR route. ``out[side]``: optional ``(layer, head, r, d)``
    buffer for the rows. Everything is computed and returned on ``device``. ``bar``: a
    progress bar (``compscope.progress``) advanced twice per job of :func:`svd_jobs`. ``ws``: where
    scratch buffers come from (:mod:`compscope.engine.workspace`); the ``r × r`` cores are computed
    in chunks of ``_CORE_CHUNK`` heads so that their temporaries stay small."""
    H, r, d = hw.n_heads, hw.d_head, hw.d_model
    res = {}
    for side in sides:
        if side not in ("W",) + KINDS:
            raise OptionError(f"unknown kind {side!r}; kinds: Q, K, V")
        n = len(layers[side])
        buf = out[side] if out and side in out else torch.empty(n, H, r, d, dtype=dtype, device=device)
        res[side] = Sides(buf, torch.zeros(n, H, r, dtype=_F64, device=device), torch.zeros(n, H, dtype=torch.long, device=device),
                          torch.zeros(n, H, dtype=_F64, device=device))
    at = {side: {l: i for i, l in enumerate(layers[side])} for side in sides}
    jobs = svd_jobs(sides, layers)
    ws = ws or Workspace()
    take = lambda name, shape, dt=_F64: ws.take(name, shape, dt, device)  # noqa: E731
    # float64 first: taking a name in a new dtype frees its other dtypes not yet taken in this call
    work = {dt: (take("factor P", (H, r, d), dt), take("factor Q", (H, r, d), dt)) for dt in dict.fromkeys((_F64, dtype))}
    factor = lambda layer, name, dt, i=0, shared=False: _factor(hw, metric, layer_metric, layer, name, offset, work[dt][i], shared)  # noqa: E731
    Gp, Gq = take("Gram P", (len(jobs), H, r, r)), take("Gram Q", (len(jobs), H, r, r))
    kv = torch.tensor(hw.kv_map, device=device)
    tick = (lambda: None) if bar is None else (lambda: bar.update(1))  # noqa: E731
    if bar is not None:
        bar.set_postfix(step="head SVDs")
    for j, (layer, c) in enumerate(jobs):
        P, Q = factor(layer, c[2], _F64), factor(layer, c[3], _F64, 1, True)  # Q: K or V, per K/V head
        torch.bmm(P, P.mT, out=Gp[j])
        if Q.shape[0] == H and list(hw.kv_map) == list(range(H)):
            torch.bmm(Q, Q.mT, out=Gq[j])
        else:
            Gq[j] = (Q @ Q.mT)[kv]
        tick()
    n = len(jobs) * H
    cu, cv = take("core U", (n, r, r)), take("core V", (n, r, r))
    s, ok = torch.empty(n, r, dtype=_F64, device=device), torch.empty(n, dtype=torch.bool, device=device)
    for i in range(0, n, _CORE_CHUNK):
        part = slice(i, i + _CORE_CHUNK)
        cu[part], cv[part], s[part], ok[part] = _svd_cores(Gp.flatten(0, 1)[part], Gq.flatten(0, 1)[part])
    cu, cv, s, ok = (t.unflatten(0, (len(jobs), H)) for t in (cu, cv, s, ok))
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
        top = sj[:, :1]
        sj = sj / torch.where(top > 0, top, 1.0)  # largest singular value 1; the scale kept apart in Sides.top
        for sd, want, coef, name, basis in zip(c[:2], _wants(sides, layers, layer, c), (cu, cv), c[2:], (0, 1)):
            if not want:
                continue
            i = at[sd][layer]
            rows = res[sd].rows[i]
            _bases(coef[j], factor(layer, name, dtype), lambda: factor(layer, name, _F64), rows)
            if len(bad):
                Bt = ((U, V)[basis] * keep[:, None, :]).mT
                rows[bad] = 0
                rows[bad, : Bt.shape[1]] = Bt.to(dtype)
            res[sd].spectrum[i] = sj
            res[sd].rank[i] = rj
            res[sd].top[i] = top[:, 0]
        tick()
    return res
