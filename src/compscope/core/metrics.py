"""Metrics on the residual stream (spec, "Symmetries and metrics").

A metric ``G`` (SPD, ``d × d``) that transforms as ``G → T G Tᵀ`` under the residual gauge
``x → T x`` makes every measure ``GL(d)``-invariant: measures are taken in whitened
coordinates, reading factors ``W_{Q,K,V} G^{1/2}`` and writing factors ``G^{-1/2} W_O``. The
whitened model of ``T``-transformed weights equals the original's up to an orthogonal matrix.

- ``identity``: ``G = I`` (raw residual basis; invariant under orthogonal ``T`` only);
- ``embed``: ``G = W_E W_Eᵀ / n_vocab (+ W_pos W_posᵀ / n_ctx when positions are learned)``;
- ``unembed``: ``G = (W_Uᵀ W_U / n_vocab)^{-1}``;
- ``activations``: ``G_l = E[x xᵀ]`` of the residual read at layer ``l`` (user-supplied, one per
  layer or one for all). For a pair ``l1 → l2`` every factor uses the reader's ``G_{l2}``;
- ``covariance``: ``G_l = E[(x − μ_l)(x − μ_l)ᵀ]``, the same residual centred on its mean ``μ_l``
  (also ``T``-covariant: ``μ → T μ``). A part of a key's input that is the same at every position
  adds the same logit to every key of a query, which the softmax ignores (exactly without rotary
  positions or QK-norm); the covariance leaves that part out of the metric, the second moment does not.
- ``activations-own``, ``covariance-own``: the same ``G_l``, but each reading factor takes the ``G``
  of the layer it reads (the writer's ``W_V`` its own ``G_{l1}``: the input its output comes
  from), each writing factor the reader's ``G_{l2}``. Still ``GL(d)``-invariant: the whitened
  writer ``G_{l2}^{-1/2} W_O W_V G_{l1}^{1/2}`` moves by an orthogonal matrix on each side.

Ill-conditioned ``G`` is regularised by a ridge ``G + λ I`` with ``λ = ridge · tr(G)/d``
(default ``ridge = 1e-6``); the condition numbers before and after are recorded. A ``G``
estimated on data is by default the sample moment shrunk toward ``(tr S/d) I`` by its
Ledoit–Wolf intensity (``MetricData.shrinkage``; :mod:`compscope.data.residual_moments`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from ..defaults import RIDGE as DEFAULT_RIDGE
from ..errors import OptionError, did_you_mean, one_line
from ..registry import Registry
from .heads import HeadWeights
from .vocab import embed_gram, unembed_gram


@dataclass(frozen=True)
class Metric:
    """``sqrt[l]`` = ``G_l^{1/2}``, ``inv_sqrt[l]`` = ``G_l^{-1/2}`` (float64, symmetric); key
    ``None`` holds the metric of every layer when it does not depend on the layer."""

    name: str
    sqrt: dict[int | None, Tensor] = field(default_factory=dict)
    inv_sqrt: dict[int | None, Tensor] = field(default_factory=dict)
    ridge: float = 0.0
    condition: dict[int | None, tuple[float, float]] = field(default_factory=dict)  # (raw, regularised)
    #: per-layer metrics: False, every factor of a pair ``l1 → l2`` uses the reader's ``G_{l2}``;
    #: True, a reading factor (``W_Q``, ``W_K``, ``W_V``) uses the ``G`` of the layer it reads
    #: (the writer's ``W_V`` its own ``G_{l1}``), a writing factor the reader's ``G_{l2}``
    own_reads: bool = False
    #: what a metric estimated on data was estimated on, in words (empty for one from the weights)
    data: str = ""
    #: the file a metric of one's own was read from, as given (how the command line names it again)
    path: str = ""

    @property
    def is_identity(self) -> bool:
        return not self.sqrt

    def for_factor(self, name: str, layer: int, reader_layer: int) -> Tensor | None:
        """The ``G^{1/2}`` (reading factors ``Q``, ``K``, ``V``) or ``G^{-1/2}`` (``O``) that factor
        ``name`` of a head in ``layer`` takes in a pair read at ``reader_layer`` (one ``G`` for
        every layer: that one, whatever the layers)."""
        s, si = self.for_layer(layer if self.own_reads and name != "O" else reader_layer)
        return si if name == "O" else s

    def for_layer(self, layer: int) -> tuple[Tensor | None, Tensor | None]:
        key = layer if layer in self.sqrt else None
        if key is None and self.sqrt and None not in self.sqrt:
            raise OptionError(f"metric {self.name!r} has no G for layer {layer} (it has layers {sorted(self.sqrt)})")
        return self.sqrt.get(key), self.inv_sqrt.get(key)


#: relative asymmetry and negative eigenvalue a G may have from rounding (a float32 Gram matrix of
#: thousands of dimensions is within it); more, and it is not a Gram matrix
GRAM_TOLERANCE = 1e-4


#: the range of a Gram matrix's largest entry: ``G^{1/2}`` and ``G^{-1/2}`` scale the weights by its square
#: root, and the engine squares the whitened weights twice in float64 (its range ends near 1e±308), so
#: with weights anywhere from 1e-30 to 1e30 (tests/test_rough_edges.py: scores exact at the four corners)
GRAM_RANGE = (1e-60, 1e60)


def _roots(G: Tensor, ridge: float, what: str, invert: bool = False) -> tuple[Tensor, Tensor, tuple[float, float]]:
    G = G.detach().to(torch.float64)  # a G that needs a gradient is a value here
    if not torch.isfinite(G).all():
        raise OptionError(f"metric {what}: G has NaN/Inf entries")
    largest = float(G.abs().max())
    if largest > 0 and not GRAM_RANGE[0] <= largest <= GRAM_RANGE[1]:  # G^{±1/2} times the weights, squared, in float64
        raise OptionError(f"metric {what}: G's largest entry is {largest:.3g}, beyond what the engine's float64 products "
                          f"of the whitened weights hold (it takes {GRAM_RANGE[0]:g} to {GRAM_RANGE[1]:g}); rescale G")
    size, asymmetry = float(G.norm()), float((G - G.T).norm())
    if asymmetry > GRAM_TOLERANCE * size:  # not rounding: not a Gram matrix
        raise OptionError(f"metric {what}: G is not symmetric (‖G − Gᵀ‖/‖G‖ = {asymmetry / size:.2g}); a Gram matrix is")
    G = (G + G.T) / 2
    evals, evecs = torch.linalg.eigh(G)
    if evals[-1] <= 0:
        raise OptionError(f"metric {what}: G is zero or negative definite")
    if evals[0] < -GRAM_TOLERANCE * evals[-1]:
        raise OptionError(f"metric {what}: G has a negative eigenvalue ({float(evals[0]):.3g}, the largest "
                          f"{float(evals[-1]):.3g}); a Gram matrix has none")
    raw_cond = float(evals[-1] / evals[0]) if evals[0] > 0 else float("inf")
    lam = check_ridge(ridge) * float(evals.clamp_min(0).sum()) / G.shape[0]
    e = evals.clamp_min(0) + lam
    if e[0] <= 0:
        raise OptionError(f"metric {what}: G is singular; pass a positive ridge")
    cond = float(e[-1] / e[0])
    s, si = e.sqrt(), e.rsqrt()
    if invert:  # G = M^{-1}: G^{1/2} = M^{-1/2}
        s, si = si, s
    return (evecs * s) @ evecs.T, (evecs * si) @ evecs.T, (raw_cond, cond)


def identity() -> Metric:
    return Metric("identity")


def from_gram(name: str, G: Tensor, ridge: float = DEFAULT_RIDGE, invert: bool = False) -> Metric:
    """The metric ``name`` with one ``(d, d)`` Gram matrix for every layer: ``G`` itself, or
    ``G⁻¹`` with ``invert`` (the ridge is added to ``G`` before inverting, as for ``unembed``)."""
    s, si, c = _roots(G, ridge, name, invert)
    return Metric(name, {None: s}, {None: si}, ridge, {None: c})


def embed(hw: HeadWeights, ridge: float = DEFAULT_RIDGE) -> Metric:
    """``G = W_E W_Eᵀ / n_vocab`` (+ ``W_pos W_posᵀ / n_ctx`` for learned positions)."""
    G = embed_gram(hw) / hw.W_E.shape[1]
    if hw.W_pos is not None:
        P = hw.W_pos.to(torch.float64)
        G = G + P @ P.T / P.shape[1]
    return from_gram("embed", G, ridge)


def unembed(hw: HeadWeights, ridge: float = DEFAULT_RIDGE) -> Metric:
    """``G = (W_Uᵀ W_U / n_vocab)^{-1}`` (ridge applied to ``W_Uᵀ W_U / n_vocab``)."""
    if hw.W_U is None:
        raise OptionError(f"metric 'unembed': {hw.meta.name} has no unembedding (W_U is None)")
    return from_gram("unembed", unembed_gram(hw) / hw.W_U.shape[0], ridge, invert=True)


def activations(second_moments: Tensor | dict[int, Tensor], ridge: float = DEFAULT_RIDGE,
                name: str = "activations") -> Metric:
    """``G_l = E[x xᵀ]`` supplied by the user: one ``(d, d)`` tensor for every layer, a
    ``(layer, d, d)`` stack, or ``{layer: (d, d)}`` (:mod:`compscope.data.residual_moments` estimates
    them from data for any model it can run). ``name``: what the metric is recorded as
    (``covariance`` for central second moments)."""
    if isinstance(second_moments, Tensor) and second_moments.ndim == 2:
        return from_gram(name, second_moments, ridge)
    items = second_moments.items() if isinstance(second_moments, dict) else enumerate(second_moments)
    sq, isq, cond = {}, {}, {}
    for layer, G in items:
        sq[layer], isq[layer], cond[layer] = _roots(G, ridge, f"{name}[layer {layer}]")
    return Metric(name, sq, isq, ridge, cond)


#: metrics by name: factories ``(hw, ridge, model, device) -> Metric``; ``model`` is what the user
#: passed (a name, a folder, an object) when a metric needs the model itself, else None;
#: ``device``: where a metric estimated on data runs the model (None: the runner's default).
#: ``activations``, ``covariance`` and their ``-own`` variants are estimated on data
#: (:mod:`compscope.data.residual_moments`), lazy entries.
METRICS: Registry = Registry("metric")
METRICS.add("identity", lambda hw, ridge, model=None, device=None: identity())
METRICS.add("embed", lambda hw, ridge, model=None, device=None: embed(hw, ridge))
METRICS.add("unembed", lambda hw, ridge, model=None, device=None: unembed(hw, ridge))
METRICS.lazy("activations", "compscope.data.residual_moments:activations_metric")
METRICS.lazy("covariance", "compscope.data.residual_moments:covariance_metric")
METRICS.lazy("activations-own", "compscope.data.residual_moments:activations_own_metric")
METRICS.lazy("covariance-own", "compscope.data.residual_moments:covariance_own_metric")
#: the names of the metrics estimated on data
ON_DATA = ("activations", "covariance", "activations-own", "covariance-own")


def on_data(metrics) -> list[str]:
    """The names among ``metrics`` (one name or metric, or several) that are estimated on data when
    used: a :class:`Metric` in hand was estimated already, whatever its name."""
    many = isinstance(metrics, (list, tuple, set, frozenset))  # else one (a Gram matrix too)
    return [m for m in (metrics if many else [metrics]) if isinstance(m, str) and m in ON_DATA]


def check_data_used(data, metrics, *, reading: bool = False, also: str | None = None) -> None:
    """``data`` (what the metrics estimated on data are estimated on, ``metric_data``) is refused
    where nothing would read it: no metric of ``metrics`` is estimated on data and nothing else
    reads its text (``reading``, said as ``also``), so that it does not pass silently unused."""
    if data is None or on_data(metrics) or reading:
        return
    names = [m if isinstance(m, str) else m.name for m in check_metrics(metrics)]  # a typo is named as such first
    raise OptionError(f"metric_data: for the metrics estimated on data ({', '.join(ON_DATA)})"
                      + (f" and {also}" if also else "") + f", and none is selected (metrics: {', '.join(names)})")


#: how a metric of one's own records where its ``G`` came from (``Metric.data``, after this)
GIVEN = "G given as"


def metric_from_gram(G, name: str = "custom", ridge: float = DEFAULT_RIDGE, *, given_as: str = "a matrix") -> Metric:
    """A metric of one's own: ``G`` a ``(d, d)`` tensor or array (every layer), a ``(layer, d, d)``
    stack, or ``{layer: (d, d)}``, symmetric positive (semi)definite, recorded as ``name``, and as
    ``given_as`` with its values' SHA-256 (``Metric.data``)."""
    if isinstance(G, dict):
        G = {layer: torch.as_tensor(g) for layer, g in G.items()}
        if not G:
            raise OptionError(f"metric {name!r}: an empty {{layer: G}}")
        shapes = {tuple(g.shape) for g in G.values()}
    else:
        G = torch.as_tensor(G)
    kinds = {g.dtype for g in (G.values() if isinstance(G, dict) else [G])}
    if any(k.is_complex or k == torch.bool for k in kinds):  # complex parts would be dropped, bools read as 0/1
        raise OptionError(f"metric {name!r}: a Gram matrix of {', '.join(sorted(str(k) for k in kinds))} values; "
                          "a Gram matrix is real")
    if not isinstance(G, dict):
        if G.ndim not in (2, 3):
            raise OptionError(f"metric {name!r}: a Gram matrix of shape {tuple(G.shape)}; expected (d, d), (layer, d, d) "
                              "or {layer: (d, d)}")
        shapes = {tuple(G.shape[-2:])}
    if any(len(sh) != 2 or sh[0] != sh[1] for sh in shapes):
        raise OptionError(f"metric {name!r}: a Gram matrix must be square, got {', '.join(map(str, sorted(shapes)))}")
    return dataclasses.replace(activations(G, ridge, name=name), data=f"{GIVEN} {given_as} ({gram_digest(G)})")


