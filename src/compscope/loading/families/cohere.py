"""Cohere decoders: Command R and Aya (``cohere``), Command R7B and Command A (``cohere2``).

Llama-like with a parallel block (attention and MLP read the same normed residual: for attention,
a pre-norm), LayerNorm without bias (``layer_norm_eps``), rotary on interleaved pairs ``(2i, 2i + 1)``
(Cohere's own ``rotate_half``), the logits scaled by ``logit_scale`` (folded into ``W_U``, which is
the embedding where tied). Command R+ adds a per-head QK LayerNorm with a gain for each head
(``use_qk_norm``). Cohere 2 slides a window on three layers in four (``layer_types``, or
``sliding_window_pattern``, default 4) and rotates only there: its global layers have no rotary.
Cohere 2 MoE (``cohere2_moe``): Cohere 2's attention; RMSNorms where the config sets ``rms_norm_eps``
(LayerNorms otherwise); its first layers dense (``mlp_layer_types``), and with
``prefix_dense_sliding_window_pattern`` 1 those are global layers that rotate all the same.
Cohere Compass (``cohere_compass_text``, the North models' language model): Cohere 2's block with
rotary settings per layer type, in the rotate-half layout.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from ...errors import LoadError
from .base import MAX_LAYERS, integer, number
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, every_nth_global, listed_layer_types


def _second(config: dict) -> bool:
    return config.get("model_type") == "cohere2" or "Cohere2ForCausalLM" in (config.get("architectures") or [])


@register
class Cohere(LlamaLike):
    name = "cohere"
    about = "Command R, R+ and Aya (cohere), Command R7B and A (cohere2): parallel block, interleaved rotary"
    model_types = ("cohere", "cohere2")
    architectures = ("CohereForCausalLM", "Cohere2ForCausalLM")
    handled = Llama.handled | {"use_qk_norm", "layer_norm_eps", "logit_scale", "sliding_window_pattern",
                               "_sliding_window_pattern"}

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Cohere 2's as listed, else transformers' default: every ``sliding_window_pattern``-th layer (4) global."""
        if _second(config):
            return every_nth_global(config, n_layers, where, 4)
        return super().layer_types(config, n_layers, where)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        second = _second(cfg)
        opts = LlamaLikeOptions(
            norm_kind="layernorm", eps_key="layer_norm_eps", rotary_style="interleaved",
            qk_norm=bool(cfg.get("use_qk_norm")), qk_norm_kind="layernorm", qk_gains_per_head=True,
            logit_scale=number(cfg, where, "logit_scale", default=0.0625, open_low=True),
            nope_layers="full_attention" if second else "",
            notes=("parallel block: the attention and the MLP read the same normed residual",))
        return convert_llamalike(ckpt, cls, opts)


