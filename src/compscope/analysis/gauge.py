"""Gauge checks on a real model: change its parameters in a way the model cannot see, and ask
which composition scores move.

A change maps the residual stream by an invertible ``T`` (``d_model × d_model``): every writer
becomes ``T W`` (``W_O``, ``b_O``, ``W_E``, ``W_pos``, token-type embeddings), every reader
``W T⁻¹`` (``W_Q``, ``W_K``, ``W_V``, ``W_U``). With norms in the model that is a symmetry only
for some ``T`` (docs/spec.md, "Symmetry and invariant measures"); the changes here are:

- ``permutation``: ``T`` permutes the residual's coordinates and every norm's gain and bias with
  them. A symmetry of every model, on the weights as loaded.
- ``rotation``: ``T`` a random orthogonal matrix (fixing the all-ones direction when the norms
  are LayerNorms, which centre). A symmetry once the norms have no gains: the gains are folded
  into the readers first (``fold_norm``); refused where a norm on the residual path keeps a
  gain that cannot be folded (post-LN models, Gemma 3's attention-output norm).
- ``gain_rescale``: ``T = I``; each pre-norm's gain (and bias) is multiplied by a random positive
  ``s`` per dimension and the weights reading it by ``1/s``, so ``W diag(g)`` is unchanged: the
  model is the same, but weights read without their gains are not.
- ``linear``: ``T`` a random invertible matrix, on the folded weights. Not a symmetry of a model
  with norms (the check says by how much the model changes); it is one of the same model
  without its norms, the case of the seed "The Symmetry of the Residual Stream".

Each change is checked on the model itself: every layer's attention, recomputed from the
changed weights (:mod:`compscope.core.attention`) on ``T x`` for random residuals ``x``, must give
the same patterns and ``T`` times the same output. Then every measure × metric scores all pairs
before and after the change.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.factors import check_composes
from ..core.heads import HeadWeights, Norm
from ..defaults import GAUGE_CHANGES as CHANGES  # the changes, in the order they are reported
from ..defaults import GAUGE_METRICS
from ..errors import OptionError, ProcessingError
from .stats import haar_orthonormal

#: spread of ``log s`` in ``gain_rescale``
GAIN_SPREAD = 0.5


@dataclass(frozen=True)
class Change:
    """One change of ``base`` (the weights as loaded, or with norm gains folded: ``weights``)
    into ``hw`` by the residual map ``T`` (float64; None: the identity)."""

    name: str
    weights: str  # 'as loaded' | 'folded'
    base: HeadWeights
    hw: HeadWeights
    T: Tensor | None
    symmetry: bool


def _map_norm(n: Norm | None, perm: Tensor | None) -> Norm | None:
    if n is None or perm is None:
        return n
    take = lambda t: None if t is None else t[:, perm]  # noqa: E731
    return dataclasses.replace(n, weight=take(n.weight), bias=take(n.bias))


def map_residual(hw: HeadWeights, T: Tensor) -> HeadWeights:
    """``hw`` with its residual stream mapped by ``T``: writers ``T W``, readers ``W T⁻¹``, float64
    (kept in float64, so that a score the change keeps differs by rounding alone). Every norm acting
    on the residual must have neither gain nor bias (their elementwise parameters do not commute
    with ``T``); :func:`permute_residual` handles the one ``T`` that moves them too."""
    for name in ("attn_norm", "final_norm", "attn_out_norm"):
        n = getattr(hw, name)
        if n is not None and (n.weight is not None or n.bias is not None):
            raise ProcessingError(f"{hw.meta.name}: {name} has a gain or bias, which a change of residual "
                                  "basis other than a permutation does not keep")
    T = T.double()
    Ti = torch.linalg.inv(T)
    write = lambda t: None if t is None else T @ t.double()  # noqa: E731  (d, ...) writers
    read = lambda t: None if t is None else t.double() @ Ti  # noqa: E731  (..., d) readers
    f64 = lambda t: None if t is None else t.double()  # noqa: E731
    return hw.replace(
        W_Q=read(hw.W_Q), W_K=read(hw.W_K), W_V=read(hw.W_V), W_U=read(hw.W_U), W_G=read(hw.W_G),
        W_O=write(hw.W_O), W_E=write(hw.W_E), W_pos=write(hw.W_pos),
        b_Q=f64(hw.b_Q), b_K=f64(hw.b_K), b_V=f64(hw.b_V), b_U=f64(hw.b_U), b_G=f64(hw.b_G),
        b_O=None if hw.b_O is None else hw.b_O.double() @ T.T,
        embed_extra={k: write(v) for k, v in hw.embed_extra.items()},
        **_latents(hw, read),
    )


def _latents(hw: HeadWeights, read) -> dict:
    """Multi-head latent attention's latent norms, reading the residual through ``read`` as the heads do."""
    return {k: lat.mapped(read) for k in ("q_latent", "kv_latent") if (lat := getattr(hw, k, None)) is not None}