def gram_digest(G: Tensor | dict) -> str:
    """``SHA-256 <16 hex digits>`` of a Gram matrix (or ``{layer: G}``) as float64 values: which
    ``G`` a table's scores were computed under, recorded with them."""
    import hashlib

    h = hashlib.sha256()
    for key, g in (sorted(G.items(), key=lambda kv: str(kv[0])) if isinstance(G, dict) else [(None, G)]):
        g = g.detach().to(device="cpu", dtype=torch.float64).contiguous()
        h.update(f"{key}:{tuple(g.shape)};".encode() + g.numpy().tobytes())
    return f"SHA-256 {h.hexdigest()[:16]}"


#: the files a Gram matrix of one's own may come in (no pickles: ``.npy`` is read without them)
GRAM_FILES = (".npy", ".safetensors")


def read_gram_file(path: str | Path, ridge: float = DEFAULT_RIDGE) -> Metric:
    """The metric in a file: a ``.npy`` array, ``(d, d)`` or ``(layer, d, d)``, or a ``.safetensors``
    file with one such tensor or one ``(d, d)`` tensor per layer named by the layer (``"0"``, ``"1"``,
    ...). Named after the file (``cov.npy``: ``cov``), recorded with its name and SHA-256."""
    path = Path(path)
    if not path.is_file():
        raise OptionError(f"metric {path}: no such file (a Gram matrix file is {' or '.join(GRAM_FILES)})")
    if path.stem in METRICS:
        raise OptionError(f"metric {path}: the file is named like the metric {path.stem!r}; give it a name of its own")
    try:
        if path.suffix == ".npy":
            import numpy as np

            with open(path, "rb") as fh:
                if fh.read(6) != b"\x93NUMPY":
                    raise ValueError("not a .npy file (it lacks the NUMPY header)")
            G = torch.from_numpy(np.load(path, allow_pickle=False))
        else:
            from safetensors.torch import load_file

            try:
                tensors = load_file(path)
            except Exception as e:  # safetensors raises its own kind on a damaged file
                raise ValueError(f"not a safetensors file ({one_line(e)})") from None
            if len(tensors) == 1:
                G = next(iter(tensors.values()))
            elif all(k.isdigit() for k in tensors):
                G = {int(k): v for k, v in tensors.items()}
            else:
                raise ValueError(f"{len(tensors)} tensors, not named by their layers ({', '.join(sorted(tensors)[:4])})")
    except (OSError, ValueError, RuntimeError, TypeError) as e:
        raise OptionError(f"metric {path}: cannot read a Gram matrix from it ({type(e).__name__}: {one_line(e)})") from None
    met = metric_from_gram(G, name=str(path), ridge=ridge, given_as=f"the file {path.name}")  # its errors name the file
    return dataclasses.replace(met, name=path.stem, path=str(path))


