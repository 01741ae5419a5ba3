"""Molmo 2's language model (AllenAI): OLMo-2's attention in Llama's layers. Grouped K/V heads, q/k/v
biases by ``attention_bias`` (the output projection has none), rotary in the rotate-half layout, and an
RMS QK-norm either per head (``qk_norm_type: qwen3``, Qwen3-based models) or over all of a layer's heads
at once (``olmo``, OLMo-based). ``norm_after`` (the OLMo-based models): no norm before the attention,
the layer's ``input_layernorm`` on its output instead, as OLMo-2 does. Layers outside
``rope_scaling_layers`` turn at the base without the rope scaling: read where the scaling is none or
covers every layer, refused otherwise.

The embedding holds ``additional_vocab_size`` rows after the vocabulary (image and frame marker tokens
the LM head does not predict): ``W_E`` is read over the vocabulary alone, the tokens ``W_U`` scores.
Files (as released, and as transformers saves them) keep the original names, read as the loaded
model's: ``model.transformer.blocks.{i}`` (``att_proj``, rows ``[q | k | v]``; ``attn_out``;
``attn_norm``, ``ff_norm``), ``wte.embedding`` and ``wte.new_embedding``, ``ln_f``.
"""

from __future__ import annotations

import dataclasses

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from ...errors import UnsupportedModelError
from . import register
from .base import integer
from .llama import (WINDOW_KEYS, LlamaLike, LlamaLikeOptions, convert_llamalike, input_norm_moved_after, normed_after,
                    switched_norm_hooks)

_LM = "model.language_model."
_MARKERS = "model.transformer.wte.new_embedding"  # (the files' rows after the vocabulary's)


@register
class Molmo2Text(LlamaLike):
    name = "molmo2"
    about = ("Molmo 2's language model (AllenAI): OLMo-2's attention, QK-norm per head or over a layer, norms "
             "before or after the attention")
    model_types = ("molmo2_text",)
    architectures = ()
    handled = LlamaLike.handled - WINDOW_KEYS - {"qkv_bias"} | {"qk_norm_type", "norm_after", "rope_scaling_layers",
                                                            "additional_vocab_size"}
    accept = {**LlamaLike.accept, "qk_norm_type": lambda v: v in (None, "qwen3", "olmo")}
    saved_names = ((r"^model\.transformer\.blocks\.", _LM + "layers."),
                   (r"^model\.transformer\.ln_f\.", _LM + "norm."),
                   (r"^model\.transformer\.wte\.embedding$", _LM + "embed_tokens.weight"),
                   (r"^(model\.language_model\.layers\.\d+\.)self_attn\.att_proj\.", r"\1self_attn.qkv_proj."),
                   (r"^(model\.language_model\.layers\.\d+\.)self_attn\.attn_out\.", r"\1self_attn.o_proj."),
                   (r"^(model\.language_model\.layers\.\d+\.)attn_norm\.", r"\1input_layernorm."),
                   (r"^(model\.language_model\.layers\.\d+\.)ff_norm\.", r"\1post_attention_layernorm."))

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("attention_bias") or False), False  # (o_proj built without one)

    hook_points = switched_norm_hooks("norm_after")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        n = integer(cfg, where, "num_hidden_layers")
        vocab = integer(cfg, where, "vocab_size")
        scaled = cfg.get("rope_scaling_layers")
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        if (scaled is not None and sorted(scaled) != list(range(n)) and isinstance(rope, dict)
                and (rope.get("rope_type") or rope.get("type") or "default") != "default"):
            kind = rope.get("rope_type") or rope.get("type")
            raise UnsupportedModelError(f"{where}: rope_scaling_layers = {scaled!r}: the layers outside it turn "
                                        f"without the {kind} rope scaling the others take, which compscope's "
                                        "canonical form (one rotary map per model) does not hold")
        olmo = cfg.get("qk_norm_type") == "olmo"
        opts = LlamaLikeOptions(qk_norm=True, qk_norm_scope="layer" if olmo else "head",
                                fused_qkv=any(".self_attn.qkv_proj." in k for k in ts.names()))
        if normed_after(cfg, "norm_after"):
            opts = input_norm_moved_after(opts)
        name = next((f"{p}embed_tokens.weight" for p in (_LM, "model.", "") if f"{p}embed_tokens.weight" in ts), None)
        extra = integer(cfg, where, "additional_vocab_size", default=0, low=0)
        if name is not None and (extra or _MARKERS in ts):  # the table's first vocab_size rows: the loaded model
            # holds all in one; files as two, wte.embedding and new_embedding, as released cut after the
            # vocabulary (transformers 5 saves them cut in half), so read joined
            def text_rows(name=name):
                parts = [ts.take(name)] + ([ts.take(_MARKERS)] if _MARKERS in ts else [])
                if any(t.ndim != 2 or t.shape[1] != parts[0].shape[1] for t in parts):
                    raise UnsupportedModelError(f"{ts.origin(name)}: the embedding's parts have shapes "
                                                f"{[tuple(t.shape) for t in parts]}: expected (rows, d_model) each")
                whole = torch.cat(parts)
                if whole.shape[0] != vocab + extra:
                    raise UnsupportedModelError(f"{ts.origin(name)}: the embedding has {whole.shape[0]} rows, expected "
                                                f"vocab_size + additional_vocab_size = {vocab} + {extra}")
                return whole[:vocab]
            ckpt = dataclasses.replace(ckpt, tensors=ts.derived({name: (text_rows, name)}, hidden=(_MARKERS,)))
        hw = convert_llamalike(ckpt, cls, opts)
        if not extra:
            return hw
        return hw.replace(note=f"W_E is the embedding of the {vocab} vocabulary tokens the LM head scores: the "
                               f"{extra} image and frame marker tokens after them (additional_vocab_size) not read")
