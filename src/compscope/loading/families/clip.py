"""CLIP's text encoder (OpenAI's CLIP, and the text towers built as CLIP's: MetaCLIP 2, OWL-ViT, OWLv2,
GroupViT, X-CLIP, CLIPSeg): a causal pre-LN transformer under its own names.

Token and learned position embeddings summed (``embeddings.token_embedding``, ``embeddings.position_embedding``);
per layer a LayerNorm (``layer_norm1``) before the attention, separate ``q/k/v_proj`` and ``out_proj`` with
biases, the usual logit scale; every query attends to the keys at and before it (CLIP masks its text
causally); ``final_layer_norm`` after the last layer. The text embedding is the final state at the
first end-of-text token through a linear projection, no unembedding over the vocabulary: ``W_U`` is
None. The tensors sit at the top of a ``CLIPTextModel`` saved by transformers 5, under ``text_model.``
in one saved by transformers 4 and in a whole ``CLIPModel`` (whose vision tower is not read).

AIMv2's text encoder (:class:`Aimv2Text`) is CLIP's layout with RMSNorms and its own module names.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import UnsupportedModelError
from . import register
from .base import (Family, checkpoint_notes, config_attention_bias, final_layernorm, number, separate_projections,
                   sizes, stack, token_embedding)

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
    #: each layer's norm before the attention, the attention, and the norm after the last layer, by their module names
    norm_at: ClassVar[str] = "layer_norm1"
    attn_at: ClassVar[str] = "self_attn"
    final_at: ClassVar[str] = "final_layer_norm"
    #: the norms' kind ('layernorm': gains and biases; 'rmsnorm': gains) and the config key of their epsilon
    norm_kind: ClassVar[str] = "layernorm"
    eps_key: ClassVar[str] = "layer_norm_eps"

    @classmethod
    def base_model(cls, model):
        """The text encoder: ``model.text_model`` of a ``CLIPModel`` (and of transformers 4's ``CLIPTextModel``),
        else ``model``."""
        return getattr(model, "text_model", model)

    @classmethod
    def hook_points(cls, model) -> list[tuple]:
        """``layer_norm1`` reads the residual; ``self_attn`` returns what the attention adds."""
        return [(getattr(b, cls.norm_at), getattr(b, cls.attn_at)) for b in cls.base_model(model).encoder.layers]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where)
        prefix = next((p for p in PREFIXES if p + "embeddings.token_embedding.weight" in ts), None)
        if prefix is None:
            raise UnsupportedModelError(f"{where}: no tensor named like 'text_model.embeddings.token_embedding.weight'")
        eps = number(cfg, where, cls.eps_key, default=1e-5, open_low=True)
        layer = lambda i: f"{prefix}encoder.layers.{i}."  # noqa: E731
        attn = separate_projections(ts, lambda i: f"{layer(i)}{cls.attn_at}.", L, H, H, r, d)
        gains = [ts.take(f"{layer(i)}{cls.norm_at}.weight", (d,)) for i in range(L)]
        rms = cls.norm_kind == "rmsnorm"
        biases = [None if rms else ts.take(f"{layer(i)}{cls.norm_at}.bias", (d,)) for i in range(L)]
        final = prefix + cls.final_at
        final_norm = (Norm("rmsnorm", ts.take(final + ".weight", (d,))[None], None, eps) if rms
                      else final_layernorm(ts, final, d, eps))
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
            attn_norm=Norm(cls.norm_kind, stack(gains), stack(biases), eps),
            final_norm=final_norm,
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


@register
class Aimv2Text(ClipText):
    """AIMv2's text encoder (its LiT models' text tower): CLIP's layout with RMSNorms (``rms_norm1`` before the
    attention, ``rms_norm`` after the last layer), the attention as ``attention`` (``q/k/v_proj``, ``out_proj``,
    biases where ``qkv_bias``), learned positions, causal; no unembedding (the text embedding is a projection of the
    final state at the end-of-text token). transformers masks it causally only when given an attention mask (without
    one it attends both ways), so the data runner gives the running model one (``run_inputs``)."""

    name = "aimv2_text"
    about = "AIMv2's text encoder: CLIP's layout with RMSNorms, causal, learned positions; no unembedding"
    model_types = ("aimv2_text_model",)
    architectures = ("Aimv2TextModel",)
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers rms_norm_eps qkv_bias".split())
    # (transformers 4 builds Aimv2TextModel.from_pretrained with the whole model's config class, whose default text and
    # vision settings and projection then sit beside the text model's own: not the text model's)
    ignored = frozenset("text_config vision_config projection_dim logit_scale_init_value max_logit_scale".split())
    norm_at, attn_at, final_at = "rms_norm1", "attention", "rms_norm"
    norm_kind, eps_key = "rmsnorm", "rms_norm_eps"
    attention_biases = config_attention_bias("qkv_bias", False)  # (on all four projections, or none)
    runs_as_named = True  # (no auto class builds its text model alone: Aimv2TextModel, as its folder names)

    @classmethod
    def run_inputs(cls, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """An attention mask of ones, ``(batch, seq)``: what has transformers mask the text causally."""
        return {"attention_mask": torch.ones_like(tokens)}
