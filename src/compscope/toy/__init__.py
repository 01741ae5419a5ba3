"""Toy transformers that grow induction heads: model, data, trainer, storage (the toy folder format)."""

from .data import Batch, DataConfig, InductionData, repeated_random
from .model import ToyConfig, ToyTransformer
from .storage import is_toy, load_toy, save_toy
from .train import PRESETS, TrainConfig, checkpoint_steps, read_log, train

__all__ = [
    "Batch", "DataConfig", "InductionData", "repeated_random", "ToyConfig", "ToyTransformer",
    "is_toy", "load_toy", "save_toy", "PRESETS", "TrainConfig", "checkpoint_steps", "read_log", "train",
]

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
