"""Falcon decoders (the HF ``falcon`` layout): a fused ``query_key_value`` in one of three row orders.

- ``new_decoder_architecture`` (Falcon-40B, 180B, Falcon 2): ``num_kv_heads`` groups, each
  ``[its H/G query heads | one key head | one value head]``; the attention reads its own
  LayerNorm ``ln_attn`` (``num_ln_in_parallel_attn`` 2, the default) or ``input_layernorm``;
- ``multi_query`` (Falcon-7B): ``[H query heads | one key head | one value head]``;
- neither: per head ``[q | k | v]``, as GPT-NeoX.

Pre-LayerNorm (gain and bias, ``layer_norm_epsilon``); projections biased when ``bias``; rotary
over the whole head in the rotate-half layout; attention and MLP in parallel when
``parallel_attn`` (recorded in the notes).

Falcon-RW (``alibi``): no rotary; each head adds ALiBi to its logit before the scale, ``(q·k + m_h j) / √d_head``,
its slopes BLOOM's (:func:`compscope.core.heads.alibi_slopes`) rounded to bfloat16 as the model computes them, so
compscope holds the slopes ``bf16(m_h) / √d_head`` (the model rounds each slope's product with a key's position to
bfloat16 too, which compscope does not: exact for slopes that are powers of two and positions below 256). Not run
on data: transformers' eager attention, the one that can be hooked, adds that bias twice (in the layer and in the
mask it builds), its SDPA attention once, so the model transformers runs is not the one trained.
"""

from __future__ import annotations

import math

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm, alibi_slopes
from ...errors import UnsupportedModelError
from . import register
from .base import (MAX_HEADS, Family, checkpoint_notes, config_attention_bias, final_layernorm, integer, layer_rotary,
                   number, rope_accept, rope_settings, sizes, split_cols, stack, token_embedding, transformers_at_least,
                   unembedding)


def _layout(cfg: dict) -> str:
    if cfg.get("new_decoder_architecture"):
        return "grouped"
    return "multi_query" if cfg.get("multi_query", True) else "per_head"


def _attn_norm_name(cfg: dict) -> str:
    """The LayerNorm the attention reads, as transformers builds the layer."""
    two = cfg.get("new_decoder_architecture") and cfg.get("num_ln_in_parallel_attn") in (None, 2)
    return "ln_attn" if two else "input_layernorm"


