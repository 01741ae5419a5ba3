"""TransformerLens ``HookedTransformer`` objects (TransformerLens ≤ 3.x).

TransformerLens uses row vectors (``x @ W``): ``W_Q: (layer, head, d_model, d_head)``,
``W_O: (layer, head, d_head, d_model)``, ``W_E: (n_vocab, d_model)``, ``W_U: (d_model, n_vocab)``;
each is transposed into the column convention here. Weight processing TransformerLens already
did (``fold_ln`` turns ``ln1`` into ``LayerNormPre``/``RMSNormPre``) is recorded as a
``transformer_lens:fold_ln`` step. Supported beyond the plain block: GQA
(``n_key_value_heads``), rotary (half or adjacent pairs, ``rotary_base_local``, linear
``rotary_scaling_factor`` and Llama 3.1's NTK-by-parts frequencies), local attention (``attn_types`` + ``window_size``), QK-norm
(``use_qk_norm``), the post-attention norm (``use_normalization_before_and_after``) and soft-capped
attention scores (``attn_scores_soft_cap``).
Every other config switch that changes what attention computes is refused by name.
``HookedEncoder`` (BERT) is read as the post-LN encoder it is: attention reads the residual
directly, ``attn_norm`` is the norm that made it (``embed.ln`` for layer 0, the previous block's
``ln2`` after that), and the masked-LM head is not read (``W_U = None``), as for HuggingFace BERT.
TransformerLens's ``TransformerBridge`` (TransformerLens 4, and 3.9) is read by
:mod:`~compscope.loading.formats.transformer_bridge`, through the HuggingFace model it wraps.
"""

from __future__ import annotations

import torch

from ...errors import UnsupportedModelError
from ...core.heads import HeadWeights, Meta, Norm, Rotary
from ..families.base import inv_freq

#: cfg attribute -> test that the value is one compscope reproduces (absent attributes pass)
_REFUSE_UNLESS = {
    "attention_dir": lambda v: v in ("causal", "bidirectional"),
    "positional_embedding_type": lambda v: v in ("standard", "rotary", "alibi"),  # shortformer: W_pos enters Q/K only
    "attn_types": lambda v: not v or set(v) <= {"global", "local"},
    "clip_qkv": lambda v: v is None,
    "use_logn_attn": lambda v: not v,
    "use_dynamic_ntk_rope": lambda v: not v,
    "scale_attn_by_inverse_layer_idx": lambda v: not v,
    "use_yarn_rope": lambda v: not v,
    "use_attention_sinks": lambda v: not v,
    "load_in_4bit": lambda v: not v,
    "original_architecture": lambda v: v not in ("OlmoeForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM"),
}


def is_hooked_encoder(obj: object) -> bool:
    """A TransformerLens ``HookedEncoder`` (BERT blocks: post-LN), or a subclass of it."""
    return any(c.__name__ == "HookedEncoder" for c in type(obj).__mro__)


def _bert_blocks(obj: object) -> bool:
    """Post-LN ``BertBlock`` layers (``HookedEncoder``, and ``HookedAudioEncoder``, which has no tokens)."""
    blocks = getattr(obj, "blocks", None)
    try:
        return hasattr(obj, "cfg") and blocks is not None and len(blocks) > 0 and type(blocks[0]).__name__ == "BertBlock"
    except TypeError:
        return False


def is_hooked_transformer(obj: object) -> bool:
    from .transformer_bridge import is_bridge

    if is_bridge(obj) or is_hooked_encoder(obj) or _bert_blocks(obj):
        return False
    return type(obj).__name__ == "HookedTransformer" or (hasattr(obj, "cfg") and hasattr(obj, "blocks") and hasattr(obj, "W_Q"))


def _refuse_unsupported(cfg, where: str) -> None:
    bad = [f"cfg.{k}={getattr(cfg, k)!r}" for k, ok in _REFUSE_UNLESS.items() if hasattr(cfg, k) and not ok(getattr(cfg, k))]
    if bad:
        hint = ("; compscope reads that architecture from the HuggingFace model itself, or from a TransformerBridge "
                "wrapping it" if not _REFUSE_UNLESS["original_architecture"](getattr(cfg, "original_architecture", None))
                else "")
        raise UnsupportedModelError(f"{where}: unsupported TransformerLens settings: {', '.join(bad)}{hint}")


def _rows(x: torch.Tensor) -> torch.Tensor:
    """TransformerLens's row-vector weight ``(..., a, b)`` as compscope's column form ``(..., b, a)``, float32."""
    return x.detach().float().transpose(-1, -2).contiguous()


