"""The convenience layer: any model source in — a name, a path, a loaded model or
``HeadWeights`` — loaded with :func:`compscope.load`, then handed to the engine or an analysis.

The engine (:mod:`compscope.engine`) and the analyses take ``HeadWeights`` and never load;
this module is where "load, then score" happens, and where a metric that needs the model
itself (``activations``, estimated on data) gets it.
"""

from __future__ import annotations

from .analysis import circuits as _circuits
from .analysis import pair as _pair
from .core.heads import HeadWeights
from .core.metrics import DEFAULT_RIDGE, get_metric
from .defaults import CONTENTS
from .engine import composition as _composition
from .errors import OptionError
from .loading.sources import load
from .measures import DEFAULT


def as_heads(model) -> HeadWeights:
    """``model`` itself when it is ``HeadWeights``, else :func:`compscope.load` of it."""
    return model if isinstance(model, HeadWeights) else load(model)


def scores(model, kinds: str = "QKV", measures=DEFAULT, metric="identity", *, ridge: float = DEFAULT_RIDGE, metric_data=None,
           **options):
    """Composition scores of every (earlier writer, later reader) head pair of ``model`` (any
    source :func:`compscope.load` reads, or ``HeadWeights``): a ``ScoreTable``.

    ``kinds``: letters of ``'QKV'``; ``measures``: names, or ``'all'``; ``metric``: a registered
    name (``identity``, ``embed``, ``unembed``, ``activations``) or a ``Metric``. Every other
    option (``offset``, ``pairs``, ``precision``, ``device``, ``max_memory``, ``progress``, …)
    is the engine's: :func:`compscope.engine.composition.scores`; ``device`` is also where the
    ``activations`` metric runs the model, and ``metric_data`` what it runs it on
    (:class:`~compscope.data.residual_moments.MetricData`; default the model's default)."""
    hw = as_heads(model)
    met = get_metric(metric, hw, ridge, model=model, device=options.get("device"), data=metric_data)  # runs the model there
    return _composition.scores(hw, kinds, measures, met, ridge=ridge, **options)


def compose_pair(model, writer: tuple[int, int] | str, reader: tuple[int, int] | str, kind: str = "K", metric="identity", *,
                 ridge: float = DEFAULT_RIDGE, device=None, metric_data=None, **options):
    """One pair of ``model`` in detail (principal angles, composed spectrum, every measure):
    :func:`compscope.analysis.pair.compose_pair` after loading. ``device``: where the
    ``activations`` metric runs the model (the pair itself is float64 on the CPU), ``metric_data``
    what it runs it on (as :func:`scores`)."""
    hw = as_heads(model)
    met = get_metric(metric, hw, ridge, model=model, device=device, data=metric_data)
    return _pair.compose_pair(hw, writer, reader, kind, met, ridge=ridge, **options)


def head_circuits(model, measure: str = "frobenius", *, offset: float = 0.0, content: str = "embed",
                  sample_data=None, progress: bool = True, positional=None):
    """Copying, matching, previous-token and induction scores of every head of ``model``, read
    from the weights: :func:`compscope.analysis.circuits.head_circuits` after loading.
    ``content``: the content distribution of the rotary previous-token score, ``embed`` (the
    normed embeddings: weights only) or ``activations`` (what each layer reads on natural text:
    runs ``model``, which must then be a name, folder or runner, not ``HeadWeights``), sampled on
    ``sample_data`` (:class:`~compscope.data.residual_moments.SampleData`; only with ``activations``).
    ``positional``: for weights whose QK-norm is linearised, those before it, which the previous-token
    scores read (:func:`compscope.loading.sources.load_with_positional` gives both)."""
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
        raise OptionError(f"{hw.meta.name}: content='activations' applies to the rotary previous-token score, and "
                          f"this model's positions are {hw.positions!r}")
    return content_samples(hw, model, data)

