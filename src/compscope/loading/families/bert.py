"""BERT encoders (BERT, all-MiniLM): post-LayerNorm, bidirectional, learned positions.

Post-LN: each sublayer's output is added to the residual and the *sum* is normalised,
``h' = LN(h + Attn(h))``. Attention at layer ``l`` therefore reads the residual directly; the
norm that produced it (``attn_norm``) is the embeddings LayerNorm for layer 0 and the previous
layer's output LayerNorm after that. The residual stream itself is renormalised after every
sublayer, so what a head writes reaches later heads only through that rescaling: recorded as
``norm_placement='post'``, and folding gains is refused (it would not preserve the model).
There is no unembedding in a plain encoder (``W_U = None``).
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm
from . import register
from .base import Family, number, sizes, split_cols, split_rows


@register
class Bert(Family):
    name = "bert"
    model_types = ("bert",)
    architectures = ("BertModel", "BertForMaskedLM")
    handled = frozenset("hidden_size num_attention_heads num_hidden_layers layer_norm_eps type_vocab_size".split())
    accept = {
        "position_embedding_type": lambda v: v in (None, "absolute"),
        "add_cross_attention": lambda v: not v,
        "is_decoder": lambda v: not v,
    }

    hf_base = "bert"

    @classmethod
    def hook_points(cls, model):
        """BERT layers (post-LN): ``attention.self`` reads the residual (the previous LayerNorm's
        output), ``attention.output.dense`` returns what is added (before dropout, residual, LN)."""
        return [(b.attention.self, b.attention.output.dense) for b in cls.base_model(model).encoder.layer]

    @classmethod
    def post_norm_points(cls, model):
        """``LN(h + Attn(h))`` is ``attention.output.LayerNorm``, ``LN(m + MLP(m))`` is ``output.LayerNorm``."""
        return [(b.attention.output.LayerNorm, b.output.LayerNorm) for b in cls.base_model(model).encoder.layer]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where)
        eps = number(cfg, where, "layer_norm_eps", default=1e-12)
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in ts else ""
        e = prefix + "embeddings."
        ln_w = [ts.take(e + "LayerNorm.weight", (d,))]
        ln_b = [ts.take(e + "LayerNorm.bias", (d,))]
        ws = {k: [] for k in ("query", "key", "value")}
        bs = {k: [] for k in ("query", "key", "value")}
        wo, bo = [], []
        for i in range(L):
            p = f"{prefix}encoder.layer.{i}.attention."
            for k in ws:
                ws[k].append(split_rows(ts.take(p + f"self.{k}.weight", (d, d)), H, r))
                bs[k].append(ts.take(p + f"self.{k}.bias", (d,)).reshape(H, r))
            wo.append(split_cols(ts.take(p + "output.dense.weight", (d, d)), H, r))
            bo.append(ts.take(p + "output.dense.bias", (d,)))
            if i < L - 1:  # the norm whose output layer i+1 reads
                ln_w.append(ts.take(f"{prefix}encoder.layer.{i}.output.LayerNorm.weight", (d,)))
                ln_b.append(ts.take(f"{prefix}encoder.layer.{i}.output.LayerNorm.bias", (d,)))
        wte = ts.take(e + "word_embeddings.weight")
        wpe = ts.take(e + "position_embeddings.weight")
        tte = ts.take(e + "token_type_embeddings.weight", required=False)
        notes = list(ckpt.notes) + [
            "post-LN: the residual is renormalised after every sublayer; attention reads it directly",
            "encoder: bidirectional attention, no unembedding (W_U is None)",
        ]
        return HeadWeights(
            W_Q=torch.stack(ws["query"]), W_K=torch.stack(ws["key"]), W_V=torch.stack(ws["value"]),
            W_O=torch.stack(wo),
            b_Q=torch.stack(bs["query"]), b_K=torch.stack(bs["key"]), b_V=torch.stack(bs["value"]),
            b_O=torch.stack(bo),
            W_E=wte.T, W_pos=wpe.T, W_U=None, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(ln_w), torch.stack(ln_b), eps),
            final_norm=None,
            norm_placement="post",
            positions="learned",
            causal=False,
            sliding_window=(None,) * L,
            embed_extra={} if tte is None else {"W_type": tte.T},
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