def _norm(modules: list, where: str, eps: float) -> tuple[Norm | None, bool]:
    """The ``Norm`` of TransformerLens norm modules (one per layer), and whether it was folded."""
    kinds = {type(m).__name__ for m in modules}
    if len(kinds) != 1:
        raise UnsupportedModelError(f"{where}: layers use different norm modules {sorted(kinds)}")
    kind = kinds.pop()
    if kind == "Identity":
        return None, False
    if kind in ("LayerNormPre", "RMSNormPre"):
        return Norm("layernorm" if kind == "LayerNormPre" else "rmsnorm", None, None, eps), True
    if kind == "LayerNorm":
        w = torch.stack([m.w.detach().float() for m in modules])
        b = torch.stack([m.b.detach().float() for m in modules])
        return Norm("layernorm", w, b, float(modules[0].eps)), False
    if kind == "RMSNorm":
        return Norm("rmsnorm", torch.stack([m.w.detach().float() for m in modules]), None, float(modules[0].eps)), False
    raise UnsupportedModelError(f"{where}: norm module {kind} is not supported")


def from_hooked_transformer(model) -> HeadWeights:
    cfg = model.cfg
    where = f"HookedTransformer({cfg.model_name})"
    _refuse_unsupported(cfg, where)
    t = _rows
    blocks = list(model.blocks)
    H = cfg.n_heads
    gqa = hasattr(blocks[0].attn, "_W_K")
    W_K = torch.stack([t(b.attn._W_K if gqa else b.attn.W_K) for b in blocks])
    W_V = torch.stack([t(b.attn._W_V if gqa else b.attn.W_V) for b in blocks])
    b_K = torch.stack([(b.attn._b_K if gqa else b.attn.b_K).detach().float() for b in blocks])
    b_V = torch.stack([(b.attn._b_V if gqa else b.attn.b_V).detach().float() for b in blocks])
    G = W_K.shape[1]
    if H % G:
        raise UnsupportedModelError(f"{where}: n_heads={H} is not a multiple of n_key_value_heads={G}")

    steps, notes = [], []
    norm, folded = _norm([b.ln1 for b in blocks], where, cfg.eps)
    if folded:
        steps.append("transformer_lens:fold_ln")
    final = None
    lf = getattr(model, "ln_final", None)
    if lf is not None:
        final, _ = _norm([lf], where, cfg.eps)
    attn_out_norm = None
    if getattr(cfg, "use_normalization_before_and_after", False):
        attn_out_norm, _ = _norm([b.ln1_post for b in blocks], where, cfg.eps)
    qk_norm = None
    if getattr(cfg, "use_qk_norm", False):
        qn, _ = _norm([b.attn.q_norm for b in blocks], where, cfg.eps)
        kn, _ = _norm([b.attn.k_norm for b in blocks], where, cfg.eps)
        qk_norm = (qn, kn)
        notes.append("QK-norm: q and k are RMS-normalised per head; W_QK-based scores describe the bilinear part only")

    types = [getattr(b.attn, "attn_type", "global") for b in blocks]
    window = getattr(cfg, "window_size", None)
    if "local" in types and not isinstance(window, int):
        raise UnsupportedModelError(f"{where}: local attention layers need an integer cfg.window_size, got {window!r}")
    rotary = None
    if cfg.positional_embedding_type == "rotary":
        dim = cfg.rotary_dim
        factor = float(getattr(cfg, "rotary_scaling_factor", 1.0) or 1.0)
        freqs = []
        ntk = bool(getattr(cfg, "use_NTK_by_parts_rope", False))
        for kind in types:
            local = kind == "local"
            base = cfg.rotary_base_local if local and getattr(cfg, "rotary_base_local", None) is not None else cfg.rotary_base
            if ntk:  # Llama 3.1: HF's "llama3" rope type, in every layer; TransformerLens then ignores the linear factor
                freqs.append(inv_freq(dim, {"rope_theta": float(base), "rope_type": "llama3",
                                            "factor": cfg.NTK_by_parts_factor,
                                            "low_freq_factor": cfg.NTK_by_parts_low_freq_factor,
                                            "high_freq_factor": cfg.NTK_by_parts_high_freq_factor,
                                            "original_max_position_embeddings": cfg.NTK_original_ctx_len}, where))
                continue
            f = 1.0 / float(base) ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
            freqs.append(f if local else f / factor)  # TransformerLens scales global layers only
        rotary = Rotary(dim, torch.stack(freqs), "interleaved" if cfg.rotary_adjacent_pairs else "half")
    scale = (1.0 / cfg.attn_scale) if cfg.use_attn_scale else 1.0
    cap = getattr(cfg, "attn_scores_soft_cap", None)
    cap = float(cap) if cap is not None and cap > 0 else None  # TransformerLens: -1 means none
    if cap is not None:
        notes.append(f"attention scores are soft-capped, c tanh(l / c) with c = {cap:g}; W_QK-based scores describe them before the cap")
    W_U = getattr(model, "W_U", None)
    b_U = getattr(model, "b_U", None)
    W_E = model.W_E.detach().float()
    if getattr(cfg, "post_embedding_ln", False):  # BLOOM: a LayerNorm on each token's embedding, the residual's start
        with torch.no_grad():
            W_E = model.embed.ln(model.W_E).detach().float()
        notes.append("W_E is the embedding LayerNorm (embed.ln) of each token's embedding, what the residual starts as")
    alibi = None
    if cfg.positional_embedding_type == "alibi":  # the slopes TransformerLens computes (its own rule for any head count)
        from transformer_lens.components import AbstractAttention

        alibi = AbstractAttention.create_alibi_multipliers(H, "cpu").detach().float()
    return HeadWeights(
        W_Q=t(model.W_Q), W_K=W_K, W_V=W_V, W_O=t(model.W_O),
        b_Q=model.b_Q.detach().float(), b_K=b_K, b_V=b_V, b_O=model.b_O.detach().float(),
        W_E=W_E.T.contiguous(),
        W_pos=model.W_pos.detach().float().T.contiguous() if cfg.positional_embedding_type == "standard" else None,
        W_U=None if W_U is None else W_U.detach().float().T.contiguous(),
        b_U=None if b_U is None else b_U.detach().float(),
        kv_map=tuple(h // (H // G) for h in range(H)),
        attn_norm=norm,
        final_norm=final,
        norm_placement="pre" if norm is not None else "none",
        qk_norm=qk_norm,
        attn_out_norm=attn_out_norm,
        rotary=rotary,
        positions={"standard": "learned", "rotary": "rotary", "alibi": "alibi"}[cfg.positional_embedding_type],
        alibi=alibi,
        attn_scale=scale,
        attn_softcap=cap,
        causal=cfg.attention_dir == "causal",
        sliding_window=tuple(window if k == "local" else None for k in types),
        meta=Meta("transformer_lens", where, cfg.model_name, "float32", str(cfg.dtype).removeprefix("torch."), tuple(steps), tuple(notes)),
    )


def from_hooked_encoder(model) -> HeadWeights:
    """A ``HookedEncoder``: BERT's post-LN blocks (module docstring)."""
    cfg = model.cfg
    where = f"HookedEncoder({cfg.model_name})"
    _refuse_unsupported(cfg, where)
    if cfg.positional_embedding_type != "standard":
        raise UnsupportedModelError(f"{where}: cfg.positional_embedding_type={cfg.positional_embedding_type!r}: "
                                    "a HookedEncoder has learned positions")
    blocks = list(model.blocks)
    L, H = len(blocks), cfg.n_heads
    # what layer l reads: the embeddings' norm, then the previous block's ln2 (BertEmbed and BertBlock build LayerNorms)
    attn_norm, _ = _norm([model.embed.ln] + [b.ln2 for b in blocks[:-1]], where, cfg.eps)
    W_type = getattr(model.embed.token_type_embed, "W_token_type", None)
    notes = ["post-LN: the residual is renormalised after every sublayer; attention reads it directly",
             "encoder: bidirectional attention, no unembedding (W_U is None; the masked-LM head is not read)"]
    return HeadWeights(
        W_Q=_rows(model.W_Q), W_K=_rows(model.W_K), W_V=_rows(model.W_V), W_O=_rows(model.W_O),
        b_Q=model.b_Q.detach().float(), b_K=model.b_K.detach().float(), b_V=model.b_V.detach().float(),
        b_O=model.b_O.detach().float(),
        W_E=model.W_E.detach().float().T.contiguous(), W_pos=model.W_pos.detach().float().T.contiguous(),
        W_U=None, b_U=None,
        kv_map=tuple(range(H)),
        attn_norm=attn_norm,
        final_norm=None,
        norm_placement="post",
        positions="learned",
        attn_scale=(1.0 / cfg.attn_scale) if cfg.use_attn_scale else 1.0,
        causal=False,
        sliding_window=(None,) * L,
        embed_extra={} if W_type is None else {"W_type": W_type.detach().float().T.contiguous()},
        meta=Meta("transformer_lens", where, cfg.model_name, "float32", str(cfg.dtype).removeprefix("torch."), (),
                  tuple(notes)),
    )


def recognise(source: object) -> bool:
    return is_hooked_transformer(source) or is_hooked_encoder(source) or _bert_blocks(source)


def read(model) -> HeadWeights:
    if is_hooked_encoder(model):
        return from_hooked_encoder(model)
    if _bert_blocks(model):  # refused here, not read as the pre-LN blocks it is not
        raise UnsupportedModelError(f"{type(model).__name__}: TransformerLens post-LN (BertBlock) models other than "
                                    "HookedEncoder are not supported (no token embeddings to read)")
    return from_hooked_transformer(model)
