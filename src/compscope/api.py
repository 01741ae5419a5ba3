"""The convenience layer: any model source in — a name, a path, a loaded model or
``HeadWeights`` — loaded with :func:`compscope.load`, then handed to the engine or an analysis.

The engine (:mod:`compscope.engine`) and the analyses take ``HeadWeights`` and never load;
this module is where "load, then score" happens, and where a metric that needs the model
itself (``activations``, estimated on data) gets it.
"""

from __future__ import annotations

from .analysis import circuits as _circuits
from .analysis import pair as _pair
from .core.factors import check_composes
from .core.heads import HeadWeights
from .core.metrics import check_data_used, get_metric
from .core.processing import check_qk_norm_linearisable, process
from .defaults import CONTENTS
from .engine import composition as _composition
from .errors import OptionError, check_keywords
from .loading.sources import load, load_with_positional
from .measures import DEFAULT


def as_heads(model) -> HeadWeights:
    """``model`` itself when it is ``HeadWeights``, else :func:`compscope.load` of it."""
    return model if isinstance(model, HeadWeights) else load(model)


def load_processed(model, *, metric_data=None, device=None, fold_norm: bool = False,
                   linearise_qk_norm: bool | str = False, center_writing: bool = False,
                   fold_value_bias: bool = False, linearise_norms: bool | str = False, sample_data=None,
                   progress: bool = True) -> tuple[HeadWeights, object]:
    """``(weights, runner or None)``: ``model`` loaded (or ``HeadWeights`` processed) with the
    processing steps of :func:`compscope.load`. ``linearise_qk_norm='text'`` replaces QK-norm at
    the second moment of what the heads read on the text ``metric_data`` names (a
    :class:`~compscope.data.residual_moments.MetricData`, default the model's default);
    ``linearise_norms`` (True or ``'all'``: every one the model has; or parts, ``'qk,output'``) the
    norms inside the heads' circuits by their mean Jacobian on ``sample_data`` (a
    :class:`~compscope.data.residual_moments.SampleData`, default 16 sequences of natural text),
    after any QK-norm step and before centring (:func:`compscope.linearise_norms`). Either runs the
    model on ``device``: its runner comes back, so that a metric estimated on data reads the same
    model."""
    steps = {"fold_norm": fold_norm, "linearise_qk_norm": linearise_qk_norm, "center_writing": center_writing,
             "fold_value_bias": fold_value_bias}
    norms = linearise_norms is not False and linearise_norms is not None
    if sample_data is not None and not norms:
        raise OptionError("sample_data: the residual is sampled for linearise_norms, which is not asked for")
    if linearise_qk_norm != "text" and not norms:
        return load(model, **steps), None
    if isinstance(model, HeadWeights):
        what = "linearise_norms" if norms else "linearise_qk_norm='text'"
        raise OptionError(f"{what} runs the model over text: pass the model itself (a name, folder, model object or "
                          "runner), not HeadWeights")
    from .data.norm_linearisation import check_parts, linearise_norms as linearised, qk_norm_on_text
    from .data.runner import Runner, runner_for

    on_text = linearise_qk_norm == "text"
    raw = load(model)  # read once: the runner runs it, the steps process it (the rest after)
    hw = process(raw, fold_norm=fold_norm, linearise_qk_norm=False if on_text else linearise_qk_norm)
    parts = None if linearise_norms is True or linearise_norms == "all" else linearise_norms
    if on_text:  # before the model is built
        check_qk_norm_linearisable(hw)
    if norms and not on_text:
        check_parts(hw, parts)
    runner = runner_for(model, None if isinstance(model, Runner) else raw, device=device)
    if on_text:
        hw = qk_norm_on_text(runner, hw, metric_data)
    if norms:
        hw = linearised(runner, parts, hw=hw, data=sample_data, progress=progress)
    return process(hw, center_writing=center_writing, fold_value_bias=fold_value_bias), runner


def scores(model, kinds: str = "QKV", measures=DEFAULT, metric="identity", *, ridge: float | None = None,
           metric_data=None, fold_norm: bool = False, linearise_qk_norm: bool | str = False,
           center_writing: bool = False, fold_value_bias: bool = False, linearise_norms: bool | str = False,
           sample_data=None, **options):
    """Composition scores of every (earlier writer, later reader) head pair of ``model`` (any
    source :func:`compscope.load` reads, or ``HeadWeights``): a ``ScoreTable``.

    ``kinds``: letters of ``'QKV'``; ``measures``: names, or ``'all'``; ``metric``: one metric (a
    table holds one), a registered name (``identity``, ``embed``, ``unembed``, ``activations``, ...),
    a ``Metric`` or a Gram matrix of one's own; ``ridge``: its ``G`` regularised as ``G + ridge·tr(G)/d·I``
    (default ``1e-6``; refused with the identity metric, which has no ``G``, and with a ``Metric`` built
    with another). ``fold_norm``, ``linearise_qk_norm`` (True,
    ``'isotropic'`` or ``'text'``), ``center_writing``, ``fold_value_bias``, ``linearise_norms`` (on
    ``sample_data``): the weights processed as :func:`load_processed` does, and a metric estimated on
    data estimated for those weights. Every other option (``offset``, ``pairs``, ``precision``,
    ``device``, ``max_memory``, ``progress``, …) is the engine's:
    :func:`compscope.engine.composition.scores`; ``device`` is also where the ``activations`` metric
    runs the model, and ``metric_data`` what it runs it on
    (:class:`~compscope.data.residual_moments.MetricData`; default the model's default)."""
    check_keywords(options, scores, _composition.scores, "scores")
    check_data_used(metric_data, metric, reading=linearise_qk_norm == "text", also="linearise_qk_norm='text'")
    hw, runner = load_processed(model, metric_data=metric_data, device=options.get("device"), fold_norm=fold_norm,
                                linearise_qk_norm=linearise_qk_norm, center_writing=center_writing,
                                fold_value_bias=fold_value_bias, linearise_norms=linearise_norms,
                                sample_data=sample_data, progress=options.get("progress", True))
    check_composes(hw)  # before a metric runs the model
    met = get_metric(metric, hw, ridge, model=runner or model, device=None if runner else options.get("device"),
                     data=metric_data)  # runs the model there
    return _composition.scores(hw, kinds, measures, met, **options)


