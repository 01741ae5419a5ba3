"""What compscope shows: figures (plots). Only the command line imports this package."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
