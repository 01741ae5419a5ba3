"""Where results go: checks made before any work, and JSON written strictly."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..errors import OptionError


def check_folder(path: str | Path, option: str | None = None) -> Path:
    """``path`` as a results folder: new or an existing folder (never a file), its parent existing;
    an ``OptionError`` naming ``option`` and the path otherwise."""
    p = Path(path)
    label = f"{option} {path}" if option else str(path)
    if p.exists() and not p.is_dir():
        raise OptionError(f"{label}: is a file; give a folder")
    if not p.parent.is_dir():
        raise OptionError(f"{label}: the folder {p.parent} does not exist (create it first)")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise OptionError(f"{label}: cannot write in this folder (no permission)")
        return p
    try:  # made and removed again: the one sure test that it can be made (permissions, read-only or odd file systems)
        p.mkdir()
        p.rmdir()
    except OSError as e:
        raise OptionError(f"{label}: cannot create this folder ({e.strerror or e})") from e
    return p


def check_new_file(path: str | Path, label: str) -> None:
    """That ``path`` (its folder existing) can be written: an existing file writable, or a new one
    creatable (made and removed again); an ``OptionError`` starting with ``label`` otherwise."""
    p = Path(path)
    if p.exists():
        if not os.access(p, os.W_OK):
            raise OptionError(f"{label}: cannot write this file (no permission)")
        return
    try:
        p.touch(exist_ok=False)
        p.unlink()
    except OSError as e:
        raise OptionError(f"{label}: cannot create this file ({e.strerror or e})") from e


def strict_json(x):
    """``x`` with every float that is not finite as None, so that a ``.json`` file is JSON that any
    reader takes (``jq``, JavaScript's ``JSON.parse``), not Python's extension with ``NaN``."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: strict_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict_json(v) for v in x]
    return x


def write_json(path: str | Path, doc) -> None:
    """``doc`` as indented strict JSON (:func:`strict_json`) at ``path``, ending in a newline."""
    Path(path).write_text(json.dumps(strict_json(doc), indent=1, allow_nan=False) + "\n")
