"""Data every machine has, made offline and seeded: repeated random token sequences, and natural
text assembled from the docstrings of the installed Python standard library.

- :func:`repeats`: ``[bos] t t`` with ``t`` uniform random tokens (``bos`` only where the model
  expects a first token): in the second copy only in-context copying predicts the next token,
  so the activation labels read induction and duplicate-token heads there.
- :func:`natural_text`: the docstrings of a fixed list of standard-library modules (their
  classes and functions, in source order), tokenised with the model's own tokenizer and cut into
  sequences; ``seed`` picks which. It is English technical prose, the same on every machine with
  the same Python minor version (the version is recorded with the results). Or a corpus of the
  user's own, a UTF-8 text file, cut the same way (its name and SHA-256 are recorded:
  :func:`corpus_words`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..core.memory import check_fits
from ..errors import OptionError
from .tokenizers import check_tokenizer, encode

#: ``|t|`` of the repeated sequences ``[bos] t t`` that validate and intervene run on by default
#: (cut to a shorter context)
HALF = 32

#: modules whose docstrings make the natural text (all in every CPython installation)
STDLIB_MODULES = (
    "argparse", "collections", "functools", "itertools", "pathlib", "json", "csv", "datetime", "decimal",
    "fractions", "statistics", "random", "string", "textwrap", "difflib", "heapq", "bisect", "contextlib",
    "dataclasses", "enum", "typing", "logging", "unittest", "inspect", "tokenize", "shutil", "tempfile",
    "subprocess", "threading", "queue", "socket", "email", "http.client", "urllib.parse", "zipfile",
    "tarfile", "gzip", "pickle", "copy", "pprint", "calendar", "locale", "gettext", "optparse", "pdb",
)


@dataclass(frozen=True)
class Repeats:
    """``tokens: (n, start + 2·half)``: an optional first token, then ``t, t``; ``start`` is 1 with
    a first token and 0 without; the seed they were drawn with."""

    tokens: Tensor
    half: int
    start: int
    seed: int


def repeats(n: int, half: int, n_vocab: int, seed: int, bos: int | None = None, *,
            avoid: tuple[int, ...] = ()) -> Repeats:
    """``n`` sequences ``[bos] t t``, ``len(t) = half``, tokens uniform over ``0 … n_vocab − 1``
    without the ids in ``avoid`` (special tokens), seeded."""
    if half < 2 or n < 1:
        raise OptionError(f"repeated sequences need n >= 1 and half-length >= 2, got n={n}, half={half}")
    check_fits(n * (3 * half + 1) * 8, f"{n:,} sequences [bos] t t with |t| = {half} (token ids, int64)", "ask for fewer")
    allowed = torch.ones(n_vocab, dtype=torch.bool)
    allowed[[a for a in avoid if 0 <= a < n_vocab]] = False
    pool = allowed.nonzero().flatten()
    g = torch.Generator().manual_seed(seed)
    t = pool[torch.randint(len(pool), (n, half), generator=g)]
    parts = ([torch.full((n, 1), bos, dtype=torch.long)] if bos is not None else []) + [t, t]
    return Repeats(torch.cat(parts, dim=1), half, 1 if bos is not None else 0, seed)


@functools.lru_cache(maxsize=4)
def stdlib_text(modules: tuple[str, ...] = STDLIB_MODULES) -> str:
    """The docstrings of ``modules`` and of their public classes and functions, paragraphs joined."""
    with warnings.catch_warnings():  # reading some attributes (typing.io) warns of deprecation
        warnings.simplefilter("ignore", DeprecationWarning)
        return _docstrings(modules)


def _docstrings(modules: tuple[str, ...]) -> str:
    parts = []
    for name in modules:
        try:
            mod = importlib.import_module(name)
        except ImportError:  # a trimmed installation: skip, the version string records which Python
            continue
        doc = inspect.getdoc(mod)
        if doc:
            parts.append(doc)
        for attr, obj in sorted(vars(mod).items()):
            if attr.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj):
                d = inspect.getdoc(obj)
                if d and len(d) > 40:
                    parts.append(d)
    return "\n\n".join(parts)


def corpus_path(corpus, what: str = "corpus") -> str:
    """``corpus`` (a path to a text file) as a string, refused unless it names a readable file
    (``what`` in the error)."""
    if not isinstance(corpus, (str, os.PathLike)):
        raise OptionError(f"{what}={corpus!r}: expected the path of a UTF-8 text file")
    path = os.fspath(corpus)
    if not os.path.exists(path):
        raise OptionError(f"{what} {path}: no such file")
    if not os.path.isfile(path):
        raise OptionError(f"{what} {path}: not a file (a text file is expected)")
    return path


def corpus_text(corpus: str | os.PathLike | None = None, what: str = "corpus") -> str:
    """The natural text: the standard library's docstrings (:func:`stdlib_text`), or the UTF-8
    text file ``corpus``, refused by name (``what`` in the error) when it cannot be read as text
    or holds none."""
    if corpus is None:
        return stdlib_text()
    path = corpus_path(corpus, what)
    st = os.stat(path)
    try:
        text = _read_corpus(os.path.abspath(path), st.st_mtime_ns, st.st_size)
    except UnicodeDecodeError as e:
        raise OptionError(f"{what} {path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    except OSError as e:
        raise OptionError(f"{what} {path}: cannot be read ({e.strerror or e})") from None
    if not text.strip():
        raise OptionError(f"{what} {path}: holds no text")
    return text


@functools.lru_cache(maxsize=4)
def _read_corpus(path: str, mtime_ns: int, size: int) -> str:
    """The text of the file ``path``, decoded as UTF-8 (kept while its time and size stay the same)."""
    return Path(path).read_bytes().decode("utf-8")


def corpus_words(corpus: str | os.PathLike | None = None) -> str:
    """The natural text in words, as results record it: ``standard-library docstrings``, or the
    corpus file's name and the first 12 hex digits of its SHA-256."""
    if corpus is None:
        return "standard-library docstrings"
    return f"{Path(corpus_path(corpus)).name} (sha256 {corpus_digest(corpus)})"


