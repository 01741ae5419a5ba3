"""Apertus (Swiss AI): Llama-like with Qwen3's QK-norm (an RMSNorm on each query and key head
before the rotary map) and its own norm names: ``attention_layernorm`` before the attention (and
``feedforward_layernorm`` before the MLP, not in the attention); no attention biases unless
``attention_bias``. Apertus 1.5 (:class:`Apertus1p5`): the same attention, its head possibly pruned."""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ..checkpoint import Checkpoint
from . import register
from .base import integer, layer_hooks
from .llama import LlamaLike, LlamaLikeOptions, convert_llamalike


@register
class Apertus(LlamaLike):
    name = "apertus"
    about = "Apertus (Swiss AI): per-head QK-norm under its own norm names"
    model_types = ("apertus",)
    architectures = ("ApertusForCausalLM", "ApertusModel")
    options = LlamaLikeOptions(qk_norm=True, input_norm_at="attention_layernorm")
    hook_points = layer_hooks("attention_layernorm", "self_attn")


#: Apertus 1.5's rotary settings where its config states none (transformers' default)
APERTUS_1P5_ROPE = {"rope_type": "llama3", "rope_theta": 12_000_000.0, "factor": 8.0,
                    "original_max_position_embeddings": 8192, "low_freq_factor": 1.0, "high_freq_factor": 4.0}


@register
class Apertus1p5(Apertus):
    """Apertus 1.5's language model: Apertus's attention over a vocabulary extended with visual and
    audio codes. Its LM head may be pruned to the text tokens (``output_vocab_size`` rows, the first
    ids of the vocabulary), narrower than the embedding: then no ``W_U`` is read (the token-space
    scores pair each token's embedding with its own logit, which the pruned head lacks for most of
    the vocabulary), and the notes say so."""

    name = "apertus1p5"
    about = "Apertus 1.5 (Swiss AI): Apertus's attention; a head pruned to the text tokens not read as W_U"
    model_types = ("apertus1p5_text",)
    architectures = ("Apertus1p5TextForCausalLM", "Apertus1p5TextModel")
    handled = Apertus.handled | {"output_vocab_size"}

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = dict(ckpt.config), ckpt.source
        if cfg.get("rope_parameters") is None and cfg.get("rope_theta") is None:
            cfg["rope_parameters"] = APERTUS_1P5_ROPE
        vocab = integer(cfg, where, "vocab_size")
        kept = cfg.get("output_vocab_size")
        if kept is None or integer(cfg, where, "output_vocab_size", high=vocab) == vocab:
            return convert_llamalike(dataclasses.replace(ckpt, config=cfg), cls, cls.options)
        heads = [n for n in ("lm_head.weight", "model.lm_head.weight", "language_model.lm_head.weight")
                 if n in ckpt.tensors]
        for name in heads:
            ckpt.tensors.leave(name)  # (not loaded: vocabulary-sized)
        tensors = ckpt.tensors.derived({}, hidden=tuple(heads))
        hw = convert_llamalike(dataclasses.replace(ckpt, config={**cfg, "tie_word_embeddings": False}, tensors=tensors),
                               cls, cls.options)
        pruned = (f"no unembedding read: the LM head is pruned to the first {kept} of the {vocab} tokens "
                  "(output_vocab_size), so no token's embedding and logit pair up over the whole vocabulary")
        notes = tuple(n for n in hw.meta.notes if not n.startswith("no unembedding")) + (pruned,)
        return hw.replace(meta=dataclasses.replace(hw.meta, notes=notes))
