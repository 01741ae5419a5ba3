"""BLOOM (BigScience; BLOOMZ): pre-LayerNorm, ALiBi positions, a LayerNorm on the embeddings.

``self_attention.query_key_value.weight`` is ``(3d, d)`` with rows ``[head][q|k|v][d_head]``, as
GPT-NeoX's. There are no position vectors: each head adds ``−m_h (i − j)`` to its logits, the
slopes ``m_h`` of :func:`compscope.core.heads.alibi_slopes` (transformers adds ``m_h j``, the
same pattern). The residual starts as ``word_embeddings_layernorm`` of the token's embedding,
a function of the token alone, so ``W_E`` holds it, column by column (the note says so); the
unembedding is the raw embedding (tied).
"""

from __future__ import annotations

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, Meta, Norm, alibi_slopes
from ...errors import UnsupportedModelError
from . import register
from .base import Family, checkpoint_notes, final_layernorm, number, sizes, split_cols, unembedding


@register
class Bloom(Family):
    name = "bloom"
    about = "BLOOM, BLOOMZ: ALiBi, a LayerNorm on the embeddings"
    model_types = ("bloom",)
    architectures = ("BloomForCausalLM", "BloomModel")
    handled = frozenset("hidden_size n_embed n_layer n_head num_hidden_layers num_attention_heads layer_norm_epsilon "
                        "pretraining_tp slow_but_exact num_key_value_heads".split())  # the last: GGUF files
    # Megatron's training switches (fused kernels, where the bias is added, the softmax's dtype, the
    # ALiBi offset of its sequence packing) and the vocabulary's special tokens: not what is computed
    ignored = frozenset("attention_softmax_in_fp32 bias_dropout_fusion masked_softmax_fusion offset_alibi skip_bias_add "
                        "skip_bias_add_qkv unk_token_id seq_length n_inner".split())
    accept = {"apply_residual_connection_post_layernorm": lambda v: not v}

    hf_base = "transformer"
    attention_returns_residual = True

    @classmethod
    def hook_points(cls, model):
        """BLOOM layers: ``input_layernorm`` reads the residual; the attention module returns the
        residual plus what it adds, so its ``dense`` projection is hooked, whose output is that
        addition (a ``slow_but_exact`` model with ``pretraining_tp > 1`` computes it without
        calling ``dense``: refused by name)."""
        cfg = model.config
        if getattr(cfg, "slow_but_exact", False) and getattr(cfg, "pretraining_tp", 1) > 1:
            raise UnsupportedModelError(
                f"{type(model).__name__} object: slow_but_exact with pretraining_tp = {cfg.pretraining_tp} sums the output "
                "projection in slices outside its module, where compscope cannot hook it; run the model with "
                "slow_but_exact false (the same projection, summed at once)")
        return [(b.input_layernorm, b.self_attention.dense) for b in cls.base_model(model).h]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d, H, L, r = sizes(cfg, where, width=("hidden_size", "n_embed"), heads=("n_head", "num_attention_heads"),
                           layers=("n_layer", "num_hidden_layers"))
        eps = number(cfg, where, "layer_norm_epsilon", default=1e-5)
        if cfg.get("num_key_value_heads") not in (None, H):
            raise UnsupportedModelError(f"{where}: config key 'num_key_value_heads' = {cfg['num_key_value_heads']!r}: "
                                        f"every BLOOM head has its own keys and values ({H})")
        prefix = "transformer." if "transformer.word_embeddings.weight" in ts else ""
        qkv_w, qkv_b, wo, bo, g, beta = ([] for _ in range(6))
        for i in range(L):
            p = f"{prefix}h.{i}."
            qkv_w.append(ts.take(p + "self_attention.query_key_value.weight", (3 * d, d)).reshape(H, 3, r, d))
            qkv_b.append(ts.take(p + "self_attention.query_key_value.bias", (3 * d,)).reshape(H, 3, r))
            wo.append(split_cols(ts.take(p + "self_attention.dense.weight", (d, d)), H, r))
            bo.append(ts.take(p + "self_attention.dense.bias", (d,)))
            g.append(ts.take(p + "input_layernorm.weight", (d,)))
            beta.append(ts.take(p + "input_layernorm.bias", (d,)))
        w, b = torch.stack(qkv_w), torch.stack(qkv_b)  # (L, H, 3, r, d), (L, H, 3, r)
        emb = ts.take(prefix + "word_embeddings.weight")
        if emb.ndim != 2 or emb.shape[1] != d:
            raise UnsupportedModelError(f"{ts.origin(prefix + 'word_embeddings.weight')}: shape {tuple(emb.shape)}, "
                                        f"expected (n_vocab, {d})")
        e = prefix + "word_embeddings_layernorm."
        emb_norm = Norm("layernorm", ts.take(e + "weight", (d,))[None], ts.take(e + "bias", (d,))[None], eps)
        W_U, head_note = unembedding(ckpt, ["lm_head.weight"], emb)
        notes = checkpoint_notes(ckpt, head_note) + [
            "W_E is the embeddings LayerNorm (word_embeddings_layernorm) of each token's embedding, what the residual "
            "starts as; W_U is the embedding itself",
            "ALiBi positions: each head's logits get -m_h (i - j), no position enters the residual"]
        return HeadWeights(
            W_Q=w[:, :, 0].contiguous(), W_K=w[:, :, 1].contiguous(), W_V=w[:, :, 2].contiguous(),
            W_O=torch.stack(wo),
            b_Q=b[:, :, 0].contiguous(), b_K=b[:, :, 1].contiguous(), b_V=b[:, :, 2].contiguous(),
            b_O=torch.stack(bo),
            W_E=emb_norm.apply(emb, 0).T, W_pos=None, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("layernorm", torch.stack(g), torch.stack(beta), eps),
            final_norm=final_layernorm(ts, prefix + "ln_f", d, eps),
            norm_placement="pre",
            positions="alibi",
            alibi=alibi_slopes(H).float(),
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
