"""Apertus (Swiss AI): Llama-like with Qwen3's QK-norm (an RMSNorm on each query and key head
before the rotary map) and its own norm names: ``attention_layernorm`` before the attention (and
``feedforward_layernorm`` before the MLP, not in the attention); no attention biases unless
``attention_bias``."""

from __future__ import annotations

from . import register
from .base import layer_hooks
from .llama import LlamaLike, LlamaLikeOptions


@register
class Apertus(LlamaLike):
    name = "apertus"
    about = "Apertus (Swiss AI): per-head QK-norm under its own norm names"
    model_types = ("apertus",)
    architectures = ("ApertusForCausalLM", "ApertusModel")
    options = LlamaLikeOptions(qk_norm=True, input_norm_at="attention_layernorm")
    hook_points = layer_hooks("attention_layernorm", "self_attn")
