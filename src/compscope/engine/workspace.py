"""Buffers the composition engine keeps between calls, so that repeated calls skip fresh pages.

A large ``torch.empty`` on the CPU is new memory from the operating system, and its first write
faults in every 4 KiB page: 0.3–1.1 ms per MB on the 2-core benchmark machine
(``bench/cpu_limits.py``, section 3). With nothing kept between calls a GPT-2-small-shaped
``scores`` call faults in 57–75 MB, a GPT-2-medium-shaped one 311–403 MB (section 5b): a few %
of their time, up to about a tenth. The engine therefore takes its large buffers (per-head
bases, factor Grams and SVD cores, Gram-tile operands, X-route blocks) from one shared :class:`Workspace`,
which keeps them after the call while they total at most :data:`KEEP_BYTES`; larger ones (a
7B-shaped model's bases) are released when the call ends. The first call pays for its pages
either way; a repeated call on the same shapes faults in 0–4 MB. Only what the latest call
took is kept: a buffer of another dtype or device under the name being taken (a call in the
other ``precision``, or on another device) is freed before the new one is allocated, and what
the call did not take at all is freed when it ends. A call that finds the shared workspace
busy (another thread inside ``scores``) uses a private one. :func:`release` frees the kept
buffers.

Buffers from the workspace are scratch space: their contents are undefined when taken, and
nothing the engine returns refers to them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

#: Bytes of buffers kept between calls (default 1 GiB); larger workspaces are freed at the end.
KEEP_BYTES = 1 << 30


class Workspace:
    """Named, growable scratch buffers: ``take(name, shape, dtype, device)`` returns a tensor of
    ``shape`` on the storage kept under ``(name, dtype, device)``, reallocated only to grow.
    Between :meth:`begin` and :meth:`end` (one engine call) it tracks which buffers were taken:
    allocating one frees the same name's buffers of other dtypes or devices not taken since
    ``begin``, and ``end`` frees every buffer not taken since ``begin``."""

    def __init__(self) -> None:
        self._bufs: dict[tuple[str, torch.dtype, torch.device], Tensor] = {}
        self._taken: set[tuple[str, torch.dtype, torch.device]] = set()

    def take(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str = "cpu") -> Tensor:
        n = math.prod(shape)
        key = (name, dtype, torch.device(device))
        self._taken.add(key)
        buf = self._bufs.get(key)
        if buf is None or buf.numel() < n:
            for k in [k for k in self._bufs if k[0] == name and k not in self._taken]:
                del self._bufs[k]  # the same buffer of an earlier call in another dtype or device
            self._bufs.pop(key, None)
            del buf  # free the old storage before allocating the larger one
            buf = self._bufs[key] = torch.empty(n, dtype=dtype, device=key[2])
        return buf[:n].view(shape)

    def begin(self) -> None:
        """Start tracking which buffers a call takes."""
        self._taken = set()

    def end(self) -> None:
        """Free the buffers not taken since :meth:`begin`."""
        for k in [k for k in self._bufs if k not in self._taken]:
            del self._bufs[k]

    @property
    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self._bufs.values())

    def clear(self) -> None:
        self._bufs.clear()


_SHARED = Workspace()
_LOCK = threading.Lock()


@contextmanager
def borrowed() -> Iterator[Workspace]:
    """The shared workspace for the duration of one engine call (a private one when another
    thread holds it); afterwards it keeps only what the call took, and nothing if that exceeds
    :data:`KEEP_BYTES`."""
    if not _LOCK.acquire(blocking=False):
        yield Workspace()
        return
    try:
        _SHARED.begin()
        yield _SHARED
    finally:
        _SHARED.end()
        if _SHARED.nbytes > KEEP_BYTES:
            _SHARED.clear()
        _LOCK.release()


def release() -> int:
    """Free the buffers kept between calls; returns the bytes released (0 while a call runs)."""
    if not _LOCK.acquire(blocking=False):
        return 0
    try:
        n = _SHARED.nbytes
        _SHARED.clear()
        return n
    finally:
        _LOCK.release()
