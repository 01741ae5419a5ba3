"""Higgs Audio v2 (Boson AI): Llama 3.2's attention shared by text and audio positions, each with a norm before the
attention and an MLP of its own (its "DualFFN"). An audio position's residual starts as the sum of one embedding per
audio codebook, a text position's as its token's embedding; on text, which is what compscope runs and reads, every
position reads the residual through the text norm, ``input_layernorm``. Its head scores the audio codebooks' tokens
(``num_codebooks × codebook_size``), not the text vocabulary, so no unembedding is read; transformers leaves the text
head some checkpoints hold (``text_lm_head``) unloaded by default."""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from . import register
from .llama import Llama, no_unembedding

#: the config keys of the audio side (codebooks, the placeholder and delay ids), which no attention weight depends on
_AUDIO_KEYS = frozenset("num_codebooks codebook_size audio_token_id audio_bos_token_id audio_delay_token_id "
                        "audio_stream_bos_id audio_stream_eos_id".split())
#: the text head's names (not read: transformers does not load it by default)
_TEXT_HEADS = ("text_lm_head.weight", "model.text_lm_head.weight")


@register
class HiggsAudioV2(Llama):
    name = "higgs_audio_v2"
    about = ("Higgs Audio v2: Llama 3.2's attention, shared by text and audio positions, read through the text "
             "positions' norm; its head over audio codebooks not read")
    model_types = ("higgs_audio_v2",)
    architectures = ("HiggsAudioV2ForConditionalGeneration", "HiggsAudioV2Model")
    ignored = Llama.ignored | _AUDIO_KEYS

    @classmethod
    def hook_points(cls, model) -> list[tuple]:
        """Per layer: the decoder layer reads the residual (its norms take the text and the audio positions apart,
        each set flattened) and ``self_attn`` returns what is added."""
        return [(b, b.self_attn) for b in cls.base_model(model).layers]

    @classmethod
    def unembedding_of(cls, ckpt: Checkpoint, emb: torch.Tensor, prefix: str) -> tuple[None, str]:
        """None: the head (``audio_lm_head``) scores audio codebook tokens, not the ids ``W_E`` embeds."""
        return no_unembedding(ckpt, _TEXT_HEADS, (
            "Higgs Audio v2's head scores the audio codebooks' tokens, not the text vocabulary W_E embeds; the "
            "attention read through the text positions' norm (input_layernorm): an audio position, whose residual "
            "starts as the sum of one embedding per codebook, reads it through a norm of its own "
            "(audio_input_layernorm) and runs an MLP of its own"))
