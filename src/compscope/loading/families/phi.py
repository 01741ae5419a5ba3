"""Phi-1, Phi-1.5 and Phi-2 decoders (the HF ``phi`` layout).

Pre-LayerNorm (gain and bias) read by attention and MLP at once (a parallel block, as GPT-J's);
separate ``q/k/v_proj`` with biases and an output ``dense`` with bias; GQA where
``num_key_value_heads`` says; partial rotary in the rotate-half layout (``partial_rotary_factor``:
Phi-2 0.4); optionally a LayerNorm on each query and key head (``qk_layernorm``, a per-head
QK-norm with gain and bias); the unembedding ``lm_head`` has a bias.
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from . import register
from .base import (Family, checkpoint_notes, final_layernorm, layer_rotary, kv_groups, number, rope_accept,
                   rope_settings, separate_projections, sizes, token_embedding, unembedding)
from .llama import llamalike_hooks


@register
class Phi(Family):
    name = "phi"
    about = "Phi-1, Phi-1.5, Phi-2: parallel block, partial rotary"
    model_types = ("phi",)
    architectures = ("PhiForCausalLM", "PhiModel")
    handled = frozenset("hidden_size num_attention_heads num_key_value_heads num_hidden_layers layer_norm_eps "
                        "partial_rotary_factor rope_theta qk_layernorm".split())
    ignored = frozenset("embd_pdrop resid_pdrop".split())
    accept = {"rope_parameters": rope_accept, "rope_scaling": rope_accept}

    hook_points = llamalike_hooks

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where)
        G, kv_map = kv_groups(cfg, where, H)
        eps = number(cfg, where, "layer_norm_eps", default=1e-5)
        qk_ln = bool(cfg.get("qk_layernorm"))
        prefix = "model." if "model.embed_tokens.weight" in ts else ""
        attn = separate_projections(ts, lambda i: f"{prefix}layers.{i}.self_attn.", L, H, G, r, d, out="dense",
                                    qkv_bias=True, out_bias=True)
        g, beta, qk = [], [], {"q": ([], []), "k": ([], [])}
        for i in range(L):
            p = f"{prefix}layers.{i}."
            g.append(ts.take(p + "input_layernorm.weight", (d,)))
            beta.append(ts.take(p + "input_layernorm.bias", (d,)))
            if qk_ln:
                for x in "qk":
                    qk[x][0].append(ts.take(f"{p}self_attn.{x}_layernorm.weight", (r,)))
                    qk[x][1].append(ts.take(f"{p}self_attn.{x}_layernorm.bias", (r,)))
        emb = token_embedding(ts, prefix + "embed_tokens.weight", d)
        W_U, head_note = unembedding(ckpt, ["lm_head.weight"], emb)
        b_U = ts.take("lm_head.bias", (emb.shape[0],), required=False) if W_U is not None else None

        notes = checkpoint_notes(ckpt, head_note)
        notes.append("parallel block: attention and MLP of a layer read the same normed residual")
        if qk_ln:
            notes.append("QK-norm: q and k are LayerNorm-ed per head before the dot product, so W_QK-based scores "
                         "(Q/K-composition) describe the bilinear part only; they are approximations")
        ln = lambda ws, bs: Norm("layernorm", torch.stack(ws), torch.stack(bs), eps)  # noqa: E731
        return HeadWeights(
            **attn,
            W_E=emb.T, W_pos=None, W_U=W_U, b_U=b_U,
            kv_map=kv_map,
            attn_norm=ln(g, beta),
            final_norm=final_layernorm(ts, prefix + "final_layernorm", d, eps),
            norm_placement="pre",
            qk_norm=(ln(*qk["q"]), ln(*qk["k"])) if qk_ln else None,
            rotary=layer_rotary(r, rope_settings(cfg), where, L),
            positions="rotary",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
