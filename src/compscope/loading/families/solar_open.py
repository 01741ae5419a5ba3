"""Solar Open (Upstage): Llama's attention with q, k and v biased by ``attention_bias`` (default off)
and the output projection never, rotary on whole heads (a ``partial_rotary_factor`` other than 1
refused: transformers' Solar Open turns whole heads only), head width ``head_dim`` (transformers'
default 128, not the residual width over the heads); its experts are MLP and not read."""

from __future__ import annotations

from . import register
from .base import rope_accept_yarn
from .llama import Llama, LlamaLike, LlamaLikeOptions

#: the experts' settings: the attention does not depend on them
_MOE = frozenset("moe_intermediate_size n_shared_experts n_routed_experts routed_scaling_factor n_group topk_group "
                 "norm_topk_prob first_k_dense_replace".split())


def _whole(share) -> bool:
    """Rotary on whole heads: no ``partial_rotary_factor``, or 1."""
    return share is None or share == 1


@register
class SolarOpen(LlamaLike):
    name = "solar_open"
    about = "Solar Open (Upstage): Llama's attention, q/k/v biases, mixture-of-experts MLPs"
    model_types = ("solar_open",)
    architectures = ("SolarOpenForCausalLM", "SolarOpenModel")
    ignored = Llama.ignored | _MOE
    # (transformers 5.17 writes partial_rotary_factor 1.0 into each config, at the top and in rope_parameters)
    accept = {**LlamaLike.accept, "partial_rotary_factor": _whole,
              "rope_parameters": lambda v: rope_accept_yarn(v) and (
                  not isinstance(v, dict) or _whole(v.get("partial_rotary_factor")))}
    options = LlamaLikeOptions(default_head_dim=128)  # transformers' default, not the residual width over the heads

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("attention_bias")), False  # o_proj has none

