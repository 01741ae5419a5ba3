"""CLIP's text encoder (OpenAI's CLIP, and the text towers built as CLIP's: MetaCLIP 2, OWL-ViT, OWLv2,
GroupViT, X-CLIP, CLIPSeg): a causal pre-LN transformer under its own names.

Token and learned position embeddings summed (``embeddings.token_embedding``, ``embeddings.position_embedding``);
per layer a LayerNorm (``layer_norm1``) before the attention, separate ``q/k/v_proj`` and ``out_proj`` with
biases, the usual logit scale; every query attends to the keys at and before it (CLIP masks its text
causally); ``final_layer_norm`` after the last layer. The text embedding is the final state at the
first end-of-text token through a linear projection, no unembedding over the vocabulary: ``W_U`` is
None. The tensors sit at the top of a ``CLIPTextModel`` saved by transformers 5, under ``text_model.``
in one saved by transformers 4 and in a whole ``CLIPModel`` (whose vision tower is not read).

AIMv2's text encoder (:class:`Aimv2Text`) is CLIP's layout with RMSNorms and its own module names; TIPSv2's
(:class:`Tipsv2Text`) SigLIP's with token embeddings times ``sqrt(d)`` and tensor2tensor sinusoids for positions.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import UnsupportedModelError
from . import register
from .base import (MAX_WIDTH, Family, checkpoint_notes, config_attention_bias, final_layernorm, integer, number,
                   separate_projections, sizes, stack, tensor2tensor_sinusoids, token_embedding)

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
    #: what the text embedding is, for the note that no unembedding is read
    pooled: ClassVar[str] = "a projection of the final state at the end-of-text token"

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
        scale, said = cls.embedding_scale(cfg, where, d)
        W_pos, said_pos = cls.positional(cfg, where, ts, prefix, d)
        notes = checkpoint_notes(ckpt, f"no unembedding read (W_U is None): the text embedding is {cls.pooled}",
                                 *[n for n in (said, said_pos) if n])
        return HeadWeights(
            **attn,
            W_E=emb.T * scale if scale != 1.0 else emb.T, W_pos=W_pos, W_U=None, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm(cls.norm_kind, stack(gains), stack(biases), eps),
            final_norm=final_norm,
            norm_placement="pre",
            positions="learned",
            causal=cls.causal,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )

    @classmethod
    def embedding_scale(cls, config: dict, where: str, d: int) -> tuple[float, str | None]:
        """The factor on the token embeddings (``W_E`` holds them times it), with a note where it is not 1."""
        return 1.0, None

    @classmethod
    def positional(cls, config: dict, where: str, ts, prefix: str, d: int) -> tuple[torch.Tensor, str | None]:
        """``W_pos: (d, n_ctx)``, the learned table ``embeddings.position_embedding.weight``, and a note (None)."""
        name = prefix + "embeddings.position_embedding.weight"
        pos = ts.take(name)
        if pos.ndim != 2 or pos.shape[1] != d:
            raise UnsupportedModelError(f"{ts.origin(name)}: position_embedding has shape {tuple(pos.shape)}, "
                                        f"expected (n_ctx, {d})")
        return pos.T, None


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
    pooled = "a linear head of the final state at the last position"


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


@register
class Tipsv2Text(SiglipText):
    """TIPSv2's text encoder: SigLIP's layout (pre-LN, attending both ways), the token embeddings times ``sqrt(d)``
    where ``scale_sqrt_depth`` (its default), and positions the tensor2tensor sinusoids transformers computes (the
    files hold none): row ``p`` of ``[sin(p f_i) | cos(p f_i)]``, ``f_i = 10000^(−i/(d/2 − 1))``, a zero column
    after them where ``d`` is odd, ``max_position_embeddings`` rows. No unembedding (the text embedding is the final
    states' mean)."""

    name = "tipsv2_text"
    about = ("TIPSv2's text encoder: SigLIP's layout, token embeddings times sqrt(d), sinusoidal positions; "
             "no unembedding")
    model_types = ("tipsv2_text_model",)
    architectures = ("Tipsv2TextModel",)
    handled = ClipText.handled | {"scale_sqrt_depth", "max_position_embeddings"}
    ignored = frozenset({"pooling_epsilon"})  # (the mean over the states that pools them)
    pooled = "the mean of the final states"
    #: its files' names (the released ones, which transformers converts on loading and writes back on saving) -> the
    #: loaded model's; each layer's fused ``in_proj`` (q, k, v stacked) is split in :meth:`convert`
    saved_names = ((r"^text_encoder\.", "text_model."), (r"^(text_model\.)?ln_final\.", r"\1final_layer_norm."),
                   (r"^(text_model\.)?token_embedding\.", r"\1embeddings.token_embedding."),
                   (r"^(text_model\.)?transformer\.resblocks\.(\d+)\.ln_1\.", r"\1encoder.layers.\2.layer_norm1."),
                   (r"^(text_model\.)?transformer\.resblocks\.(\d+)\.attn\.", r"\1encoder.layers.\2.self_attn."))

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        """CLIP's reading, each layer's ``self_attn.in_proj_weight`` ``(3d, d)`` (and bias) first split into the
        ``q_proj``, ``k_proj`` and ``v_proj`` it stacks, in that order."""
        ts = ckpt.tensors
        fused = [n for n in ts.names() if n.endswith((".self_attn.in_proj_weight", ".self_attn.in_proj_bias"))]
        split: dict[str, tuple] = {}  # (each fused tensor read and split once, for its three parts)

        def part(name: str, i: int) -> torch.Tensor:
            if name not in split:
                split[name] = _thirds(ts, name)
            return split[name][i]

        made = {}
        for name in fused:
            stem, kind = name.rsplit(".in_proj_", 1)
            for i, x in enumerate("qkv"):
                made[f"{stem}.{x}_proj.{kind}"] = (lambda name=name, i=i: part(name, i), name)
        if made:
            ckpt = dataclasses.replace(ckpt, tensors=ts.derived(made, hidden=tuple(fused)))
        return super().convert(ckpt)

    @classmethod
    def embedding_scale(cls, config: dict, where: str, d: int) -> tuple[float, str | None]:
        """``sqrt(d)`` where ``scale_sqrt_depth`` (default true), else 1."""
        scaled = config.get("scale_sqrt_depth", True)
        if not isinstance(scaled, bool):
            raise UnsupportedModelError(f"{where}: scale_sqrt_depth is {scaled!r}, expected true or false")
        if not scaled:
            return 1.0, None
        return math.sqrt(d), f"token embeddings times sqrt(hidden_size) = {math.sqrt(d):.6g} in W_E (scale_sqrt_depth)"

    @classmethod
    def positional(cls, config: dict, where: str, ts, prefix: str, d: int) -> tuple[torch.Tensor, str | None]:
        """The table transformers computes, position ``p`` at row ``p``, ``max_position_embeddings`` rows."""
        if d < 4:
            raise UnsupportedModelError(f"{where}: hidden_size {d} is below 4: TIPSv2's sinusoids divide by "
                                        "d // 2 − 1")
        n = integer(config, where, "max_position_embeddings", default=64, high=MAX_WIDTH)
        table = tensor2tensor_sinusoids(n, d - d % 2)
        if d % 2:  # (an odd width: a zero row after the sinusoids, as the model pads them)
            table = torch.cat([table, table.new_zeros(1, n)])
        return table, f"sinusoidal positions computed as the model computes them, {n} of them"


def _thirds(ts, name: str) -> tuple[torch.Tensor, ...]:
    """The three equal parts along the first dimension of the fused projection ``name``: q, k, v."""
    w = ts.take(name)
    if w.ndim not in (1, 2) or w.shape[0] % 3:
        raise UnsupportedModelError(f"{ts.origin(name)}: {name} has shape {tuple(w.shape)}, expected (3 d, ...): "
                                    "the query, key and value projections stacked")
    return w.chunk(3, dim=0)
