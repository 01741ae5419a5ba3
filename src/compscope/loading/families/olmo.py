"""OLMo, OLMo-2, OLMo-3 and OLMoE decoders (AllenAI): Llama-like module names with these twists.

- OLMo: every LayerNorm without parameters (no gain, no bias; eps 1e-5), so there are no norm
  tensors to read.
- OLMo-2: no norm before the attention (the heads read the raw residual); an RMSNorm on the
  attention output before the residual add (and on the MLP output); and QK-norm over the whole
  layer: one RMSNorm over all query heads' ``q`` at once (gain of width ``n_heads · d_head``),
  one over all K heads' ``k``, before the rotary map (``HeadWeights.qk_norm_scope = 'layer'``).
- OLMo-3: OLMo-2 with sliding-window layers (``layer_types``; HF's default every fourth layer
  global) and a rotary base per layer type.
- OLMoE: Llama's pre-RMSNorm layout with OLMo-2's layer-wide QK-norm (its experts are MLP: not
  read).

``clip_qkv`` (q, k, v clamped elementwise: not linear) is refused when set.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import Family, config_attention_bias, rope_accept
from .gemma import _default_layer_types
from .llama import Llama, LlamaLikeOptions, convert_llamalike, llamalike_hooks

_LAYER_QK_NORM = dict(qk_norm=True, qk_norm_scope="layer")


def _raw_residual_hooks(cls, model):
    """OLMo-2 and OLMo-3 layers: ``self_attn`` reads the residual itself (no norm before it); what
    is added is the output of ``post_attention_layernorm`` (the attention-output norm)."""
    return [(b.self_attn, b.post_attention_layernorm) for b in cls.base_model(model).layers]


@register
class Olmo(Family):
    name = "olmo"
    model_types = ("olmo",)
    architectures = ("OlmoForCausalLM", "OlmoModel")
    handled = Llama.handled
    ignored = frozenset()
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hook_points = classmethod(llamalike_hooks)
    attention_biases = config_attention_bias("attention_bias", False)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        opts = LlamaLikeOptions(norm_kind="layernorm", norm_gains=False, norm_eps=1e-5)  # HF's OlmoLayerNorm
        return convert_llamalike(ckpt, cls, opts)


@register
class Olmo2(Family):
    name = "olmo2"
    model_types = ("olmo2", "olmo3")
    architectures = ("Olmo2ForCausalLM", "Olmo2Model", "Olmo3ForCausalLM", "Olmo3Model")
    handled = Llama.handled
    ignored = frozenset()
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hook_points = classmethod(_raw_residual_hooks)
    attention_biases = config_attention_bias("attention_bias", False)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        theta = 10000.0
        if ckpt.config.get("model_type") == "olmo3":
            cfg = _default_layer_types(dict(ckpt.config), ckpt.source, 4)  # HF: every fourth layer global
            if "sliding_attention" in cfg["layer_types"]:
                cfg.setdefault("sliding_window", 4096)  # HF's default
            ckpt, theta = dataclasses.replace(ckpt, config=cfg), 500_000.0
        opts = LlamaLikeOptions(input_norm=False, post_attn_norm=True, default_theta=theta, **_LAYER_QK_NORM)
        return convert_llamalike(ckpt, cls, opts)


@register
class Olmoe(Family):
    name = "olmoe"
    model_types = ("olmoe",)
    architectures = ("OlmoeForCausalLM", "OlmoeModel")
    handled = Llama.handled
    ignored = Llama.ignored | frozenset("num_experts norm_topk_prob".split())
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hook_points = classmethod(llamalike_hooks)
    attention_biases = config_attention_bias("attention_bias", False)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, LlamaLikeOptions(**_LAYER_QK_NORM))
