"""OPT decoders (Meta's OPT-125m ... 66B, the HF ``opt`` layout).

Pre-LayerNorm ``self_attn_layer_norm`` (gain and bias, or none with
``layer_norm_elementwise_affine=False``); separate ``q/k/v_proj`` and ``out_proj`` with biases
(``enable_bias``); HF scales the query, bias included, by ``d_head^-1/2``, the usual logit scale;
learned absolute positions stored two rows late (``embed_positions`` row ``p + 2`` is position
``p``). OPT-350m's post-LN blocks (``do_layer_norm_before=False``) and its projections between a
narrower embedding and the residual (``word_embed_proj_dim``) are refused by name.
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import UnsupportedModelError
from . import register
from .base import (Family, checkpoint_notes, config_attention_bias, final_layernorm, integer, layer_hooks,
                   separate_projections, sizes, token_embedding, unembedding)

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

    @classmethod
    def base_model(cls, model):
        """The decoder inside ``OPTForCausalLM`` (``model.model.decoder``) or ``OPTModel``."""
        base = getattr(model, "model", model)
        return getattr(base, "decoder", base)

    hook_points = layer_hooks("self_attn_layer_norm", "self_attn")

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where)
        if integer(cfg, where, "word_embed_proj_dim", default=d) != d:
            raise UnsupportedModelError(f"{where}: word_embed_proj_dim={cfg['word_embed_proj_dim']} differs from "
                                        f"hidden_size={d} (embeddings projected in and out of the residual: OPT-350m); "
                                        "not supported")
        prefix = next((p for p in ("model.decoder.", "decoder.", "") if p + "embed_tokens.weight" in ts), None)
        if prefix is None:
            raise UnsupportedModelError(f"{where}: no tensor named like 'model.decoder.embed_tokens.weight'")
        affine = cfg.get("layer_norm_elementwise_affine", True)
        attn = separate_projections(ts, lambda i: f"{prefix}layers.{i}.self_attn.", L, H, H, r, d)
        g = [ts.take(f"{prefix}layers.{i}.self_attn_layer_norm.weight", (d,)) for i in range(L)] if affine else []
        beta = [ts.take(f"{prefix}layers.{i}.self_attn_layer_norm.bias", (d,)) for i in range(L)] if affine else []
        emb = token_embedding(ts, prefix + "embed_tokens.weight", d)
        pos = ts.take(prefix + "embed_positions.weight")
        if pos.ndim != 2 or pos.shape[1] != d or pos.shape[0] <= POSITION_OFFSET:
            raise UnsupportedModelError(f"{ts.origin(prefix + 'embed_positions.weight')}: embed_positions has shape "
                                        f"{tuple(pos.shape)}, expected ({POSITION_OFFSET} + n_ctx, {d})")
        W_U, head_note = unembedding(ckpt, ["lm_head.weight"], emb)
        eps = 1e-5  # nn.LayerNorm's default, which HF's OPT uses
        if affine:
            final = final_layernorm(ts, prefix + "final_layer_norm", d, eps)
            attn_norm = Norm("layernorm", torch.stack(g), torch.stack(beta), eps)
        else:
            final = attn_norm = Norm("layernorm", None, None, eps)
        notes = checkpoint_notes(ckpt, head_note)
        notes.append(f"learned positions: W_pos is embed_positions from row {POSITION_OFFSET} on (OPT's offset)")
        return HeadWeights(
            **attn,
            W_E=emb.T, W_pos=pos[POSITION_OFFSET:].T, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=attn_norm,
            final_norm=final,
            norm_placement="pre",
            positions="learned",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
