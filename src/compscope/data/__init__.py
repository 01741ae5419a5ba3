"""Ground truth from data: activation labels of heads (head_labels), interventional
composition (intervene), and the activations metric estimated from the residual stream
(residual_moments)."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
