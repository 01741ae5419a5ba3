"""What compscope shows: the HTML report (:func:`compscope.write_report`) and figures (plots). Only the
command line and the package root's ``write_report`` import this package."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
