"""SmolLM3 decoders: Llama-like, with no rotary on some layers (NoPE).

Every ``no_rope_layer_interval``-th layer (4 in SmolLM3-3B; or as ``no_rope_layers`` lists them,
1 rotary, 0 none) leaves queries and keys unrotated: compscope gives those layers rotary frequency
0, which turns nothing, so one ``Rotary`` describes every layer and the card says which have none.
Sliding windows only with ``use_sliding_window`` on, and then on the layers without rotary.
"""

from __future__ import annotations

from . import register
from .llama import Llama, LlamaLike, LlamaLikeOptions


@register
class SmolLM3(LlamaLike):
    name = "smollm3"
    model_types = ("smollm3",)
    architectures = ("SmolLM3ForCausalLM", "SmolLM3Model")
    handled = Llama.handled | {"no_rope_layers", "no_rope_layer_interval"}
    options = LlamaLikeOptions(nope_layers="no_rope_layers")
