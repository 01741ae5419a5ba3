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


def did_you_mean(names, choices) -> str:
    """``'; did you mean 'x'?'`` for the closest of ``choices`` to each of ``names`` that has one
    (a typo), to end an "unknown ..." message; empty when none is close."""
    import difflib

    close = [c for n in ([names] if isinstance(names, str) else names) if isinstance(n, str)
             for c in difflib.get_close_matches(n, list(choices), n=1)]
    return f"; did you mean {' or '.join(repr(c) for c in dict.fromkeys(close))}?" if close else ""


def check_keywords(options: dict, own, engine, what: str) -> dict:
    """``options`` (the ``**options`` of the function ``own``, which hands them to ``engine``) when
    each is a keyword ``engine`` takes, else an error naming the unknown one, every option
    (``own``'s after its first, then ``engine``'s keyword-only ones) and the one meant (not
    Python's TypeError from deep inside, after the work before it)."""
    import inspect

    takes = inspect.signature(engine).parameters
    if any(p.kind == p.VAR_KEYWORD for p in takes.values()):  # one that takes any keyword (a wrapper) says itself
        return options
    mine = [n for n, p in inspect.signature(own).parameters.items() if p.kind != p.VAR_KEYWORD][1:]
    names = [*mine, *(n for n, p in takes.items() if p.kind == p.KEYWORD_ONLY and n not in mine)]
    unknown = [k for k in options if k not in names]
    if unknown:
        raise OptionError(f"{what}: unknown option {unknown[0]!r}; options: {', '.join(names)}"
                          + did_you_mean(unknown[0], names))
    return options


def at_least_words(low: int | None) -> str:
    """How an integer option's bound reads in an error: 'an integer', 'a positive integer',
    'a positive integer >= 2', 'an integer >= 0'."""
    if low is None:
        return "an integer"
    return "a positive integer" + (f" >= {low}" if low > 1 else "") if low >= 1 else f"an integer >= {low}"


def check_int(name: str, value, low: int | None = None) -> int:
    """``value`` when it is an integer (not a bool) of at least ``low``; else an ``OptionError``
    naming ``name``."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or (low is not None and value < low):
        raise OptionError(f"{name}={value!r}: expected {at_least_words(low)}")
    return int(value)


def what_is(x) -> str:
    """A tensor's shape, or the type of something that is not a tensor (for messages)."""
    import torch

    return f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else f"a {type(x).__name__}"


def check_tokens(tokens, dims: str = "batch, seq", n_vocab: int | None = None, model: str = "the model"):
    """``tokens`` if it is a tensor ``(batch, seq)`` of integer token ids with at least one sequence and one
    position (and, ``n_vocab`` given, ids in ``0..n_vocab - 1``: a negative id would index from the end), else
    an ``OptionError`` (``dims``: the two dimensions' names in the message; ``model``: the vocabulary's)."""
    import torch

    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.numel() == 0:
        raise OptionError(f"tokens must be a non-empty ({dims}) tensor, got {what_is(tokens)}")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise OptionError(f"tokens must be integer token ids, got dtype {str(tokens.dtype).removeprefix('torch.')}")
    if n_vocab is not None and (int(tokens.min()) < 0 or int(tokens.max()) >= n_vocab):
        raise OptionError(f"token ids must lie in 0..{n_vocab - 1} for {model}")
    return tokens


def one_line(e: BaseException) -> str:
    """An exception's message on one line (compscope's messages are single lines)."""
    return " ".join(str(e).split()) or type(e).__name__
