"""Phi-3 (and Phi-4-mini) decoders: Llama-like with one fused ``qkv_proj``, whose rows stack the
query heads, then the K/V heads' keys, then their values; partial rotary
(``partial_rotary_factor``, rotate-half within the rotated dims); a sliding window, when set, on
every layer. The long-context rope scalings (``longrope``) are refused by name.
"""

from __future__ import annotations

from . import register
from .llama import Llama, LlamaLike, LlamaLikeOptions


@register
class Phi3(LlamaLike):
    name = "phi3"
    model_types = ("phi3",)
    architectures = ("Phi3ForCausalLM", "Phi3Model")
    handled = Llama.handled | {"partial_rotary_factor", "original_max_position_embeddings"}
    ignored = frozenset("embd_pdrop resid_pdrop".split())
    options = LlamaLikeOptions(fused_qkv=True)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # transformers builds every projection with bias=False
