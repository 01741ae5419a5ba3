"""Tokenizers: the one a model carries or one given for it, checked before the model reads a token.

- :func:`read_tokenizer`: a ``transformers`` tokenizer from local files (``--tokenizer PATH``),
  and :func:`given_tokenizer` / :func:`tokenizer_digest`, how a run records it;
- :func:`has_vocabulary`: whether a tokenizer encodes text at all (a folder without tokenizer
  files gets one of special tokens alone);
- :func:`checked_tokenizer` / :func:`check_token_ids`: a tokenizer, and the ids it gives, fit
  the model's vocabulary (another model's tokenizer would otherwise fail deep inside the
  embedding);
- :func:`check_tokenizer`: natural text refused, by name, for a model without one;
- :func:`encode`: a whole text to ids, no special tokens added.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from ..errors import OptionError, one_line


def check_tokenizer(tokenizer, corpus: str | os.PathLike | None = None) -> None:
    """Natural text (the docstrings, or the file ``corpus``) is refused for a model without a tokenizer."""
    if tokenizer is None:
        what = "natural text" if corpus is None else f"corpus {os.fspath(corpus)}"
        raise OptionError(f"{what}: needs the model's tokenizer, and this model has none (a toy model, a folder "
                          "without tokenizer files (give it one with --tokenizer PATH), or a model object "
                          "(compscope.runner_for(model, tokenizer=...)))")


def has_vocabulary(tokenizer) -> bool:
    """Whether ``tokenizer`` encodes text to tokens other than its unknown token: for a folder
    without tokenizer files transformers builds one of special tokens alone (GPT-2's encodes text
    to nothing, Gemma's to ``<unk>``)."""
    if tokenizer is None:
        return False
    try:
        ids = tokenizer.encode("The text of a docstring.", add_special_tokens=False)
    except Exception:
        return False
    return any(i != getattr(tokenizer, "unk_token_id", None) for i in ids)


def checked_tokenizer(tokenizer, n_vocab: int, model: str):
    """``tokenizer`` when it encodes text (``encode(text, add_special_tokens=False)``) to token ids of
    a vocabulary of ``n_vocab`` (the model named ``model``'s), else an error that says what is wrong
    with it (another model's tokenizer gives ids past the vocabulary, which the model would fail on
    deep inside its embedding; the text's own ids are checked again before it runs:
    :func:`check_token_ids`)."""
    if isinstance(tokenizer, (str, bytes, Path)):  # a str has an encode() of its own
        raise OptionError(f"tokenizer={str(tokenizer)!r}: give a tokenizer object (for example "
                          "transformers.AutoTokenizer.from_pretrained(folder)), not a name or path")
    if not callable(getattr(tokenizer, "encode", None)):
        raise OptionError(f"tokenizer: {type(tokenizer).__name__!r} has no encode(text) method (give a transformers "
                          "tokenizer, or an object whose encode(text, add_special_tokens=False) returns token ids)")
    try:
        ids = list(tokenizer.encode("The text of a docstring: def f(x): return x + 1.", add_special_tokens=False))
    except Exception as e:  # a tokenizer of one's own may fail in any way; the message names it
        raise OptionError(f"tokenizer: encode(text, add_special_tokens=False) failed ({type(e).__name__}: "
                          f"{one_line(e)})") from None
    if not has_vocabulary(tokenizer):
        raise OptionError("tokenizer: it encodes text to nothing, or to its unknown token alone")
    check_token_ids(ids, n_vocab, model, "tokenizer")
    return tokenizer


def check_token_ids(ids, n_vocab: int, model: str, what: str) -> None:
    """``ids`` (a sequence or tensor of integers) all token ids of a vocabulary of ``n_vocab`` (the
    model named ``model``'s), else an error naming ``what`` gave them."""
    try:
        t = torch.as_tensor(ids)
    except (TypeError, ValueError, RuntimeError):
        t = None
    if t is None or (t.numel() and (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)):
        raise OptionError(f"{what}: gives a {type(ids).__name__}, not integer token ids")
    bad = t[(t < 0) | (t >= n_vocab)]
    if bad.numel():
        raise OptionError(f"{what}: token id {int(bad[0])} is past {model}'s vocabulary of {n_vocab} "
                          f"(ids 0..{n_vocab - 1}): not this model's tokenizer")


def encode(tokenizer, text: str) -> list[int]:
    """``text``'s token ids, no special tokens added. The whole text is one call, so that its
    pieces join as the tokenizer joins them; a ``transformers`` tokenizer is told not to warn that
    it is longer than the model's context (it is cut into windows that fit). Another tokenizer does
    not need ``transformers`` installed (one of its tokenizers has imported it)."""
    transformers = sys.modules.get("transformers")
    quiet = {"verbose": False} if transformers and isinstance(tokenizer, transformers.PreTrainedTokenizerBase) else {}
    return tokenizer.encode(text, add_special_tokens=False, **quiet)


def read_tokenizer(path: str | Path):
    """The ``transformers`` tokenizer stored at ``path`` (a folder with a tokenizer's files, or a
    ``tokenizer.json``), read from local files only; an error naming ``path`` when there is none."""
    path = Path(path)
    if not path.exists():
        raise OptionError(f"--tokenizer {path}: no such file or folder")
    try:
        import transformers
    except ImportError:
        raise OptionError(f"--tokenizer {path}: reading a tokenizer needs transformers (pip install transformers)") from None
    try:
        if path.is_file():
            if path.suffix != ".json":
                raise OptionError(f"--tokenizer {path}: give a folder with a tokenizer's files, or a tokenizer.json")
            return transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
        return transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except OptionError:
        raise
    except Exception as e:  # transformers raises many kinds; the message names the cause
        raise OptionError(f"--tokenizer {path}: transformers could not read a tokenizer there ({one_line(e)})") from None


def given_tokenizer(path: str | Path) -> dict:
    """``{tokenizer, tokenizer_said}`` for :func:`runner_for` (and ``track``): the tokenizer at ``path``
    (:func:`read_tokenizer`) and the words that record it, "the tokenizer PATH"."""
    return {"tokenizer": read_tokenizer(path), "tokenizer_said": f"the tokenizer {path}"}


def tokenizer_digest(path: str | Path) -> str:
    """The first 12 hex digits of the SHA-256 of the tokenizer at ``path`` (a ``tokenizer.json``, or a
    folder's files by name and bytes), so that a sweep's tasks change when its files do."""
    import hashlib

    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]
