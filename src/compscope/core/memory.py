"""Memory free on a device, for refusing work that cannot fit before it starts."""

from __future__ import annotations

import torch


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
