"""Jamba (AI21: Jamba, Jamba 1.5 and 1.6 Mini and Large): Mamba layers with an attention layer
every ``attn_layer_period``-th layer (from ``attn_layer_offset``: layers 4, 12, 20, ... by default),
and mixture-of-experts MLPs.

compscope reads the attention layers alone, in order (its layer ``k`` is the model's k-th
attention layer; the notes say which), the Mamba layers being other writers to the residual, as
MLPs are. The attention is Llama's (pre-RMSNorm ``input_layernorm``, separate projections without
bias, GQA, logit scale ``d_head^-1/2``) with no positional encoding at all: compscope gives it
rotary frequency 0 (NoPE), so that the heads see positions only through the causal mask. The
final norm is ``final_layernorm``.
"""

from __future__ import annotations

from ...errors import UnsupportedModelError
from . import register
from .base import MAX_LAYERS, attending, integer
from .llama import Llama, LlamaLike, LlamaLikeOptions, attention_layer_hooks

#: the Mamba layers' and the experts' settings: the attention does not depend on them
_NOT_ATTENTION = frozenset(
    "mamba_d_state mamba_d_conv mamba_expand mamba_dt_rank mamba_conv_bias mamba_proj_bias use_mamba_kernels use_mambapy "
    "use_associative_scan expert_layer_period expert_layer_offset num_experts num_experts_per_tok output_router_logits "
    "router_aux_loss_coef num_logits_to_keep calc_logits_for_entire_prompt".split())  # (the last two: which logits
# a forward returns)


@register
class Jamba(LlamaLike):
    name = "jamba"
    about = "Jamba (AI21): Mamba layers with an attention layer every few"
    model_types = ("jamba",)
    architectures = ("JambaForCausalLM", "JambaModel")
    handled = Llama.handled | {"attn_layer_period", "attn_layer_offset"}
    ignored = Llama.ignored | _NOT_ATTENTION
    options = LlamaLikeOptions(nope_layers="all", final_norm="final_layernorm")
    hook_points = attention_layer_hooks

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        """Layer ``i`` attends when ``i % attn_layer_period == attn_layer_offset`` (transformers' defaults 8 and 4)."""
        period = integer(config, where, "attn_layer_period", default=8, high=MAX_LAYERS)
        offset = integer(config, where, "attn_layer_offset", default=4, low=0, high=period - 1)
        layers = [i for i in range(n_layers) if i % period == offset]
        return attending(layers, n_layers, where, "a Mamba layer",
                         detail=f" (attn_layer_period {period}, attn_layer_offset {offset})")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        if config.get("sliding_window"):  # transformers 4 slides the attention layers by it, 5 does not read it
            raise UnsupportedModelError(f"{where}: sliding_window = {config['sliding_window']!r}: transformers 4 slides "
                                        "Jamba's attention by it and transformers 5 does not; save the config without it")
        return ["full_attention"] * n_layers
