"""Analyses on top of the engine: one pair in detail (pair), circuits read from the weights
(circuits), composition over checkpoints (tracking), the axiom battery (axioms)."""
