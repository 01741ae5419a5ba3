"""Qwen3 and Qwen3-MoE decoders: Llama-like with QK-norm.

Each query and key head is RMS-normalised (gain ``w``, no offset) after its projection and before
the rotary map, as in Gemma 3, so products of ``W_Q`` and ``W_K`` are approximations there (the
loaded ``HeadWeights`` says so in ``meta.notes``). No attention-output norm, no embedding scale,
logit scale ``head_dim^-1/2``. Sliding windows as Qwen2's (``use_sliding_window``, layers from
``max_window_layers`` up). Qwen3-MoE differs in its MLP only, which compscope does not read.
"""

from __future__ import annotations

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import Family, config_attention_bias, rope_accept
from .llama import Llama, LlamaLikeOptions, convert_llamalike, llamalike_hooks

#: Qwen3-MoE's MLP settings: the attention does not depend on them
_MOE = frozenset(
    "decoder_sparse_step moe_intermediate_size num_experts num_local_experts num_experts_per_tok norm_topk_prob "
    "output_router_logits router_aux_loss_coef mlp_only_layers".split()
)


@register
class Qwen3(Family):
    name = "qwen3"
    model_types = ("qwen3", "qwen3_moe")
    architectures = ("Qwen3ForCausalLM", "Qwen3Model", "Qwen3MoeForCausalLM")
    handled = Llama.handled
    ignored = Llama.ignored | _MOE
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hook_points = classmethod(llamalike_hooks)
    attention_biases = config_attention_bias("attention_bias", False)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, LlamaLikeOptions(qk_norm=True))