def permute_residual(hw: HeadWeights, perm: Tensor) -> HeadWeights:
    """``hw`` mapped by ``T = I[perm]`` (``(T x)_i = x_{perm_i}``): writers' rows and readers'
    columns permuted, and every norm's gain and bias with them. Exact, by indexing, in each
    tensor's own dtype (no float64 copy of a 262,144-token embedding)."""
    rows = lambda t: None if t is None else t[..., perm, :]  # noqa: E731  T W: the residual axis is second to last
    cols = lambda t: None if t is None else t[..., perm]  # noqa: E731  W T⁻¹ = W Tᵀ: the last axis
    return hw.replace(
        W_Q=cols(hw.W_Q), W_K=cols(hw.W_K), W_V=cols(hw.W_V), W_U=cols(hw.W_U), W_G=cols(hw.W_G),
        W_O=rows(hw.W_O), W_E=rows(hw.W_E), W_pos=rows(hw.W_pos), b_O=cols(hw.b_O),
        embed_extra={k: rows(v) for k, v in hw.embed_extra.items()},
        attn_norm=_map_norm(hw.attn_norm, perm), final_norm=_map_norm(hw.final_norm, perm),
        attn_out_norm=_map_norm(hw.attn_out_norm, perm), **_latents(hw, cols),
    )


def _gainless(hw: HeadWeights, change: str) -> tuple[HeadWeights, str]:
    """``hw`` with no gain or bias on the residual path (pre-norm gains folded), and which weights
    those are (``'folded'`` or ``'as loaded'``); refused where a gain on the residual path cannot be
    folded."""
    from ..core.processing import fold_norm

    if hw.norm_placement == "post":
        raise ProcessingError(f"{change}: {hw.meta.name} is post-LN; its norms act on the residual with gains that "
                              "cannot be folded, so only a permutation keeps the model")
    if hw.attn_out_norm is not None and hw.attn_out_norm.weight is not None:
        raise ProcessingError(f"{change}: {hw.meta.name}'s attention-output norm has a gain on the residual path, "
                              "which cannot be folded, so only a permutation keeps the model")
    if hw.norm_placement != "pre" or "fold_norm" in hw.meta.processing:
        return hw, "as loaded"
    folded = fold_norm(hw)
    f = folded.final_norm
    if hw.W_U is None and f is not None and (f.weight is not None or f.bias is not None):
        # an encoder's final norm feeds no unembedding: nothing compscope computes reads its gain
        folded = folded.replace(final_norm=Norm(f.kind, None, None, f.eps))
    return folded, "folded"


def permutation(hw: HeadWeights, seed: int = 0) -> Change:
    """Permute the residual's coordinates (and every norm's parameters with them)."""
    perm = torch.randperm(hw.d_model, generator=torch.Generator().manual_seed(seed))
    T = torch.eye(hw.d_model, dtype=torch.float64)[perm]
    return Change("permutation", "as loaded", hw, permute_residual(hw, perm), T, True)


def rotation(hw: HeadWeights, seed: int = 0) -> Change:
    """A random orthogonal ``T`` on the gain-folded weights (``T 1 = 1`` for LayerNorm models)."""
    base, weights = _gainless(hw, "rotation")
    d, g = hw.d_model, torch.Generator().manual_seed(seed)
    kinds = {n.kind for n in (hw.attn_norm, hw.final_norm, hw.attn_out_norm) if n is not None}
    if "layernorm" in kinds:  # LayerNorm centres: T must keep the mean, i.e. fix the all-ones direction
        one = torch.full((d, 1), d**-0.5, dtype=torch.float64)
        B = torch.linalg.qr(torch.cat([one, torch.randn(d, d - 1, generator=g, dtype=torch.float64)], 1))[0][:, 1:]
        T = B @ haar_orthonormal(d - 1, d - 1, g) @ B.T + one @ one.T
    else:
        T = haar_orthonormal(d, d, g)
    return Change("rotation", weights, base, map_residual(base, T), T, True)


