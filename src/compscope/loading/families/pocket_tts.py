"""Pocket TTS's backbone (``pocket_tts``; llama.cpp's ``pockettts`` files), and Gradium Phonon TTS's, its sibling
(``gradium_phonon_tts``, whose speaker and duration conditions enter at audio positions alone): the causal transformer
of Kyutai's flow language model for speech. Llama's attention (biases where ``attention_bias`` says, default none) in pre-LN layers
with LayerNorms; it reads text tokens, and audio latents projected into the residual at placeholder token ids, and has
no unembedding: a flow head turns its last residual into audio latents."""

from __future__ import annotations

import dataclasses

import torch

from ..checkpoint import Checkpoint, pairs_to_halves
from ...core.heads import HeadWeights
from ...errors import UnsupportedModelError
from . import register
from .base import MAX_LAYERS, integer, prefix_of
from .llama import PREFIXES, LlamaLike, LlamaLikeOptions, convert_llamalike, no_unembedding

#: the config keys of the audio side (the flow head, the latents and their placeholder ids, the training losses),
#: which no attention weight depends on
_AUDIO_KEYS = frozenset(
    "flow_head_config latent_dim audio_prompt_token_id audio_latent_token_id audio_prompt_bos_token_id "
    "audio_bos_token_id frame_rate eos_loss_weight flow_loss_num_samples lsd_distill_probability lsd_diagonal_weight "
    "lsd_time_logit_mean lsd_time_logit_std latent_stats_ema_steps latent_stats_ema_decay "
    # (Gradium Phonon TTS's: its voice-prompt width and the conditions added at audio positions)
    "audio_prompt_dim num_speakers num_speakers_vocab_size num_speakers_embedding_dim duration_delta "
    "duration_delta_embedding_dim duration_delta_scale duration_delta_max_period".split())


@register
class PocketTts(LlamaLike):
    name = "pocket_tts"
    about = ("Pocket TTS's and Gradium Phonon TTS's backbones: Llama's attention in LayerNorm layers; no unembedding "
             "(a flow head reads it)")
    model_types = ("pocket_tts", "gradium_phonon_tts")
    architectures = ("PocketTTSForConditionalGeneration", "PocketTTSModel", "GradiumPhononTTSForConditionalGeneration",
                     "GradiumPhononTTSModel")
    handled = LlamaLike.handled | {"layer_norm_eps"}
    ignored = LlamaLike.ignored | _AUDIO_KEYS
    options = LlamaLikeOptions(norm_kind="layernorm", norm_bias=True, eps_key="layer_norm_eps")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        """Llama's converter; a layer's fused ``self_attn.in_proj`` (as Gradium's checkpoints store it, and
        transformers saves it back) read as transformers loads it: cut in three equal parts, q, k and v, the rows of
        q and k from rotating adjacent pairs into the rotate-half order."""
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        H = integer(cfg, where, "num_attention_heads")
        made = {}
        for i in range(integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)):
            fused = prefix_of(ts, f"layers.{i}.self_attn.in_proj.weight", PREFIXES)
            fused = None if fused is None else f"{fused}layers.{i}.self_attn.in_proj.weight"
            if fused is None:
                continue
            if integer(cfg, where, "num_key_value_heads", default=H) != H:
                raise UnsupportedModelError(f"{ts.origin(fused)}: '{fused}': a fused in_proj beside grouped K/V heads: "
                                            "transformers cuts it in three equal parts, which fit only as many K/V "
                                            "heads as query heads")
            stem = fused.removesuffix("in_proj.weight")
            for part, name in enumerate(("q", "k", "v")):
                made[f"{stem}{name}_proj.weight"] = (
                    lambda fused=fused, part=part: _third(ts.take(fused), part, H), fused)
        if made:
            ckpt = dataclasses.replace(ckpt, tensors=ts.derived(made))
        return convert_llamalike(ckpt, cls, cls.options)

    @classmethod
    def unembedding_of(cls, ckpt: Checkpoint, emb: torch.Tensor, prefix: str) -> tuple[None, str]:
        """None: the model has no head over tokens (llama.cpp's files reuse the embedding as one only so that a
        sampler runs; its logits are never used)."""
        return no_unembedding(ckpt, (), "the backbone has no head over tokens; a flow head turns its last residual "
                                        "into audio latents")


def _third(w: torch.Tensor, part: int, n_heads: int) -> torch.Tensor:
    """Part ``part`` (q 0, k 1, v 2) of a fused ``in_proj`` weight, q's and k's rows from rotating adjacent pairs into
    the rotate-half order (:func:`~compscope.loading.checkpoint.pairs_to_halves`)."""
    rows = w.chunk(3, dim=0)[part]
    return rows if part == 2 else pairs_to_halves(rows, n_heads)
