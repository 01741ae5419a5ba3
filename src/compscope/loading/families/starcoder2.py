"""StarCoder2 decoders: Llama's module names with LayerNorms and biases everywhere.

Pre-LayerNorm with gain and bias (``norm_epsilon``); separate ``q/k/v/o_proj``, all with biases
when ``use_bias`` (the default); GQA; rotary over the whole head in the rotate-half layout;
a sliding window on every layer when ``sliding_window`` is set (a mask, recorded per layer).
"""

from __future__ import annotations

from . import register
from .base import config_attention_bias
from .llama import LlamaLike, LlamaLikeOptions


@register
class Starcoder2(LlamaLike):
    name = "starcoder2"
    about = "StarCoder2: LayerNorms, biases on every projection, sliding window"
    model_types = ("starcoder2",)
    architectures = ("Starcoder2ForCausalLM", "Starcoder2Model")
    handled = frozenset("hidden_size num_attention_heads num_key_value_heads num_hidden_layers norm_epsilon use_bias "
                        "rope_theta sliding_window".split())
    ignored = frozenset("residual_dropout embedding_dropout".split())
    attention_biases = config_attention_bias("use_bias", True)
    options = LlamaLikeOptions(norm_kind="layernorm", norm_bias=True, eps_key="norm_epsilon")
