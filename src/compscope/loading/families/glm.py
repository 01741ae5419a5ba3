"""GLM decoders: GLM-4-9B and GLM-Edge (``glm``), GLM-4-0414 and GLM-Z1 (``glm4``), the language
models of GLM-4.1V and GLM-OCR (``glm4v_text``, ``glm_ocr_text``), GLM-4.5, 4.6 and 4.7
(``glm4_moe``), and Sarvam's and BharatGen's Param2 MoE models, built as GLM-4.5 (``sarvam_moe``,
``param2moe``).

Llama-like, with rotary on part of each head (``partial_rotary_factor``, transformers' default
one half) turning interleaved pairs ``(2i, 2i + 1)`` of the rotated dims, as GPT-J's; q, k and v
biased by ``attention_bias`` (default on), the output projection never. GLM-4-0414 adds an RMSNorm
on the attention output before it enters the residual (``post_self_attn_layernorm``, read as
Gemma's post-attention norm) and one on the MLP's (not in the attention). GLM-4.5 and its successors
are Llama's layout again: rotary on the first half of each head in Llama's rotate-half pairing, q, k
and v biased by ``attention_bias`` (default off), a per-head QK RMSNorm before the rotary map where
``use_qk_norm`` is on (as Qwen3's); their experts and the multi-token-prediction layer stored after
the last (``num_nextn_predict_layers``, which transformers does not build) are not attention that
composes, and are not read.
"""

from __future__ import annotations

import dataclasses

from torch import Tensor

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import layer_hooks
from .llama import Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, no_unembedding

#: GLM-4.5's MoE MLP and multi-token-prediction settings: the attention does not depend on them
GLM45_MOE = frozenset("first_k_dense_replace moe_intermediate_size n_group n_routed_experts n_shared_experts "
                      "norm_topk_prob num_experts_per_tok num_nextn_predict_layers num_mtp_layers routed_scaling_factor "
                      "topk_group".split())


#: where GLM-Image's head sits: in its own model, and in the whole model
_HEADS = ("lm_head.weight", "model.lm_head.weight", "language_model.lm_head.weight")


@register
class Glm(LlamaLike):
    name = "glm"
    about = "GLM-4-9B, GLM-Edge: rotary on interleaved pairs of half of each head"
    model_types = ("glm",)
    architectures = ("GlmForCausalLM", "GlmModel")
    handled = Llama.handled | {"partial_rotary_factor"}
    options = LlamaLikeOptions(rotary_style="interleaved", partial_rotary=0.5)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        on = config.get("attention_bias")
        return (True if on is None else bool(on)), False  # transformers' default on; o_proj has none


@register
class Glm4(Glm):
    name = "glm4"
    about = "GLM-4-0414, GLM-Z1: GLM's attention with a norm on its output"
    model_types = ("glm4",)
    architectures = ("Glm4ForCausalLM", "Glm4Model")
    options = dataclasses.replace(Glm.options, post_attn_norm=True, post_attn_norm_at="post_self_attn_layernorm")
    hook_points = layer_hooks("input_layernorm", "post_self_attn_layernorm")


@register
class Glm4vText(Glm4):
    """GLM-4.1V's and GLM-OCR's language models: GLM-4-0414's layers (interleaved rotary on part of each
    head, a norm on the attention output), q/k/v biased in GLM-4.1V's whatever ``attention_bias``
    says and nothing biased in GLM-OCR's, all of each head rotated where the rope settings state no
    share (transformers' default for these), and multimodal rotary sections (``mrope_section``) that
    on text turn every pair by the token's position: the ordinary map, read as such."""

    name = "glm4v_text"
    about = ("GLM-4.1V's and GLM-OCR's language models: GLM-4-0414's layers, multimodal rotary (the ordinary map on "
             "text)")
    model_types = ("glm4v_text", "glm_ocr_text")
    architectures = ("Glm4vTextModel", "GlmOcrTextModel")
    options = dataclasses.replace(Glm4.options, partial_rotary=1.0)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return config.get("model_type") != "glm_ocr_text", False  # (set by the model type, not by the config)


@register
class GlmImageText(Glm4):
    """GLM-Image's language model (the autoregressive half that writes image tokens): GLM-4-0414's layers with
    GLM-4.5V's attention: rotary in Llama's rotate-half pairing over the share ``partial_rotary_factor`` of each head
    (all of it by default), q/k/v biased by ``attention_bias`` (default on), multimodal rotary sections that on text
    turn every pair by the token's position (the ordinary map, read as such)."""

    name = "glm_image_text"
    about = ("GLM-Image's language model: GLM-4-0414's layers, rotate-half rotary, multimodal sections (the ordinary "
             "map on text)")
    model_types = ("glm_image_text",)
    architectures = ("GlmImageTextModel",)
    ignored = Glm4.ignored | {"vision_vocab_size"}  # (its head's width: see convert)
    options = dataclasses.replace(Glm4.options, rotary_style="half", partial_rotary=1.0)

    @classmethod
    def unembedding_of(cls, ckpt: Checkpoint, emb: Tensor, prefix: str) -> tuple[None, str]:
        """None: the model's head (``lm_head``, ``vision_vocab_size`` rows) scores the image tokens alone, the first
        ids of a wider vocabulary, and is never the embedding."""
        first = ckpt.config.get("vision_vocab_size", 16512)
        return no_unembedding(ckpt, _HEADS, f"GLM-Image's head scores its image tokens alone, the first {first} of the "
                                            f"{emb.shape[0]} token ids W_E embeds")


