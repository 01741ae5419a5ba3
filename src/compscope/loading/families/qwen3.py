"""Qwen3 and Qwen3-MoE decoders: Llama-like with QK-norm.

Each query and key head is RMS-normalised (gain ``w``, no offset) after its projection and before
the rotary map, as in Gemma 3, so products of ``W_Q`` and ``W_K`` are approximations there (the
loaded ``HeadWeights`` says so in ``meta.notes``). No attention-output norm, no embedding scale,
logit scale ``head_dim^-1/2``. Sliding windows as Qwen2's (``use_sliding_window``, layers from
``max_window_layers`` up). Qwen3-MoE differs in its MLP only, which compscope does not read.
The language models of Qwen3-VL and Qwen3-VL-MoE are Qwen3's, with a multimodal rotary that is the
ordinary one on text (``llama.mrope_note``); the visual features they add to their first layers'
residual come with images only.
"""

from __future__ import annotations

from . import register
from .llama import Llama, LlamaLike, LlamaLikeOptions, listed_layer_types, upper_layers_slide, window_switch

#: Qwen3-MoE's MLP settings: the attention does not depend on them
_MOE = frozenset(
    "decoder_sparse_step moe_intermediate_size num_experts num_local_experts num_experts_per_tok norm_topk_prob "
    "output_router_logits router_aux_loss_coef mlp_only_layers".split()
)


@register
class Qwen3(LlamaLike):
    name = "qwen3"
    model_types = ("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text")  # (Qwen3-VL's language models)
    architectures = ("Qwen3ForCausalLM", "Qwen3Model", "Qwen3MoeForCausalLM")
    ignored = Llama.ignored | _MOE
    options = LlamaLikeOptions(qk_norm=True)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed; else windows only with ``use_sliding_window`` on: Qwen3's on the layers from
        ``max_window_layers`` up, Qwen3-MoE's on every layer (it does not read ``max_window_layers``)."""
        on = window_switch(config, where)
        listed = listed_layer_types(config, n_layers, where)
        if listed is not None:
            return listed
        if config.get("model_type") in ("qwen3_moe", "qwen3_vl_moe_text"):
            return ["sliding_attention" if on else "full_attention"] * n_layers
        return upper_layers_slide(config, n_layers, where, on)
