"""CLIP's text encoder (OpenAI's CLIP, and the text towers built as CLIP's: MetaCLIP 2, OWL-ViT, OWLv2,
GroupViT, X-CLIP, CLIPSeg): a causal pre-LN transformer under its own names.

Token and learned position embeddings summed (``embeddings.token_embedding``, ``embeddings.position_embedding``);
per layer a LayerNorm (``layer_norm1``) before the attention, separate ``q/k/v_proj`` and ``out_proj`` with
biases, the usual logit scale; every query attends to the keys at and before it (CLIP masks its text
causally); ``final_layer_norm`` after the last layer. The text embedding is the final state at the
first end-of-text token through a linear projection, no unembedding over the vocabulary: ``W_U`` is
None. The tensors sit at the top of a ``CLIPTextModel`` saved by transformers 5, under ``text_model.``
in one saved by transformers 4 and in a whole ``CLIPModel`` (whose vision tower is not read).
"""

from __future__ import annotations

from typing import ClassVar

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import UnsupportedModelError
from . import register
from .base import (Family, checkpoint_notes, final_layernorm, number, separate_projections, sizes, stack,
                   token_embedding)

#: where the text encoder's tensors may sit
PREFIXES = ("", "text_model.")


@register
class ClipText(Family):
    name = "clip_text"
    about = ("CLIP's text encoder, and those of MetaCLIP 2, OWL-ViT, OWLv2, GroupViT, X-CLIP and CLIPSeg: causal, "
             "pre-LN, learned positions; no unembedding (a projection of one state)")
    model_types = ("clip_text_model", "metaclip_2_text_model", "owlvit_text_model", "owlv2_text_model",
                   "groupvit_text_model", "xclip_text_model", "clipseg_text_model")  # (CLIP's text model, each)
    architectures = ("CLIPTextModel", "CLIPTextModelWithProjection", "MetaClip2TextModel", "OwlViTTextModel",
                     "Owlv2TextModel", "GroupViTTextModel", "XCLIPTextModel", "CLIPSegTextModel")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers layer_norm_eps".split())
    ignored = frozenset({"projection_dim", "initializer_factor"})  # (the projection after pooling; initialisation)
    hf_base = "text_model"
    part = "text encoder"
    causal: ClassVar[bool] = True  # (SigLIP's text encoder attends both ways)

    @classmethod
    def base_model(cls, model):
        """The text encoder: ``model.text_model`` of a ``CLIPModel`` (and of transformers 4's ``CLIPTextModel``),
        else ``model``."""
        return getattr(model, "text_model", model)

    @classmethod
    def hook_points(cls, model) -> list[tuple]:
        """``layer_norm1`` reads the residual; ``self_attn`` returns what the attention adds."""
        return [(b.layer_norm1, b.self_attn) for b in cls.base_model(model).encoder.layers]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where)
        prefix = next((p for p in PREFIXES if p + "embeddings.token_embedding.weight" in ts), None)
        if prefix is None:
            raise UnsupportedModelError(f"{where}: no tensor named like 'text_model.embeddings.token_embedding.weight'")
        eps = number(cfg, where, "layer_norm_eps", default=1e-5, open_low=True)
        layer = lambda i: f"{prefix}encoder.layers.{i}."  # noqa: E731
        attn = separate_projections(ts, lambda i: layer(i) + "self_attn.", L, H, H, r, d)
        gains = [ts.take(layer(i) + "layer_norm1.weight", (d,)) for i in range(L)]
        biases = [ts.take(layer(i) + "layer_norm1.bias", (d,)) for i in range(L)]
        emb = token_embedding(ts, prefix + "embeddings.token_embedding.weight", d)
        pos = ts.take(prefix + "embeddings.position_embedding.weight")
        if pos.ndim != 2 or pos.shape[1] != d:
            raise UnsupportedModelError(f"{ts.origin(prefix + 'embeddings.position_embedding.weight')}: "
                                        f"position_embedding has shape {tuple(pos.shape)}, expected (n_ctx, {d})")
        notes = checkpoint_notes(ckpt, "no unembedding read (W_U is None): the text embedding is a projection of the "
                                       "final state at the end-of-text token")
        return HeadWeights(
            **attn,
            W_E=emb.T, W_pos=pos.T, W_U=None, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", stack(gains), stack(biases), eps),
            final_norm=final_layernorm(ts, prefix + "final_layer_norm", d, eps),
            norm_placement="pre",
            positions="learned",
            causal=cls.causal,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class SiglipText(ClipText):
    """SigLIP's and SigLIP 2's text encoder: CLIP's layout, every query attending to every key (no causal
    mask); the text embedding a linear ``head`` of the final state at the last position, no unembedding."""

    name = "siglip_text"
    about = "SigLIP's and SigLIP 2's text encoder: CLIP's layout attending both ways; no unembedding"
    model_types = ("siglip_text_model", "siglip2_text_model")
    architectures = ("SiglipTextModel", "Siglip2TextModel")
    ignored = frozenset({"projection_size"})  # (the head after pooling)
    causal = False
