"""Analyses on top of the engine: one pair in detail (pair), circuits read from the weights
(circuits), composition over checkpoints (tracking), the axiom battery (axioms)."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
