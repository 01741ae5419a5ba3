"""compscope: how attention heads compose, read from a transformer's weights."""

from .axioms import check_axioms
from .circuits import head_circuits
from .errors import CompscopeError, LoadError, OptionError, ProcessingError, UnsupportedModelError, WeightError
from .composition import scores
from .heads import HeadWeights, Meta, Norm, Rotary
from .loading import load
from .lowrank import LowRank
from .pair import PairReport, compose_pair
from .processing import center_writing, fold_norm, fold_value_bias
from .tracking import track

__version__ = "0.1.0"

__all__ = [
    "CompscopeError", "HeadWeights", "check_axioms", "head_circuits", "PairReport", "compose_pair", "LoadError", "OptionError", "LowRank", "Meta", "Norm", "ProcessingError",
    "Rotary", "UnsupportedModelError", "WeightError", "center_writing", "fold_norm",
    "fold_value_bias", "load", "scores", "track",
]
