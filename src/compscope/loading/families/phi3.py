"""Phi-3 (and Phi-4-mini) decoders: Llama-like with one fused ``qkv_proj``, whose rows stack the
query heads, then the K/V heads' keys, then their values; partial rotary
(``partial_rotary_factor``, rotate-half within the rotated dims); a sliding window, when set, on
every layer. The long-context rope scaling (``longrope``: Phi-3-128k, Phi-3.5, Phi-4-mini) is read for
sequences within the original context, its attention factor folded into the logit scale where whole
heads rotate, into the rotated rows of ``W_Q`` and ``W_K`` where part of each head does (Phi-4-mini).
"""

from __future__ import annotations

from . import register
from .llama import Llama, LlamaLike, LlamaLikeOptions


@register
class Phi3(LlamaLike):
    name = "phi3"
    about = "Phi-3, Phi-3.5, Phi-4-mini: fused qkv_proj, partial rotary, LongRoPE"
    model_types = ("phi3",)
    architectures = ("Phi3ForCausalLM", "Phi3Model")
    handled = Llama.handled | {"partial_rotary_factor", "original_max_position_embeddings"}
    ignored = frozenset("embd_pdrop resid_pdrop".split())
    options = LlamaLikeOptions(fused_qkv=True)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # transformers builds every projection with bias=False


@register
class Phi4Multimodal(Phi3):
    """Phi-4-multimodal's language model: Phi-4-mini's attention (fused ``qkv_proj``, partial rotary, LongRoPE), its
    settings at the top of the config beside the vision and audio encoders' (not read). transformers loads the LoRA
    adapters its makers trained for images and speech apart (PEFT), on those inputs; on text the base weights run
    alone, which are what is read."""

    name = "phi4_multimodal"
    about = "Phi-4-multimodal's language model: Phi-4-mini's attention; its vision and audio encoders not read"
    model_types = ("phi4_multimodal",)
    architectures = ("Phi4MultimodalForCausalLM", "Phi4MultimodalModel")
    ignored = Phi3.ignored | {"vision_config", "audio_config"}
