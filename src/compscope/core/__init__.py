"""The canonical form and what acts on it: ``HeadWeights`` (heads), factored matrices
(lowrank), a head's factored circuits (factors), metrics on the residual stream (metrics),
weight processing (processing), and attention recomputed from ``HeadWeights`` (attention)."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
