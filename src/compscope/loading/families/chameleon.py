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

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .llama import (WINDOW_KEYS, LlamaLike, LlamaLikeOptions, convert_llamalike, input_norm_moved_after, normed_after,
                    switched_norm_hooks)


@register
class Chameleon(LlamaLike):
    name = "chameleon"
    about = ("Chameleon and Anole (Meta's early-fusion models): a LayerNorm on each query and key head with its own "
             "gain and bias; the 30B's norms after the attention (swin_norm)")
    model_types = ("chameleon",)
    architectures = ("ChameleonForConditionalGeneration", "ChameleonModel")
    handled = LlamaLike.handled - WINDOW_KEYS - {"qkv_bias"} | {"swin_norm"}
    ignored = LlamaLike.ignored | {"model_parallel_size", "vq_config", "vocabulary_map", "image_token_id",
                                   "boi_token_id", "eoi_token_id"}  # (the training shards; the image tokenizer)
    runs_as_named = True
    options = LlamaLikeOptions(qk_norm=True, qk_norm_kind="layernorm", qk_gains_per_head=True, qk_norm_bias=True,
                               qk_norm_eps=1e-5)

    hook_points = switched_norm_hooks("swin_norm")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        after = normed_after(ckpt.config, "swin_norm")
        return convert_llamalike(ckpt, cls, input_norm_moved_after(cls.options) if after else cls.options)
