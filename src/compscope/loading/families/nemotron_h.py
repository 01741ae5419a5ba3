"""Nemotron-H (NVIDIA: Nemotron-H 4B to 56B, Nemotron Nano 2, Nemotron 3 Nano): a stack of blocks
each holding one mixer (Mamba-2, attention, an MLP or a mixture of experts) behind an RMSNorm.

compscope reads the attention blocks alone, in order (its layer ``k`` is the model's k-th attention
block; the notes say which): those the block types mark ``full_attention`` (transformers 5's
``layers_block_type``, whose older names ``attention`` and ``mamba`` it also reads) or ``*`` in the
configs' ``hybrid_override_pattern`` (``M`` Mamba, ``E`` experts, ``-`` MLP). The number of blocks is
the number of types, as transformers counts them (``num_hidden_layers`` is not read). The other
blocks write to the residual, as MLPs do. The attention is Llama's without any positional encoding
(compscope gives it rotary frequency 0: the heads see positions only through the causal mask) and
without biases, whatever ``attention_bias`` says (transformers builds none), its head width
``head_dim`` (transformers' default 128, not the residual width over the heads); the norm before a
block is ``norm``, the attention ``mixer``, the embedding ``embeddings`` and the final norm ``norm_f``,
under ``backbone.`` in NVIDIA's files and ``model.`` in those transformers 5 writes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...core.heads import HeadWeights
from ...errors import LoadError, UnsupportedModelError
from ..checkpoint import Checkpoint
from . import register
from .base import MAX_LAYERS, attending
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike

#: block type (transformers 5's names and their older ones; the pattern's letters) -> whether it attends
_TYPES = {"full_attention": True, "attention": True, "linear_attention": False, "mamba": False, "mlp": False,
          "moe": False}
_LETTERS = {"*": "full_attention", "M": "linear_attention", "-": "mlp", "E": "moe"}
#: rotary settings a config may carry: the model has no rotary, and transformers does not read them
_ROPE = ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor")

#: the Mamba, MLP, experts' and multi-token-prediction settings: the attention does not depend on them
_NOT_ATTENTION = frozenset(
    "intermediate_size mlp_hidden_act mlp_bias use_bias use_mamba_kernels ssm_state_size mamba_num_heads "
    "mamba_head_dim mamba_hidden_act mamba_n_groups n_groups mamba_d_conv conv_kernel mamba_expand expand "
    "mamba_dt_min mamba_dt_max mamba_dt_limit mamba_dt_init_floor time_step_min time_step_max time_step_limit "
    "time_step_floor mamba_conv_bias use_conv_bias mamba_proj_bias mamba_chunk_size chunk_size mamba_ssm_cache_dtype "
    "n_routed_experts n_shared_experts moe_intermediate_size moe_shared_expert_intermediate_size moe_latent_size "
    "moe_shared_expert_overlap num_experts_per_tok routed_scaling_factor n_group topk_group norm_topk_prob "
    "num_nextn_predict_layers mtp_layers_block_type mtp_hybrid_override_pattern rescale_prenorm_residual "
    "residual_in_fp32 num_logits_to_keep hidden_dropout".split()
) | {"attention_head_dim", "attention_bias", "sliding_window", "num_hidden_layers", *_ROPE}  # (not read by
# transformers' Nemotron-H, whose attention has no biases, window or rotary, and whose blocks are as many as their
# types)


def block_types(config: dict, where: str = "config") -> list[str]:
    """Each block's type, as transformers builds the model: ``layers_block_type`` (or ``layer_types``)
    with the older names renamed, else ``hybrid_override_pattern`` letter by letter, else
    transformers' default four blocks."""
    listed = config.get("layers_block_type") or config.get("layer_types")
    if listed:
        renamed = {"mamba": "linear_attention", "attention": "full_attention"}
        if not isinstance(listed, list) or any(t not in _TYPES for t in listed):
            raise UnsupportedModelError(f"{where}: config key 'layers_block_type' = {listed!r}: expected a list of "
                                        f"{', '.join(t for t in _TYPES)}")
        types = [renamed.get(t, t) for t in listed]
    elif config.get("hybrid_override_pattern") is not None:
        pattern = config["hybrid_override_pattern"]
        if not isinstance(pattern, str) or not pattern or any(c not in _LETTERS for c in pattern):
            raise LoadError(f"{where}: config key 'hybrid_override_pattern' = {pattern!r} is not a string of "
                            f"{', '.join(_LETTERS)}")
        types = [_LETTERS[c] for c in pattern]
    else:
        types = ["linear_attention", "moe", "full_attention", "mlp"]
    if len(types) > MAX_LAYERS:
        raise LoadError(f"{where}: {len(types)} blocks, more than {MAX_LAYERS}")
    return types


@register
class NemotronH(LlamaLike):
    name = "nemotron_h"
    about = ("Nemotron-H, Nemotron Nano 2, Nemotron 3 Nano (NVIDIA): Mamba-2 blocks with attention blocks among them, "
             "NoPE")
    model_types = ("nemotron_h",)
    architectures = ("NemotronHForCausalLM", "NemotronHModel")
    handled = (Llama.handled - {"rms_norm_eps", "rope_theta", "qkv_bias", "max_window_layers", "use_sliding_window"}
               ) | {"layer_norm_epsilon", "layers_block_type", "hybrid_override_pattern"}
    ignored = Llama.ignored | _NOT_ATTENTION
    accept: dict = {}  # no rotary: no rope settings to read
    options = LlamaLikeOptions(nope_layers="all", input_norm_at="norm", attn_at="mixer", embed_at="embeddings",
                               final_norm="norm_f", eps_key="layer_norm_epsilon",
                               default_head_dim=128)  # (transformers' default, not the residual width over the heads)
    other_layers = "Mamba-2, MLP and expert blocks"
    #: the embedding as transformers 5.3 to 5.15 save it and read it back (their conversion mapping)
    saved_names = ((r"^(backbone|model)\.embedding\.weight$", r"\1.embeddings.weight"),)

    @classmethod
    def base_model(cls, model):
        """``model.model`` (transformers 5), ``model.backbone`` (its older releases), or ``model``."""
        for attr in ("model", "backbone"):
            inner = getattr(model, attr, None)
            if inner is not None and hasattr(inner, "layers"):
                return inner
        return model

    @classmethod
    def hook_points(cls, model) -> list[tuple[Any, Any]]:
        """The attention blocks: ``norm`` reads the residual, ``mixer`` returns what is added."""
        return [(b.norm, b.mixer) for b in cls.base_model(model).layers if _TYPES.get(b.block_type)]

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # transformers builds none, whatever attention_bias says

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        layers = [i for i, t in enumerate(block_types(config, where)) if _TYPES[t]]
        return attending(layers, n_layers, where, "a Mamba, MLP or experts block", unit="block")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return ["full_attention"] * n_layers  # no window: transformers' Nemotron-H does not read sliding_window

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        cls.check_config(cfg, where)
        n = len(block_types(cfg, where))
        counted = {**{k: v for k, v in cfg.items() if k not in _ROPE}, "num_hidden_layers": n}
        return convert_llamalike(dataclasses.replace(ckpt, config=counted), cls, cls.options)
