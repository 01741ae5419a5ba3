"""Ground truth from data: activation labels of heads (head_labels), interventional
composition (intervene), the activations metric estimated from the residual stream
(residual_moments), and the norms inside the heads' circuits linearised on data
(norm_linearisation)."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
