"""Talkie as llama.cpp runs its GGUF files: Llama's attention in layers whose RMSNorms have no gains, each token's
embedding RMS-normalised (no gain) before the first layer, queries and keys RMS-normalised per head after the
rotary map (the query's by one gain per head, the key's by none), each layer's attention output times a scalar of
its own, the logits times ``logit_scale``; every layer also adds the normalised embedding, times a scalar of its
own, to the residual after its MLP. No HuggingFace model type names it here (its model is its makers' own code):
GGUF files alone are read as it (``gguf_types``), for the weight-only commands.

A per-head RMSNorm whose gain is one number per head commutes with the rotary map (a rotation keeps each head's
norm), so the norm is read before it, as compscope's QK-norm stands; the scalar gains are held as a gain on each of
the head's dims. The embedding's norm acts on each token's row alone, so it is read into ``W_E`` exactly."""

from __future__ import annotations

import dataclasses

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights
from . import register
from .base import MAX_LAYERS, integer, number
from .llama import LlamaLike, LlamaLikeOptions, convert_llamalike


@register
class Talkie(LlamaLike):
    name = "talkie"
    about = ("Talkie (GGUF files, as llama.cpp runs them): gainless RMSNorms, the embedding normed and added again "
             "every layer, per-head QK norms (a scalar gain on queries), scaled attention outputs and logits")
    model_types = ()
    gguf_types = ("talkie_gguf",)
    architectures = ()
    handled = LlamaLike.handled | {"logit_scale"}
    options = LlamaLikeOptions(norm_gains=False, qk_norm=True, qk_gains_per_head=True)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        """Llama's converter on the file's tensors with each query norm's gain (one per head) spread over the head's
        dims, the key norms' gains ones, and each layer's output scale in its ``W_O``; then the embedding's norm
        folded into ``W_E`` and the logit scale into ``W_U``."""
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        H = integer(cfg, where, "num_attention_heads")
        G = integer(cfg, where, "num_key_value_heads", default=H)
        r = integer(cfg, where, "head_dim", default=integer(cfg, where, "hidden_size") // H)
        made = {}
        for i in range(integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)):
            p = f"model.layers.{i}.self_attn."
            q, o, s = p + "q_norm.weight", p + "o_proj.weight", p + "o_proj.scale"
            made[q] = (lambda q=q: ts.take(q, (H, 1)).expand(H, r).contiguous(), q)
            made[p + "k_norm.weight"] = (lambda: torch.ones(G, r), q)
            made[o] = (lambda o=o, s=s: ts.take(o) * ts.take(s, (1,)), o)
        hw = convert_llamalike(dataclasses.replace(ckpt, tensors=ts.derived(made)), cls, cls.options)
        eps = hw.attn_norm.eps  # (the embedding's norm is the layers' own, gainless: each token's column normalised)
        W_E = hw.attn_norm.normalise(hw.W_E.T).T.to(hw.W_E.dtype)
        scale = number(cfg, where, "logit_scale", low=-1e300)
        return hw.replace(W_E=W_E, W_U=hw.W_U * scale, note=(
            f"each token's embedding is RMS-normalised (no gain, eps {eps:.3g}) before the first layer: read into W_E "
            f"(exact, token by token); the logits times logit_scale {scale:.6g}, folded into W_U; each layer's "
            "attention output times its scalar, folded into its W_O; queries and keys RMS-normalised per head after "
            "the rotary map (the same before it: a rotation keeps a head's norm), the query's by one gain per head, "
            "the key's by none; every layer also adds the normalised embedding, times a scalar of its own, to the "
            "residual after its MLP (a write of W_E that no head makes, which the weight-only measures leave out)"))
