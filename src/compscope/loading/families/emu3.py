"""Emu3's language model (BAAI): Llama's attention and pre-RMSNorm layers over one vocabulary of text
and image (vision tokenizer) tokens, grouped K/V heads, rotary in the rotate-half layout. Its layers
add dropout after the attention, which a model in evaluation does not apply. transformers' default
rotary base where a config states none: 1e6. The VQ-VAE that turns images into tokens is not read.
"""

from __future__ import annotations

from . import register
from .llama import WINDOW_KEYS, LlamaLike, LlamaLikeOptions


@register
class Emu3(LlamaLike):
    name = "emu3"
    about = "Emu3's language model (BAAI): Llama's layers over text and image tokens"
    model_types = ("emu3_text_model",)
    architectures = ("Emu3ForCausalLM",)
    handled = LlamaLike.handled - WINDOW_KEYS  # (its mask takes no window)
    options = LlamaLikeOptions(default_theta=1e6)
