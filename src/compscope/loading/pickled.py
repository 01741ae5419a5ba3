"""PyTorch's pickled checkpoints (``pytorch_model.bin``, sharded or not), for HuggingFace folders
that hold no safetensors (older models; the training checkpoints of some model suites).

Read only through torch's weights-only unpickler, ``torch.load(weights_only=True)``, which rebuilds
tensors and plain containers and refuses every other object, so a file cannot run code when it is
read; memory-mapped where the file is in torch's zip format. A file that holds anything but a
mapping of names to tensors is refused naming it.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import torch
from torch import Tensor

from ..errors import LoadError, one_line

def load_weights_only(f: Path) -> dict[str, Tensor]:
    """The tensors of the pickled checkpoint ``f``, by name, through torch's weights-only unpickler
    (memory-mapped where it can be); anything else in it, or a file it cannot read, refused naming ``f``."""
    try:
        try:
            state = torch.load(str(f), map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as e:
            if "mmap" not in str(e) and "zip" not in str(e):
                raise
            state = torch.load(str(f), map_location="cpu", weights_only=True)  # the legacy (tar) format: no mmap
    except pickle.UnpicklingError as e:
        found = re.search(r"GLOBAL ([\w.]+)", str(e))  # an object torch's weights-only unpickler would not build
        if found is None:  # no such object: bytes that are no pickle torch reads (a corrupt or foreign file)
            raise LoadError(f"{f}: not a readable PyTorch checkpoint, truncated or corrupt") from e
        raise LoadError(f"{f}: holds objects other than tensors (it names {found[1]}), which torch's weights-only "
                        "loader refuses; compscope never unpickles arbitrary objects: convert the weights to "
                        "safetensors") from e
    except Exception as e:  # torch raises many kinds for a truncated or foreign file
        raise LoadError(f"{f}: not a readable PyTorch checkpoint, truncated or corrupt ({one_line(e)[:200]})") from e
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        raise LoadError(f"{f}: expected a mapping of tensor names to tensors (a state dict), got a "
                        f"{type(state).__name__}" + (" holding other values" if isinstance(state, dict) else ""))
    return state
