"""Solar Open (Upstage): Llama's attention with q, k and v biased by ``attention_bias`` (default off)
and the output projection never, rotary on whole heads, head width ``head_dim`` (transformers'
default 128, not the residual width over the heads); its experts are MLP and not read."""

from __future__ import annotations

from . import register
from .llama import Llama, LlamaLike, LlamaLikeOptions

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
    options = LlamaLikeOptions(default_head_dim=128)  # transformers' default, not the residual width over the heads

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("attention_bias")), False  # o_proj has none

