"""IBM Granite decoders (Granite 3.x dense: ``granite``; their mixture-of-experts siblings:
``granitemoe``, ``granitemoeshared``; the language models of Granite 4 Vision and Granite-Docling,
whose scalars default to values of its own): Llama-like with four scalars in place of Llama's
implicit ones, each folded into the weights where it acts.

- ``embedding_multiplier`` ``e``: the residual starts at ``e · W_E[t]`` (into ``W_E``).
- ``attention_multiplier`` ``a``: the logit is ``a · q·k``, in place of ``d_head^-1/2``
  (``HeadWeights.attn_scale``).
- ``residual_multiplier`` ``m``: each layer adds ``m`` times its attention output to the residual
  (into ``W_O`` and ``b_O``; :meth:`Family.residual_scale` tells the data runner).
- ``logits_scaling`` ``s``: logits are ``W_U x / s`` (``1/s`` into ``W_U``).

The experts (and the shared expert) are MLP: not read.

Granite 4's hybrids (``granitemoehybrid``: Granite-4.0-H) put Mamba layers between the attention
layers: compscope reads the attention layers alone, in order (its layer ``k`` is the model's k-th
attention layer; the card's notes say which), the Mamba layers being other writers to the
residual, as MLPs are. Their attention has no rotary unless ``position_embedding_type`` is
``rope`` (NoPE: frequency 0 on every layer).

Granite with sliding windows (``granite_swa``, and its MoE sibling ``granitemoe_swa``) adds a sink logit per head, windows on the layers
its types mark sliding, and a rotary base per layer (0: none). HyperCLOVA X (``hyperclovax``) has
Granite's scalars, logits multiplied by ``logits_scaling``, and a norm on each attention output.
"""

from __future__ import annotations

import dataclasses

from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from ...errors import LoadError, UnsupportedModelError
from . import register
from .base import MAMBA2_SETTINGS, inv_freq, layer_hooks, number
from .llama import Llama, LlamaLike, LlamaLikeOptions, attention_layer_hooks, convert_llamalike, listed_layer_types

_SCALARS = ("embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling")
#: transformers' defaults of the scalars where they are not 1, by model type
_DEFAULT_SCALARS = {"granite_docling_text": {"embedding_multiplier": 12.0, "attention_multiplier": 0.015625,
                                             "residual_multiplier": 0.263, "logits_scaling": 4.0}}


@register
class Granite(LlamaLike):
    name = "granite"
    about = ("IBM Granite 3.x, dense and MoE, and the language models of Granite 4 Vision and Granite-Docling: four "
             "scalar multipliers folded where they act")
    model_types = ("granite", "granitemoe", "granitemoeshared",
                   "granite4_vision_text",  # (Granite 4 Vision's language model: Granite's; images add to its residual)
                   "granite_docling_text")  # (Granite-Docling's: Granite's, with scalars of its own by default)
    architectures = ("GraniteForCausalLM", "GraniteModel", "GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM")
    handled = Llama.handled | frozenset(_SCALARS)
    ignored = Llama.ignored | {"shared_intermediate_size"}
    accept = {**LlamaLike.accept, "position_embedding_type": lambda v: v == "rope"}  # transformers 4's MoE configs
    #: ``position_embedding_type`` where the config has none, as transformers builds the model
    positions_default: ClassVar[str | None] = "rope"

    @classmethod
    def scalar(cls, config: dict, where: str, key: str) -> float:
        """One of the four scalars, transformers' default where the config has none (1; Granite-Docling's own)."""
        default = _DEFAULT_SCALARS.get(config.get("model_type"), {}).get(key, 1.0)
        return number(config, where, key, default=default, open_low=True)

    @classmethod
    def residual_scale(cls, config: dict, where: str = "config") -> float:
        return cls.scalar(config, where, "residual_multiplier")

    @classmethod
    def _scaled_options(cls, cfg: dict, where: str) -> LlamaLikeOptions:
        """The family's options with the embedding, attention and logit scalars, and rotary or not."""
        e, a, s = (cls.scalar(cfg, where, k)
                   for k in ("embedding_multiplier", "attention_multiplier", "logits_scaling"))
        rope = cfg.get("position_embedding_type", cls.positions_default) == "rope"
        return dataclasses.replace(cls.options, embed_scale=e, attn_scale=a, logit_scale=1.0 / s,
                                   nope_layers="" if rope else "all")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        return convert_llamalike(ckpt, cls, cls._scaled_options(ckpt.config, ckpt.source))


#: a hybrid's layer types, as transformers 4 and 5 spell them
_ATTENTION, _MAMBA = ("attention", "full_attention"), ("mamba", "linear_attention")


