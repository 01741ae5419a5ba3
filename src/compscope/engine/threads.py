"""Small LAPACK problems over torch's threads.

torch runs a batch of small factorisations (``eigh``, ``eigvals`` of ``r × r`` matrices) one
after another on one core, and LAPACK's general eigensolver does not use a second one either;
Python threads do, as torch releases the GIL inside them. :func:`threaded` splits a batch over
torch's threads, :func:`thread_map` maps a function over a list. Both keep the order, and both
run in turn when called from one of their own threads (no pool waits on itself). Each pool
thread runs torch (and its LAPACK) on one core: the pool is the parallelism. Left at torch's
count, the ``n`` pool threads of an ``n``-core machine each started ``n`` more (``bench/cpu_limits.py``
section 1c times both).
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
_STARTED = [0]  # pool threads started so far (the pools start them as work comes)
_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor | None:
    """The pool of torch's thread count, or None where threads would not help (one thread, or
    called from a pool thread)."""
    n = torch.get_num_threads()
    if n < 2 or threading.current_thread().name.startswith(_PREFIX):
        return None
    return _POOL.get(n) or _POOL.setdefault(n, ThreadPoolExecutor(n, thread_name_prefix=_PREFIX, initializer=_one_core))


def _one_core() -> None:
    """A pool thread's start: torch's thread count there (OpenMP's and MKL's, per thread) is 1.
    Torch sets a thread's count on its first use, from a process-wide default that
    ``set_num_threads`` also sets: first that use, then the count (:func:`_map` puts the default back)."""
    torch.get_num_threads()
    torch.set_num_threads(1)
    with _LOCK:
        _STARTED[0] += 1


def _map(pool: ThreadPoolExecutor, fn: Callable[[T], R], items) -> list[R]:
    """``pool.map``, then, where it started a pool thread, torch's default count for new threads
    back at the caller's own (``set_num_threads`` also resets torch's own thread pool: not on
    every map)."""
    n, started = torch.get_num_threads(), _STARTED[0]
    try:
        return list(pool.map(fn, items))
    finally:
        if _STARTED[0] != started:
            torch.set_num_threads(n)


def threaded(fn: Callable[[Tensor], Any], x: Tensor) -> Any:
    """``fn(x)`` for a batched LAPACK call on CPU, the batch (dim 0) split over torch's threads
    (one core each: a small batch too, as LAPACK's own threads slow small problems down);
    ``fn`` returns a tensor or a tuple of tensors with the same leading dim."""
    pool = _pool()
    if pool is None or x.shape[0] < 2 or x.device.type != "cpu":
        return fn(x)
    parts = _map(pool, fn, x.tensor_split(min(torch.get_num_threads(), x.shape[0])))
    if isinstance(parts[0], Tensor):
        return torch.cat(parts)
    return tuple(torch.cat(p) for p in zip(*parts))


def thread_map(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(x) for x in items]``, the calls spread over torch's threads (for work that is mostly
    LAPACK calls on CPU tensors)."""
    pool = _pool()
    if pool is None or len(items) < 2:
        return [fn(x) for x in items]
    return _map(pool, fn, items)
