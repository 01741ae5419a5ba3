"""Small LAPACK problems over torch's threads.

torch runs a batch of small factorisations (``eigh``, ``eigvals`` of ``r × r`` matrices) one
after another on one core, and LAPACK's general eigensolver does not use a second one either;
Python threads do, as torch releases the GIL inside them. :func:`threaded` splits a batch over
torch's threads, :func:`thread_map` maps a function over a list. Both keep the order, and both
run in turn when called from one of their own threads (no pool waits on itself).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import torch
from torch import Tensor

T = TypeVar("T")
R = TypeVar("R")

_POOL: dict[int, ThreadPoolExecutor] = {}
_PREFIX = "compscope"


def _pool() -> ThreadPoolExecutor | None:
    """The pool of torch's thread count, or None where threads would not help (one thread, or
    called from a pool thread)."""
    n = torch.get_num_threads()
    if n < 2 or threading.current_thread().name.startswith(_PREFIX):
        return None
    return _POOL.get(n) or _POOL.setdefault(n, ThreadPoolExecutor(n, thread_name_prefix=_PREFIX))


def threaded(fn: Callable[[Tensor], Any], x: Tensor) -> Any:
    """``fn(x)`` for a batched LAPACK call on CPU, the batch (dim 0) split over torch's threads;
    ``fn`` returns a tensor or a tuple of tensors with the same leading dim."""
    pool = _pool()
    n = torch.get_num_threads()
    if pool is None or x.shape[0] < 4 * n or x.device.type != "cpu":
        return fn(x)
    parts = list(pool.map(fn, x.tensor_split(n)))
    if isinstance(parts[0], Tensor):
        return torch.cat(parts)
    return tuple(torch.cat(p) for p in zip(*parts))


def thread_map(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(x) for x in items]``, the calls spread over torch's threads (for work that is mostly
    LAPACK calls on CPU tensors)."""
    pool = _pool()
    if pool is None or len(items) < 2:
        return [fn(x) for x in items]
    return list(pool.map(fn, items))
