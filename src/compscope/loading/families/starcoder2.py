"""StarCoder2 decoders: Llama's module names with LayerNorms and biases everywhere.

Pre-LayerNorm with gain and bias (``norm_epsilon``); separate ``q/k/v/o_proj``, all with biases
when ``use_bias`` (the default); GQA; rotary over the whole head in the rotate-half layout;
a sliding window on every layer when ``sliding_window`` is set (a mask, recorded per layer).
"""

from __future__ import annotations

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import Family, config_attention_bias, rope_accept
from .llama import LlamaLikeOptions, convert_llamalike, llamalike_hooks


@register
class Starcoder2(Family):
    name = "starcoder2"
    model_types = ("starcoder2",)
    architectures = ("Starcoder2ForCausalLM", "Starcoder2Model")
    handled = frozenset("hidden_size num_attention_heads num_key_value_heads num_hidden_layers norm_epsilon use_bias "
                        "rope_theta sliding_window".split())
    ignored = frozenset("residual_dropout embedding_dropout".split())
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hook_points = classmethod(llamalike_hooks)
    attention_biases = config_attention_bias("use_bias", True)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, LlamaLikeOptions(norm_kind="layernorm", norm_bias=True, eps_key="norm_epsilon"))
