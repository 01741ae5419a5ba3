"""Toy model folders written by ``compscope train`` (``toy.json`` + ``model.safetensors``;
:mod:`compscope.toy.storage`)."""

from __future__ import annotations

from . import existing_path


def recognise(source: object) -> bool:
    from ...toy.storage import is_toy

    path = existing_path(source)
    return path is not None and is_toy(path)


def read(source):
    from ...toy.storage import load_heads

    return load_heads(existing_path(source))
