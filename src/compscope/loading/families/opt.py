"""OPT decoders (Meta's OPT-125m ... 66B, the HF ``opt`` layout), and BioGPT and XGLM, the same layout.

Pre-LayerNorm ``self_attn_layer_norm`` (gain and bias, or none with
``layer_norm_elementwise_affine=False``); separate ``q/k/v_proj`` and ``out_proj`` with biases
(``enable_bias``); HF scales the query, bias included, by ``d_head^-1/2``, the usual logit scale;
learned absolute positions stored two rows late (``embed_positions`` row ``p + 2`` is position
``p``). OPT-350m's post-LN blocks (``do_layer_norm_before=False``) and its projections between a
narrower embedding and the residual (``word_embed_proj_dim``) are refused by name.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import UnsupportedModelError
from . import register
from .base import (Family, checkpoint_notes, config_attention_bias, final_layernorm, integer, layer_hooks,
                   separate_projections, sizes, tensor2tensor_sinusoids, token_embedding, unembedding)

#: OPT's learned positions start at this row (HF's ``OPTLearnedPositionalEmbedding.offset``)
POSITION_OFFSET = 2


@register
class OPT(Family):
    name = "opt"
    about = "OPT: learned positions stored two rows late"
    model_types = ("opt",)
    architectures = ("OPTForCausalLM", "OPTModel")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers enable_bias layer_norm_elementwise_affine "
                        "word_embed_proj_dim".split())
    ignored = frozenset("ffn_dim dropout layerdrop init_std".split())
    accept = {"do_layer_norm_before": lambda v: v is True, "_remove_final_layer_norm": lambda v: not v}
    attention_biases = config_attention_bias("enable_bias", True)
    #: where the decoder's tensors may sit, its final LayerNorm's name in it, and the unembedding's names
    prefixes: ClassVar[tuple[str, ...]] = ("model.decoder.", "decoder.", "", "language_model.model.decoder.")  # (the
    # last: BLIP-2's and InstructBLIP's language model)
    final_norm_at: ClassVar[str] = "final_layer_norm"
    heads: ClassVar[tuple[str, ...]] = ("lm_head.weight", "language_model.lm_head.weight")

    @classmethod
    def base_model(cls, model):
        """The decoder inside ``OPTForCausalLM`` (``model.model.decoder``) or ``OPTModel``; in BLIP-2 and
        InstructBLIP, that of its language model (``model.language_model.model.decoder``)."""
        lm = getattr(model, "language_model", model)
        base = getattr(lm, "model", lm)
        return getattr(base, "decoder", base)

    @classmethod
    def sizes(cls, config: dict, where: str) -> tuple[int, int, int, int]:
        """``(d_model, heads, layers, d_head)`` from the config's size keys."""
        return sizes(config, where)

    @classmethod
    def embed_scale(cls, config: dict, where: str) -> float:
        """What the model multiplies its token embeddings by: 1 here."""
        return 1.0

    @classmethod
    def position_table(cls, ts, prefix: str, config: dict, where: str, d: int) -> tuple[torch.Tensor, str]:
        """``W_pos (d, n_ctx)`` and the note that says what it is: the learned table from row 2 on."""
        pos = ts.take(prefix + "embed_positions.weight")
        if pos.ndim != 2 or pos.shape[1] != d or pos.shape[0] <= POSITION_OFFSET:
            raise UnsupportedModelError(f"{ts.origin(prefix + 'embed_positions.weight')}: embed_positions has shape "
                                        f"{tuple(pos.shape)}, expected ({POSITION_OFFSET} + n_ctx, {d})")
        return pos[POSITION_OFFSET:].T, (f"learned positions: W_pos is embed_positions from row {POSITION_OFFSET} on "
                                         "(OPT's offset)")

    hook_points = layer_hooks("self_attn_layer_norm", "self_attn")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = cls.sizes(cfg, where)
        if integer(cfg, where, "word_embed_proj_dim", default=d) != d:
            raise UnsupportedModelError(f"{where}: word_embed_proj_dim={cfg['word_embed_proj_dim']} differs from "
                                        f"hidden_size={d} (embeddings projected in and out of the residual: OPT-350m); "
                                        "not supported")
        prefix = next((p for p in cls.prefixes if p + "embed_tokens.weight" in ts), None)
        if prefix is None:
            raise UnsupportedModelError(f"{where}: no tensor named like '{cls.prefixes[0]}embed_tokens.weight'")
        affine = cfg.get("layer_norm_elementwise_affine", True)
        attn = separate_projections(ts, lambda i: f"{prefix}layers.{i}.self_attn.", L, H, H, r, d)
        g = [ts.take(f"{prefix}layers.{i}.self_attn_layer_norm.weight", (d,)) for i in range(L)] if affine else []
        beta = [ts.take(f"{prefix}layers.{i}.self_attn_layer_norm.bias", (d,)) for i in range(L)] if affine else []
        emb = token_embedding(ts, prefix + "embed_tokens.weight", d)
        W_pos, position_note = cls.position_table(ts, prefix, cfg, where, d)
        W_U, head_note = unembedding(ckpt, list(cls.heads), emb)
        eps = 1e-5  # nn.LayerNorm's default, which HF's OPT uses
        if affine:
            final = final_layernorm(ts, prefix + cls.final_norm_at, d, eps)
            attn_norm = Norm("layernorm", torch.stack(g), torch.stack(beta), eps)
        else:
            final = attn_norm = Norm("layernorm", None, None, eps)
        notes = checkpoint_notes(ckpt, head_note)
        notes.append(position_note)
        scale = cls.embed_scale(cfg, where)
        if scale != 1.0:
            notes.append(f"W_E includes the embedding scale {scale:g} (sqrt(d_model)); W_U does not")
        return HeadWeights(
            **attn,
            W_E=emb.T * scale if scale != 1.0 else emb.T, W_pos=W_pos, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=attn_norm,
            final_norm=final,
            norm_placement="pre",
            positions="learned",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )


