"""Where and in how much memory the engine works, decided once per call and handed down.

- device: :func:`resolve_device` (CUDA when present unless told otherwise; an error for a device
  that is not there);
- memory: :func:`memory_budget` (bytes for tiles, ``X`` blocks and chunks; every route sizes its
  buffers from this one number: ``gram_route.choose_block``, ``x_route.x_all``,
  ``gram_route.refine_small``); the per-head bases come on top, and :mod:`.workspace` keeps up to
  1 GiB of buffers between calls;
- work: :func:`plan_groups` (reader layers sharing a metric, their Gram tiles and progress ticks).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..core.heads import HeadWeights
from ..core.memory import free_memory
from ..errors import OptionError
from .gram_route import block_flops, choose_block, reader_groups
from .head_svd import svd_jobs


def memory_budget(max_memory: float | None, device: torch.device) -> int:
    """Bytes for tiles, blocks and chunks: ``max_memory`` when given (whole bytes, at least 1), else a quarter of the
    free memory of ``device`` (:func:`~compscope.core.memory.free_memory`: on CUDA what torch holds
    cached counts as free; ``MemAvailable`` on the CPU; 8 GiB assumed where unreadable)."""
    if max_memory is not None:
        if isinstance(max_memory, bool) or not isinstance(max_memory, (int, float)) or not 0 < max_memory < math.inf:
            raise OptionError(f"max_memory={max_memory!r}: expected a positive, finite number of bytes")
        return max(1, int(max_memory))
    return (free_memory(device) or 8 << 30) // 4


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device``: CUDA when available for ``None``, else the CPU; an
    ``OptionError`` for devices that are not there or that the engine does not support."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = parse_device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise OptionError(f"device={device!r}: torch sees no CUDA device here (torch {torch.__version__}); use 'cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise OptionError(f"device={device!r}: there are {torch.cuda.device_count()} CUDA devices")
    return dev


def parse_device(device: str | torch.device) -> torch.device:
    """``device`` as a ``torch.device`` of a type the engine supports (cpu, cuda), whether or not it
    is present here (:func:`resolve_device` also checks that)."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise OptionError(f"device={device!r}: not a device name ({e}); use 'cpu' or 'cuda'") from None
    if dev.type not in ("cpu", "cuda"):
        raise OptionError(f"device={device!r}: the engine runs on 'cpu' or 'cuda'")
    return dev


class Group(NamedTuple):
    """The work for one group of reader layers sharing a metric: writer layers ``wl``, reader
    layers ``rl``; Gram-route row groups ``rg`` and tile size ``blk`` (None when the route is
    not taken); progress ticks per Gram row block and per X block; their total ``units``."""

    readers: list[int]
    wl: range
    rl: range
    rg: list[tuple[int, int, int]] | None
    blk: int | None
    ticks: list[int] | None
    x_ticks: list[int]
    units: int


def plan_groups(hw: HeadWeights, groups: list[list[int]], kinds: str, want: tuple[str, ...], all_x: bool, block: int | None,
          dtype: torch.dtype, budget: int) -> list[Group]:
    """Every reader group's work, planned before any is done so that the progress bar's total
    is known: ticks of about one head SVD's work (``2 r² d H`` multiply-adds), a head SVD job
    being 2 ticks and a Gram row block (``want``: the Grams formed; none: no Gram route) or an
    X block as many as its multiply-adds make."""
    H, r, d, per = hw.n_heads, hw.d_head, hw.d_model, len(kinds) * hw.n_heads
    weigh = lambda flops: max(1, round(flops / (2 * r * r * d * H)))  # noqa: E731
    plan = []
    for readers in groups:
        wl, rl = range(0, readers[-1]), range(readers[0], readers[-1] + 1)
        units = 2 * len(svd_jobs(("W",) + tuple(kinds), {"W": wl, **{k: rl for k in kinds}}))
        rg = blk = ticks = None
        if want:
            rg = reader_groups(readers, per, H)
            blk = block or choose_block(d, r, len(wl) * H, len(readers) * per, max(r1 - r0 for r0, r1, _ in rg),
                                        torch.finfo(dtype).bits // 8, budget)
            n_pairs = sum((r1 - r0) * nc for r0, r1, nc in rg)
            ticks = [weigh(f) for f in block_flops(d, blk, r, len(wl) * H + len(readers) * per, n_pairs, len(want))]
            units += sum(ticks)
        x_ticks = [weigh(l2 * H * H * r * r * d) for l2 in readers] if all_x else []
        plan.append(Group(readers, wl, rl, rg, blk, ticks, x_ticks, units + len(kinds) * sum(x_ticks)))
    return plan
