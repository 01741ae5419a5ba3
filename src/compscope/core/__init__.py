"""The canonical form and what acts on it: ``HeadWeights`` (heads), factored matrices
(lowrank), a head's factored circuits (factors), metrics on the residual stream (metrics),
weight processing (processing), attention recomputed from ``HeadWeights`` (attention), and
the ``d × d`` products over the vocabulary (vocab)."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