def compose_pair(model, writer: tuple[int, int] | str, reader: tuple[int, int] | str, kind: str = "K", metric="identity", *,
                 ridge: float | None = None, device=None, metric_data=None, fold_norm: bool = False,
                 linearise_qk_norm: bool | str = False, center_writing: bool = False, fold_value_bias: bool = False,
                 linearise_norms: bool | str = False, sample_data=None, **options):
    """One pair of ``model`` in detail (principal angles, composed spectrum, every measure):
    :func:`compscope.analysis.pair.compose_pair` after loading, processed as :func:`scores` does.
    ``device``: where the ``activations`` metric runs the model (the pair itself is float64 on the
    CPU), ``metric_data`` what it runs it on (as :func:`scores`)."""
    check_keywords(options, compose_pair, _pair.compose_pair, "compose_pair")
    check_data_used(metric_data, metric, reading=linearise_qk_norm == "text", also="linearise_qk_norm='text'")
    hw, runner = load_processed(model, metric_data=metric_data, device=device, fold_norm=fold_norm,
                                linearise_qk_norm=linearise_qk_norm, center_writing=center_writing,
                                fold_value_bias=fold_value_bias, linearise_norms=linearise_norms,
                                sample_data=sample_data)
    check_composes(hw)
    met = get_metric(metric, hw, ridge, model=runner or model, device=None if runner else device, data=metric_data)
    return _pair.compose_pair(hw, writer, reader, kind, met, **options)


def head_circuits(model, measure: str = "frobenius", *, offset: float = 0.0, content: str = "embed",
                  sample_data=None, progress: bool = True, positional=None, fold_norm: bool = False,
                  linearise_qk_norm: bool = False, center_writing: bool = False, fold_value_bias: bool = False):
    """Copying, matching, previous-token and induction scores of every head of ``model``, read
    from the weights: :func:`compscope.analysis.circuits.head_circuits` after loading.
    ``content``: the content distribution of the rotary, ALiBi or relative-position previous-token score, ``embed`` (the
    normed embeddings: weights only) or ``activations`` (what each layer reads on natural text:
    runs ``model``, which must then be a name, folder or runner, not ``HeadWeights``), sampled on
    ``sample_data`` (:class:`~compscope.data.residual_moments.SampleData`; only with ``activations``).
    ``positional``: for weights whose QK-norm is linearised, those before it, which the previous-token
    scores read (:func:`compscope.loading.sources.load_with_positional` gives both). ``fold_norm``,
    ``linearise_qk_norm``, ``center_writing``, ``fold_value_bias``: the weights processed as
    :func:`compscope.load` does (the previous-token scores read the weights before a linearised QK-norm)."""
    steps = {"fold_norm": fold_norm, "linearise_qk_norm": linearise_qk_norm, "center_writing": center_writing,
             "fold_value_bias": fold_value_bias}
    if any(steps.values()):
        hw, before = load_with_positional(model, **steps)
        positional = before if positional is None else positional
    else:
        hw = as_heads(model)
    return _circuits.head_circuits(hw, measure, offset=offset, content=circuit_content(hw, content, model, sample_data),
                                   progress=progress, positional=positional)


def circuit_content(hw, content: str, model, sample_data=None):
    """The samples :func:`head_circuits` takes for ``content`` (``embed``: None; ``activations``:
    :func:`compscope.data.residual_moments.content_samples` on ``sample_data``, only where the
    previous-token score is rotary)."""
    from .data.residual_moments import as_sample_data, content_samples

    if content not in CONTENTS:
        raise OptionError(f"content={content!r}: expected one of {', '.join(CONTENTS)}")
    data = None if sample_data is None else as_sample_data(sample_data)
    if content == "embed":
        if data is not None:
            raise OptionError("sample data: the residual is sampled for content='activations' only, and content is 'embed'")
        return None
    from .analysis.circuits import reads_content

    if not reads_content(hw):
        raise OptionError(f"{hw.meta.name}: content='activations' applies to the rotary, ALiBi or relative-position "
                          f"previous-token score, and this model's positions are {hw.positions!r}")
    return content_samples(hw, model, data)

