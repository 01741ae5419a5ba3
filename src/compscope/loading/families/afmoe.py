"""Arcee's AFMoE (the Trinity models): Llama's projections with a gated attention output, per-head
QK-norm, a norm on each attention output, rotary on the local layers alone.

- A separate ``gate_proj`` per layer: each head's ``z`` times ``σ(W_G x)`` of its query's input
  before ``o_proj`` (``HeadWeights.W_G``, as Qwen3.5's gates).
- ``q_norm``, ``k_norm``: RMSNorm per head before the rotary map; ``post_attention_layernorm``
  normalises what the attention adds (an attention-output norm, as Gemma's).
- Every ``global_attn_every_n_layers``-th layer (counting from 1) attends over the whole sequence
  without rotary (NoPE); the others within ``sliding_window``, rotated.
- ``mup_enabled``: the embeddings times ``sqrt(d_model)``. The experts are MLP: not read.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import MAX_HEADS, MAX_LAYERS, integer, layer_hooks, prefix_of
from .llama import Llama, LlamaLike, LlamaLikeOptions, PREFIXES, convert_llamalike, listed_or, with_output_gates


@register
class Afmoe(LlamaLike):
    name = "afmoe"
    about = ("Arcee's AFMoE (Trinity): gated attention, QK-norm, a norm on each attention output, rotary on local "
             "layers only")
    model_types = ("afmoe",)
    architectures = ("AfmoeForCausalLM", "AfmoeModel")
    handled = Llama.handled | {"global_attn_every_n_layers", "mup_enabled"}
    ignored = Llama.ignored | {"num_dense_layers", "num_shared_experts", "route_scale", "route_norm", "score_func"}
    options = LlamaLikeOptions(qk_norm=True, post_attn_norm=True, nope_layers="full_attention")
    hook_points = layer_hooks("input_layernorm", "post_attention_layernorm")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else transformers' rule: every ``global_attn_every_n_layers``-th layer (4) global."""
        if config.get("layer_types"):
            return listed_or(config, n_layers, where, bool)
        every = integer(config, where, "global_attn_every_n_layers", default=4, high=MAX_LAYERS)
        return listed_or(config, n_layers, where, lambda i: (i + 1) % every == 0)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d = integer(cfg, where, "hidden_size")
        H = integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
        r = integer(cfg, where, "head_dim", default=d // H)
        opts = dataclasses.replace(cls.options, embed_scale=d**0.5 if cfg.get("mup_enabled") else 1.0)
        hw = convert_llamalike(ckpt, cls, opts)
        probe = "layers.0.self_attn.gate_proj.weight"
        prefix = prefix_of(ts, probe, PREFIXES, "model.")
        gates = [ts.take(f"{prefix}layers.{i}.self_attn.gate_proj.weight", (H * r, d)).reshape(H, r, d)
                 for i in range(hw.n_layers)]
        return with_output_gates(hw, gates)
