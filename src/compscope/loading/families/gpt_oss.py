"""gpt-oss (OpenAI's gpt-oss-20b and -120b): Llama-like attention with a learned sink logit per head.

Each head's softmax spans its keys and one more logit ``s_h`` (``self_attn.sinks``) whose share is
dropped, so a head can attend to nothing (``HeadWeights.sinks``). Biases on every projection;
sliding-window layers (128 tokens) alternate with full ones, the first sliding; YaRN rope scaling,
its attention factor folded into the logit scale. The experts are MLP: not read.
"""

from __future__ import annotations

from . import register
from .base import config_attention_bias
from .llama import LlamaLike, LlamaLikeOptions, listed_layer_types


@register
class GptOss(LlamaLike):
    name = "gpt_oss"
    about = "gpt-oss-20b and -120b: a sink logit per head, YaRN"
    model_types = ("gpt_oss",)
    architectures = ("GptOssForCausalLM", "GptOssModel")
    ignored = LlamaLike.ignored | frozenset("swiglu_alpha swiglu_limit experts_per_token initial_context_length".split())
    options = LlamaLikeOptions(sinks=True)
    attention_biases = config_attention_bias("attention_bias", True)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As ``layer_types`` lists them, else transformers' default: even-numbered layers slide
        (layer 0 first), odd ones attend to everything."""
        listed = listed_layer_types(config, n_layers, where)
        if listed is not None:
            return listed
        types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)]
        return listed_layer_types({**config, "layer_types": types}, n_layers, where)
