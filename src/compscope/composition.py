"""All-pairs Q-, K- and V-composition, exact, from the factors (MATH.md).

For every writer ``h1`` in layer ``l1`` and reader ``h2`` in a later layer ``l2 > l1``
(same-layer and backward pairs are not computed), with ``A = W_OV^{h1}`` and

    kind Q: B = W_QK^{h2 T} = W_Kᵀ R(δ) W_Q      (reads through W_Q)
    kind K: B = W_QK^{h2}   = W_Qᵀ R(-δ) W_K     (reads through W_K)
    kind V: B = W_OV^{h2}   = W_O W_V            (reads through W_V)

(``δ`` the rotary offset, query minus key position; in whitened coordinates when a metric is
given). Thin SVDs of every ``A`` and ``B`` come from their ``r × d`` factors (QR of each,
SVD of the ``r × r`` core) in float64.

Routes, cheapest exact one per measure:

- **gram** (frobenius, frobenius_baselined, tight, overlap, shared_dims): ``‖BA‖_F² =
  ⟨BᵀB, AAᵀ⟩_F`` and ``‖X‖_F² = ⟨P_B, P_A⟩_F`` for all pairs of a tile with one matrix
  multiply of symmetric-packed ``d × d`` Grams (``d(d+1)/2`` entries, off-diagonals times
  √2): ``N_r N_w d²/2`` multiply-adds per product instead of ``N_r N_w r² d`` for every ``X``.
- **X** (bandwidth, spectral, and any measure on request): ``X = V_Bᵀ U_A`` per pair, batched.
  For all pairs when ``pairs='all'``, else for the top ``pairs`` pairs by ``frobenius``.

Tiles are whole layers; writer layers are grouped so that the packed Grams fit ``max_memory``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .errors import OptionError
from .heads import HeadWeights
from .measures import GramStats, PairSpectra, get_measure
from .metrics import DEFAULT_RIDGE, Metric, get_metric
from .progress import progress_bar
from .results import ScoreTable

KINDS = ("Q", "K", "V")
DEFAULT_MEASURES = ("frobenius", "frobenius_baselined", "tight", "overlap", "shared_dims", "bandwidth", "spectral")


@dataclass(frozen=True)
class Sides:
    """Per-head SVD pieces, float64. ``basis: (layer, head, d, r)`` is ``U_A`` (writers) or
    ``V_B`` (readers); ``spectrum: (layer, head, r)`` descending; ``rank: (layer, head)``."""

    basis: Tensor
    spectrum: Tensor
    rank: Tensor


def _svd_factors(left: Tensor, right: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Batched thin SVD of ``left @ right`` (``(..., m, r) @ (..., r, n)``): ``U, S, V``."""
    q_l, r_l = torch.linalg.qr(left)
    q_r, r_r = torch.linalg.qr(right.transpose(-1, -2))
    u, s, vh = torch.linalg.svd(r_l @ r_r.transpose(-1, -2), full_matrices=False)
    return q_l @ u, s, q_r @ vh.transpose(-1, -2)


def _rank(s: Tensor, dims: int) -> Tensor:
    tol = s[..., :1] * dims * torch.finfo(s.dtype).eps
    return (s > tol).sum(-1)


def _rotate_rows(w: Tensor, hw: HeadWeights, offset: float) -> Tensor:
    """``R(offset) W`` for ``w: (layer, head, r, d)`` (rows are head dims)."""
    if hw.rotary is None or offset == 0:
        return w
    pos = torch.tensor([float(offset)])
    out = [hw.rotary.rotate(w[l].transpose(-1, -2), pos, l).transpose(-1, -2) for l in range(w.shape[0])]
    return torch.stack(out)


def head_sides(hw: HeadWeights, kind: str, metric: Metric, offset: float = 0.0, layer_metric: int | None = None) -> Sides:
    """Writer (``kind='W'``) or reader (``'Q'``, ``'K'``, ``'V'``) sides of every head."""
    f64 = torch.float64
    kv = list(hw.kv_map)
    W_Q, W_K, W_V, W_O = (hw.W_Q.to(f64), hw.W_K.to(f64)[:, kv], hw.W_V.to(f64)[:, kv], hw.W_O.to(f64))
    s, si = metric.for_layer(layer_metric) if layer_metric is not None else metric.for_layer(-1)
    rd = (lambda w: w) if s is None else (lambda w: w @ s)  # reading factor W G^{1/2}  # noqa: E731
    wr = (lambda w: w) if si is None else (lambda w: si @ w)  # writing factor G^{-1/2} W_O  # noqa: E731
    tr = lambda w: w.transpose(-1, -2)  # noqa: E731
    if kind in ("W", "V"):
        U, S, V = _svd_factors(wr(W_O), rd(W_V))
        basis = U if kind == "W" else V
    elif kind == "Q":
        U, S, V = _svd_factors(tr(rd(W_K)), rd(_rotate_rows(W_Q, hw, offset)))
        basis = V
    elif kind == "K":
        U, S, V = _svd_factors(tr(rd(W_Q)), rd(_rotate_rows(W_K, hw, -offset)))
        basis = V
    else:
        raise OptionError(f"unknown kind {kind!r}; kinds: Q, K, V")
    return Sides(basis, S, _rank(S, hw.d_model))


