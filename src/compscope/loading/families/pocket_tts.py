"""Pocket TTS's backbone (``pocket_tts``; llama.cpp's ``pockettts`` files): the causal transformer of Kyutai's flow
language model for speech. Llama's attention (biases where ``attention_bias`` says, default none) in pre-LN layers
with LayerNorms; it reads text tokens, and audio latents projected into the residual at placeholder token ids, and has
no unembedding: a flow head turns its last residual into audio latents."""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from . import register
from .llama import LlamaLike, LlamaLikeOptions, no_unembedding

#: the config keys of the audio side (the flow head, the latents and their placeholder ids, the training losses),
#: which no attention weight depends on
_AUDIO_KEYS = frozenset(
    "flow_head_config latent_dim audio_prompt_token_id audio_latent_token_id audio_prompt_bos_token_id "
    "audio_bos_token_id frame_rate eos_loss_weight flow_loss_num_samples lsd_distill_probability lsd_diagonal_weight "
    "lsd_time_logit_mean lsd_time_logit_std latent_stats_ema_steps latent_stats_ema_decay".split())


@register
class PocketTts(LlamaLike):
    name = "pocket_tts"
    about = "Pocket TTS's backbone: Llama's attention in LayerNorm layers; no unembedding (a flow head reads it)"
    model_types = ("pocket_tts",)
    architectures = ("PocketTTSForConditionalGeneration", "PocketTTSModel")
    handled = LlamaLike.handled | {"layer_norm_eps"}
    ignored = LlamaLike.ignored | _AUDIO_KEYS
    options = LlamaLikeOptions(norm_kind="layernorm", norm_bias=True, eps_key="layer_norm_eps")

    @classmethod
    def unembedding_of(cls, ckpt: Checkpoint, emb: torch.Tensor, prefix: str) -> tuple[None, str]:
        """None: the model has no head over tokens (llama.cpp's files reuse the embedding as one only so that a
        sampler runs; its logits are never used)."""
        return no_unembedding(ckpt, (), "Pocket TTS's backbone has no head over tokens; a flow head turns its last "
                              "residual into audio latents")