@register
class GraniteHybrid(Granite):
    name = "granite_hybrid"
    about = "IBM Granite 4: Mamba-2 hybrids"
    model_types = ("granitemoehybrid",)
    architectures = ("GraniteMoeHybridForCausalLM", "GraniteMoeHybridModel")
    handled = Granite.handled | {"layers_block_type", "partial_rotary_factor"}  # (transformers 4's name of layer_types;
    # a GGUF file of Bamba, which llama.cpp writes as this architecture, rotates half of each head)
    ignored = Granite.ignored | MAMBA2_SETTINGS | {"init_method"}  # (the last: how the weights were initialised)
    accept = {**Granite.accept, "position_embedding_type": lambda v: v in (None, "rope", "nope"),
              "normalization_function": lambda v: v == "rmsnorm"}
    positions_default = None  # transformers: no rotary unless the config says 'rope'
    hook_points = attention_layer_hooks  # (what is added: times the residual multiplier)

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        key = "layer_types" if config.get("layer_types") is not None else "layers_block_type"
        types = config.get(key)
        if types is None:
            raise UnsupportedModelError(f"{where}: config key 'layer_types' is missing: transformers would build every "
                                        "layer as a Mamba layer, and there would be no attention to read")
        if not isinstance(types, list) or len(types) != n_layers or any(t not in _ATTENTION + _MAMBA for t in types):
            raise LoadError(f"{where}: config key {key!r} = {types!r} is not one of {_ATTENTION + _MAMBA} per layer "
                            f"({n_layers})")
        layers = [i for i, t in enumerate(types) if t in _ATTENTION]
        if not layers:
            raise UnsupportedModelError(f"{where}: {key} has no attention layer (all {n_layers} are Mamba layers)")
        return layers

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return ["full_attention"] * n_layers  # no windows: transformers reads no sliding_window for these


@register
class GraniteSWA(Granite):
    """Granite with sliding windows and attention sinks (``granite_swa``): Granite's four scalars, a
    learned sink logit per head (as gpt-oss's), a window on the layers ``layer_types`` marks sliding
    (transformers' default: every layer but each fourth from layer 0), and a rotary base per layer
    (``layer_rope_theta``; 0 on a layer without rotary), the config's base on every layer where
    none is listed."""

    name = "granite_swa"
    about = ("Granite with sliding windows, a sink logit per head, a rotary base per layer (0: NoPE); its MoE "
             "sibling (Granite SWASH)")
    model_types = ("granite_swa", "granitemoe_swa")  # (GraniteMoeSWA: the same attention, MoE MLPs)
    architectures = ("GraniteSWAForCausalLM", "GraniteSWAModel", "GraniteMoeSWAForCausalLM", "GraniteMoeSWAModel")
    handled = Granite.handled | {"layer_rope_theta"}
    accept = LlamaLike.accept  # (rotary always: no position_embedding_type)
    positions_default = "rope"

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        listed = listed_layer_types(config, n_layers, where)
        if listed is not None:
            return listed
        return ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n_layers)]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        hw = convert_llamalike(ckpt, cls, dataclasses.replace(cls._scaled_options(cfg, where), sinks=True))
        thetas = cfg.get("layer_rope_theta")
        if thetas is None:
            return hw
        base = lambda t: not isinstance(t, bool) and isinstance(t, (int, float)) and (t == 0 or t > 1)  # noqa: E731
        if not isinstance(thetas, list) or len(thetas) != hw.n_layers or not all(base(t) for t in thetas):
            raise LoadError(f"{where}: config key 'layer_rope_theta' = {thetas!r} is not a rotary base (> 1, or 0 for "
                            f"none) per layer ({hw.n_layers})")
        dim = hw.rotary.dim
        freqs = torch.stack([torch.zeros(dim // 2, dtype=torch.float64) if t == 0 else
                             inv_freq(dim, {"rope_theta": float(t)}, where) for t in thetas])
        freqs = freqs.to(hw.rotary.inv_freq.dtype)
        plain = [i for i, t in enumerate(thetas) if t == 0]
        nope = f"; none (NoPE) on layers {', '.join(map(str, plain))}" if plain else ""
        notes = (f"rotary base per layer (layer_rope_theta){nope}",)
        return dataclasses.replace(hw, rotary=dataclasses.replace(hw.rotary, inv_freq=freqs),
                                   meta=dataclasses.replace(hw.meta, notes=hw.meta.notes + notes))


@register
class HyperClovaX(Granite):
    """HyperCLOVA X (NAVER): Granite's scalars, except that the logits are *multiplied* by
    ``logits_scaling``, and an RMSNorm on each layer's attention output before the residual
    multiplier (``post_norm1``, where ``use_post_norm``: Peri-LN), which holds that multiplier in
    its gain."""

    name = "hyperclovax"
    about = "HyperCLOVA X (NAVER): Granite's scalars, a norm on each attention output (Peri-LN)"
    model_types = ("hyperclovax",)
    architectures = ("HyperCLOVAXForCausalLM", "HyperCLOVAXModel")
    handled = Granite.handled | {"use_post_norm"}
    accept = LlamaLike.accept
    positions_default = "rope"
    hook_points = layer_hooks("input_layernorm", "post_norm1")  # (the identity where there is no post norm)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        opts = cls._scaled_options(cfg, where)
        s = cls.scalar(cfg, where, "logits_scaling")
        post = cfg.get("use_post_norm", True) is not False  # transformers' default: on
        opts = dataclasses.replace(opts, logit_scale=s, post_attn_norm=post, post_attn_norm_at="post_norm1")
        return convert_llamalike(ckpt, cls, opts)