def split_fused(t: torch.Tensor, layout: str, H: int, G: int, r: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fused rows (and bias entries) ``t: ((H + 2G) r, ...)`` as ``(q (H, r, ...), k (G, r, ...), v (G, r, ...))``."""
    rest = t.shape[1:]
    if layout == "grouped":
        g = t.reshape(G, H // G + 2, r, *rest)
        return g[:, :-2].reshape(H, r, *rest), g[:, -2], g[:, -1]
    if layout == "per_head":
        g = t.reshape(H, 3, r, *rest)
        return g[:, 0], g[:, 1], g[:, 2]
    return t[: H * r].reshape(H, r, *rest), t[H * r : (H + 1) * r].reshape(1, r, *rest), t[(H + 1) * r :].reshape(1, r, *rest)


@register
class Falcon(Family):
    name = "falcon"
    about = ("Falcon-7B, 40B, 180B and Falcon 2: fused query_key_value, parallel block; Falcon-RW's ALiBi (weights "
             "only)")
    model_types = ("falcon",)
    architectures = ("FalconForCausalLM", "FalconModel")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers num_kv_heads layer_norm_epsilon alibi "
                        "new_decoder_architecture multi_query parallel_attn bias num_ln_in_parallel_attn rope_theta "
                        "num_key_value_heads".split())  # (the last: transformers 5.25's count, checked against the
    # layout's)
    ignored = frozenset("ffn_hidden_size activation".split())
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hf_base = "transformer"
    attention_biases = config_attention_bias("bias", False)

    @classmethod
    def hook_points(cls, model):
        """Falcon layers: the attention's LayerNorm reads the residual, ``self_attention`` returns what is added.
        A Falcon-RW (ALiBi) model is refused before transformers 5.25, whose eager attention adds its ALiBi twice
        (5.25 adds it once, in the mask, whatever the attention)."""
        if getattr(model.config, "alibi", False) and not transformers_at_least(5, 25):
            raise UnsupportedModelError(
                f"{type(model).__name__} object: a Falcon-RW model (alibi): transformers' eager attention, whose "
                "layers compscope hooks, adds its ALiBi twice (in the layer and again in the mask) before transformers "
                "5.25, where the model was trained with it once (as transformers' SDPA attention adds it), so the "
                "model that would run is not the one read: the data-based commands cannot run it with this "
                "transformers (the weight-only ones read it; transformers 5.25 adds it once)")
        norm = _attn_norm_name(model.config.to_dict())
        return [(getattr(b, norm), b.self_attention) for b in cls.base_model(model).h]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where)
        layout = _layout(cfg)
        G = {"grouped": None, "multi_query": 1, "per_head": H}[layout]
        if G is None:
            G = integer(cfg, where, "num_kv_heads", default=H, high=MAX_HEADS)
            if H % G:
                raise UnsupportedModelError(f"{where}: num_attention_heads={H} is not a multiple of num_kv_heads={G}")
        stated = cfg.get("num_key_value_heads")  # (transformers 5.25 derives it from the others and saves it)
        if stated is not None and stated != G:
            raise UnsupportedModelError(f"{where}: num_key_value_heads={stated!r}, but a {layout.replace('_', '-')} "
                                        f"Falcon layer (new_decoder_architecture, multi_query, num_kv_heads) has {G} "
                                        f"key/value heads")
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5)
        norm_name = _attn_norm_name(cfg)
        parts: dict[str, list] = {k: [] for k in ("wq", "wk", "wv", "bq", "bk", "bv", "wo", "bo", "g", "beta")}
        for i in range(L):
            p = f"transformer.h.{i}."
            q, k, v = split_fused(ts.take(p + "self_attention.query_key_value.weight", ((H + 2 * G) * r, d)), layout, H, G, r)
            b = ts.take(p + "self_attention.query_key_value.bias", ((H + 2 * G) * r,), required=False)
            bq, bk, bv = (None,) * 3 if b is None else split_fused(b, layout, H, G, r)
            for key, value in (("wq", q), ("wk", k), ("wv", v), ("bq", bq), ("bk", bk), ("bv", bv)):
                parts[key].append(value)
            parts["wo"].append(split_cols(ts.take(p + "self_attention.dense.weight", (d, H * r)), H, r))
            parts["bo"].append(ts.take(p + "self_attention.dense.bias", (d,), required=False))
            parts["g"].append(ts.take(p + f"{norm_name}.weight", (d,)))
            parts["beta"].append(ts.take(p + f"{norm_name}.bias", (d,)))
        emb = token_embedding(ts, "transformer.word_embeddings.weight", d)
        W_U, head_note = unembedding(ckpt, ["lm_head.weight"], emb)
        notes = checkpoint_notes(ckpt, head_note)
        if cfg.get("parallel_attn", True):
            notes.append("parallel block: attention and MLP of a layer read the same residual")
        positions = dict(rotary=layer_rotary(r, rope_settings(cfg), where, L), positions="rotary")
        if cfg.get("alibi"):  # Falcon-RW: ALiBi before the scale, its slopes rounded to bfloat16 (module docstring)
            positions = dict(rotary=None, positions="alibi",
                             alibi=(alibi_slopes(H).to(torch.bfloat16).double() / math.sqrt(r)).float())
            notes.append("ALiBi (Falcon-RW): added to q·k before the scale, slopes rounded to bfloat16 as the model "
                         "computes them, held as bf16(m_h) / sqrt(d_head); the model's bfloat16 rounding of each "
                         "slope's product with a key's position is not modelled")
        return HeadWeights(
            W_Q=torch.stack(parts["wq"]), W_K=torch.stack(parts["wk"]), W_V=torch.stack(parts["wv"]),
            W_O=torch.stack(parts["wo"]), b_Q=stack(parts["bq"]), b_K=stack(parts["bk"]), b_V=stack(parts["bv"]),
            b_O=stack(parts["bo"]),
            W_E=emb.T, W_pos=None, W_U=W_U, b_U=None,
            kv_map=tuple(h // (H // G) for h in range(H)),
            attn_norm=Norm("layernorm", torch.stack(parts["g"]), torch.stack(parts["beta"]), eps),
            final_norm=final_layernorm(ts, "transformer.ln_f", d, eps),
            norm_placement="pre",
            **positions,
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
