"""MiniCPM 5 MoE (OpenBMB): Llama's attention with an output gate, in DeepSeek-V3's layers.

- ``q_gate_proj`` (the files' ``q_proj``, which transformers renames) holds, per head, the query's rows and then as
  many rows of an output gate: each head's ``z`` is multiplied by ``σ(W_G x + b_G)`` of its query's input before
  ``o_proj`` (``HeadWeights.W_G``, as Qwen3.5's gates; ``b_G`` where ``attention_bias`` is on).
- Grouped K/V heads, a head width of 128 where the config states none (the residual width over the heads where it
  states null), rotate-half rotary on all of each head (base 5,000,000), no QK-norm; q/gate, k, v and o biased where
  ``attention_bias`` says (default off).
- Pre-RMSNorm layers; the experts, the shared expert and the dense MLPs (``mlp_layer_types``) are MLP, not read.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from ...errors import LoadError
from . import register
from .base import MAX_HEADS, MAX_LAYERS, integer, prefix_of
from .glm import GLM45_MOE
from .llama import PREFIXES, Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, gated_queries, with_output_gates

#: the head width where the config states none (transformers' default)
MINICPM5_HEAD_DIM = 128


@register
class MiniCpm5Moe(LlamaLike):
    name = "minicpm5_moe"
    about = ("MiniCPM 5 MoE: gated attention (each head's output times a sigmoid gate of its query's input), grouped "
             "K/V heads")
    model_types = ("minicpm5_moe",)
    architectures = ("MiniCPM5MoeForCausalLM", "MiniCPM5MoEForCausalLM", "MiniCPM5MoeModel")
    handled = Llama.handled
    ignored = LlamaLike.ignored | GLM45_MOE | {"mlp_layer_types"}
    accept = {**LlamaLike.accept, "use_gated_attention": bool}  # (transformers refuses it off)
    saved_names = ((r"\.self_attn\.q_proj\.", ".self_attn.q_gate_proj."),)  # (its files' name)
    options = LlamaLikeOptions(default_theta=5_000_000.0)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        on = bool(config.get("attention_bias"))
        return on, on  # (Llama's attention: one switch for all four, default off)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        cls.check_config(cfg, where)
        d = integer(cfg, where, "hidden_size")
        H = integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
        if "head_dim" in cfg and cfg["head_dim"] is None:  # (stated null: transformers' width over the heads)
            if d % H:
                raise LoadError(f"{where}: config key 'num_attention_heads' = {H} does not divide 'hidden_size' = {d} "
                                "(and head_dim is null)")
            ckpt = dataclasses.replace(ckpt, config={**cfg, "head_dim": d // H})
        r = integer(ckpt.config, where, "head_dim", default=MINICPM5_HEAD_DIM)
        layers = list(range(integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)))
        probe = "layers.0.self_attn.q_gate_proj.weight"
        prefix = prefix_of(ckpt.tensors, probe, PREFIXES, "model.")
        ckpt, gates, biases = gated_queries(ckpt, layers, H, r, d, prefix, at="q_gate_proj")
        hw = convert_llamalike(ckpt, cls, dataclasses.replace(cls.options, default_head_dim=MINICPM5_HEAD_DIM))
        built = cls.attention_biases(cfg)[0] and biases  # (a file's bias transformers does not build is left out)
        return with_output_gates(hw, [gates[i] for i in layers], biases=[biases[i] for i in layers] if built else None)
