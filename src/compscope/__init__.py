"""compscope: how attention heads compose, read from a transformer's weights.

The package root is light: names below are imported on first use (``import compscope`` does
not import torch), so the command line answers ``--help`` at once.

>>> import compscope                                     # doctest: +SKIP
>>> t = compscope.scores("induction-2l", kinds="K")      # doctest: +SKIP
>>> t.top("K", "frobenius", 1)                           # doctest: +SKIP
"""

from __future__ import annotations

import importlib

from .errors import CompscopeError, LoadError, OptionError, ProcessingError, UnsupportedModelError, WeightError

__version__ = "0.1.0"

#: public name -> module that defines it (imported on first access)
_PUBLIC = {
    "load": "compscope.loading.sources",
    "scores": "compscope.api",
    "compose_pair": "compscope.api",
    "head_circuits": "compscope.api",
    "as_heads": "compscope.api",
    "PairReport": "compscope.analysis.pair",
    "check_axioms": "compscope.analysis.axioms",
    "gauge_check": "compscope.analysis.gauge",
    "track": "compscope.analysis.tracking",
    "validate": "compscope.data.validate",
    "runner_for": "compscope.data.runner",
    "activation_labels": "compscope.data.head_labels",
    "text_labels": "compscope.data.head_labels",
    "intervention_effects": "compscope.data.intervene",
    "metric_from_gram": "compscope.core.metrics",
    "MetricData": "compscope.data.residual_moments",
    "SampleData": "compscope.data.residual_moments",
    "HeadWeights": "compscope.core.heads",
    "Meta": "compscope.core.heads",
    "Norm": "compscope.core.heads",
    "Rotary": "compscope.core.heads",
    "LowRank": "compscope.core.lowrank",
    "center_writing": "compscope.core.processing",
    "fold_norm": "compscope.core.processing",
    "fold_value_bias": "compscope.core.processing",
    "linearise_qk_norm": "compscope.core.processing",
    "linearise_norms": "compscope.data.norm_linearisation",
    "ScoreTable": "compscope.results.table",
    "read_scores": "compscope.results.table",
    "write_report": "compscope.report.build",
}
#: subpackages reachable as attributes after ``import compscope``
_SUBPACKAGES = ("analysis", "api", "core", "data", "engine", "loading", "measures", "report", "results", "sweep", "toy")

__all__ = [
    "CompscopeError", "LoadError", "OptionError", "ProcessingError", "UnsupportedModelError", "WeightError",
    *_PUBLIC, "__version__",
]


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"compscope.{name}")
    else:
        raise AttributeError(f"module 'compscope' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names and subpackages (not the helpers this module imports)."""
    return sorted({*__all__, *_SUBPACKAGES})
