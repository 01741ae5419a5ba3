"""Memory free on a device, for refusing work that cannot fit before it starts."""

from __future__ import annotations

import torch

from ..errors import OptionError


def free_memory(device: torch.device) -> int | None:
    """Bytes free on ``device``: on CUDA the device's free memory and what torch holds cached but
    unused, ``MemAvailable`` on the CPU; None where unreadable (not Linux)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable"))
    except (OSError, StopIteration, ValueError):
        return None


def check_fits(need: int, what: str, advice: str, device: torch.device | None = None, bound: str = "about") -> None:
    """Refuse, naming ``what`` and ``advice``, work that needs ``need`` bytes (``bound``: how the
    message qualifies it, ``'about'`` or ``'at least'``) where less is free on ``device`` (default
    the CPU); nothing where the free memory is unreadable."""
    device = torch.device("cpu") if device is None else device
    free = free_memory(device)
    if free is not None and need > free:
        raise OptionError(f"{what} take {bound} {gib(need)}, more than the {gib(free)} free on {device}; {advice}")


def gib(n: int) -> str:
    """``n`` bytes in GiB as an error message says it (three significant digits; whole GiB from 100)."""
    return f"{n / 2**30:,.0f} GiB" if n >= 100 * 2**30 else f"{n / 2**30:.3g} GiB"
