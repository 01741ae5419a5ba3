"""LFM2 (Liquid AI: LFM2 and LFM2.5, 350M to 2.6B; LFM2-MoE): short-convolution layers with
attention layers among them.

compscope reads the attention layers alone, in order (its layer ``k`` is the model's k-th attention
layer; the notes say which): those ``layer_types`` lists as ``full_attention``, else those
``full_attn_idxs`` lists (every layer where neither is given, as transformers builds it). The
convolution layers are other writers to the residual, as MLPs are. The attention is Llama's under
other names: an RMSNorm ``operator_norm`` before it (eps ``norm_eps``, gain ``w``), q/k/v and the
output projection ``out_proj`` without biases, and Qwen3's per-head QK RMSNorm (``q_layernorm``,
``k_layernorm``) before the rotary map. The final norm is the one transformers names
``embedding_norm``, which comes after the last layer. ``tie_embedding`` is the configs' own word
for ``tie_word_embeddings``.
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ...errors import LoadError, UnsupportedModelError
from ..checkpoint import Checkpoint
from . import register
from .base import MAX_LAYERS, attending, integer, layer_hooks
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike

#: the convolution layers', the MLP's and the experts' settings: the attention does not depend on them
_NOT_ATTENTION = frozenset(
    "conv_bias conv_L_cache conv_dim conv_dim_out conv_use_xavier_init block_dim block_ff_dim block_multiple_of "
    "block_ffn_dim_multiplier block_auto_adjust_ff_dim block_use_swiglu block_use_xavier_init block_mlp_init_scale "
    "block_out_init_scale intermediate_size moe_intermediate_size num_experts num_experts_per_tok num_dense_layers "
    "norm_topk_prob routed_scaling_factor use_expert_bias".split()) | {"block_norm_eps"}  # (not read by
# transformers, which norms with norm_eps)


@register
class Lfm2(LlamaLike):
    name = "lfm2"
    about = "LFM2, LFM2.5 and LFM2-MoE (Liquid AI): convolution layers with attention layers among them, QK-norm"
    model_types = ("lfm2", "lfm2_moe")
    architectures = ("Lfm2ForCausalLM", "Lfm2Model", "Lfm2MoeForCausalLM")
    handled = (Llama.handled - {"rms_norm_eps", "sliding_window", "use_sliding_window", "max_window_layers"}) | {
        "norm_eps", "full_attn_idxs", "tie_embedding", "num_heads"}
    ignored = Llama.ignored | _NOT_ATTENTION
    options = LlamaLikeOptions(qk_norm=True, input_norm_at="operator_norm", eps_key="norm_eps", out_proj_at="out_proj",
                               qk_norm_at=("q_layernorm", "k_layernorm"), final_norm="embedding_norm",
                               default_theta=1000000.0)
    hook_points = layer_hooks("operator_norm", "self_attn", attending="self_attn")
    other_layers = "short-convolution layers"

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        """The layers ``layer_types`` lists as attending (any other type than 'conv' is refused by
        name), else those of ``full_attn_idxs``, else every layer."""
        types = config.get("layer_types")
        if types:
            known = ("conv", "full_attention")
            if not isinstance(types, list) or len(types) != n_layers or any(t not in known for t in types):
                raise UnsupportedModelError(f"{where}: config key 'layer_types' = {types!r}: expected 'conv' or "
                                            f"'full_attention' for each of the {n_layers} layers")
            layers = [i for i, t in enumerate(types) if t == "full_attention"]
        elif config.get("model_type") == "lfm2_moe":
            raise LoadError(f"{where}: an LFM2-MoE config without 'layer_types', which transformers needs to build it")
        elif config.get("full_attn_idxs") is not None:
            idxs = config["full_attn_idxs"]
            if (not isinstance(idxs, list) or any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n_layers
                                                  for i in idxs)):
                raise LoadError(f"{where}: config key 'full_attn_idxs' = {idxs!r} is not a list of layer indices "
                                f"below {n_layers}")
            layers = sorted(set(idxs))
        else:
            layers = list(range(n_layers))
        return attending(layers, n_layers, where, "a convolution")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Full attention on every layer that attends: LFM2 slides no window."""
        return ["full_attention"] * n_layers

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)
        if "num_heads" in cfg and cfg["num_heads"] != cfg.get("num_attention_heads"):
            raise LoadError(f"{where}: config keys 'num_heads' = {cfg['num_heads']!r} and 'num_attention_heads' = "
                            f"{cfg.get('num_attention_heads')!r} disagree")
        if "tie_embedding" in cfg and "tie_word_embeddings" not in cfg:  # transformers reads it as that
            ckpt = dataclasses.replace(ckpt, config={**cfg, "tie_word_embeddings": bool(cfg["tie_embedding"])})
        return convert_llamalike(ckpt, cls, cls.options)
