"""Source → raw tensors → ``HeadWeights``. Two independent axes: the *format* (where tensors
come from: ``formats/``, asked in turn by :func:`compscope.loading.sources.load`) and the
*family* (how names map to heads: ``families/``); plus built-in model names (builtin)."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
