"""Errors compscope raises. Every message names the file, tensor, key or option at fault."""


class CompscopeError(Exception):
    """Base class of every error compscope raises on purpose."""


class LoadError(CompscopeError):
    """A source cannot be read: missing, truncated or corrupt file, unknown built-in name."""


class WeightError(CompscopeError):
    """A tensor is unusable: wrong shape, NaN or Inf values, missing from the checkpoint."""


class UnsupportedModelError(CompscopeError):
    """The architecture, or a setting of its config, is one compscope does not handle."""


class ProcessingError(CompscopeError):
    """A requested weight transform is not valid for this model (e.g. centring an RMSNorm model)."""


class OptionError(CompscopeError, ValueError):
    """An option has a value compscope does not accept (unknown measure, metric, kind, ...)."""


def one_line(e: BaseException) -> str:
    """An exception's message on one line (compscope's messages are single lines)."""
    return " ".join(str(e).split()) or type(e).__name__
