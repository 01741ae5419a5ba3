"""transformers reading a GGUF file to run it, faster and quietly.

transformers reads a GGUF file (its config, its weights, its tokenizer) with gguf-py's
``GGUFReader``, once per part, and each reading parses every metadata field, a vocabulary of
262,144 strings included, through ``numpy.memmap`` slices: one Python-level ``memmap.__getitem__``
and ``__array_finalize__`` per value read. While :func:`transformers_gguf_reading` is active:

- the file is parsed once (``GGUFReader`` made once per arguments) rather than once per part;
- the parse slices a plain ``ndarray`` view of the same mapped bytes: the same values, dtypes and
  byte order, views of the same memory, without the memmap subclass's per-slice cost (the runner's
  load of Gemma 3: 40.9 s to 28.9 s on a 2-core CPU, bench/RESULTS.md);
- gguf-py's tensor-name map is built once per architecture rather than once per submodule;
- transformers' own ``tqdm`` bar is hidden (its progress-bar switch does not reach it; compscope's
  bar speaks for the load).

What the reader returns is unchanged; all of it is restored afterwards. Where transformers or
gguf-py lay these out otherwise (another ``GGUFReader._get``, no ``tqdm``), the load runs as it is,
only slower. One load at a time patches them: loads from several threads wait for each other.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading

import numpy as np

#: held while :func:`transformers_gguf_reading` has gguf-py and transformers patched
_GGUF_READING = threading.RLock()

#: the signature of ``GGUFReader._get`` that :func:`_plain_get` replaces
_GET_PARAMETERS = ["self", "offset", "dtype", "count", "override_order"]


@contextlib.contextmanager
def transformers_gguf_reading(active: bool):
    """While active: transformers reads a GGUF file from one fast parse, one name map, no bar of
    its own (module docstring). ``active=False``, or gguf-py or transformers missing: nothing."""
    try:
        import gguf
        from transformers import modeling_gguf_pytorch_utils as reader
    except ImportError:
        active = False
    if not active:
        yield
        return
    with _GGUF_READING, _patched(gguf, reader):
        yield


@contextlib.contextmanager
def _patched(gguf, reader):
    saved = {}
    if hasattr(reader, "tqdm"):
        saved[reader, "tqdm"] = reader.tqdm
        reader.tqdm = lambda items, *args, **kwargs: items
    for name, how in (("GGUFReader", plain_reader), ("get_tensor_name_map", None)):  # made once per arguments
        made = getattr(gguf, name, None)
        if callable(made):
            saved[gguf, name] = made
            setattr(gguf, name, functools.lru_cache(maxsize=None)(how(made) if how else made))
    try:
        yield
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)


def plain_reader(cls):
    """A subclass of gguf-py's reader class ``cls`` whose parse slices a plain ``ndarray`` view of
    its memory map (:func:`_plain_get`); ``cls`` itself where its ``_get`` is not the one this
    replaces (or ``cls`` is no class)."""
    get = getattr(cls, "_get", None) if isinstance(cls, type) else None
    try:
        same = get is not None and list(inspect.signature(get).parameters) == _GET_PARAMETERS
    except (TypeError, ValueError):
        same = False
    return type(f"Plain{cls.__name__}", (cls,), {"_get": _plain_get}) if same else cls


def _plain_get(self, offset, dtype, count=1, override_order=None):
    """``GGUFReader._get``: ``count`` values of ``dtype`` at byte ``offset``, in the file's byte
    order (or ``override_order``), sliced from a plain ``ndarray`` view of ``self.data``."""
    if self.__dict__.get("_plain_of") is not self.data:
        self._plain, self._plain_of = self.data.view(np.ndarray), self.data
    count = int(count)
    end = offset + np.dtype(dtype).itemsize * count
    arr = self._plain[offset:end].view(dtype=dtype)[:count]
    return arr.view(arr.dtype.newbyteorder(self.byte_order if override_order is None else override_order))
