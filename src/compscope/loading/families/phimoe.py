"""Phi-3.5-MoE (``phimoe``): Llama's layout with LayerNorms (with biases, eps ``rms_norm_eps``), one
``attention_bias`` switch for all four projections, a biased unembedding (``lm_head_bias``: ``b_U``),
and LongRoPE whose amplitude is stated outright: transformers turns queries and keys at the short
factors and scales them by ``short_mscale`` on sequences up to the original context (``long_mscale``
past it, not read: the data runner takes sequences up to that context). The experts are MLP and
not read.
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ..checkpoint import Checkpoint
from . import register
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike


def _short_amplitude(config: dict) -> dict:
    """``config`` with its LongRoPE's ``short_mscale`` as the rope's ``attention_factor`` (how
    compscope's rope reading takes an amplitude stated outright), where the config states one."""
    for key in ("rope_parameters", "rope_scaling"):
        rope = config.get(key)
        if isinstance(rope, dict) and rope.get("short_mscale") is not None and rope.get("attention_factor") is None:
            return {**config, key: {**rope, "attention_factor": rope["short_mscale"]}}
    return config


@register
class Phimoe(LlamaLike):
    name = "phimoe"
    about = "Phi-3.5-MoE: LayerNorms, biases on every projection and the unembedding, LongRoPE"
    model_types = ("phimoe",)
    architectures = ("PhimoeForCausalLM", "PhimoeModel", "PhiMoEForCausalLM")  # (the last: the hub configs' name)
    handled = Llama.handled | {"lm_head_bias", "original_max_position_embeddings"}
    ignored = Llama.ignored | {"input_jitter_noise"}  # (training noise on the experts' input)
    options = LlamaLikeOptions(norm_kind="layernorm", norm_bias=True)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        b_U = ckpt.tensors.take("lm_head.bias", required=False) if ckpt.config.get("lm_head_bias") else None
        hw = convert_llamalike(dataclasses.replace(ckpt, config=_short_amplitude(ckpt.config)), cls, cls.options)
        return hw if b_U is None else dataclasses.replace(hw, b_U=b_U)
