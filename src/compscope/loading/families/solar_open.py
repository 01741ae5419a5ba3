"""Solar Open (Upstage): Llama's attention with q, k and v biased by ``attention_bias`` (default off)
and the output projection never, rotary on whole heads, head width ``head_dim`` (transformers'
default 128, not the residual width over the heads); its experts are MLP and not read."""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ..checkpoint import Checkpoint
from . import register
from .llama import Llama, LlamaLike, convert_llamalike

#: the experts' settings: the attention does not depend on them
_MOE = frozenset("moe_intermediate_size n_shared_experts n_routed_experts routed_scaling_factor n_group topk_group "
                 "norm_topk_prob first_k_dense_replace".split())


@register
class SolarOpen(LlamaLike):
    name = "solar_open"
    about = "Solar Open (Upstage): Llama's attention, q/k/v biases, mixture-of-experts MLPs"
    model_types = ("solar_open",)
    architectures = ("SolarOpenForCausalLM", "SolarOpenModel")
    ignored = Llama.ignored | _MOE

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("attention_bias")), False  # o_proj has none

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        if ckpt.config.get("head_dim") is None:  # transformers' default, not the residual width over the heads
            ckpt = dataclasses.replace(ckpt, config={**ckpt.config, "head_dim": 128})
        return convert_llamalike(ckpt, cls, cls.options)