@register
class Glm4Moe(LlamaLike):
    name = "glm4_moe"
    about = "GLM-4.5, 4.6 and 4.7: rotary on half of each head, per-head QK-norm"
    model_types = ("glm4_moe",)
    architectures = ("Glm4MoeForCausalLM", "Glm4MoeModel")
    handled = Llama.handled | {"partial_rotary_factor", "use_qk_norm"}
    ignored = Llama.ignored | GLM45_MOE
    options = LlamaLikeOptions(partial_rotary=0.5)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("attention_bias")), False  # transformers' default off; o_proj has none

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        qk_norm = bool(ckpt.config.get("use_qk_norm"))
        return convert_llamalike(ckpt, cls, dataclasses.replace(cls.options, qk_norm=qk_norm))


@register
class Glm4vMoeText(Glm4Moe):
    """GLM-4.5V's and GLM-4.6V's language model: GLM-4.5's layers without QK-norm, q/k/v biases on
    by default, and multimodal rotary sections (``mrope_section``) over the rotated half of each head,
    which on text turn every pair by the token's position: the ordinary map, read as such."""

    name = "glm4v_moe_text"
    about = "GLM-4.5V's language model: GLM-4.5's layers, q/k/v biases, multimodal rotary (the ordinary map on text)"
    model_types = ("glm4v_moe_text",)
    architectures = ("Glm4vMoeTextModel",)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("attention_bias", True)), False  # (its config's default: on)


@register
class SarvamMoe(Glm4Moe):
    """Sarvam's MoE model (Sarvam-30B): GLM-4.5's layers as transformers builds them, with other
    defaults: rotary on all of each head (base 8,000,000), per-head QK-norm on, q/k/v biases under
    ``use_qkv_bias`` (transformers' other name for ``attention_bias``). Their files (and what
    transformers saves) name the tensors otherwise: one fused ``attention.query_key_value`` (rows
    ``[q heads | k heads | v heads]``), ``attention.dense``, ``query_layernorm``, ``key_layernorm``,
    ``word_embeddings``; a loaded model holds GLM-4.5's names. Either is read."""

    name = "sarvam_moe"
    about = "Sarvam MoE (Sarvam-30B): GLM-4.5's layers, full rotary, QK-norm"
    model_types = ("sarvam_moe",)
    architectures = ("SarvamMoEForCausalLM",)
    handled = Glm4Moe.handled | {"use_qkv_bias"}
    ignored = Glm4Moe.ignored | {"num_experts", "num_shared_experts", "num_local_experts"}  # (the experts' other names)
    options = LlamaLikeOptions(partial_rotary=1.0, default_theta=8_000_000.0)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return bool(config.get("attention_bias") or config.get("use_qkv_bias")), False

    #: the names of Sarvam's own files (and of what transformers saves), which transformers renames to GLM-4.5's
    FILE_NAMES = dict(fused_qkv=True, fused_qkv_at="query_key_value", attn_at="attention", out_proj_at="dense",
                      qk_norm_at=("query_layernorm", "key_layernorm"), embed_at="word_embeddings")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        qk_norm = bool(ckpt.config.get("use_qk_norm", True))  # (transformers' default for this model type: on)
        files = any(n.endswith(".attention.query_key_value.weight") for n in ckpt.tensors.names())
        opts = dataclasses.replace(cls.options, qk_norm=qk_norm, **(cls.FILE_NAMES if files else {}))
        return convert_llamalike(ckpt, cls, opts)


@register
class Param2Moe(SarvamMoe):
    """BharatGen's Param2 MoE models: GLM-4.5's layers, which transformers builds for them (``Glm4MoeForCausalLM``),
    their files named as Sarvam's (transformers renames them alike), with other defaults: rotary on all of each head
    (base 500,000), per-head QK-norm on, a head width of 64 where the config states none, embeddings tied."""

    name = "param2moe"
    about = "Param2 MoE (BharatGen): GLM-4.5's layers, full rotary, QK-norm, Sarvam's file names"
    model_types = ("param2moe",)
    architectures = ()  # (transformers builds GLM-4.5's classes, which name GLM-4.5)
    options = LlamaLikeOptions(partial_rotary=1.0, default_theta=500_000.0, default_head_dim=64)
