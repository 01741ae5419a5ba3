"""GLM decoders: GLM-4-9B and GLM-Edge (``glm``), GLM-4-0414 and GLM-Z1 (``glm4``).

Llama-like, with rotary on part of each head (``partial_rotary_factor``, transformers' default
one half) turning interleaved pairs ``(2i, 2i + 1)`` of the rotated dims, as GPT-J's; q, k and v
biased by ``attention_bias`` (default on), the output projection never. GLM-4-0414 adds an RMSNorm
on the attention output before it enters the residual (``post_self_attn_layernorm``, read as
Gemma's post-attention norm) and one on the MLP's (not in the attention).
"""

from __future__ import annotations

import dataclasses

from . import register
from .base import layer_hooks
from .llama import Llama, LlamaLike, LlamaLikeOptions


@register
class Glm(LlamaLike):
    name = "glm"
    model_types = ("glm",)
    architectures = ("GlmForCausalLM", "GlmModel")
    handled = Llama.handled | {"partial_rotary_factor"}
    options = LlamaLikeOptions(rotary_style="interleaved", partial_rotary=0.5)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        on = config.get("attention_bias")
        return (True if on is None else bool(on)), False  # transformers' default on; o_proj has none


@register
class Glm4(Glm):
    name = "glm4"
    model_types = ("glm4",)
    architectures = ("Glm4ForCausalLM", "Glm4Model")
    options = dataclasses.replace(Glm.options, post_attn_norm=True, post_attn_norm_at="post_self_attn_layernorm")
    hook_points = layer_hooks("input_layernorm", "post_self_attn_layernorm")