def gain_rescale(hw: HeadWeights, seed: int = 0, spread: float = GAIN_SPREAD) -> Change:
    """Each pre-norm's gain and bias times ``s`` (per layer and dimension, ``log s ~ N(0, spread²)``),
    the weights reading it (``W_Q, W_K, W_V``; ``W_U`` after the final norm) times ``1/s``. With
    tied embeddings the new ``W_U`` is no longer ``W_Eᵀ``: the same function, a model with one more
    matrix (only the ``unembed`` metric reads ``W_U``)."""
    n = hw.attn_norm
    if hw.norm_placement != "pre" or n is None or n.weight is None:
        raise ProcessingError(f"gain_rescale: {hw.meta.name} has no pre-norm gain to trade against the weights "
                              f"that read it (norm placement {hw.norm_placement!r}"
                              + (", gains folded)" if n is not None and n.weight is None else ")"))
    g = torch.Generator().manual_seed(seed)

    def rescale(norm: Norm, rows: int, keep_first: bool = False) -> tuple[Norm, Tensor]:
        s = torch.exp(spread * torch.randn(rows, hw.d_model, generator=g, dtype=torch.float64))
        if keep_first:  # a first layer that reads the residual itself: no gain there to trade
            s[0] = 1
        gain = torch.stack([norm.gain(l).double() for l in range(rows)]) * s
        weight = (gain - norm.offset).to(norm.weight.dtype)
        bias = None if norm.bias is None else (norm.bias.double() * s).to(norm.bias.dtype)
        return dataclasses.replace(norm, weight=weight, bias=bias), s

    attn, s = rescale(n, hw.n_layers, hw.first_layer_unnormed)
    inv = lambda w, s: w / s.to(w.dtype)  # noqa: E731  s broadcasts over d_model; in w's dtype (no float64 copy of W_U)
    changes = dict(attn_norm=attn, W_Q=inv(hw.W_Q, s[:, None, None]), W_K=inv(hw.W_K, s[:, None, None]),
                   W_V=inv(hw.W_V, s[:, None, None]))
    if hw.W_G is not None:  # an output gate reads the same normed input
        changes["W_G"] = inv(hw.W_G, s[:, None, None])
    changes.update(_latents(hw, lambda w: inv(w, s[:, None, :])))  # (W: (layer, rank, d_model))
    f = hw.final_norm
    if f is not None and f.weight is not None and hw.W_U is not None:
        changes["final_norm"], sf = rescale(f, f.weight.shape[0])
        changes["W_U"] = inv(hw.W_U, sf[0])
    return Change("gain_rescale", "as loaded", hw, hw.replace(**changes), None, True)


def linear(hw: HeadWeights, seed: int = 0) -> Change:
    """A random invertible ``T = I + N/√d`` (``N`` Gaussian) on the gain-folded weights: not a
    symmetry where norms normalise the residual (the check measures how far from one it is)."""
    base, weights = _gainless(hw, "linear")
    g = torch.Generator().manual_seed(seed)
    T = torch.eye(hw.d_model, dtype=torch.float64) + torch.randn(hw.d_model, hw.d_model, generator=g,
                                                                   dtype=torch.float64) / hw.d_model**0.5
    norms = [x for x in (hw.attn_norm, hw.final_norm, hw.attn_out_norm) if x is not None]
    return Change("linear", weights, base, map_residual(base, T), T, not norms)


BUILDERS = {"permutation": permutation, "rotation": rotation, "gain_rescale": gain_rescale, "linear": linear}
assert tuple(BUILDERS) == CHANGES


@torch.no_grad()
def model_change(c: Change, seed: int = 0, batch: int = 2, seq: int = 12) -> float:
    """How much the model changes: the largest, over layers, of ``max |Δ pattern|`` and
    ``max |out' − T out| / max |out|`` for the attention recomputed from ``c.base`` on random
    residuals ``x`` and from ``c.hw`` on ``T x`` (float32)."""
    from ..data.runner import layer_state

    hw0, hw1 = c.base, c.hw
    g = torch.Generator().manual_seed(seed)
    worst = 0.0
    for layer in range(hw0.n_layers):
        x = torch.randn(batch, seq, hw0.d_model, generator=g, dtype=torch.float64)
        tx = x if c.T is None else x @ c.T.T
        s0, s1 = (layer_state(hw, layer, r.to(hw.W_Q.dtype)) for hw, r in ((hw0, x), (hw1, tx)))
        (p0, o0), (p1, o1) = ((st.pattern.double(), st.out.double()) for st in (s0, s1))
        to = o0 if c.T is None else o0 @ c.T.T
        scale = float(to.abs().max()) or 1.0
        worst = max(worst, float((p1 - p0).abs().max()), float((o1 - to).abs().max()) / scale)
    return worst


@dataclass(frozen=True)
class GaugeRow:
    """One change × metric × measure: the largest score change relative to the largest score
    (``max_change``) and the rank correlation of all pairs' scores before and after
    (``spearman``), over every kind; ``model_change`` from :func:`model_change`."""

    change: str
    weights: str
    symmetry: bool
    model_change: float
    metric: str
    measure: str
    max_change: float
    spearman: float


