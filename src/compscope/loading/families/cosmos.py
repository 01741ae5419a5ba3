"""Cosmos3 Edge's language model (NVIDIA): Llama's attention and pre-RMSNorm layers (its MLP a
plain two-layer one, not read), grouped K/V heads, rotary in the rotate-half layout with multimodal
sections interleaved over the pairs (temporal, height, width). On text the three positions of a
token are its position, so every pair turns by it: the ordinary rotary map, which is what is read.
transformers' defaults where a config states none: base 1e8, heads 128 wide. Its released files
keep the language model's layers at the top under other names (``self_attn.to_q`` ... ``to_out``),
read as the loaded model's.
"""

from __future__ import annotations

from . import register
from .llama import WINDOW_KEYS, LlamaLike, LlamaLikeOptions


@register
class Cosmos3Edge(LlamaLike):
    name = "cosmos3_edge"
    about = "Cosmos3 Edge's language model (NVIDIA): Llama's attention, multimodal rotary (the ordinary map on text)"
    model_types = ("cosmos3_edge_text",)
    architectures = ("Cosmos3EdgeTextModel",)
    handled = LlamaLike.handled - WINDOW_KEYS
    options = LlamaLikeOptions(default_theta=1e8, default_head_dim=128)
    saved_names = tuple((rf"\.self_attn\.to_{x}\.", f".self_attn.{y}_proj.") for x, y in
                        (("q", "q"), ("k", "k"), ("v", "v"), ("out", "o")))