def as_metric(metric, ridge: float = DEFAULT_RIDGE):
    """``metric`` as :func:`get_metric` takes it: a name or a :class:`Metric` as it is; a Gram
    matrix of one's own (a tensor, an array or ``{layer: G}``) as :func:`metric_from_gram` reads it,
    named ``custom``; a file of one (:data:`GRAM_FILES`) as :func:`read_gram_file` reads it."""
    if isinstance(metric, (dict, Tensor)) or hasattr(metric, "__array__"):
        return metric_from_gram(metric, ridge=ridge)
    if isinstance(metric, (str, Path)) and str(metric).endswith(GRAM_FILES):
        return read_gram_file(metric, ridge)
    return metric  # a name, a Metric; anything else is named as unknown by check_metrics


def check_fits(metric: Metric, hw: HeadWeights) -> Metric:
    """``metric`` when each ``G`` is ``d_model × d_model`` and names a layer of ``hw``, else an
    error that says which (not a shape error from deep inside the engine)."""
    said = f"metric {metric.name!r}" + (f" (the file {metric.path})" if metric.path else "")  # a file by its path
    for layer, root in metric.sqrt.items():
        where = "" if layer is None else f" for layer {layer}"
        if layer is not None and not (isinstance(layer, int) and 0 <= layer < hw.n_layers):
            raise OptionError(f"{said}: a G for layer {layer!r}, but {hw.meta.name} has layers "
                              f"0..{hw.n_layers - 1}")
        if tuple(root.shape) != (hw.d_model, hw.d_model):
            raise OptionError(f"{said}: G{where} is {root.shape[0]} x {root.shape[1]}, but "
                              f"{hw.meta.name}'s residual stream has d_model {hw.d_model}")
    return metric


