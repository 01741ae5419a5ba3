"""Analyses on top of the engine: one pair in detail (pair), circuits read from the weights
(circuits), composition over checkpoints (tracking), the axiom battery (axioms), and changes of a
model's parameters that it cannot see (gauge)."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
