"""Checks on where results go, made before any work."""

from __future__ import annotations

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
