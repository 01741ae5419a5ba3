"""Qwen3-Next and Qwen3.5 (dense and MoE; the language model of Qwen3.5's vision-language models):
gated attention layers among gated DeltaNet (linear attention) layers.

- Every ``full_attention_interval``-th layer (4) attends, as ``layer_types`` lists them; the others
  are DeltaNet layers, other writers to the residual (as Granite 4's Mamba layers are).
- ``q_proj`` holds, per head, the query's rows and then as many rows of an output gate: each head's
  ``z`` is multiplied by ``σ(W_G x)`` of its query's input before ``o_proj`` (``HeadWeights.W_G``).
- Per-head QK-norm; every RMSNorm multiplies by ``1 + w``; rotary on a quarter of each head by
  default (``partial_rotary_factor``); the multimodal rotary sections turn every pair by the token's
  position on text.

Lara-mini (:class:`LaraMini`) is the same lineage without the gate: Qwen3's attention on sliding
(rotary) and global (NoPE) layers among its DeltaNet layers.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from ...errors import UnsupportedModelError
from . import register
from .base import MAX_HEADS, MAX_LAYERS, attending, integer, prefix_of
from .llama import (PREFIXES, Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, gated_queries, layer_hooks,
                    linear_hybrid_layers, listed_layer_types, with_output_gates)

_DELTANET = frozenset({"linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
                       "linear_num_value_heads"})


@register
class Qwen35(LlamaLike):
    name = "qwen3_5"
    about = ("Qwen3-Next, Qwen3.5 and Qwen3.5-MoE: gated attention (each head's output times a sigmoid gate of its "
             "query's input) every fourth layer, gated DeltaNet layers between")
    model_types = ("qwen3_5_text", "qwen3_5_moe_text", "qwen3_next")
    architectures = ("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "Qwen3NextForCausalLM")
    handled = Llama.handled | {"full_attention_interval", "partial_rotary_factor"}
    ignored = LlamaLike.ignored | _DELTANET | {"shared_expert_intermediate_size"}
    accept = {**LlamaLike.accept, "attention_bias": lambda v: not v}
    hook_points = layer_hooks("input_layernorm", "self_attn", attending="self_attn")
    other_layers = "gated DeltaNet (linear attention) layers"
    options = LlamaLikeOptions(norm_offset=1.0, qk_norm=True, partial_rotary=0.25, default_head_dim=256)

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        """The ``full_attention`` layers of ``layer_types``, else every ``full_attention_interval``-th (4)."""
        types = config.get("layer_types")
        if types is None:
            every = integer(config, where, "full_attention_interval", default=4, high=MAX_LAYERS)
            types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n_layers)]
        return linear_hybrid_layers(types, n_layers, where)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """No window: every layer that attends attends to all before it."""
        return ["full_attention"] * n_layers

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d = integer(cfg, where, "hidden_size")
        H = integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
        r = integer(cfg, where, "head_dim", default=256)  # (transformers' default)
        layers = cls.attention_layers(cfg, integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS), where)
        probe = f"layers.{layers[0]}.self_attn.q_proj.weight"
        prefix = prefix_of(ts, probe, PREFIXES, "model.")

        ckpt, gates, _ = gated_queries(ckpt, layers, H, r, d, prefix, bias=False)  # (a file's q bias transformers
        # does not build: read as its rows are, then left out)
        hw = convert_llamalike(ckpt, cls, cls.options)
        return with_output_gates(hw, [gates[i] for i in layers])


#: Lara-mini's layer types and the released pattern (period 5) where the config lists none
LARA_TYPES = ("linear_attention", "sliding_attention", "full_attention")
LARA_WINDOW = 512  # (transformers' default)
LARA_PATTERN = ("linear_attention", "sliding_attention", "linear_attention", "full_attention", "sliding_attention")


@register
class LaraMini(LlamaLike):
    """Lara-mini: gated DeltaNet layers with attention layers among them, Qwen3's attention (per-head
    QK-norm, no output gate, plain RMSNorm gains) on sliding layers that turn by the rotary map and
    global ones without positional encoding (NoPE), as ``layer_types`` lists them (transformers'
    default: the released pattern linear, sliding, linear, full, sliding, repeated); the DeltaNet
    layers and the experts are other writers to the residual, not read."""

    name = "lara_mini"
    about = "Lara-mini: gated DeltaNet layers among sliding (rotary) and global (NoPE) attention layers, QK-norm"
    model_types = ("lara_mini",)
    architectures = ("LaraMiniForCausalLM", "LaraMiniModel")
    handled = (Llama.handled - {"max_window_layers", "use_sliding_window"}) | {"partial_rotary_factor"}
    ignored = LlamaLike.ignored | _DELTANET | {"shared_expert_intermediate_size", "full_attention_interval"}
    hook_points = layer_hooks("input_layernorm", "self_attn", attending="self_attn")
    other_layers = "gated DeltaNet (linear attention) layers"
    options = LlamaLikeOptions(qk_norm=True, nope_layers="full_attention")

    @classmethod
    def types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Per model layer, as ``layer_types`` lists it, else the released pattern."""
        types = config.get("layer_types")
        if types is None:
            types = [LARA_PATTERN[i % len(LARA_PATTERN)] for i in range(n_layers)]
        if not isinstance(types, list) or len(types) != n_layers or any(t not in LARA_TYPES for t in types):
            raise UnsupportedModelError(f"{where}: config key 'layer_types' = {types!r}: expected one of "
                                        f"{', '.join(LARA_TYPES)} for each of the {n_layers} layers")
        return list(types)

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        layers = [i for i, t in enumerate(cls.types(config, n_layers, where)) if t != "linear_attention"]
        return attending(layers, n_layers, where, "linear attention")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        types = [t if t != "linear_attention" else "full_attention" for t in cls.types(config, n_layers, where)]
        return listed_layer_types({"sliding_window": LARA_WINDOW, **config, "layer_types": types}, n_layers, where)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        if "sliding_window" not in ckpt.config:  # transformers' default window (a null one: refused with sliding layers)
            ckpt = dataclasses.replace(ckpt, config={**ckpt.config, "sliding_window": LARA_WINDOW})
        return convert_llamalike(ckpt, cls, cls.options)