def check_ridge(ridge) -> float:
    """``ridge`` when it is a finite real number >= 0 (``G + ridge · tr(G)/d · I``), else an error
    naming it (a negative one would take from ``G``'s spectrum, not add to it)."""
    import numbers

    if isinstance(ridge, bool) or not isinstance(ridge, numbers.Real) or not math.isfinite(ridge) or ridge < 0:
        raise OptionError(f"ridge={ridge!r}: expected a finite number >= 0 (G is regularised as G + ridge·tr(G)/d·I)")
    return float(ridge)


def get_metric(metric, hw: HeadWeights, ridge: float | None = None, *, model=None, device=None,
               data=None) -> Metric:
    """``metric`` itself when it is a :class:`Metric`, a Gram matrix of one's own as :func:`as_metric`
    reads it, else the registered metric of that name for ``hw`` (``model``: the source ``hw`` came
    from, for metrics estimated on data; ``device``: where those run it; ``data``: what they are
    estimated on, a :class:`~compscope.data.residual_moments.MetricData`, default the model's
    default). A metric of one's own must fit ``hw`` (:func:`check_fits`). ``ridge``: ``G`` is
    regularised as ``G + ridge·tr(G)/d·I`` (None: the default, ``1e-6``); one given is refused
    where it would change nothing or not apply (:func:`check_ridge_applies`)."""
    given = ridge is not None
    ridge = DEFAULT_RIDGE if ridge is None else check_ridge(ridge)
    built = isinstance(metric, Metric)
    met = as_metric(metric, ridge)
    if isinstance(met, Metric):
        met = check_fits(met, hw)
    else:
        check_metrics([met])  # not a name: named as unknown, with the choices
        more = {"data": data} if data is not None and on_data(met) else {}
        met = METRICS.get(met)(hw, ridge, model, device=device, **more)
    if given:
        check_ridge_applies(met, ridge, built)
    return met


