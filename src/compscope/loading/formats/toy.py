"""Toy models: folders written by ``compscope train`` (``toy.json`` + ``model.safetensors``;
:mod:`compscope.toy.storage`), and ``ToyTransformer`` objects in memory."""

from __future__ import annotations

from . import existing_path


def is_toy_model(obj: object) -> bool:
    """A ``compscope.toy.ToyTransformer`` object (checked without importing torch for other sources)."""
    return type(obj).__name__ == "ToyTransformer" and type(obj).__module__ == "compscope.toy.model"


def recognise(source: object) -> bool:
    if is_toy_model(source):
        return True
    from ...toy.storage import is_toy

    path = existing_path(source)
    return path is not None and is_toy(path)


def read(source):
    if is_toy_model(source):
        return heads_of_object(source)
    from ...toy.storage import load_heads

    return load_heads(existing_path(source))


def heads_of_object(model):
    """``HeadWeights`` of a ``ToyTransformer`` object; a parameter that is not finite is refused by name."""
    import torch

    from ...errors import WeightError

    for name, p in model.named_parameters():
        if not bool(torch.isfinite(p).all()):
            raise WeightError(f"ToyTransformer object: parameter {name} holds NaN or Inf")
    return model.head_weights(name="toy", source="ToyTransformer object")
