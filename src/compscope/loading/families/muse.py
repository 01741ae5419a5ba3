"""Muse Glimmer's language model (Meta): Llama-like layers with Gemma's sandwich norms and more.

- The token embeddings pass through an RMS norm without gain before the first layer, one token at
  a time: ``W_E[:, t] = E[t] / rms(E[t])`` (float32, as the model computes it).
- Each layer reads a ``1 + w`` RMS norm of the residual; its attention output passes through
  another (``post_attention_layernorm``, its own ``post_norm_eps``) before it is added.
- Queries and keys are RMS-normalised per head without gain (one ``qk_norm`` module), the queries
  then multiplied by ``qk_scale_factor``: held as QK-norm gains ``qk_scale_factor`` and 1.
- Each head's output is gated per dimension by ``sigmoid(gate_proj x)`` before ``o_proj`` (``W_G``).
- Local layers slide a window, global ones (every fourth counted back from the last, by default)
  have no rotary (``layer_rope_theta`` 0); the others turn at the config's base.
- The final norm multiplies by its stored weight (not ``1 + w``); the logits are
  ``output_multiplier`` times ``W_U x`` (folded into ``W_U``), then soft-capped.
"""

from __future__ import annotations

import dataclasses

import torch

from ...core.heads import HeadWeights, Norm
from ...errors import UnsupportedModelError
from ..checkpoint import Checkpoint
from . import register
from .base import MAX_HEADS, integer, layer_hooks, number, prefix_of, rope_settings
from .llama import LlamaLike, LlamaLikeOptions, PREFIXES, convert_llamalike, listed_or, with_output_gates


#: Muse Glimmer's window where its config states none (transformers' default)
MUSE_GLIMMER_WINDOW = 2048


@register
class MuseGlimmer(LlamaLike):
    name = "muse_glimmer"
    about = ("Muse Glimmer's language model (Meta): normed embeddings, sandwich norms, gainless QK-norm with a query "
             "scale, a per-dimension output gate, NoPE global layers")
    model_types = ("muse_glimmer_text",)
    architectures = ("MuseGlimmerTextModel",)
    handled = LlamaLike.handled - {"max_window_layers", "use_sliding_window"} | {
        "qk_scale_factor", "output_multiplier", "post_norm_eps", "layer_rope_theta", "final_logit_softcapping"}
    hook_points = layer_hooks("input_layernorm", "post_attention_layernorm")

    @classmethod
    def layer_types(cls, config: dict, n_layers: int, where: str = "config") -> list[str]:
        """As listed, else transformers' default: every fourth layer counted back from the last global."""
        return listed_or(config, n_layers, where, lambda i: (n_layers - 1 - i) % 4 == 0, MUSE_GLIMMER_WINDOW)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = dict(ckpt.config), ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        n = integer(cfg, where, "num_hidden_layers")
        d, H = integer(cfg, where, "hidden_size"), integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
        r = integer(cfg, where, "head_dim", default=128)
        cfg.setdefault("sliding_window", MUSE_GLIMMER_WINDOW)
        theta = number(rope_settings(cfg), where, "rope_theta", open_low=True)
        bases = cfg.get("layer_rope_theta")
        if bases is None:
            bases = [0 if (n - 1 - i) % 4 == 0 else theta for i in range(n)]
        if not isinstance(bases, list) or len(bases) != n or any(b not in (0, theta) for b in bases):
            raise UnsupportedModelError(
                f"{where}: config key 'layer_rope_theta' = {bases!r}: transformers turns every layer whose entry is not 0 "
                f"at rope_theta ({theta:g}), so only 0 or that base per layer reads as it runs")
        scale = number(cfg, where, "qk_scale_factor", default=3.87, open_low=True)
        eps = number(cfg, where, "rms_norm_eps", default=1e-5, open_low=True)
        post_eps = number(cfg, where, "post_norm_eps", default=1e-8, open_low=True)
        prefix = prefix_of(ts, "layers.0.self_attn.q_proj.weight", PREFIXES, "model.")
        made = {}
        for i in range(n):  # (no tensors: the QK norm has no gain; read as gains 1 + w = scale and 1)
            q = f"{prefix}layers.{i}.self_attn.q_proj.weight"
            made[f"{prefix}layers.{i}.self_attn.q_norm.weight"] = (lambda: torch.full((r,), scale - 1.0), q)
            made[f"{prefix}layers.{i}.self_attn.k_norm.weight"] = (lambda: torch.zeros(r), q)
        opts = LlamaLikeOptions(
            norm_offset=1.0, qk_norm=True, post_attn_norm=True, default_head_dim=128,
            nope_layers=tuple(i for i, b in enumerate(bases) if b == 0),
            logit_scale=number(cfg, where, "output_multiplier", default=0.19611613513818404, open_low=True))
        hw = convert_llamalike(dataclasses.replace(ckpt, config=cfg, tensors=ts.derived(made)), cls, opts)

        emb = hw.W_E  # (d_model, vocab): the embedding as read, each column normed as the model norms it
        W_E = emb * torch.rsqrt(emb.pow(2).mean(0, keepdim=True) + eps)
        q_gain, k_gain = torch.full((n, r), scale), torch.ones(n, r)
        final = hw.final_norm
        gates = [ts.take(f"{prefix}layers.{i}.self_attn.gate_proj.weight", (H * r, d)).reshape(H, r, d)
                 for i in range(n)]
        cap = number(cfg, where, "final_logit_softcapping", default=20.0, open_low=True) \
            if cfg.get("final_logit_softcapping", 20.0) is not None else None
        notes = [n_ for n_ in hw.meta.notes if not n_.startswith("QK-norm")] + [
            "W_E is each token's embedding after the embeddings' gainless RMS norm (float32): the residual the first "
            "layer reads",
            f"QK-norm without gains: q and k are RMS-normalised per head, q then times qk_scale_factor {scale:g} (held "
            "as its gain), so W_QK-based scores (Q/K-composition) describe the bilinear part only; they are "
            "approximations",
            f"the attention-output norm's epsilon is post_norm_eps ({post_eps:g}); the final norm multiplies by its "
            "weight as stored (not 1 + w)",
        ] + ([f"final logits soft-capped, c tanh(l / c) with c = {cap:g}: a monotone map of W_U x, which W_U-based "
              "scores describe before the cap"] if cap is not None else [])
        hw = hw.replace(
            W_E=W_E,
            qk_norm=(Norm("rmsnorm", q_gain, None, eps), Norm("rmsnorm", k_gain, None, eps)),
            attn_out_norm=dataclasses.replace(hw.attn_out_norm, eps=post_eps),
            final_norm=None if final is None else Norm(final.kind, final.weight, final.bias, final.eps, 0.0),
            meta=dataclasses.replace(hw.meta, notes=tuple(notes)))
        return with_output_gates(hw, gates)
