"""Qwen3 and Qwen3-MoE decoders: Llama-like with QK-norm.

Each query and key head is RMS-normalised (gain ``w``, no offset) after its projection and before
the rotary map, as in Gemma 3, so products of ``W_Q`` and ``W_K`` are approximations there (the
loaded ``HeadWeights`` says so in ``meta.notes``). No attention-output norm, no embedding scale,
logit scale ``head_dim^-1/2``. Sliding windows as Qwen2's (``use_sliding_window``, layers from
``max_window_layers`` up). Qwen3-MoE differs in its MLP only, which compscope does not read.
rednote's dots.llm1 has Qwen3's attention, its windows as ``layer_types`` lists them, else (no switch)
on the layers from ``max_window_layers`` up wherever a window is set (transformers' default 4096).
The language models of Qwen3-VL and Qwen3-VL-MoE are Qwen3's, with a multimodal rotary that is the
ordinary one on text (``llama.mrope_note``); the visual features they add to their first layers'
residual come with images only.
"""

from __future__ import annotations

import dataclasses

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import MAX_LAYERS, integer
from .llama import (WINDOW_KEYS, Llama, LlamaLike, LlamaLikeOptions, convert_llamalike, listed_layer_types, listed_or,
                    no_unembedding, upper_layers_slide, window_switch)

#: dots.llm1's window where its config states none (transformers' default)
DOTS1_WINDOW = 4096

#: Qwen3-MoE's MLP settings: the attention does not depend on them
_MOE = frozenset(
    "decoder_sparse_step moe_intermediate_size num_experts num_local_experts num_experts_per_tok norm_topk_prob "
    "output_router_logits router_aux_loss_coef mlp_only_layers".split()
) | frozenset(  # dots.llm1's
    "first_k_dense_replace n_group n_routed_experts n_shared_experts routed_scaling_factor topk_group".split()
)


@register
class Qwen3(LlamaLike):
    name = "qwen3"
    about = "Qwen3, Qwen3-MoE, the language models of Qwen3-VL and Qwen3-Omni, dots.llm1: per-head QK-norm"
    model_types = ("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text",  # (Qwen3-VL's language models)
                   "dots1",  # (rednote's dots.llm1)
                   "qwen3_omni_moe_text")  # (Qwen3-Omni's thinker's: Qwen3-VL-MoE's attention, never a window)
    architectures = ("Qwen3ForCausalLM", "Qwen3Model", "Qwen3MoeForCausalLM")
    ignored = Llama.ignored | _MOE
    options = LlamaLikeOptions(qk_norm=True)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        if ckpt.config.get("model_type") == "dots1":  # transformers' default window where the config states none
            ckpt = dataclasses.replace(ckpt, config={"sliding_window": DOTS1_WINDOW, **ckpt.config})
        return convert_llamalike(ckpt, cls, cls.options)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed; else windows only with ``use_sliding_window`` on: Qwen3's on the layers from
        ``max_window_layers`` up, Qwen3-MoE's on every layer (it does not read ``max_window_layers``)."""
        if config.get("model_type") == "qwen3_omni_moe_text":  # its attention sets no window, whatever the config says
            return ["full_attention"] * n_layers
        on = window_switch(config, where)
        listed = listed_layer_types(config, n_layers, where)
        if listed is not None:
            return listed
        if config.get("model_type") == "dots1":  # no switch: a window (transformers' default 4096) on the layers
            first = integer(config, where, "max_window_layers", default=62, low=0, high=MAX_LAYERS)  # from here up
            slides = config.get("sliding_window", DOTS1_WINDOW) is not None
            return ["sliding_attention" if slides and i >= first else "full_attention" for i in range(n_layers)]
        if config.get("model_type") in ("qwen3_moe", "qwen3_vl_moe_text"):
            return ["sliding_attention" if on else "full_attention"] * n_layers
        return upper_layers_slide(config, n_layers, where, on)


#: Mellum's rope settings where its config states none (transformers' default): a base per layer type
MELLUM_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 500_000.0},
               "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}


