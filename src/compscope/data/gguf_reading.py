"""transformers reading a GGUF file to run it, faster and quietly.

transformers reads a GGUF file (its config, its weights, its tokenizer) with gguf-py's
``GGUFReader``, once per part, and each reading parses every metadata field, a vocabulary of
262,144 strings included, through ``numpy.memmap`` slices: one Python-level ``memmap.__getitem__``
and ``__array_finalize__`` per value read. While :func:`transformers_gguf_reading` is active:

- the file is parsed once (``GGUFReader`` made once per arguments) rather than once per part read
  while it is active (the runner's config and weights; its tokenizer, read on first use, under a
  use of its own);
- the parse slices a plain ``ndarray`` view of the same mapped bytes: the same values, dtypes and
  byte order, views of the same memory, without the memmap subclass's per-slice cost (the runner's
  load of Gemma 3: 40.9 s to 28.9 s on a 2-core CPU, bench/RESULTS.md);
- an array of scalars or strings (Gemma 3's vocabulary: 262,144 strings, as many scores and token
  types) is sliced in one pass over its items, rather than by gguf-py's parse of each item as a field
  of its own (which reads its type again and makes its parts in three calls): the same parts;
- transformers' turning each parsed value into a Python one (``_gguf_parse_value``, called once per
  value for each part it reads: the config, the tokenizer, the weights) takes the common cases in one
  step (:func:`python_value`): the same values, of the same types;
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
#: the signature of ``GGUFReader._get_field_parts`` that :func:`_array_parts` wraps
_FIELD_PARTS_PARAMETERS = ["self", "orig_offs", "raw_type"]
#: the signature of transformers' ``_gguf_parse_value`` that :func:`python_value` takes in one step
_PARSE_VALUE_PARAMETERS = ["_value", "data_type"]


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
    if _takes(getattr(reader, "_gguf_parse_value", None), _PARSE_VALUE_PARAMETERS):
        saved[reader, "_gguf_parse_value"] = reader._gguf_parse_value
        reader._gguf_parse_value = python_value(reader._gguf_parse_value)
    try:
        yield
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)


def plain_reader(cls):
    """A subclass of gguf-py's reader class ``cls`` whose parse slices a plain ``ndarray`` view of
    its memory map (:func:`_plain_get`), and an array's items in one pass (:func:`_array_parts`, where
    ``_get_field_parts`` is the one it wraps); ``cls`` itself where its ``_get`` is not the one this
    replaces (or ``cls`` is no class)."""
    if not isinstance(cls, type) or not _takes(getattr(cls, "_get", None), _GET_PARAMETERS):
        return cls
    body = {"_get": _plain_get}
    if _takes(getattr(cls, "_get_field_parts", None), _FIELD_PARTS_PARAMETERS):
        body["_get_field_parts"] = _array_parts(cls._get_field_parts)
    return type(f"Plain{cls.__name__}", (cls,), body)


#: GGUF value types read as a Python ``int``, ``float`` or ``bool`` (``GGUFValueType``'s numbers)
_SCALARS = {**dict.fromkeys((0, 1, 2, 3, 4, 5, 10, 11), int), 6: float, 12: float, 7: bool}
#: GGUF's string and array value types
_STRING, _ARRAY = 8, 9


def python_value(parse):
    """transformers' ``_gguf_parse_value`` (``parse``) in one step where it is common: a value of
    ``types`` ``[t]`` or ``[ARRAY, t]`` (an item of an array of ``t``) is ``int``, ``float`` or ``bool``
    of its first element for a scalar ``t``, and a string's bytes decoded as UTF-8 for a string, where
    ``parse`` makes a list of its bytes first. Anything else (other types, a string not of bytes) goes to
    ``parse``, which reads it, or raises, as transformers does. Taken only where transformers' has the
    parameters it had when this was written (``_value, data_type``)."""

    def value(part, types):
        if isinstance(types, list):
            if len(types) == 2 and types[0] == _ARRAY:
                kind = types[1]
            elif len(types) == 1:
                kind = types[0]
            else:
                return parse(part, types)
        else:
            kind = types
        if kind == _STRING:
            if isinstance(part, np.ndarray) and part.dtype == np.uint8:
                return part.tobytes().decode()
            return parse(part, types)
        scalar = _SCALARS.get(kind) if isinstance(kind, int) else None
        return parse(part, types) if scalar is None else scalar(part[0])

    return value


def _takes(method, parameters: list[str]) -> bool:
    """Whether ``method`` is a function whose parameters are named ``parameters`` (None, or no function: no)."""
    try:
        return list(inspect.signature(method).parameters) == parameters
    except (TypeError, ValueError):
        return False


def _plain_get(self, offset, dtype, count=1, override_order=None):
    """``GGUFReader._get``: ``count`` values of ``dtype`` at byte ``offset``, in the file's byte
    order (or ``override_order``), sliced from a plain ``ndarray`` view of ``self.data``."""
    if self.__dict__.get("_plain_of") is not self.data:
        self._plain, self._plain_of = self.data.view(np.ndarray), self.data
    count = int(count)
    end = offset + np.dtype(dtype).itemsize * count
    arr = self._plain[offset:end].view(dtype=dtype)[:count]
    return arr.view(arr.dtype.newbyteorder(self.byte_order if override_order is None else override_order))


def _array_parts(field_parts):
    """``GGUFReader._get_field_parts`` (``field_parts``, gguf-py's), but for an array of scalars or of
    strings: ``(size, parts, data indices, types)`` from one pass over its items, the parts
    ``[item type, length, item 0, ...]`` (a string item: its length, then its bytes) as the same
    read-only views gguf-py makes, of the same dtypes and byte order. Anything else (a scalar, a
    string, an empty array, an array of arrays, an unknown type, an array whose items could not fit
    in what is left of the file) goes to ``field_parts``, which raises or reads it as gguf-py does."""
    import struct
    import sys

    from gguf import GGUFValueType

    def parts(self, orig_offs, raw_type):
        if raw_type != GGUFValueType.ARRAY:
            return field_parts(self, orig_offs, raw_type)
        raw_itype, alen = self._get(orig_offs, np.uint32), self._get(orig_offs + 4, np.uint64)  # (makes _plain)
        n, start = int(alen[0]), orig_offs + 12
        try:
            itype = GGUFValueType(int(raw_itype[0]))
        except ValueError:
            itype = None
        scalar = self.gguf_scalar_to_np.get(itype)
        least = n * (np.dtype(scalar).itemsize if scalar is not None else 8)  # bytes its items take at least
        if n == 0 or (scalar is None and itype != GGUFValueType.STRING) or start + least > self._plain.size:
            return field_parts(self, orig_offs, raw_type)  # (a length past the file's end: as gguf-py reads it)
        got: list[np.ndarray] = [raw_itype, alen]
        if scalar is not None:
            values = self._get(start, scalar, n)
            got += [values[i:i + 1] for i in range(n)]
            return 12 + int(values.nbytes), got, list(range(2, n + 2)), [GGUFValueType.ARRAY, itype]
        plain, swapped = self._plain, self.byte_order == "S"
        length = np.dtype(np.uint64).newbyteorder(self.byte_order)
        little = (sys.byteorder == "little") != swapped
        unpack = struct.Struct("<Q" if little else ">Q").unpack_from
        offs = start
        try:
            for _ in range(n):
                size = unpack(plain, offs)[0]
                got += [plain[offs:offs + 8].view(length), plain[offs + 8:offs + 8 + size]]
                offs += 8 + size
        except struct.error:  # the file ends inside the array: as gguf-py says it
            return field_parts(self, orig_offs, raw_type)
        return offs - orig_offs, got, list(range(3, 2 * n + 3, 2)), [GGUFValueType.ARRAY, GGUFValueType.STRING]

    return parts
