"""Chameleon (Meta's early-fusion models, and Anole): Llama's layers over one vocabulary of text and
image (VQ-VAE) tokens, with a LayerNorm on each query and key head before the rotary map: statistics
over the head's own dims, then that head's own gain and bias (``q_norm.weight`` and ``.bias`` of
shape ``(heads, d_head)``), at epsilon 1e-5 whatever ``rms_norm_eps`` says. One switch
(``attention_bias``) for biases on all four projections. ``swin_norm`` (Chameleon 30B's layers):
no norm before the attention, the layer's ``input_layernorm`` on its output instead, as OLMo-2 does.
Run as the class its config names (``ChameleonForConditionalGeneration``), on text alone; the VQ-VAE
that turns images into tokens is not read.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .llama import LlamaLike, LlamaLikeOptions, convert_llamalike


@register
class Chameleon(LlamaLike):
    name = "chameleon"
    about = ("Chameleon and Anole (Meta's early-fusion models): a LayerNorm on each query and key head with its own "
             "gain and bias; the 30B's norms after the attention (swin_norm)")
    model_types = ("chameleon",)
    architectures = ("ChameleonForConditionalGeneration", "ChameleonModel")
    handled = LlamaLike.handled - {"qkv_bias", "sliding_window", "layer_types", "max_window_layers",
                                   "use_sliding_window"} | {"swin_norm"}
    ignored = LlamaLike.ignored | {"model_parallel_size", "vq_config", "vocabulary_map", "image_token_id",
                                   "boi_token_id", "eoi_token_id"}  # (the training shards; the image tokenizer)
    runs_as_named = True
    options = LlamaLikeOptions(qk_norm=True, qk_norm_kind="layernorm", qk_gains_per_head=True, qk_norm_bias=True,
                               qk_norm_eps=1e-5)

    @classmethod
    def swin(cls, config) -> bool:
        """Whether the layers normalise the attention's output rather than its input (``swin_norm``)."""
        return bool(config.get("swin_norm") if isinstance(config, dict) else getattr(config, "swin_norm", False))

    @classmethod
    def hook_points(cls, model) -> list[tuple]:
        """Per layer: ``input_layernorm`` reads the residual and ``self_attn`` returns what is added; with
        ``swin_norm``, ``self_attn`` reads the residual and ``input_layernorm`` returns what is added."""
        base = cls.base_model(model)
        if cls.swin(base.config):
            return [(b.self_attn, b.input_layernorm) for b in base.layers]
        return [(b.input_layernorm, b.self_attn) for b in base.layers]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        opts = cls.options
        if cls.swin(ckpt.config):
            opts = dataclasses.replace(opts, input_norm=False, post_attn_norm=True, post_attn_norm_at="input_layernorm")
        return convert_llamalike(ckpt, cls, opts)
