"""Checks on where results go, made before any work."""

from __future__ import annotations

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
    return p
