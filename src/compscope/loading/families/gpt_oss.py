"""gpt-oss (OpenAI's gpt-oss-20b and -120b): Llama-like attention with a learned sink logit per head.

Each head's softmax spans its keys and one more logit ``s_h`` (``self_attn.sinks``) whose share is
dropped, so a head can attend to nothing (``HeadWeights.sinks``). Biases on every projection;
sliding-window layers (128 tokens) alternate with full ones, the first sliding; YaRN rope scaling,
its attention factor folded into the logit scale. The experts are MLP: not read. OpenAI's privacy
filter (:class:`PrivacyFilter`) is this attention as an encoder.
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ..checkpoint import Checkpoint
from . import register
from .base import config_attention_bias
from .llama import LlamaLike, LlamaLikeOptions, convert_llamalike, listed_layer_types, listed_or


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
        return listed_or(config, n_layers, where, lambda i: i % 2 == 1)


#: the privacy filter's window radius and rotary settings where its config states none (transformers' defaults)
PRIVACY_FILTER_WINDOW = 128
PRIVACY_FILTER_ROPE = {"rope_type": "yarn", "rope_theta": 150_000.0, "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                       "truncate": False, "original_max_position_embeddings": 4096}


@register
class PrivacyFilter(LlamaLike):
    """OpenAI's privacy filter: gpt-oss's attention (a sink logit per head, biases, YaRN) as an encoder
    that tags tokens. Every layer sees the keys within ``sliding_window`` tokens on either side of the
    query (``|i − j| ≤ sliding_window``, held as the window ``sliding_window + 1``); rotary on
    interleaved pairs ``(2i, 2i + 1)``; queries and keys each scaled by ``d_head^(-1/4)`` after the
    rotary map, whose product is the usual ``d_head^(-1/2)``. No unembedding (a token classifier)."""

    name = "privacy_filter"
    about = "OpenAI's privacy filter: gpt-oss's attention as an encoder, every layer a both-sided window"
    model_types = ("openai_privacy_filter",)
    architectures = ("OpenAIPrivacyFilterModel", "OpenAIPrivacyFilterForTokenClassification")
    handled = LlamaLike.handled - {"layer_types", "max_window_layers", "use_sliding_window"}
    ignored = GptOss.ignored | {"classifier_dropout"}
    accept = {**LlamaLike.accept, "is_decoder": lambda v: not v}
    options = LlamaLikeOptions(sinks=True, bidirectional=True, radius="whole", rotary_style="interleaved")
    attention_biases = config_attention_bias("attention_bias", True)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Every layer slides its window (the model builds one mask for all)."""
        return listed_layer_types({**config, "layer_types": ["sliding_attention"] * n_layers}, n_layers, where)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        config = {"sliding_window": PRIVACY_FILTER_WINDOW, **ckpt.config}  # (a null window: refused, not defaulted)
        if config.get("rope_parameters") is None:
            config["rope_parameters"] = PRIVACY_FILTER_ROPE
        return convert_llamalike(dataclasses.replace(ckpt, config=config), cls, cls.options)
