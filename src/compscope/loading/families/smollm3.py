"""SmolLM3 decoders: Llama-like, with no rotary on some layers (NoPE).

Every ``no_rope_layer_interval``-th layer (4 in SmolLM3-3B; or as ``no_rope_layers`` lists them,
1 rotary, 0 none) leaves queries and keys unrotated: compscope gives those layers rotary frequency
0, which turns nothing, so one ``Rotary`` describes every layer and the card says which have none.
Sliding windows only with ``use_sliding_window`` on, and then on the layers without rotary.
"""

from __future__ import annotations

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import Family, config_attention_bias, rope_accept
from .llama import Llama, LlamaLikeOptions, convert_llamalike, llamalike_hooks


@register
class SmolLM3(Family):
    name = "smollm3"
    model_types = ("smollm3",)
    architectures = ("SmolLM3ForCausalLM", "SmolLM3Model")
    handled = Llama.handled | {"no_rope_layers", "no_rope_layer_interval"}
    ignored = Llama.ignored
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hook_points = classmethod(llamalike_hooks)
    attention_biases = config_attention_bias("attention_bias", False)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, LlamaLikeOptions(nope_layers="no_rope_layers"))