def gauge_check(model, changes=CHANGES, *, kinds: str = "QKV", measures="default", metrics=("identity", "embed"),
                seed: int = 0, precision: str = "float64", progress: bool = True) -> tuple[list[GaugeRow], list[str]]:
    """Score every pair of ``model`` before and after each change (module docstring), per metric
    and measure. Returns the rows and notes (changes this model does not allow, and why).
    ``precision``: the engine's (float64 by default, so that a kept score differs by rounding
    alone, about 1e-12). ``metrics``: of ``identity``, ``embed``, ``unembed``, each computed from
    the weights of the model it scores."""
    from ..engine.composition import scores
    from ..loading.sources import load
    from ..measures import DEFAULT
    from .stats import spearman

    hw = check_composes(model if isinstance(model, HeadWeights) else load(model))
    unknown = [c for c in changes if c not in BUILDERS]
    if unknown:
        raise OptionError(f"changes {unknown}: expected any of {', '.join(CHANGES)}")
    measures = DEFAULT if measures == "default" else measures
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    bad = [m if isinstance(m, str) else f"a {type(m).__name__} ({getattr(m, 'name', '?')})" for m in metrics
           if not isinstance(m, str) or m not in GAUGE_METRICS]
    if bad or not metrics:
        raise OptionError(f"metrics {', '.join(map(str, bad)) or '(none)'}: a gauge check scores each changed model under "
                          f"a metric of its own weights, one of {', '.join(GAUGE_METRICS)}")
    rows, notes, cache = [], [], {}
    for name in changes:
        c = None  # the previous change's weights go before the next is built
        try:
            c = BUILDERS[name](hw, seed)
        except ProcessingError as e:
            notes.append(f"skipped: {e}")
            continue
        moved = model_change(c, seed)
        for metric in metrics:
            if metric == "unembed" and hw.W_U is None:
                continue
            key = (c.weights, metric)
            if key not in cache:
                cache[key] = scores(c.base, kinds, measures, metric, pairs="all", precision=precision, ridge=0.0,
                                    progress=progress)
            before = cache[key]
            after = scores(c.hw, kinds, measures, metric, pairs="all", precision=precision, ridge=0.0, progress=progress)
            for m in before.measures:
                a = torch.cat([before.dense(m, k).flatten() for k in before.kinds]).double()
                b = torch.cat([after.dense(m, k).flatten() for k in before.kinds]).double()
                ok = torch.isfinite(a) & torch.isfinite(b)
                top = float(a[ok].abs().max()) if ok.any() else 0.0
                diff = float((a[ok] - b[ok]).abs().max()) / (top or 1.0) if ok.any() else float("nan")
                rows.append(GaugeRow(name, c.weights, c.symmetry, moved, metric, m, diff, spearman(a, b)))
    return rows, notes


#: a score counts as kept when it moved by at most this, relative to the largest score
KEPT = 1e-6
#: a change moves the model (:func:`model_change`) by less than this when it is a symmetry (float32 rounding)
SAME = 1e-4


def format_gauge(hw_name: str, rows: list[GaugeRow], notes: list[str], seed: int) -> str:
    """The table ``compscope gauge`` prints: per change and metric, each measure's Spearman
    between the scores before and after, ``=`` where every score is kept (to ``KEPT``)."""
    measures = list(dict.fromkeys(r.measure for r in rows))
    width = {m: max(8, len(m)) for m in measures}
    lines = [f"{hw_name}: every pair's scores before and after each change of the parameters (seed {seed})",
             f"model: how much the attention changes (below {SAME:g}, float32 rounding: a symmetry); per measure '=' "
             f"where every score is kept to {KEPT:g} of the largest, else the rank correlation of the scores before and after"]
    head = f"{'change':<13} {'weights':<10} {'model':>8}  {'metric':<9}" + "".join(f" {m:>{width[m]}}" for m in measures)
    lines += ["", head]
    groups = dict.fromkeys((r.change, r.weights, r.metric) for r in rows)
    for change, weights, metric in groups:
        rs = {r.measure: r for r in rows if (r.change, r.weights, r.metric) == (change, weights, metric)}
        r0 = next(iter(rs.values()))
        cells = "".join(f" {'=' if rs[m].max_change <= KEPT else f'{rs[m].spearman:.3f}':>{width[m]}}" for m in measures)
        moved = f"<{SAME:g}" if r0.model_change < SAME else f"{r0.model_change:.2g}"
        lines.append(f"{change:<13} {weights:<10} {moved:>8}  {metric:<9}{cells}")
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)
