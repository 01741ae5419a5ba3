"""The GGUF container (llama.cpp's file format): the metadata and tensor table of a file in a
buffer (:func:`read_header`) and each tensor's bytes as float32 (:func:`dequantize`). What the
tensors mean (names, layouts, architectures) is the GGUF format's business
(:mod:`compscope.loading.formats.gguf`).

The header is parsed here rather than with ``gguf.GGUFReader``, which builds a numpy view per
array element and takes ~15 s on a 262k-token vocabulary; the ``gguf`` package is used for its
quantisation tables and dequantisers only. Every overrun, bad alignment or overlap raises
``EOFError`` or ``ValueError`` with where it happened; the caller names the file.
"""

from __future__ import annotations

import math
import struct
import warnings
from dataclasses import dataclass

import numpy as np
import torch

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_DEFAULT_ALIGNMENT = 32
#: GGUF metadata value types: id -> struct format (STRING = 8 and ARRAY = 9 are handled apart)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_NP_SCALARS = {0: "u1", 1: "i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9
#: string arrays longer than this (tokenizer vocabularies) are skipped, not decoded
_MAX_DECODED_STRINGS = 1024
#: arrays of arrays deeper than this are refused (no real file nests them)
_MAX_NESTING = 8


class SkippedStrings:
    """A long string array (a tokenizer vocabulary) that was skipped; only its length is kept."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"<{self.n} strings>"


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # GGUF order: innermost (contiguous) dimension first
    type_id: int
    offset: int  # absolute, in the file
    nbytes: int | None  # None: quantisation type unknown to the gguf package

    @property
    def shape(self) -> tuple[int, ...]:  # numpy / torch order
        return tuple(reversed(self.dims))


class _Cursor:
    """Little-endian reads from a buffer; every overrun raises ``EOFError`` with the offset."""

    def __init__(self, buf, size: int) -> None:
        self.buf, self.size, self.pos = buf, size, 0

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.size:
            raise EOFError(
                f"header runs past the end of the file at byte {self.pos} (needs {n} more bytes, file has {self.size})"
            )

    def scalar(self, fmt: str):
        n = struct.calcsize("<" + fmt)
        self.need(n)
        (v,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += n
        return v

    def string(self, decode: bool = True) -> str | None:
        n = self.scalar("Q")
        self.need(n)
        raw = self.buf[self.pos : self.pos + n] if decode else None
        self.pos += n
        return None if raw is None else bytes(raw).decode("utf-8", errors="replace")

    def value(self, type_id: int, depth: int = 0):
        if depth > _MAX_NESTING:
            raise ValueError(f"arrays nested more than {_MAX_NESTING} deep at byte {self.pos}")
        if type_id in _SCALARS:
            return self.scalar(_SCALARS[type_id])
        if type_id == _STRING:
            return self.string()
        if type_id == _ARRAY:
            item_type, n = self.scalar("I"), self.scalar("Q")
            if item_type in _NP_SCALARS:
                dt = np.dtype(_NP_SCALARS[item_type])
                self.need(n * dt.itemsize)
                a = np.frombuffer(self.buf, dtype=dt, count=n, offset=self.pos)
                self.pos += n * dt.itemsize
                return a.tolist() if n <= _MAX_DECODED_STRINGS else a.copy()
            if item_type == _STRING:
                decode = n <= _MAX_DECODED_STRINGS
                items = [self.string(decode) for _ in range(n)]
                return items if decode else SkippedStrings(n)
            return [self.value(item_type, depth + 1) for _ in range(n)]
        raise ValueError(f"unknown metadata value type {type_id} at byte {self.pos}")


def check_magic(first: bytes) -> None:
    """ValueError unless ``first`` (a file's first four bytes) is the GGUF magic."""
    if first != _MAGIC:
        raise ValueError(f"does not start with the GGUF magic (starts with {first!r})")


def read_header(buf, size: int) -> tuple[dict, list[TensorInfo]]:
    """Metadata and tensor table of a GGUF file held in ``buf`` (``size`` bytes)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    c = _Cursor(buf, size)
    c.need(4)
    check_magic(bytes(buf[:4]))
    c.pos = 4
    version = c.scalar("I")
    if version not in _VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        what = " (a big-endian file?)" if swapped in _VERSIONS else ""
        raise ValueError(f"GGUF version {version}{what} is not supported (supported: {_VERSIONS})")
    n_tensors, n_kv = c.scalar("Q"), c.scalar("Q")
    fields: dict = {}
    raw = []
    where = "the header"
    try:
        for i in range(n_kv):
            where = f"metadata entry {i} of {n_kv}"
            key = c.string()
            where = f"metadata '{key}'"
            fields[key] = c.value(c.scalar("I"))
        for i in range(n_tensors):
            where = f"tensor table entry {i} of {n_tensors}"
            name = c.string()
            where = f"the tensor table entry of '{name}'"
            n_dims = c.scalar("I")
            if n_dims > 8:
                raise ValueError(f"claims {n_dims} dimensions")
            dims = tuple(c.scalar("Q") for _ in range(n_dims))
            if any(x == 0 for x in dims):
                raise ValueError(f"has a dimension of size 0 ({dims})")
            raw.append((name, dims, c.scalar("I"), c.scalar("Q")))
    except (EOFError, ValueError) as e:
        raise (EOFError if isinstance(e, EOFError) else ValueError)(f"in {where}: {e}") from e
    align = fields.get("general.alignment", _DEFAULT_ALIGNMENT)
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise ValueError(f"general.alignment={align!r} is not a power of two")
    data_start = -(-c.pos // align) * align
    tensors = []
    for name, dims, type_id, rel in raw:
        if rel % align:  # the format requires it; a shifted offset would read shifted weights
            raise ValueError(f"tensor '{name}' has offset {rel}, not a multiple of the alignment {align}")
        nbytes = None
        try:
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]
            n = math.prod(dims)  # exact Python ints: corrupt dims must not wrap around
            nbytes = n // block * type_size
        except (ValueError, KeyError):
            pass
        tensors.append(TensorInfo(name, dims, type_id, data_start + rel, nbytes))
    spans = sorted((t.offset, t.offset + (t.nbytes or 0), t.name) for t in tensors)
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise ValueError(f"the data of tensors '{a}' and '{b}' overlap (offsets out of order or corrupt)")
    return fields, tensors


def dequantize(buf, info: TensorInfo) -> torch.Tensor:
    """float32 tensor of ``info.shape`` from its bytes in ``buf`` (a fresh, writable copy).

    F32/F16/BF16 and Q8_0 (``q * d``: int8 times the block's float16 scale, as in ggml's
    ``dequantize_row_q8_0``) are decoded with torch; other types with ``gguf.quants``."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    qtype = GGMLQuantizationType(info.type_id)
    block, type_size = GGML_QUANT_SIZES[qtype]
    inner = info.dims[0] if info.dims else 1
    if inner % block:
        raise ValueError(f"innermost dimension {inner} is not a multiple of the {qtype.name} block size {block}")
    raw = np.frombuffer(buf, dtype=np.uint8, count=info.nbytes, offset=info.offset)
    simple = {GGMLQuantizationType.F32: torch.float32, GGMLQuantizationType.F16: torch.float16,
              GGMLQuantizationType.BF16: torch.bfloat16}
    if qtype in simple or qtype == GGMLQuantizationType.Q8_0:
        with warnings.catch_warnings():  # read-only mmap: every result below is a fresh tensor
            warnings.simplefilter("ignore", UserWarning)
            b = torch.frombuffer(buf, dtype=torch.uint8, count=info.nbytes, offset=info.offset)
        if qtype in simple:
            t = b.view(simple[qtype]).to(torch.float32, copy=True)
        else:
            blocks = b.reshape(-1, type_size)
            d = blocks[:, :2].contiguous().view(torch.float16).float()  # (n_blocks, 1)
            t = blocks[:, 2:].view(torch.int8) * d  # int8 * float32 -> float32, one pass
    else:
        rows = raw.reshape(-1, inner // block * type_size)
        t = torch.from_numpy(np.asarray(gguf_dequantize(rows, qtype), dtype=np.float32))
    return t.reshape(info.shape)
