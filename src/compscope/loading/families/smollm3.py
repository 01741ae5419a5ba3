"""SmolLM3 decoders: Llama-like, with no rotary on some layers (NoPE).

Every ``no_rope_layer_interval``-th layer (4 in SmolLM3-3B; or as ``no_rope_layers`` lists them,
1 rotary, 0 none) leaves queries and keys unrotated: compscope gives those layers rotary frequency
0, which turns nothing, so one ``Rotary`` describes every layer and the card says which have none.
Sliding windows only with ``use_sliding_window`` on, and then on the layers without rotary.
"""

from __future__ import annotations

from . import register
from .llama import Llama, LlamaLike, LlamaLikeOptions, listed_layer_types, rope_layers, window_switch


@register
class SmolLM3(LlamaLike):
    name = "smollm3"
    about = "SmolLM3: no rotary on every fourth layer"
    model_types = ("smollm3",)
    architectures = ("SmolLM3ForCausalLM", "SmolLM3Model")
    handled = Llama.handled | {"no_rope_layers", "no_rope_layer_interval"}
    options = LlamaLikeOptions(nope_layers="no_rope_layers")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Windows only with ``use_sliding_window`` on, whatever ``layer_types`` says; then as listed,
        else on the layers without rotary."""
        on = window_switch(config, where)
        listed = listed_layer_types(config, n_layers, where)
        if not on:
            return ["full_attention"] * n_layers
        if listed is not None:
            return listed
        return ["full_attention" if turns else "sliding_attention" for turns in rope_layers(config, n_layers, where)]
