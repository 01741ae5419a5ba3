"""Jais 2 (Inception, MBZUAI, Cerebras): Llama's attention with biases on every projection
(``attention_bias``, default on) and LayerNorms with a bias where Llama has RMSNorms
(``layer_norm_eps``)."""

from __future__ import annotations

from . import register
from .base import config_attention_bias
from .llama import Llama, LlamaLike, LlamaLikeOptions


@register
class Jais2(LlamaLike):
    name = "jais2"
    about = "Jais 2: Llama's attention with biases, LayerNorms"
    model_types = ("jais2",)
    architectures = ("Jais2ForCausalLM", "Jais2Model")
    handled = Llama.handled | {"layer_norm_eps"}
    attention_biases = config_attention_bias("attention_bias", True)
    options = LlamaLikeOptions(norm_kind="layernorm", norm_bias=True, eps_key="layer_norm_eps")
