"""Grok-1 (xAI) as llama.cpp runs its GGUF files: Llama's pre-norm layers with an RMSNorm on each attention output
before the residual, logits soft-capped, ``c tanh(s q·k / c)`` (``attn_logit_softcapping`` c, the attention output
multiplier s in place of ``d_head^-1/2``), the token embeddings times ``embedding_multiplier`` and the logits times
``logits_scaling`` (folded into ``W_E`` and ``W_U``; the notes say so). Its norms' gains as stored; its experts are
MLP. No HuggingFace model type names it here (its model is remote code): GGUF files alone are read as it
(``gguf_types``), for the weight-only commands.
"""

from __future__ import annotations

import dataclasses

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import number
from .llama import LlamaLike, LlamaLikeOptions, convert_llamalike


@register
class Grok(LlamaLike):
    name = "grok"
    about = ("Grok-1 (GGUF files, as llama.cpp runs them): a norm on each attention output, soft-capped logits, "
             "embedding and logit multipliers")
    model_types = ()
    gguf_types = ("grok_gguf",)
    handled = LlamaLike.handled | {"attn_logit_softcapping", "attention_output_multiplier", "embedding_multiplier",
                                   "logits_scaling"}
    options = LlamaLikeOptions(post_attn_norm=True)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        """Llama's converter with the soft cap, the logit scale and the two multipliers its config states."""
        cfg, where = ckpt.config, ckpt.source
        scales = {key: number(cfg, where, name, open_low=True) for key, name in (
            ("attn_softcap", "attn_logit_softcapping"), ("attn_scale", "attention_output_multiplier"),
            ("embed_scale", "embedding_multiplier"), ("logit_scale", "logits_scaling"))}
        return convert_llamalike(ckpt, cls, dataclasses.replace(cls.options, **scales))
