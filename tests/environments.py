"""The suite's second and third environments (``.venv-tl4``, ``.venv-oldest``; Makefile), found for the
modules that run their checks there as subprocesses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def python_of(folder: str, variable: str, what: str) -> Path:
    """The Python named by the environment variable ``variable``, else ``ROOT/folder``'s; without
    either the test is skipped, saying how to build ``what``."""
    named = os.environ.get(variable)
    for candidate in ([Path(named)] if named else []) + [ROOT / folder / "bin" / "python"]:
        if candidate.is_file():
            return candidate
    pytest.skip(f"no {what}: `make {folder}` builds one (or set {variable})")
