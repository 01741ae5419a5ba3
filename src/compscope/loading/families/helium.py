"""Helium (Kyutai Helium-1): Llama-like, with rotary on interleaved pairs ``(2i, 2i + 1)`` of whole
heads; q, k and v biased by ``attention_bias`` (default off), the output projection never."""

from __future__ import annotations

from . import register
from .llama import LlamaLike, LlamaLikeOptions


@register
class Helium(LlamaLike):
    name = "helium"
    about = "Helium-1 (Kyutai): rotary on interleaved pairs, q/k/v biases"
    model_types = ("helium",)
    architectures = ("HeliumForCausalLM", "HeliumModel")
    options = LlamaLikeOptions(rotary_style="interleaved")

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("attention_bias") or False), False  # o_proj is built without one
