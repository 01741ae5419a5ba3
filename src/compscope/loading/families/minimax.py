"""MiniMax-M2 (MiniMax: M2, M2.1): Llama-like full attention with QK-norm over all heads of a layer
at once (one RMSNorm over every query head's ``q``, one over every K/V head's ``k``, before the
rotary map, as OLMo-2's) and rotary on the first ``rotary_dim`` dims of each head (rotate-half
within them; transformers reads ``rotary_dim`` as ``partial_rotary_factor``); no biases. Its experts
are MLP, and its multi-token-prediction modules are not built by transformers: neither is read.

Keys of the model makers' own code that transformers' MiniMax-M2 does not read are accepted where
they say what that model computes anyway (``use_qk_norm`` true, ``qk_norm_type`` ``per_layer``, full
attention on every layer in ``attn_type_list``, no window) and refused otherwise.
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ..checkpoint import Checkpoint
from . import register
from .base import integer
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike

#: the experts', router's and multi-token-prediction settings, and the residual weights that transformers'
#: MiniMax-M2 does not read: the attention does not depend on them
_NOT_ATTENTION = frozenset(
    "mlp_intermediate_size use_routing_bias scoring_func use_grouped_topk num_expert_group topk_group "
    "routed_scaling_factor layernorm_full_attention_beta layernorm_linear_attention_beta layernorm_mlp_beta "
    "shared_intermediate_size shared_moe_mode use_mtp num_mtp_modules mtp_transformer_layers swa_rope_theta "
    "max_model_len".split())


def _full_attention_everywhere(v) -> bool:
    return v is None or (isinstance(v, list) and all(t == 1 for t in v))


@register
class MiniMaxM2(LlamaLike):
    name = "minimax_m2"
    about = "MiniMax-M2: QK-norm over all heads of a layer, rotary on part of each head"
    model_types = ("minimax_m2",)
    architectures = ("MiniMaxM2ForCausalLM", "MiniMaxM2Model")
    handled = Llama.handled | {"rotary_dim", "partial_rotary_factor"}
    ignored = Llama.ignored | _NOT_ATTENTION
    accept = {**LlamaLike.accept, "use_qk_norm": lambda v: v is True, "qk_norm_type": lambda v: v == "per_layer",
              "attn_type_list": _full_attention_everywhere, "attn_window_size": lambda v: v is None}
    options = LlamaLikeOptions(qk_norm=True, qk_norm_scope="layer", default_head_dim=128)  # (transformers' default)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return ["full_attention"] * n_layers  # transformers' MiniMax-M2 slides no window, whatever sliding_window says

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        if cfg.get("rotary_dim") is not None and "partial_rotary_factor" not in cfg:  # transformers' reading of it
            rotary = integer(cfg, where, "rotary_dim")
            head_dim = integer(cfg, where, "head_dim", default=cls.options.default_head_dim)
            rope = cfg.get("rope_parameters")
            if isinstance(rope, dict) and "partial_rotary_factor" not in rope:
                cfg = {**cfg, "rope_parameters": {**rope, "partial_rotary_factor": rotary / head_dim}}
            elif not isinstance(rope, dict):
                cfg = {**cfg, "partial_rotary_factor": rotary / head_dim}
        return convert_llamalike(dataclasses.replace(ckpt, config=cfg), cls, cls.options)