def _packed(basis: Tensor, weights: Tensor, dtype: torch.dtype) -> Tensor:
    """Symmetric-packed ``V diag(w) Vᵀ`` for ``basis: (n, d, r)``, ``weights: (n, r)`` -> ``(n, d(d+1)/2)``."""
    d = basis.shape[-2]
    b = basis.to(dtype)
    M = (b * weights.to(dtype)[:, None, :]) @ b.transpose(-1, -2)
    iu = torch.triu_indices(d, d)
    scale = torch.where(iu[0] == iu[1], 1.0, math.sqrt(2.0)).to(dtype)
    return M[:, iu[0], iu[1]] * scale


def _memory_budget(max_memory: int | None) -> int:
    if max_memory is not None:
        return int(max_memory)
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable"))
    except (OSError, StopIteration):
        avail = 8 << 30
    return avail // 4


def scores(
    model,
    kinds: str = "QKV",
    measures: tuple[str, ...] | list[str] | str = ("frobenius", "frobenius_baselined", "tight", "overlap"),
    metric: str | Metric = "identity",
    *,
    offset: float = 0.0,
    pairs: str | int = 256,
    precision: str = "float64",
    ridge: float = DEFAULT_RIDGE,
    baseline_samples: int = 256,
    seed: int = 0,
    max_memory: int | None = None,
    progress: bool = True,
) -> ScoreTable:
    """Composition scores of every (earlier writer, later reader) head pair.

    ``kinds``: any of ``'Q'``, ``'K'``, ``'V'``. ``measures``: names from
    ``compscope.measures.measures()`` (``'all'`` for every one). ``metric``: ``'identity'``,
    ``'embed'``, ``'unembed'`` or a ``Metric``. ``pairs``: for X-route measures, ``'all'`` or
    the number of top pairs by ``frobenius`` per kind (others NaN). ``precision``: dtype of
    the large Gram products (``'float64'`` exact to ~1e-12; ``'float32'`` faster, absolute
    error ~1e-4 on near-zero ``frobenius``)."""
    from .loading import load

    hw = model if isinstance(model, HeadWeights) else load(model)
    names = list(DEFAULT_MEASURES) if measures == "all" else [measures] if isinstance(measures, str) else list(measures)
    ms = [get_measure(n) for n in names]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise OptionError(f"kinds={kinds!r}: use letters from 'QKV'")
    if pairs != "all" and not (isinstance(pairs, int) and pairs > 0):
        raise OptionError(f"pairs={pairs!r}: use 'all' or a positive number of top pairs")
    dtype = {"float64": torch.float64, "float32": torch.float32}.get(precision)
    if dtype is None:
        raise OptionError(f"precision={precision!r}: use 'float32' or 'float64'")
    met = get_metric(metric, hw, ridge)
    L, H, d = hw.n_layers, hw.n_heads, hw.d_model
    values = {}
    per_layer_metric = not met.is_identity and None not in met.sqrt
    budget = _memory_budget(max_memory)
    D2 = d * (d + 1) // 2
    esize = torch.finfo(dtype).bits // 8
    # writer layers per block: packed Grams (2 per head) of the block and of one reader layer
    block = max(1, min(L - 1, budget // max(1, 2 * H * D2 * esize) - 1)) if L > 1 else 1
    gram_ms = [m for m in ms if m.from_gram is not None]
    x_ms = [m for m in ms if m.from_gram is None]
    need_frob_for_topk = bool(x_ms) and pairs != "all"
    total = len(kinds) * (L - 1)
    bar = progress_bar(total, "composition", enabled=progress)
    writers_fixed = None if per_layer_metric else head_sides(hw, "W", met)  # the same for every kind
    for kind in kinds:
        ba2 = torch.full((L, H, L, H), float("nan"), dtype=torch.float64)
        x2 = torch.full_like(ba2, float("nan"))
        readers_fixed = None if per_layer_metric else head_sides(hw, kind, met, offset)
        if gram_ms or need_frob_for_topk:
            for start in range(0, L - 1, block):  # writer layers [start, stop), packed once
                stop = min(L - 1, start + block)
                packed_w = None
                for l2 in range(start + 1, L):
                    W = writers_fixed or head_sides(hw, "W", met, layer_metric=l2)
                    R = readers_fixed or head_sides(hw, kind, met, offset, layer_metric=l2)
                    if packed_w is None or per_layer_metric:
                        wb = W.basis[start:stop].reshape(-1, d, W.basis.shape[-1])
                        ws = W.spectrum[start:stop].reshape(-1, W.spectrum.shape[-1])
                        wr = W.rank[start:stop].reshape(-1)
                        packed_w = (_packed(wb, ws.pow(2), dtype), _packed(wb, _mask(wr, ws.shape[-1]).to(wb.dtype), dtype))
                    rb, rs = R.basis[l2], R.spectrum[l2]
                    n_r = _packed(rb, rs.pow(2), dtype)
                    p_r = _packed(rb, _mask(R.rank[l2], rs.shape[-1]).to(rb.dtype), dtype)
                    top = min(stop, l2)  # writers strictly before the reader
                    n_w, p_w = packed_w[0][: (top - start) * H], packed_w[1][: (top - start) * H]
                    ba2[start:top, :, l2] = (n_r @ n_w.T).to(torch.float64).T.reshape(top - start, H, H)
                    x2[start:top, :, l2] = (p_r @ p_w.T).to(torch.float64).T.reshape(top - start, H, H)
                    if start == 0:
                        bar.update(1)
        else:
            bar.update(L - 1)
        W_all = writers_fixed or head_sides(hw, "W", met, layer_metric=L - 1)
        R_all = readers_fixed or head_sides(hw, kind, met, offset, layer_metric=L - 1)
        a = W_all.spectrum[:, :, None, None, :].expand(L, H, L, H, -1)
        b = R_all.spectrum[None, None, :, :, :].expand(L, H, L, H, -1)
        rank_a = W_all.rank[:, :, None, None].expand(L, H, L, H)
        expected = None
        if any(m.needs_baseline for m in ms):
            e, _ = _baseline(W_all, R_all, d, baseline_samples, seed)
            expected = e
        stats = GramStats(ba2, x2, a, b, rank_a, d, expected)
        for m in gram_ms:
            values[(m.name, kind)] = _only_forward(m.from_gram(stats), L)
        if x_ms:
            if pairs == "all":
                sel = _forward_pairs(L, H)
            else:
                frob = _only_forward(get_measure("frobenius").from_gram(stats), L)
                flat = torch.nan_to_num(frob, nan=-1.0).flatten()
                k = min(int(pairs), int(torch.isfinite(frob).sum()))
                idx = flat.topk(k).indices
                sel = torch.stack(torch.unravel_index(idx, frob.shape), -1)
            xv = _x_route(hw, kind, met, offset, sel, x_ms, per_layer_metric, W_all, R_all, expected)
            for m in x_ms:
                out = torch.full((L, H, L, H), float("nan"), dtype=torch.float64)
                out[sel[:, 0], sel[:, 1], sel[:, 2], sel[:, 3]] = xv[m.name]
                values[(m.name, kind)] = out
    bar.close()
    return ScoreTable.from_dense(values, hw, met, offset=offset)


def _mask(rank: Tensor, r: int) -> Tensor:
    return (torch.arange(r)[None, :] < rank[:, None]).to(torch.float64)


def _only_forward(t: Tensor, L: int) -> Tensor:
    keep = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)  # l1 < l2
    return torch.where(keep[:, None, :, None], t, torch.full_like(t, float("nan")))


def _forward_pairs(L: int, H: int) -> Tensor:
    idx = torch.cartesian_prod(torch.arange(L), torch.arange(H), torch.arange(L), torch.arange(H))
    return idx[idx[:, 0] < idx[:, 2]]


def _baseline(W: Sides, R: Sides, d: int, n: int, seed: int) -> tuple[Tensor, Tensor]:
    from .baseline import expected_frobenius

    L, H, r = W.spectrum.shape
    e, se = expected_frobenius(W.spectrum.reshape(L * H, r), R.spectrum.reshape(L * H, -1), d, n, seed)
    return e.T.reshape(L, H, L, H), se.T.reshape(L, H, L, H)


def _x_route(hw, kind, met, offset, sel, x_ms, per_layer_metric, W_all, R_all, expected, chunk: int = 4096) -> dict:
    out = {m.name: [] for m in x_ms}
    for i in range(0, len(sel), chunk):
        s = sel[i : i + chunk]
        if per_layer_metric:  # bases depend on the reader layer
            ws, rs = [], []
            for l1, h1, l2, h2 in s.tolist():
                W = head_sides(hw, "W", met, layer_metric=l2)
                R = head_sides(hw, kind, met, offset, layer_metric=l2)
                ws.append((W.basis[l1, h1], W.spectrum[l1, h1], W.rank[l1, h1]))
                rs.append((R.basis[l2, h2], R.spectrum[l2, h2]))
            UA, a, ra = (torch.stack(t) for t in zip(*ws))
            VB, b = (torch.stack(t) for t in zip(*rs))
        else:
            UA, a, ra = W_all.basis[s[:, 0], s[:, 1]], W_all.spectrum[s[:, 0], s[:, 1]], W_all.rank[s[:, 0], s[:, 1]]
            VB, b = R_all.basis[s[:, 2], s[:, 3]], R_all.spectrum[s[:, 2], s[:, 3]]
        X = VB.transpose(-1, -2) @ UA
        X = X * _mask(ra, X.shape[-1])[:, None, :]
        e = None if expected is None else expected[s[:, 0], s[:, 1], s[:, 2], s[:, 3]]
        p = PairSpectra(a, b, X, hw.d_model, ra, e)
        for m in x_ms:
            out[m.name].append(m.exact(p))
    return {k: torch.cat(v) for k, v in out.items()}