@register
class Cohere2Moe(LlamaLike):
    name = "cohere2_moe"
    about = ("Cohere 2 MoE: Cohere 2's attention, RMS or LayerNorms, dense first layers that rotate where its "
             "prefix pattern makes them global")
    model_types = ("cohere2_moe",)
    architectures = ("Cohere2MoeForCausalLM",)
    handled = Llama.handled | {"layer_norm_eps", "logit_scale", "sliding_window_pattern", "mlp_layer_types",
                               "first_k_dense_replace", "prefix_dense_sliding_window_pattern"}
    ignored = LlamaLike.ignored | {"num_shared_experts", "shared_expert_combination_strategy", "expert_selection_fn",
                                   "prefix_dense_intermediate_size"}

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else transformers' rule: the ``first_k_dense_replace`` dense layers global every
        ``prefix_dense_sliding_window_pattern``-th (1: all), the rest every ``sliding_window_pattern``-th (4)."""
        listed = listed_layer_types(config, n_layers, where)
        if listed is not None:
            return listed
        k = integer(config, where, "first_k_dense_replace", default=0, low=0, high=n_layers)
        prefix = integer(config, where, "prefix_dense_sliding_window_pattern", default=1, high=MAX_LAYERS)
        rest = integer(config, where, "sliding_window_pattern", default=4, high=MAX_LAYERS)
        # (layer i's place in its part, counted from 1, and the part's pattern)
        place = [(i + 1, prefix) for i in range(k)] + [(i + 1, rest) for i in range(n_layers - k)]
        types = ["full_attention" if j % m == 0 else "sliding_attention" for j, m in place]
        return listed_layer_types({**config, "layer_types": types}, n_layers, where)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        n = integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)
        types = cls.layer_types(cfg, n, where)
        dense = _dense_layers(cfg, n, where)
        forced = integer(cfg, where, "prefix_dense_sliding_window_pattern", default=1, high=MAX_LAYERS) == 1
        plain = tuple(i for i, t in enumerate(types) if t == "full_attention" and not (forced and i in dense))
        rms = cfg.get("rms_norm_eps") is not None
        opts = LlamaLikeOptions(
            norm_kind="rmsnorm" if rms else "layernorm", eps_key="rms_norm_eps" if rms else "layer_norm_eps",
            rotary_style="interleaved", logit_scale=number(cfg, where, "logit_scale", default=0.0625, open_low=True),
            nope_layers=plain, notes=("parallel block: the attention and the MLP read the same normed residual",))
        return convert_llamalike(ckpt, cls, opts)


def _dense_layers(config: dict, n_layers: int, where: str) -> set[int]:
    """The layers whose MLP is dense (``mlp_layer_types``; else the first ``first_k_dense_replace``)."""
    kinds = config.get("mlp_layer_types")
    if kinds is None:
        return set(range(integer(config, where, "first_k_dense_replace", default=0, low=0, high=n_layers)))
    if not isinstance(kinds, list) or len(kinds) != n_layers or not set(kinds) <= {"dense", "sparse"}:
        raise LoadError(f"{where}: config key 'mlp_layer_types' = {kinds!r} is not 'dense' or 'sparse' for each of the "
                        f"{n_layers} layers")
    return {i for i, k in enumerate(kinds) if k == "dense"}


def _compass_rope(config: dict, types: list[str], where: str) -> dict:
    """Cohere Compass's ``rope_parameters``: an entry per layer type, None for a type without rotary."""
    rope = config.get("rope_parameters")
    missing = sorted({t for t in types if not isinstance(rope, dict) or t not in rope})
    if missing:
        raise LoadError(f"{where}: rope_parameters = {rope!r} has no entry for the {', '.join(missing)} layers (the model "
                        "reads one per layer type; null for a type without rotary)")
    bad = sorted(t for t in set(types) if rope[t] is not None and not isinstance(rope[t], dict))
    if bad:
        raise LoadError(f"{where}: rope_parameters entry for {bad[0]} layers = {rope[bad[0]]!r} is not rope settings")
    return rope


@register
class CohereCompass(LlamaLike):
    """Cohere Compass's language model (Cohere's North models): Cohere 2's parallel block and biasless
    LayerNorms, rotary in the rotate-half layout with settings per layer type (a null entry: that type
    has no rotary), multimodal sections that on text turn every pair by the token's position (read as
    the ordinary map); every layer global unless ``layer_types`` says otherwise; the logits times
    ``logit_scale`` where one is set."""

    name = "cohere_compass"
    about = "Cohere Compass (North): Cohere 2's parallel block, rotary per layer type, none where its entry is null"
    model_types = ("cohere_compass_text",)
    architectures = ("CohereCompassForCausalLM", "CohereCompassTextModel")
    handled = Llama.handled - {"max_window_layers", "use_sliding_window"} | {"layer_norm_eps", "logit_scale"}
    ignored = LlamaLike.ignored | {"pooling"}  # (how a sentence embedding pools: after the layers)
    accept = {"rope_parameters": lambda v: isinstance(v, dict) and all(
        s is None or (isinstance(s, dict) and (s.get("rope_type") or "default") == "default")
        for s in v.values() if not isinstance(s, (str, int, float))), "rope_scaling": lambda v: v is None}

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else every layer global (transformers' default)."""
        listed = listed_layer_types(config, n_layers, where)
        return listed if listed is not None else ["full_attention"] * n_layers

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        cls.check_config(cfg, where)
        n = integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)
        types = cls.layer_types(cfg, n, where)
        rope = _compass_rope(cfg, types, where)
        plain = tuple(i for i, t in enumerate(types) if rope[t] is None)
        turning = {t: s for t, s in rope.items() if isinstance(s, dict)}
        filler = next(iter(turning.values()), {"rope_type": "default", "rope_theta": 10_000.0})  # (NoPE: turned by 0)
        config = {**cfg, "rope_parameters": {t: turning.get(t, filler) for t in set(types)}}
        opts = LlamaLikeOptions(
            norm_kind="layernorm", eps_key="layer_norm_eps",
            logit_scale=1.0 if cfg.get("logit_scale") is None else number(cfg, where, "logit_scale", open_low=True),
            nope_layers=plain, notes=("parallel block: the attention and the MLP read the same normed residual",))
        return convert_llamalike(dataclasses.replace(ckpt, config=config), cls, opts)