@register
class Mellum(Qwen3):
    """Mellum (JetBrains): Qwen3-MoE's attention (per-head QK-norm), windows on the layers
    ``layer_types`` marks sliding (none where it lists none), a rotary base per layer type; its
    multi-token-prediction layers (``mtp.``) are not part of the model transformers runs."""

    name = "mellum"
    about = "Mellum (JetBrains): Qwen3-MoE's attention, sliding layers as listed, a rotary base per layer type"
    model_types = ("mellum",)
    architectures = ("MellumForCausalLM", "MellumModel")
    ignored = Qwen3.ignored | {"mlp_layer_types", "num_mtp_layers", "mtp_layer_types", "mtp_mlp_layer_types"}

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg = ckpt.config
        if cfg.get("rope_parameters") is None and cfg.get("rope_scaling") is None and cfg.get("rope_theta") is None:
            ckpt = dataclasses.replace(ckpt, config={**cfg, "rope_parameters": MELLUM_ROPE})
        return convert_llamalike(ckpt, cls, cls.options)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else every layer global (transformers' default)."""
        listed = listed_layer_types(config, n_layers, where)
        return listed if listed is not None else ["full_attention"] * n_layers


@register
class HyV3(Qwen3):
    """Tencent's HY-V3 (Hy3): Qwen3's attention (per-head QK-norm before the rotary map; one
    ``attention_bias`` switch for all four projections), every layer attending over the whole
    sequence; its experts, and the multi-token-prediction layer stored after the last, not read."""

    name = "hy_v3"
    about = "HY-V3 (Tencent Hy3): Qwen3's attention with per-head QK-norm, MoE MLPs"
    model_types = ("hy_v3",)
    architectures = ("HYV3ForCausalLM", "HYV3Model")
    handled = LlamaLike.handled - WINDOW_KEYS
    ignored = Qwen3.ignored | {"num_shared_experts", "router_scaling_factor", "enable_moe_fp32_combine", "mlp_layer_types"}

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return ["full_attention"] * n_layers  # (no window: a config stating one is refused by name)


#: Flint's window where its config states none (transformers' default)
FLINT_WINDOW = 513


@register
class Flint(Qwen3):
    """Flint: Qwen3's attention (per-head QK-norm) with a learned sink logit per head (as gpt-oss's),
    sliding layers that turn by the rotary map and global ones without positional encoding (NoPE), as
    ``layer_types`` lists them (transformers' default: layers 0, 1, every fourth from 1 and the last
    global); the experts (and the shared expert) are MLP, not read. Its files name the sinks
    ``softmax_offset``; a loaded model ``sinks``."""

    name = "flint"
    about = "Flint: Qwen3's attention with a sink logit per head, rotary sliding layers, NoPE global ones"
    model_types = ("flint",)
    architectures = ("FlintForCausalLM", "FlintModel")
    handled = LlamaLike.handled - {"max_window_layers", "use_sliding_window"}
    options = LlamaLikeOptions(qk_norm=True, sinks=True, nope_layers="full_attention")
    saved_names = ((r"\.self_attn\.softmax_offset$", ".self_attn.sinks"),)  # (its files' name for the sinks)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        if "sliding_window" not in ckpt.config:  # transformers' default window
            ckpt = dataclasses.replace(ckpt, config={**ckpt.config, "sliding_window": FLINT_WINDOW})
        return convert_llamalike(ckpt, cls, cls.options)

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        return listed_or(config, n_layers, where, lambda i: i < 2 or i % 4 == 1 or i == n_layers - 1, FLINT_WINDOW)


@register
class Qwen3Bidirectional(Qwen3):
    """Qwen3's attention (per-head QK-norm before rotate-half rotary) with every token attending to every other, as
    llama.cpp runs the GGUF files of the diffusion LMs LLaDA-MoE and RND1 (their loaders set the attention
    non-causal whatever the file says). No HuggingFace model type names it (their models are remote code): GGUF files
    alone are read as it (:attr:`gguf_types`), for the weight-only commands; an encoder, so no unembedding (the head
    that predicts the masked tokens is not read)."""

    name = "qwen3_bidirectional"
    about = ("LLaDA-MoE, RND1 (GGUF files, as llama.cpp runs these diffusion LMs): Qwen3's attention (per-head "
             "QK-norm) attending both ways")
    model_types = ()
    gguf_types = ("qwen3_bidirectional",)
    architectures = ()
    options = LlamaLikeOptions(qk_norm=True, bidirectional=True)


#: the names the head of a Qwen3-TTS file is read under (llama.cpp's ``output.weight``)
_HEADS = ("lm_head.weight", "model.lm_head.weight")


@register
class Qwen3TtsTalker(Qwen3):
    """Qwen3-TTS's talker (its backbone, which predicts the first codebook of each audio frame), as llama.cpp runs
    its GGUF files with Qwen3-VL's graph: Qwen3's attention (per-head QK-norm before the rotary map, multimodal
    sections that are the ordinary rotary map on a sequence of single positions). Its token embedding holds the text
    tokens, each passed through the talker's text projection by the converter, then the codec tokens; its head scores
    the codec tokens alone, so no unembedding is read. No HuggingFace model type names it (its model is its makers'
    own code): GGUF files alone are read as it (:attr:`gguf_types`), for the weight-only commands."""

    name = "qwen3_tts_talker"
    about = ("Qwen3-TTS's talker (GGUF files, as llama.cpp runs it): Qwen3's attention (per-head QK-norm); its head "
             "over codec tokens not read")
    model_types = ()
    gguf_types = ("qwen3_tts_talker",)
    architectures = ()

    @classmethod
    def unembedding_of(cls, ckpt: Checkpoint, emb: torch.Tensor, prefix: str) -> tuple[None, str]:
        """None: the head scores the codec tokens alone, the last ids of the vocabulary the embedding holds."""
        return no_unembedding(ckpt, _HEADS, "Qwen3-TTS's head scores its codec tokens alone (3072 rows), the last "
                                            f"of the {emb.shape[0]} token ids W_E embeds (text tokens first, each "
                                            "through the talker's text projection)")
