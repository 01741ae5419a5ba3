"""Unlimited-OCR's language model (``unlimited_ocr_text``): DeepSeek-OCR 2's (Llama's attention in DeepSeek-V2's
layers, read by the Llama family), each layer a "reference sliding window": a token generated after the prompt sees
every prompt token and the last ``sliding_window`` generated ones. In one forward pass, as compscope runs a model,
every token is a prompt token and transformers' mask is the causal mask: read as causal attention without a window,
and said.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from ...errors import UnsupportedModelError
from . import register
from .llama import Llama, convert_llamalike

#: the layer types its configs list: the reference window, and full attention
_TYPES = ("reference_sliding_attention", "full_attention")


@register
class UnlimitedOcrText(Llama):
    name = "unlimited_ocr_text"
    about = ("Unlimited-OCR's language model: DeepSeek-OCR 2's, its reference sliding window (on generated tokens "
             "alone) read as one forward pass runs it, causal")
    model_types = ("unlimited_ocr_text",)
    architectures = ("UnlimitedOcrTextModel",)
    runs_as_named = True  # (no auto class builds its language model alone: UnlimitedOcrTextModel, as its folder names)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Every layer 'full_attention': a reference sliding window masks nothing that a single pass computes."""
        types = config.get("layer_types") or [_TYPES[0]] * n_layers
        if not isinstance(types, list) or len(types) != n_layers or any(t not in _TYPES for t in types):
            raise UnsupportedModelError(f"{where}: config key 'layer_types' = {types!r}: expected one of "
                                        f"{', '.join(_TYPES)} for each of its {n_layers} layers")
        return ["full_attention"] * n_layers

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        hw = convert_llamalike(ckpt, cls, cls.options)
        if _TYPES[0] not in (ckpt.config.get("layer_types") or [_TYPES[0]]):
            return hw
        said = ("reference sliding window read as one forward pass runs it: every token attends to all before it (the "
                f"window of {ckpt.config.get('sliding_window')} applies to tokens generated after the prompt, which "
                "also see every prompt token)")
        return dataclasses.replace(hw, meta=dataclasses.replace(hw.meta, notes=(*hw.meta.notes, said)))
