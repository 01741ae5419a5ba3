"""Cohere decoders: Command R and Aya (``cohere``), Command R7B and Command A (``cohere2``).

Llama-like with a parallel block (attention and MLP read the same normed residual: for attention,
a pre-norm), LayerNorm without bias (``layer_norm_eps``), rotary on interleaved pairs ``(2i, 2i + 1)``
(Cohere's own ``rotate_half``), the logits scaled by ``logit_scale`` (folded into ``W_U``, which is
the embedding where tied). Command R+ adds a per-head QK LayerNorm with a gain for each head
(``use_qk_norm``). Cohere 2 slides a window on three layers in four (``layer_types``, or
``sliding_window_pattern``, default 4) and rotates only there: its global layers have no rotary.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import MAX_LAYERS, integer, number
from .gemma import _default_layer_types
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike


@register
class Cohere(LlamaLike):
    name = "cohere"
    model_types = ("cohere", "cohere2")
    architectures = ("CohereForCausalLM", "Cohere2ForCausalLM")
    handled = Llama.handled | {"use_qk_norm", "layer_norm_eps", "logit_scale", "sliding_window_pattern",
                               "_sliding_window_pattern"}

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = dict(ckpt.config), ckpt.source
        second = cfg.get("model_type") == "cohere2" or "Cohere2ForCausalLM" in (cfg.get("architectures") or [])
        if second and not cfg.get("layer_types"):  # transformers' default: every 4th layer global
            pattern = integer(cfg, where, "sliding_window_pattern", "_sliding_window_pattern", default=4, high=MAX_LAYERS)
            cfg = _default_layer_types(cfg, where, pattern)
        opts = LlamaLikeOptions(
            norm_kind="layernorm", eps_key="layer_norm_eps", rotary_style="interleaved",
            qk_norm=bool(cfg.get("use_qk_norm")), qk_norm_kind="layernorm", qk_gains_per_head=True,
            logit_scale=number(cfg, where, "logit_scale", default=0.0625, open_low=True),
            nope_layers="full_attention" if second else "",
            notes=("parallel block: the attention and the MLP read the same normed residual",))
        return convert_llamalike(dataclasses.replace(ckpt, config=cfg), cls, opts)
