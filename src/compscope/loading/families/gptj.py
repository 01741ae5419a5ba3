"""GPT-J decoders (GPT-J-6B and its descendants, the HF ``gptj`` layout).

Pre-LayerNorm ``ln_1`` read by attention and MLP at once (a parallel block); separate
``q/k/v_proj`` and ``out_proj`` without biases (read where a model object has them:
TransformerLens's processing adds them; a HF folder's are ignored, as transformers ignores
them); rotary on the first ``rotary_dim`` dims of each head in the interleaved layout (pairs
``2i, 2i+1``, base 10000); logits ``q·k / sqrt(d_head)``; the unembedding ``lm_head`` has a
bias. ``rotary_dim`` unset (rotary frequencies over the whole width, not the head) is refused.
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm, Rotary
from ...errors import UnsupportedModelError
from . import register
from .gpt2 import ln1_attn_hooks
from .base import (Family, checkpoint_notes, final_layernorm, integer, inv_freq, number, separate_projections, sizes,
                   token_embedding, unembedding)


@register
class GPTJ(Family):
    name = "gptj"
    model_types = ("gptj",)
    architectures = ("GPTJForCausalLM", "GPTJModel")
    handled = frozenset("n_embd n_head n_layer rotary_dim layer_norm_epsilon".split())
    ignored = frozenset("n_inner embd_pdrop resid_pdrop attn_pdrop n_positions".split())

    hf_base = "transformer"
    position_table = True  # HF's GPT-J looks its rotary sines up in a table of n_positions rows

    hook_points = classmethod(ln1_attn_hooks)

    @classmethod
    def attention_biases(cls, config: dict) -> tuple[bool, bool]:
        return False, False  # transformers builds every projection with bias=False

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where, width=("n_embd",), heads=("n_head",), layers=("n_layer",))
        if cfg.get("rotary_dim") is None:
            raise UnsupportedModelError(f"{where}: rotary_dim is not set (GPT-J then turns whole heads by frequencies "
                                        "of the model width); not supported")
        rot_dim = integer(cfg, where, "rotary_dim", high=r)
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5)
        prefix = "transformer." if "transformer.wte.weight" in ts else ""
        # no biases in GPT-J's own files; processing may add them
        attn = separate_projections(ts, lambda i: f"{prefix}h.{i}.attn.", L, H, H, r, d)
        g = [ts.take(f"{prefix}h.{i}.ln_1.weight", (d,)) for i in range(L)]
        beta = [ts.take(f"{prefix}h.{i}.ln_1.bias", (d,)) for i in range(L)]
        emb = token_embedding(ts, prefix + "wte.weight", d)
        W_U, head_note = unembedding(ckpt, ["lm_head.weight"], emb)
        b_U = ts.take("lm_head.bias", (emb.shape[0],), required=False) if W_U is not None else None
        freqs = inv_freq(rot_dim, {"rope_theta": 10000.0}, where)  # GPT-J's fixed base
        notes = checkpoint_notes(ckpt, head_note)
        notes.append("parallel block: attention and MLP of a layer read the same normed residual")
        return HeadWeights(
            **attn,
            W_E=emb.T, W_pos=None, W_U=W_U, b_U=b_U,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(g), torch.stack(beta), eps),
            final_norm=final_layernorm(ts, prefix + "ln_f", d, eps),
            norm_placement="pre",
            rotary=Rotary(rot_dim, freqs[None].expand(L, -1).contiguous(), "interleaved"),
            positions="rotary",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
