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
from .base import integer, layer_hooks
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, every_nth_global, linear_hybrid_layers

_LAYER_QK_NORM = dict(qk_norm=True, qk_norm_scope="layer")


#: OLMo-2 and OLMo-3 layers (and EXAONE 4's): ``self_attn`` reads the residual itself (no norm before
#: it); what is added is the output of ``post_attention_layernorm`` (the attention-output norm)
raw_residual_hooks = layer_hooks("self_attn", "post_attention_layernorm")


@register
class Olmo(LlamaLike):
    name = "olmo"
    about = "OLMo 1: LayerNorms without parameters"
    model_types = ("olmo",)
    architectures = ("OlmoForCausalLM", "OlmoModel")
    ignored = frozenset()

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        opts = LlamaLikeOptions(norm_kind="layernorm", norm_gains=False, norm_eps=1e-5)  # HF's OlmoLayerNorm
        return convert_llamalike(ckpt, cls, opts)


@register
class Olmo2(LlamaLike):
    name = "olmo2"
    about = "OLMo-2, OLMo-3: norms on the attention's output, QK-norm over a layer"
    model_types = ("olmo2", "olmo3")
    architectures = ("Olmo2ForCausalLM", "Olmo2Model", "Olmo3ForCausalLM", "Olmo3Model")
    ignored = frozenset()

    hook_points = raw_residual_hooks

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """OLMo-3's as listed, else transformers' default: every fourth layer global."""
        if config.get("model_type") == "olmo3":
            return every_nth_global(config, n_layers, where, 4)
        return super().layer_types(config, n_layers, where)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        theta = 10000.0
        if ckpt.config.get("model_type") == "olmo3":
            cfg = {"sliding_window": 4096, **ckpt.config}  # HF's default window
            ckpt, theta = dataclasses.replace(ckpt, config=cfg), 500_000.0
        opts = LlamaLikeOptions(input_norm=False, post_attn_norm=True, default_theta=theta, **_LAYER_QK_NORM)
        return convert_llamalike(ckpt, cls, opts)


@register
class Olmoe(LlamaLike):
    name = "olmoe"
    about = "OLMoE: QK-norm over a layer"
    model_types = ("olmoe",)
    architectures = ("OlmoeForCausalLM", "OlmoeModel")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, LlamaLikeOptions(**_LAYER_QK_NORM))


@register
class FlexOlmo(Olmo2):
    """FlexOlmo (AllenAI): OLMo-2's attention (no input norm, a norm on its output, QK-norm over a layer)
    with mixture-of-experts MLPs, which are not read; no windows; rotary base 500 000 by default."""

    name = "flex_olmo"
    about = "FlexOlmo: OLMo-2's attention with mixture-of-experts MLPs"
    model_types = ("flex_olmo",)
    architectures = ("FlexOlmoForCausalLM", "FlexOlmoModel")
    ignored = Llama.ignored  # (the experts' settings)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return ["full_attention"] * n_layers  # transformers' FlexOlmo slides no window

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        opts = LlamaLikeOptions(input_norm=False, post_attn_norm=True, default_theta=500_000.0, **_LAYER_QK_NORM)
        return convert_llamalike(ckpt, cls, opts)


#: OLMo-hybrid's gated DeltaNet layers' settings: the attention does not depend on them
_LINEAR = frozenset("linear_num_key_heads linear_num_value_heads linear_key_head_dim linear_value_head_dim "
                    "linear_a_log_min linear_a_log_max linear_dt_min linear_dt_max linear_dt_init_floor "
                    "linear_conv_kernel_dim linear_allow_neg_eigval".split())


@register
class OlmoHybrid(Olmo2):
    """OLMo-hybrid (AllenAI): OLMo-2's attention layers (no input norm, a norm on the output, QK-norm over a
    layer) among gated DeltaNet layers (linear attention), which write to the residual as MLPs do and
    are not read: the attention layers are those ``layer_types`` marks ``full_attention`` (transformers'
    default every fourth, from layer 3, at least the last). No windows; rotary unless the config's
    ``rope_parameters`` states its base as null (the released checkpoints': NoPE), as transformers
    builds it. transformers saves the norm on the attention's output as ``feedforward_layer_norm`` (its
    renaming of AllenAI's names run backwards); either name is read."""

    name = "olmo_hybrid"
    about = "OLMo-hybrid (AllenAI): OLMo-2's attention layers among gated DeltaNet layers"
    model_types = ("olmo_hybrid",)
    architectures = ("OlmoHybridForCausalLM", "OlmoHybridModel")
    ignored = _LINEAR
    hook_points = layer_hooks("self_attn", "post_attention_layernorm", attending="self_attn")
    other_layers = "gated DeltaNet layers"

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        types = config.get("layer_types")
        if types is None:
            types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n_layers)]
            if "full_attention" not in types:
                types[-1] = "full_attention"
        return linear_hybrid_layers(types, n_layers, where)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return ["full_attention"] * n_layers  # no windows

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        rope = ckpt.config.get("rope_parameters")
        nope = isinstance(rope, dict) and "rope_theta" in rope and rope["rope_theta"] is None
        if nope:  # no rotary: no base to read
            ckpt = dataclasses.replace(ckpt, config={k: v for k, v in ckpt.config.items() if k != "rope_parameters"})
        # the norm on the attention's output: transformers' name, or the one its saving writes back (and AllenAI's
        # files hold), feedforward_layer_norm
        cfg, where = ckpt.config, ckpt.source
        first = cls.attention_layers(cfg, integer(cfg, where, "num_hidden_layers"), where)[0]
        theirs = any(n.endswith(f"layers.{first}.feedforward_layer_norm.weight") for n in ckpt.tensors.names())
        opts = LlamaLikeOptions(input_norm=False, post_attn_norm=True, nope_layers="all" if nope else "",
                                post_attn_norm_at="feedforward_layer_norm" if theirs else "post_attention_layernorm",
                                **_LAYER_QK_NORM)
        return convert_llamalike(ckpt, cls, opts)
