"""GPT-1 (``openai-gpt``): post-LayerNorm, learned positions, GPT-2's fused ``Conv1D`` projections.

Each block computes ``n = LN_1(x + Attn(x))``, ``h = LN_2(n + MLP(n))``: attention at layer ``l``
reads the residual itself, which the previous block's ``ln_2`` made (``attn_norm`` row ``l``, as
for BERT). The first layer reads the sum of token and position embeddings, which no norm made
(``first_layer_unnormed``; ``attn_norm``'s row 0 is never read). The logits read the last block's
output through the tied embeddings, with no final norm. ``c_attn`` and ``c_proj`` are laid out as
GPT-2's (:mod:`.gpt2`); logits are scaled by ``d_head^{-1/2}``.
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from ...errors import WeightError
from . import register
from .base import Family, checkpoint_notes, number, split_cols, split_rows, unembedding
from .gpt2 import gpt2_sizes


@register
class OpenAIGPT(Family):
    name = "openai_gpt"
    about = "GPT-1: post-LN, learned positions, its first layer reading the raw embeddings"
    model_types = ("openai-gpt",)
    architectures = ("OpenAIGPTLMHeadModel", "OpenAIGPTModel", "OpenAIGPTDoubleHeadsModel")
    handled = frozenset("n_embd n_layer n_head layer_norm_epsilon".split())
    ignored = frozenset("afn n_special predict_special_tokens summary_type summary_use_proj summary_activation "
                        "summary_proj_to_labels summary_first_dropout".split())
    accept = {}
    hf_base = "transformer"

    @classmethod
    def hook_points(cls, model):
        """``attn`` reads the residual (the previous block's ``ln_2`` output), ``attn.c_proj`` returns
        what is added (before dropout, the residual and ``ln_1``)."""
        return [(b.attn, b.attn.c_proj) for b in cls.base_model(model).h]

    @classmethod
    def post_norm_points(cls, model):
        """``LN(x + Attn(x))`` is ``ln_1``, ``LN(n + MLP(n))`` is ``ln_2``."""
        return [(b.ln_1, b.ln_2) for b in cls.base_model(model).h]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = gpt2_sizes(cfg, where)
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5, open_low=True)
        prefix = "transformer." if "transformer.tokens_embed.weight" in ts else ""
        fields: dict[str, list] = {k: [] for k in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")}
        gains, biases = [torch.ones(d)], [torch.zeros(d)]  # row 0: no norm made the first layer's residual
        for i in range(L):
            p = f"{prefix}h.{i}."
            w = ts.take(p + "attn.c_attn.weight", (d, 3 * d)).T  # Conv1D: (in, out); rows [q | k | v]
            b = ts.take(p + "attn.c_attn.bias", (3 * d,))
            for x, wx, bx in zip("QKV", w.split(d), b.split(d)):
                fields[f"W_{x}"].append(split_rows(wx, H, r))
                fields[f"b_{x}"].append(bx.reshape(H, r))
            fields["W_O"].append(split_cols(ts.take(p + "attn.c_proj.weight", (d, d)).T, H, r))
            fields["b_O"].append(ts.take(p + "attn.c_proj.bias", (d,)))
            if i < L - 1:  # the norm whose output layer i + 1 reads
                gains.append(ts.take(p + "ln_2.weight", (d,)))
                biases.append(ts.take(p + "ln_2.bias", (d,)))
        tokens = ts.take(prefix + "tokens_embed.weight")
        if tokens.ndim != 2 or tokens.shape[1] != d:
            raise WeightError(f"{ts.origin(prefix + 'tokens_embed.weight')}: 'tokens_embed.weight' has shape "
                              f"{tuple(tokens.shape)}, expected (n_vocab, {d})")
        positions = ts.take(prefix + "positions_embed.weight")
        if positions.ndim != 2 or positions.shape[1] != d:
            raise WeightError(f"{ts.origin(prefix + 'positions_embed.weight')}: 'positions_embed.weight' has shape "
                              f"{tuple(positions.shape)}, expected (n_positions, {d})")
        W_U, head_note = unembedding(ckpt, ["lm_head.weight"], tokens)
        notes = checkpoint_notes(ckpt, head_note) + [
            "post-LN: the residual is renormalised after every sublayer; attention reads it directly, the first "
            "layer the raw sum of token and position embeddings",
        ]
        return HeadWeights(
            **{k: torch.stack(v) for k, v in fields.items()},
            W_E=tokens.T, W_pos=positions.T, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(gains), torch.stack(biases), eps),
            final_norm=None,
            norm_placement="post",
            first_layer_unnormed=True,
            positions="learned",
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
