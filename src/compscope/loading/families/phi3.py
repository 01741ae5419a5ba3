"""Phi-3 (and Phi-4-mini) decoders: Llama-like with one fused ``qkv_proj``, whose rows stack the
query heads, then the K/V heads' keys, then their values; partial rotary
(``partial_rotary_factor``, rotate-half within the rotated dims); a sliding window, when set, on
every layer. The long-context rope scalings (``longrope``) are refused by name.
"""

from __future__ import annotations

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import Family, rope_accept
from .llama import Llama, LlamaLikeOptions, convert_llamalike, llamalike_hooks


@register
class Phi3(Family):
    name = "phi3"
    model_types = ("phi3",)
    architectures = ("Phi3ForCausalLM", "Phi3Model")
    handled = Llama.handled | {"partial_rotary_factor", "original_max_position_embeddings"}
    ignored = frozenset("embd_pdrop resid_pdrop".split())
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hook_points = classmethod(llamalike_hooks)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # transformers builds every projection with bias=False

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, LlamaLikeOptions(fused_qkv=True))