def shared_ridge(metrics, ridge: float | None) -> float | None:
    """``ridge`` given once for several ``metrics`` (a command scoring each): checked, and refused above 0
    where every one is the identity, which has no ``G``, or where a :class:`Metric` built already holds
    another; each metric with a ``G`` takes it (:func:`ridge_for`), before any work."""
    if ridge is None:
        return None
    ridge = check_ridge(ridge)
    check_some_g(metrics, ridge)
    for m in metrics:
        if isinstance(m, Metric) and m.sqrt:
            check_ridge_applies(m, ridge, built=True)
    return ridge


def check_some_g(metrics, ridge: float | None, option: str = "ridge=",
                 advice: str = "leave ridge out, or add a metric with a G") -> None:
    """A ridge above 0 refused where every one of ``metrics`` (names or built) is the identity, which has no
    ``G`` to regularise (:func:`ridge_for`); ``option``: how the message names the ridge, ``advice``: what to do."""
    if ridge and all(ridge_for(m, ridge) is None for m in metrics):
        raise OptionError(f"{option}{ridge:g}: the identity metric has no G to regularise; {advice}")


def ridge_for(metric, ridge: float | None) -> float | None:
    """The ridge :func:`get_metric` builds ``metric`` with where one ``ridge`` is given for several metrics:
    none (the default, nothing to regularise) for the identity, by name or built, ``ridge`` for every other."""
    no_g = metric == "identity" if isinstance(metric, str) else isinstance(metric, Metric) and not metric.sqrt
    return None if no_g else ridge


