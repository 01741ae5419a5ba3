"""TransformerLens ``HookedTransformer`` objects (TransformerLens ≤ 3.x).

TransformerLens uses row vectors (``x @ W``): ``W_Q: (layer, head, d_model, d_head)``,
``W_O: (layer, head, d_head, d_model)``, ``W_E: (n_vocab, d_model)``, ``W_U: (d_model, n_vocab)``;
each is transposed into the column convention here. Weight processing TransformerLens already
did (``fold_ln`` makes ``normalization_type`` end in ``Pre``; centring; value-bias folding) is
recorded as ``transformer_lens:...`` steps. TransformerLens 4's ``TransformerBridge`` is not
accepted: load the underlying HuggingFace model instead.
"""

from __future__ import annotations

import torch

from ..errors import UnsupportedModelError
from ..heads import HeadWeights, Meta, Norm, Rotary


def is_hooked_transformer(obj: object) -> bool:
    return type(obj).__name__ == "HookedTransformer" or (hasattr(obj, "cfg") and hasattr(obj, "blocks") and hasattr(obj, "W_Q"))


def is_bridge(obj: object) -> bool:
    return type(obj).__name__ == "TransformerBridge"


def from_hooked_transformer(model) -> HeadWeights:
    cfg = model.cfg
    where = f"HookedTransformer({cfg.model_name})"
    for key, ok in (("attention_dir", cfg.attention_dir in ("causal", "bidirectional")),
                    ("positional_embedding_type", cfg.positional_embedding_type in ("standard", "rotary", "shortformer")),
                    ("attn_types", not getattr(cfg, "attn_types", None) or set(cfg.attn_types) <= {"global"})):
        if not ok:
            raise UnsupportedModelError(f"{where}: unsupported cfg.{key}={getattr(cfg, key)!r}")
    t = lambda x: x.detach().float().transpose(-1, -2).contiguous()  # noqa: E731
    blocks = model.blocks
    attn0 = blocks[0].attn
    gqa = hasattr(attn0, "_W_K")
    W_K = torch.stack([t(b.attn._W_K if gqa else b.attn.W_K) for b in blocks])
    W_V = torch.stack([t(b.attn._W_V if gqa else b.attn.W_V) for b in blocks])
    b_K = torch.stack([(b.attn._b_K if gqa else b.attn.b_K).detach().float() for b in blocks])
    b_V = torch.stack([(b.attn._b_V if gqa else b.attn.b_V).detach().float() for b in blocks])
    H, G = cfg.n_heads, W_K.shape[1]
    L = cfg.n_layers
    ntype = cfg.normalization_type
    steps = []
    norm = final = None
    if ntype is not None:
        kind = "layernorm" if ntype.startswith("LN") else "rmsnorm"
        if ntype.endswith("Pre"):
            steps.append("transformer_lens:fold_ln")
            norm = final = Norm(kind, None, None, cfg.eps)
        else:
            w = torch.stack([b.ln1.w.detach().float() for b in blocks])
            bias = torch.stack([b.ln1.b.detach().float() for b in blocks]) if kind == "layernorm" else None
            norm = Norm(kind, w, bias, cfg.eps)
            lf = model.ln_final
            final = Norm(kind, lf.w.detach().float()[None], lf.b.detach().float()[None] if kind == "layernorm" else None, cfg.eps)
    rotary = None
    if cfg.positional_embedding_type == "rotary":
        dim = cfg.rotary_dim
        f = 1.0 / cfg.rotary_base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        rotary = Rotary(dim, f[None].expand(L, -1).contiguous(), "interleaved" if cfg.rotary_adjacent_pairs else "half")
    scale = (1.0 / cfg.attn_scale) if cfg.use_attn_scale else 1.0
    return HeadWeights(
        W_Q=t(model.W_Q), W_K=W_K, W_V=W_V, W_O=t(model.W_O),
        b_Q=model.b_Q.detach().float(), b_K=b_K, b_V=b_V, b_O=model.b_O.detach().float(),
        W_E=model.W_E.detach().float().T.contiguous(),
        W_pos=model.W_pos.detach().float().T.contiguous() if cfg.positional_embedding_type in ("standard", "shortformer") else None,
        W_U=model.W_U.detach().float().T.contiguous(), b_U=model.b_U.detach().float(),
        kv_map=tuple(h // (H // G) for h in range(H)),
        attn_norm=norm,
        final_norm=final,
        norm_placement="pre" if norm is not None else "none",
        rotary=rotary,
        positions={"standard": "learned", "shortformer": "learned", "rotary": "rotary"}[cfg.positional_embedding_type],
        attn_scale=scale,
        causal=cfg.attention_dir == "causal",
        sliding_window=(None,) * L,
        meta=Meta("transformer_lens", where, cfg.model_name, "float32", str(cfg.dtype).removeprefix("torch."), tuple(steps), ()),
    )
