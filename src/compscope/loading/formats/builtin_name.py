"""Built-in model names (``induction-2l``, ``smollm2``, …; :mod:`compscope.loading.builtin`): the
name is resolved to the file or folder its package ships, read by the format that recognises
that, and named after the built-in."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ...core.heads import HeadWeights
from ..builtin import BUILTINS, resolve


def recognise(source: object) -> bool:
    return isinstance(source, str) and source in BUILTINS and not Path(source).exists()


def read(name: str) -> HeadWeights:
    from ..sources import read_unprocessed

    path = resolve(name)
    hw = read_unprocessed(path)
    b = BUILTINS.get(name)
    where = f"built-in '{name}': {path.name} from the {b.dist} package"
    return dataclasses.replace(hw, meta=dataclasses.replace(hw.meta, name=b.display, source=where))