def check_ridge_applies(met: Metric, ridge: float, built: bool = False) -> None:
    """A ridge given for ``met`` is refused where it is not the one ``met`` holds: a metric without
    ``G`` (the identity) takes none but 0, and a :class:`Metric` already built (``built``) holds its own
    (a registered name or a Gram matrix is regularised with the ridge given, so it always holds it)."""
    if ridge == met.ridge:
        return
    if not met.sqrt:
        raise OptionError(f"ridge={ridge:g}: the {met.name} metric has no G to regularise; leave ridge out, or "
                          "choose a metric with a G")
    if built:
        raise OptionError(f"ridge={ridge:g}: the metric {met.name!r} given was built with ridge {met.ridge:g}; build "
                          "it with the ridge wanted, or leave ridge out")


def check_metrics(metrics) -> list:
    """``metrics`` (one name, metric or Gram matrix of one's own, or several) as a list, each name
    registered: an unknown one (a typo) is refused before any work, not skipped where a metric
    cannot apply to a model. Gram matrices become metrics (:func:`as_metric`)."""
    if isinstance(metrics, (str, Metric, dict, Tensor)) or hasattr(metrics, "__array__"):
        metrics = [metrics]
    elif not hasattr(metrics, "__iter__"):
        raise OptionError(f"metrics: expected a metric's name, a Metric, or a list of them, got {type(metrics).__name__}")
    metrics = [as_metric(m) for m in metrics]
    unknown = [m for m in metrics if not isinstance(m, Metric) and not (isinstance(m, str) and m in METRICS)]
    if unknown or not metrics:
        raise OptionError((f"unknown metric {', '.join(_short(m) for m in unknown)}" if unknown else "no metric given")
                          + f"; metrics: {', '.join(METRICS.names())}"
                          + ("" if all(isinstance(m, str) for m in unknown) else ", a Metric, or a Gram matrix of your own")
                          + did_you_mean(unknown, METRICS.names()))
    return metrics


def _short(m) -> str:
    return repr(m) if isinstance(m, str) else f"<{type(m).__name__}>"


def distinct_metrics(metrics) -> list:
    """:func:`check_metrics`, each metric once by name: a name given twice counts once, and two
    different metrics under one name (a ``Metric`` of one's own called ``embed`` beside ``embed``)
    are refused, since their results could not be told apart."""
    out, seen = [], {}
    for m in check_metrics(metrics):
        name = m if isinstance(m, str) else m.name
        if name in seen:
            if seen[name] is m or (isinstance(m, str) and isinstance(seen[name], str)):
                continue
            raise OptionError(f"metrics: two different metrics are named {name!r}; give a metric of your own a name "
                              "of its own (compscope.metric_from_gram(G, name=...), or dataclasses.replace(metric, name=...))")
        seen[name] = m
        out.append(m)
    return out
