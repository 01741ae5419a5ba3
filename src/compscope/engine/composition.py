"""All-pairs Q-, K- and V-composition, exact, from the factors (docs/spec.md).

For every writer ``h1`` in layer ``l1`` and reader ``h2`` in a later layer ``l2 > l1``
(same-layer and backward pairs are not computed), with ``A = W_OV^{h1}`` and

    kind Q: B = W_QK^{h2 T} = W_Kᵀ R(δ) W_Q      (reads through W_Q)
    kind K: B = W_QK^{h2}   = W_Qᵀ R(-δ) W_K     (reads through W_K)
    kind V: B = W_OV^{h2}   = W_O W_V            (reads through W_V)

(``δ`` the rotary offset, query minus key position; in whitened coordinates when a metric is
given). ``B_Q = B_Kᵀ``, so one SVD of each head's ``W_QK`` serves kinds Q and K, and one of
its ``W_OV`` serves writers and V-readers.

**Steps** (one module each): the thin SVDs of every head's circuits from the factors
(:mod:`compscope.engine.head_svd`); then, per measure, the cheapest exact route: the **Gram route**
(:mod:`compscope.engine.gram_route`: frobenius, frobenius_baselined, tight, overlap, shared_dims,
read_gain from inner products of per-head ``d × d`` Grams, ``d²`` per pair instead of ``r² d``) or the **X
route** (:mod:`compscope.engine.x_route`: bandwidth and spectral, and every measure when
``pairs='all'``, from ``X = V_Bᵀ U_A``; by default only for the top pairs by ``frobenius``);
the Haar baseline of ``frobenius_baselined`` (:mod:`compscope.engine.baseline`).

**Precision per step**: factor Grams, their Cholesky/eigh, spectra, ranks and per-pair
results in float64 always; bases, Gram tiles, tile products, ``X`` blocks and ``C Cᵀ`` in
``precision``, float32 by default (about half the time of float64): within ~1e-6 relative on
typical scores; the Gram route's cancellation on near-zero scores, and its repair, are
described in :mod:`compscope.engine.gram_route`. ``precision='float64'``: exact to ~1e-12.
Two opt-in reduced product precisions trade accuracy for speed on GPUs (errors against float64
measured by ``bench/product_precision.py``): ``'tf32'`` (float32 storage, every float32 matmul
on TF32 tensor cores: 10-bit mantissas in, float32 accumulation; on a CPU torch may use its own
reduced float32 matmul or none) and ``'bfloat16'`` (the Gram route's tiles and pair products
in bfloat16 with float32 accumulation; the rest as in float32).
**Scale**: each head's spectrum is divided by its largest value once the float64 SVDs are done,
and the batched eigen-solver scales each core by a power of two: nothing in float32 overflows or
underflows for weights from 1e-30 to 1e30 or one entry of 1e26. Every measure but ``read_gain`` is
invariant to a positive scale of either map; ``read_gain`` reads the reader's largest value, kept
apart, as ``GramStats.b_top``.

**Memory**: the bases (``n_heads · r · d`` numbers per side) plus tile buffers, ``X`` blocks
and baseline chunks chosen to fit ``max_memory`` (default a quarter of the available memory
of the device). The bases and tile operands come from :mod:`compscope.engine.workspace`, kept for
the next call while they total at most 1 GiB (fresh pages cost up to a tenth of a call).

**Device**: everything from the factors on (factor Grams, SVDs, bases, tiles, ``X``, spectra)
runs on ``device``, CUDA when present unless told otherwise; weights are copied there one layer
and factor at a time, results come back to the CPU in float64, and the Haar baseline (``O(r²)``
per pair) stays on the CPU. Float32 products are kept in IEEE float32 (TF32 and other reduced
matmul precisions are switched off for the call), since the error bounds above assume it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import OptionError, check_int
from .gram_route import gram_products, refine_small
from .head_svd import Sides, head_sides
from .plan import memory_budget, plan_groups, resolve_device
from ..core.factors import check_kinds, check_offset
from ..core.heads import HeadWeights
from ..measures import DEFAULT, GramStats, Measure, PairSpectra, get_measure, select
from ..core.metrics import Metric, get_metric
from ..progress import progress_bar
from ..results.table import ScoreTable, top_entries
from .workspace import Workspace, borrowed
from .x_route import at_pairs, x_all, x_pairs

_F64 = torch.float64

#: ``precision`` -> (dtype of bases, tiles and ``X`` blocks; torch's float32 matmul precision for
#: the call; dtype of the Gram route's tiles and pair products, None: the bases').
PRECISIONS: dict[str, tuple[torch.dtype, str, torch.dtype | None]] = {
    "float32": (torch.float32, "highest", None),
    "float64": (torch.float64, "highest", None),
    "tf32": (torch.float32, "high", None),
    "bfloat16": (torch.float32, "highest", torch.bfloat16),
}


def scores(
    hw: HeadWeights,
    kinds: str = "QKV",
    measures: tuple[str, ...] | list[str] | str = DEFAULT,
    metric: str | Metric = "identity",
    *,
    offset: float = 0.0,
    pairs: str | int = 256,
    precision: str = "float32",
    ridge: float | None = None,
    baseline_samples: int = 256,
    seed: int = 0,
    max_memory: int | None = None,
    progress: bool = True,
    block: int | None = None,
    width: int | None = None,
    device: str | torch.device | None = None,
) -> ScoreTable:
    """Composition scores of every (earlier writer, later reader) head pair of ``hw``
    (``compscope.scores`` takes any model source and loads it first).

    ``kinds``: any of ``'Q'``, ``'K'``, ``'V'``. ``measures``: names from
    ``compscope.measures.MEASURES`` (``'all'`` for every one). ``metric``: a registered
    name (``compscope.core.metrics.METRICS``) or a ``Metric``; ``ridge``: its ``G`` regularised as
    ``G + ridge·tr(G)/d·I`` (default ``1e-6``; refused where it changes nothing or the ``Metric`` holds
    another, :func:`~compscope.core.metrics.get_metric`). ``pairs``: for X-route measures, ``'all'`` or
    the number of top pairs by ``frobenius`` per kind (others NaN). ``precision``: of the
    large products (``'float32'``, the default: see the module docstring for its error;
    ``'float64'``: exact to ~1e-12, about half the speed; ``'tf32'`` and ``'bfloat16'``:
    reduced, opt-in, for GPUs). ``max_memory``: bytes for tiles
    and blocks (the per-head bases come on top). ``block``, ``width``: Gram tile rows and
    columns (default from ``d`` and ``max_memory``). ``device``: where to compute (``'cpu'``,
    ``'cuda'``, ``'cuda:1'``; default CUDA when available, else the CPU)."""
    if not isinstance(hw, HeadWeights):
        raise OptionError(f"the engine scores HeadWeights, not a {type(hw).__name__}: "
                          "compscope.scores(model) loads a name, path or model object first")
    ms = select(measures)
    kinds = check_kinds(kinds)
    check_offset(hw, offset)
    if pairs != "all" and not (isinstance(pairs, int) and pairs > 0):
        raise OptionError(f"pairs={pairs!r}: use 'all' or a positive number of top pairs")
    if precision not in PRECISIONS:
        raise OptionError(f"precision={precision!r}: use one of {', '.join(map(repr, PRECISIONS))}")
    dtype, matmul, tile_dtype = PRECISIONS[precision]
    baseline_samples, seed = check_int("baseline_samples", baseline_samples, 1), check_int("seed", seed, 0)
    block, width = (None if v is None else check_int(name, v, 1) for name, v in (("block", block), ("width", width)))
    met = get_metric(metric, hw, ridge)
    dev = resolve_device(device)
    budget = memory_budget(max_memory, dev)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmul)  # 'highest' (IEEE float32) unless asked: the error bounds assume it
    try:
        with borrowed() as ws, torch.no_grad():  # scores are values: weights that need a gradient are read as such
            return _scores(hw, kinds, ms, met, dev, budget, offset, pairs, dtype, baseline_samples, seed, progress, block,
                           width, ws, tile_dtype)
    finally:
        torch.set_float32_matmul_precision(previous)


def _scores(hw: HeadWeights, kinds: str, ms: list[Measure], met: Metric, dev: torch.device, budget: int,
            offset: float, pairs: str | int, dtype: torch.dtype, baseline_samples: int, seed: int, progress: bool,
            block: int | None, width: int | None, ws: Workspace, tile_dtype: torch.dtype | None = None) -> ScoreTable:
    """The body of :func:`scores`, options checked; large scratch buffers from ``ws``."""
    L, H, r, d = hw.n_layers, hw.n_heads, hw.d_head, hw.d_model
    per_layer_metric = not met.is_identity and None not in met.sqrt
    gram_ms = [m for m in ms if m.from_gram is not None]
    x_ms = [m for m in ms if m.from_gram is None]
    all_x = bool(x_ms) and pairs == "all"
    baseline = any(m.needs_baseline for m in ms)
    # the Gram inner products some measure reads (ba2 also ranks the top pairs of the X route)
    want = tuple(n for n in ("ba2", "x2") if any(n in m.gram_inputs for m in gram_ms) or (n == "ba2" and x_ms))
    need_gram = not all_x and bool(want)
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
    b_top = {k: torch.zeros((L, H, L, H) if per_layer_metric else (1, 1, L, H), dtype=_F64) for k in kinds}  # their scales
    bases: dict[str, Sides] = {}
    K = len(kinds)
    refined = {k: (0, 0) for k in kinds}
    plan = plan_groups(hw, groups, kinds, want if need_gram else (), all_x, block, dtype, budget)
    bar = progress_bar(sum(g.units for g in plan), "composition", enabled=progress)
    for readers, wl, rl, rg, blk, ticks, x_ticks, _ in plan:
        rbuf = ws.take("reader rows", (len(readers), K, H, r, d), dtype, dev)  # ordered (layer, kind, head)
        out = {"W": ws.take("writer rows", (len(wl), H, r, d), dtype, dev), **{k: rbuf[:, i] for i, k in enumerate(kinds)}}
        sd = head_sides(hw, ("W",) + tuple(kinds), met, offset, {"W": wl, **{k: rl for k in kinds}}, dtype,
                        readers[0] if per_layer_metric else None, out=out, device=dev, bar=bar, ws=ws)
        W = sd["W"]
        spec = {side: sd[side].spectrum.cpu() for side in sd}
        W_rank = W.rank.cpu()
        if per_layer_metric:
            (l2,) = readers
            a[:l2, :, l2], rank_a[:l2, :, l2] = spec["W"][:, :, None], W_rank[:, :, None]
            for k in kinds:
                b[k][:, :, l2] = spec[k][0][None]
                b_top[k][:, :, l2] = sd[k].top[0].cpu()[None]
        else:
            a[: wl.stop, :, 0, 0], rank_a[: wl.stop, :, 0, 0] = spec["W"], W_rank
            for k in kinds:
                b[k][0, 0, rl.start :] = spec[k]
                b_top[k][0, 0, rl.start :] = sd[k].top.cpu()
            bases = sd
        if baseline:
            from .baseline import expected_frobenius

            for k in kinds:
                for j, l2 in enumerate(readers):
                    e, _ = expected_frobenius(spec["W"][:l2].flatten(0, 1), spec[k][j], d, baseline_samples, seed)
                    expected[k][:l2, :, l2] = e.view(H, l2, H).permute(1, 2, 0)
        if need_gram:
            bar.set_postfix(step="Gram tiles")
            rspec = torch.stack([sd[k].spectrum for k in kinds], 1).flatten(0, 2)
            wid = width or 2 * blk
            got = gram_products(W, rbuf.flatten(0, 2), rspec, rg, blk, wid, bar, want, ws=ws, ticks=ticks,
                                tile_dtype=tile_dtype)
            if dtype == torch.float32:
                fixed = refine_small(W, rbuf.flatten(0, 2), rspec, got, rg, budget, terms=blk * wid)
                looked = torch.zeros_like(fixed)
                for r0, r1, nc in rg:
                    looked[r0:r1] = nc
                for i, k in enumerate(kinds):  # (pairs recomputed, pairs computed), per kind
                    n, of = (int(t.view(len(readers), K, H)[:, i].sum()) for t in (fixed, looked))
                    refined[k] = (refined[k][0] + n, refined[k][1] + of)
            for name, dense in (("ba2", ba2), ("x2", x2)):
                if name not in got:
                    continue
                v = got[name].to("cpu", _F64).view(len(readers), K, H, len(wl), H)
                for i, k in enumerate(kinds):
                    for j, l2 in enumerate(readers):
                        dense[k][:l2, :, l2] = v[j, i, :, :l2].permute(1, 2, 0)
        if all_x:
            bar.set_postfix(step="X blocks")
            for k in kinds:
                for j, l2 in enumerate(readers):
                    e = None if expected is None else expected[k][:l2, :, l2]
                    x_all(W, sd[k], j, l2, budget, x_ms, {m.name: xval[(m.name, k)] for m in x_ms}, ba2[k], x2[k], e, d,
                          ws=ws)
                    bar.update(x_ticks[j])
    bar.close()
    values, partial = {}, {}
    for k in kinds:
        stats = GramStats(ba2[k], x2[k], a, b[k], rank_a, d, None if expected is None else expected[k], b_top[k])
        for m in gram_ms:
            values[(m.name, k)] = _only_forward(m.from_gram(stats).expand(L, H, L, H), L)
        if x_ms and not all_x and groups:
            frob = _only_forward(get_measure("frobenius").from_gram(stats), L)
            sel = torch.tensor([c for c, _ in top_entries(frob, int(pairs))], dtype=torch.long).reshape(-1, 4)
            total = int(torch.isfinite(frob).sum())
            if len(sel) < total:
                partial.update({m.name: (len(sel), total) for m in x_ms})
            X, s = x_pairs(hw, met, offset, k, sel, per_layer_metric, bases, dtype, dev)
            e = None if expected is None else at_pairs(expected[k], sel)
            p = PairSpectra(at_pairs(a, sel), at_pairs(b[k], sel), X, d, at_pairs(rank_a, sel), e, core_sv2=s,
                            b_top=at_pairs(b_top[k], sel))
            for m in x_ms:
                xval[(m.name, k)][sel[:, 0], sel[:, 1], sel[:, 2], sel[:, 3]] = m.exact(p).to(_F64)
    values.update(xval)
    order = {(m.name, k): values[(m.name, k)] for k in kinds for m in ms}
    table = ScoreTable.from_dense(order, hw, met, offset=offset)
    if partial:  # X-route measures of the top pairs only: say so in the table
        table.info["partial"] = partial
    if dtype == torch.float32 and need_gram:  # float32 Gram-route values recomputed from X
        table.info["refined"] = refined
    return table


def _only_forward(t: Tensor, L: int) -> Tensor:
    keep = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)  # l1 < l2
    return torch.where(keep[:, None, :, None], t, torch.full_like(t, float("nan")))
