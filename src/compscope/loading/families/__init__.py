"""Model families: how a checkpoint's tensor names map onto heads. One file per family;
each registers itself with :func:`register` where it is defined."""

from __future__ import annotations

import dataclasses

from ...errors import UnsupportedModelError
from ...core.heads import HeadWeights
from ...registry import Registry
from .base import Family

#: every family, found by its ``model_types`` and ``architectures``
FAMILIES: Registry = Registry("family", "families", error=UnsupportedModelError)


def register(cls: type[Family]) -> type[Family]:
    """Class decorator: make a family findable by its ``model_types`` and ``architectures``."""
    return FAMILIES.add(cls.name, cls)


def families() -> dict[str, type[Family]]:
    return dict(FAMILIES.items())


def family_for(config: dict, where: str) -> type[Family]:
    """The family that handles ``config`` (by ``model_type``, then ``architectures``)."""
    model_type = config.get("model_type")
    archs = config.get("architectures") or []
    for fam in families().values():
        if model_type in fam.model_types:
            return fam
    for fam in families().values():
        if any(a in fam.architectures for a in archs):
            return fam
    known = sorted(t for f in families().values() for t in f.model_types)
    what = f"model_type={model_type!r}" + (f", architectures={archs}" if archs else "")
    raise UnsupportedModelError(f"{where}: unsupported architecture ({what}); supported model types: {', '.join(known)}")


def to_heads(ckpt) -> HeadWeights:
    """``HeadWeights`` of a format's ``Checkpoint``, by the family its config names. A bias the
    checkpoint holds beside a weight the family read, but that the family did not read, is refused
    by name rather than dropped (what the model computes would differ from what compscope reads);
    so is any tensor the format marks as entering attention that the family did not read."""
    family = family_for(ckpt.config, ckpt.source)
    hw = family.convert(ckpt)
    unread = ckpt.tensors.unread_biases()
    if unread:
        names = ", ".join(f"'{n}'" for n in unread[:3]) + (f" and {len(unread) - 3} more" if len(unread) > 3 else "")
        raise UnsupportedModelError(
            f"{ckpt.tensors.origin(unread[0])}: {names} present but not read by the {family.name} family: the model "
            "adds these biases, so compscope would describe a different model")
    unread = ckpt.unread_attention_sources()
    if unread:
        names = ", ".join(f"'{n}'" for n in unread[:3]) + (f" and {len(unread) - 3} more" if len(unread) > 3 else "")
        raise UnsupportedModelError(
            f"{ckpt.source}: {names} enter{'s' if len(unread) == 1 else ''} attention but compscope does not read "
            f"{'it' if len(unread) == 1 else 'them'} for this {family.name} model: it would describe a different model")
    return _without_unbuilt_biases(hw, family, ckpt) if ckpt.biases_from_config else hw


def _without_unbuilt_biases(hw: HeadWeights, family: type[Family], ckpt) -> HeadWeights:
    """``hw`` without the attention biases a HF folder holds but transformers does not build from
    its config (Llama with ``attention_bias`` false, GPT-J, ...): the running model ignores them."""
    qkv, out = family.attention_biases(ckpt.config)
    unbuilt = [b for b, on in (("b_Q", qkv), ("b_K", qkv), ("b_V", qkv), ("b_O", out)) if not on and getattr(hw, b) is not None]
    if not unbuilt:
        return hw
    note = (f"{', '.join(unbuilt)} not read: the file holds these attention biases, but transformers builds this "
            f"{family.name} model's projections without them (its config) and ignores the tensors")
    meta = dataclasses.replace(hw.meta, notes=hw.meta.notes + (note,))
    return dataclasses.replace(hw, **dict.fromkeys(unbuilt), meta=meta)


from . import bert, falcon, gemma, gpt2, gpt_neo, gptj, llama, neox, olmo, opt, phi, phi3, qwen3, stablelm, starcoder2  # noqa: E402,F401  (registration)

__all__ = ["FAMILIES", "Family", "family_for", "families", "register", "to_heads"]

from ...registry import submodules as _submodules

__getattr__ = _submodules(__name__)