def corpus_digest(corpus: str | os.PathLike) -> str:
    """The first 12 hex digits of the SHA-256 of the corpus file's text (UTF-8), kept as its text is."""
    corpus_text(corpus)  # refused here, by name, if it cannot be read
    path = os.path.abspath(os.fspath(corpus))
    st = os.stat(path)
    return _digest(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _digest(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(_read_corpus(path, mtime_ns, size).encode("utf-8")).hexdigest()[:12]


def natural_text(tokenizer, n: int, seq_len: int, seed: int, bos: int | None = None,
                 corpus: str | os.PathLike | None = None) -> Tensor:
    """``(n, seq_len)`` token ids of the natural text (:func:`corpus_text`: standard-library
    docstrings, or the file ``corpus``), ``[bos]`` first when given; ``seed`` picks the ``n``
    windows out of the whole text."""
    check_tokenizer(tokenizer, corpus)
    body = seq_len - (bos is not None)
    ids = torch.tensor(encode(tokenizer, corpus_text(corpus)), dtype=torch.long)
    windows = len(ids) // body
    if windows < n:
        source = "the standard-library text" if corpus is None else f"corpus {os.fspath(corpus)} ({len(ids)} tokens)"
        raise OptionError(f"{source} gives {windows} sequences of {seq_len} tokens; asked for {n} (ask for fewer or "
                          "shorter sequences, or give a longer text)")
    g = torch.Generator().manual_seed(seed)
    pick = torch.randperm(windows, generator=g)[:n].sort().values
    out = ids[: windows * body].view(windows, body)[pick]
    if bos is not None:
        out = torch.cat([torch.full((n, 1), bos, dtype=torch.long), out], dim=1)
    return out


def python_version() -> str:
    """The Python version whose standard library made the text (recorded with results)."""
    return ".".join(map(str, sys.version_info[:3]))
