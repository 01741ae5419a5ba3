"""LFM3 (Liquid AI): LFM2's short-convolution layers with attention layers among them, some global
and some sliding (as ``layer_types`` lists them: ``full_attention``, ``sliding_attention``,
``conv``; transformers' default: layer ``i`` global where ``i % 4 == 2``, sliding where ``i % 4 == 0``
from layer 4, the rest convolutions).

compscope reads the attention layers alone, in order (its layer ``k`` is the model's k-th attention
layer), the convolution layers being other writers to the residual. The attention is Qwen3's under
LFM2's norm names: an RMSNorm ``operator_norm`` before it (eps ``norm_eps``), per-head QK-norm
(``q_norm``, ``k_norm``) before the rotary map, and, where ``use_sandwich_norm`` is on (the default),
an RMSNorm ``post_operator_norm`` on its output before the residual (read as Gemma's post-attention
norm). Each head's output is multiplied by ``sigmoid(g_h · x)`` of the layer's input, one scalar per
head from ``g_proj`` (``gate_proj`` in the files; ``use_attention_gate``, default on): held as ``W_G`` with that row repeated over
the head's dims. Each layer type turns at its own rope settings: the sliding layers the ordinary map,
the global ones (by default) the proportional one, pairs across the whole head of which the first
``partial_rotary_factor`` turn and the rest stay unturned.
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ...errors import UnsupportedModelError
from ..checkpoint import Checkpoint
from . import register
from .base import MAX_HEADS, YARN_TYPES, attending, integer, layer_hooks, prefix_of, rope_accept_of, rope_settings
from .lfm2 import _NOT_ATTENTION
from .llama import (PREFIXES, Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, listed_layer_types,
                    with_output_gates)

#: the layer types of LFM3's ``layer_types``
TYPES = ("full_attention", "sliding_attention", "conv")
#: transformers' rope settings where the config states none
DEFAULT_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                "full_attention": {"rope_type": "proportional", "rope_theta": 1_000_000.0, "partial_rotary_factor": 0.5}}
_KINDS = YARN_TYPES + ("proportional",)


@register
class Lfm3(LlamaLike):
    name = "lfm3"
    about = ("LFM3 (Liquid AI): convolution layers with global and sliding attention layers among them, QK-norm, "
             "a sigmoid gate per head, proportional rotary")
    model_types = ("lfm3",)
    architectures = ("Lfm3ForCausalLM", "Lfm3Model")
    handled = (Llama.handled - {"rms_norm_eps", "use_sliding_window", "max_window_layers"}) | {
        "norm_eps", "use_sandwich_norm", "use_attention_gate"}
    ignored = Llama.ignored | _NOT_ATTENTION
    accept = {"rope_parameters": rope_accept_of(_KINDS), "rope_scaling": lambda v: v is None}
    options = LlamaLikeOptions(qk_norm=True, input_norm_at="operator_norm", eps_key="norm_eps",
                               final_norm="embedding_norm", rope_kinds=_KINDS)
    saved_names = ((r"\.self_attn\.gate_proj\.weight$", ".self_attn.g_proj.weight"),)  # (its files' name for the gate)
    hook_points = layer_hooks("operator_norm", "post_operator_norm", attending="self_attn")
    other_layers = "short-convolution layers"

    @classmethod
    def types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """Per model layer, as ``layer_types`` lists it, else transformers' default."""
        listed = config.get("layer_types")
        if listed is None:
            listed = ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0 else "conv"
                      for i in range(n_layers)]
        if not isinstance(listed, list) or len(listed) != n_layers or any(t not in TYPES for t in listed):
            raise UnsupportedModelError(f"{where}: config key 'layer_types' = {listed!r}: expected one of "
                                        f"{', '.join(TYPES)} for each of the {n_layers} layers")
        return listed

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        layers = [i for i, t in enumerate(cls.types(config, n_layers, where)) if t != "conv"]
        return attending(layers, n_layers, where, "a convolution")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        types = [t if t != "conv" else "full_attention" for t in cls.types(config, n_layers, where)]  # (conv: unread)
        return listed_layer_types({**config, "layer_types": types}, n_layers, where)  # (a window where any slides)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = dict(ckpt.config), ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        if cfg.get("rope_parameters") is None:
            cfg["rope_parameters"] = DEFAULT_ROPE
        sandwich = cfg.get("use_sandwich_norm", True)
        opts = dataclasses.replace(cls.options, post_attn_norm=bool(sandwich), post_attn_norm_at="post_operator_norm")
        hw = convert_llamalike(dataclasses.replace(ckpt, config=cfg), cls, opts)
        n = integer(cfg, where, "num_hidden_layers")
        kinds = {t: rope_settings(cfg, t).get("rope_type", "default") for t in set(cls.layer_types(cfg, n, where))}
        which = [t.split("_")[0] for t, k in sorted(kinds.items()) if k == "proportional"]
        if which:
            hw = hw.replace(note=f"proportional rotary on the {' and '.join(which)} layers: pairs across the whole head, "
                                 "the first partial_rotary_factor of them turning, the rest unturned (frequency 0)")
        if not cfg.get("use_attention_gate", True):
            return hw
        d, H = integer(cfg, where, "hidden_size"), integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
        layers = cls.attention_layers(cfg, integer(cfg, where, "num_hidden_layers"), where)
        at = prefix_of(ts, f"layers.{layers[0]}.self_attn.g_proj.weight", PREFIXES, "model.")
        gates = [ts.take(f"{at}layers.{i}.self_attn.g_proj.weight", (H, d))[:, None, :].expand(H, hw.d_head, d)
                 .contiguous() for i in layers]
        return with_output_gates(hw, gates, per="per-head")