@register
class BioGpt(OPT):
    """BioGPT (Microsoft): OPT's layout under ``biogpt.``, the token embeddings times
    ``sqrt(d_model)`` (``scale_embedding``), every LayerNorm at ``nn.LayerNorm``'s default eps
    (the config's ``layer_norm_eps`` is not read by the model), the unembedding ``output_projection``."""

    name = "biogpt"
    about = "BioGPT: OPT's layout, embeddings times sqrt(d_model)"
    model_types = ("biogpt",)
    architectures = ("BioGptForCausalLM", "BioGptModel")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers scale_embedding".split())
    ignored = frozenset("layerdrop activation_dropout layer_norm_eps".split())  # (the last: unread by the model)
    accept = {}
    prefixes = ("biogpt.", "")
    final_norm_at = "layer_norm"
    heads = ("output_projection.weight",)

    @classmethod
    def base_model(cls, model):
        """The decoder inside ``BioGptForCausalLM`` (``model.biogpt``) or ``BioGptModel``."""
        return getattr(model, "biogpt", model)

    @classmethod
    def embed_scale(cls, config: dict, where: str) -> float:
        d = cls.sizes(config, where)[0]
        return math.sqrt(d) if config.get("scale_embedding", True) else 1.0


@register
class Xglm(BioGpt):
    """XGLM (Meta's multilingual GPT): BioGPT's layout under ``model.`` (sizes as ``d_model``,
    ``attention_heads``, ``num_layers``), embeddings times ``sqrt(d_model)``, and fixed sinusoidal
    positions, which the model computes rather than stores: ``W_pos`` is that table, position ``p``
    at its row ``p + 2``, ``[sin((p + 2) f_i) | cos((p + 2) f_i)]`` with ``f_i = 10000^(−i / (d/2 − 1))``,
    in float32 as transformers computes it."""

    name = "xglm"
    about = "XGLM: OPT's layout, embeddings times sqrt(d_model), sinusoidal positions"
    model_types = ("xglm",)
    architectures = ("XGLMForCausalLM", "XGLMModel")
    handled = frozenset("d_model attention_heads num_layers scale_embedding max_position_embeddings".split())
    ignored = frozenset("ffn_dim dropout layerdrop init_std activation_dropout".split())
    accept = {"add_cross_attention": lambda v: not v}
    prefixes = ("model.", "")
    final_norm_at = "layer_norm"
    heads = ("lm_head.weight",)

    @classmethod
    def sizes(cls, config: dict, where: str) -> tuple[int, int, int, int]:
        return sizes(config, where, width=("d_model",), heads=("attention_heads",), layers=("num_layers",))

    @classmethod
    def base_model(cls, model):
        return getattr(model, "model", model)

    @classmethod
    def position_table(cls, ts, prefix: str, config: dict, where: str, d: int) -> tuple[torch.Tensor, str]:
        n = integer(config, where, "max_position_embeddings")
        if d % 2 or d < 4:
            raise UnsupportedModelError(f"{where}: d_model {d} is odd or below 4: no sinusoidal table as XGLM's")
        table = tensor2tensor_sinusoids(n + POSITION_OFFSET, d)[:, POSITION_OFFSET:]
        return table.contiguous(), (f"sinusoidal positions computed as the model computes them (position p at its "
                                      f"table's row p + {POSITION_OFFSET}), {n} of them")
