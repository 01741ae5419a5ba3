"""Model families: how a checkpoint's tensor names map onto heads. One file per family;
each registers itself with :func:`register` where it is defined."""

from __future__ import annotations

from ..errors import UnsupportedModelError
from .base import Family

_FAMILIES: dict[str, type[Family]] = {}


def register(cls: type[Family]) -> type[Family]:
    """Class decorator: make a family findable by its ``model_types`` and ``architectures``."""
    _FAMILIES[cls.name] = cls
    return cls


def families() -> dict[str, type[Family]]:
    return dict(_FAMILIES)


def family_for(config: dict, where: str) -> type[Family]:
    """The family that handles ``config`` (by ``model_type``, then ``architectures``)."""
    model_type = config.get("model_type")
    archs = config.get("architectures") or []
    for fam in _FAMILIES.values():
        if model_type in fam.model_types:
            return fam
    for fam in _FAMILIES.values():
        if any(a in fam.architectures for a in archs):
            return fam
    known = sorted(t for f in _FAMILIES.values() for t in f.model_types)
    what = f"model_type={model_type!r}" + (f", architectures={archs}" if archs else "")
    raise UnsupportedModelError(f"{where}: unsupported architecture ({what}); supported model types: {', '.join(known)}")


from . import bert, gemma, gpt2, llama, neox  # noqa: E402,F401  (registration)

__all__ = ["Family", "family_for", "families", "register"]
