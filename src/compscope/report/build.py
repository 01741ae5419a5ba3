"""The report from Python: :func:`write_report` does what ``compscope report`` does, and takes a
:class:`~compscope.data.verdict.Verdict` already computed as its data."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

from ..defaults import DEFAULT_MODEL, DETAIL_PAIRS, REPORT_MEASURES, REPORT_METRICS


def build(model, out, *, command: str, kinds: str = "QKV", measures=REPORT_MEASURES, metrics=REPORT_METRICS,
          data="auto", run=None, detail_pairs: int = DETAIL_PAIRS, processing: dict | None = None,
          figures: bool = True, progress: bool = True, metric_data=None, python: bool = False,
          ridge: float | None = None) -> tuple:
    """``(Report, paths written)``: the report of ``model`` gathered
    (:func:`~compscope.report.collect.collect`) and written into the folder ``out``, every option
    checked before any work; ``command``: what the page says made it; ``python``: errors name
    ``out`` and ``data`` as Python arguments, not as the command line's ``--out`` and ``--data``."""
    from .. import __version__
    from ..core.metrics import check_data_used, check_metrics
    from ..errors import check_int
    from .collect import collect
    from .page import check_out, require_plotly, write

    out = check_out(out, "out" if python else "--out")
    check_int("detail_pairs", detail_pairs, 0)
    metrics = check_metrics(metrics)
    check_data_used(metric_data, metrics_on_data(metrics, data), also="a verdict run (data='auto' or 'run')")
    require_plotly()
    if figures:
        from .plots import require_matplotlib

        require_matplotlib()
    rep = collect(model, kinds=kinds, measures=measures, metrics=metrics, data=data, run=run,
                  detail_pairs=detail_pairs, processing=processing, progress=progress, metric_data=metric_data,
                  data_option="data" if python else "--data", ridge=ridge)
    return rep, write(rep, out, command=command, version=__version__, figures=figures)


def metrics_on_data(metrics: list, data) -> list:
    """The metrics a report of ``data`` may estimate: its own, and where a verdict may run
    (``data`` ``'auto'``, on a toy model, or ``'run'``) the verdict's as well."""
    from ..data.validate import DEFAULT_METRICS

    return [*metrics, *DEFAULT_METRICS] if isinstance(data, str) and data in ("auto", "run") else list(metrics)


def write_report(model=DEFAULT_MODEL, out: str | Path = "compscope-report", *, kinds: str = "QKV",
                 measures=REPORT_MEASURES, metrics=REPORT_METRICS, data="auto", run: str | Path | None = None,
                 detail_pairs: int = DETAIL_PAIRS, figures: bool = True, progress: bool = True, metric_data=None,
                 fold_norm: bool = False, linearise_qk_norm: bool = False, center_writing: bool = False,
                 fold_value_bias: bool = False, ridge: float | None = None) -> Path:
    """Write the interactive report of ``model`` (any source :func:`compscope.load` reads) into the
    folder ``out``, as ``compscope report`` does, and return the path of its ``index.html``.

    ``data``: ``'auto'`` (the verdict run on toy models only), ``'run'`` (always), ``'none'``, a
    folder written by ``compscope validate --out``, or a :class:`~compscope.data.verdict.Verdict`
    of the same model from :func:`compscope.validate` (its labels, effects and table, not run
    again). ``run``: a ``compscope train`` folder for the training curves; ``figures``: the PNG/SVG
    figures beside the page (matplotlib); ``fold_norm``, ``linearise_qk_norm``, ``center_writing``,
    ``fold_value_bias``: how the weights are processed when loaded (:func:`compscope.load`); ``ridge``: each
    metric's ``G`` regularised as ``G + ridge·tr(G)/d·I`` (default ``1e-6``; the identity has none)."""
    from ..core.processing import STEPS

    defaults = inspect.signature(write_report).parameters  # the call as the page names it: arguments not left as they were
    chosen = {"kinds": kinds, "measures": measures, "metrics": metrics, "data": data, "run": run,
              "detail_pairs": detail_pairs, "metric_data": metric_data, "fold_norm": fold_norm,
              "linearise_qk_norm": linearise_qk_norm, "center_writing": center_writing,
              "fold_value_bias": fold_value_bias, "ridge": ridge}
    said = [repr(model if isinstance(model, (str, Path)) else type(model).__name__), f"out={str(out)!r}"]
    said += [f"{k}={_said(v)}" for k, v in chosen.items() if v is not defaults[k].default and v != defaults[k].default]
    _, paths = build(model, out, command=f"compscope.write_report({', '.join(said)})", kinds=kinds, measures=measures,
                     metrics=metrics, data=data, run=run, detail_pairs=detail_pairs, figures=figures, progress=progress,
                     metric_data=metric_data, processing={k: chosen[k] for k in STEPS}, python=True, ridge=ridge)
    return paths[0]


def _said(v) -> str:
    """An argument as the page's "made by" line names it: plain values and lists of them as
    written, :class:`~compscope.data.residual_moments.MetricData` by the fields given, any other
    object by its kind."""
    from ..data.residual_moments import MetricData

    if isinstance(v, (str, Path, bool, int, float, type(None))):
        return repr(str(v) if isinstance(v, Path) else v)
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_said(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, MetricData):
        given = [f"{f.name}={getattr(v, f.name)!r}" for f in dataclasses.fields(v) if getattr(v, f.name) is not None]
        return f"MetricData({', '.join(given)})"
    return type(v).__name__
