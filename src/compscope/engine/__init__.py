"""The all-pairs composition engine: ``HeadWeights`` → score table. It never loads a model
(``compscope.scores`` in :mod:`compscope.api` does that, then calls :func:`composition.scores`).
Memory and device are decided once (plan); head SVDs, the Gram and X routes, the Haar
baseline, scratch buffers (workspace) and the batched eigen-solver are its steps; threads spreads
small LAPACK problems over torch's threads (also for the circuits' eigenproblems)."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
