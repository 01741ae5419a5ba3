"""The model card: what was loaded — shapes, normalisation, positions, processing — and the
notes that change what the scores mean (``compscope info`` prints it; the report shows it)."""

from __future__ import annotations

from .heads import HeadWeights
from .vocab import tied


def _fmt_int(n: int) -> str:
    return f"{n:,}"


def _rotary_bases(hw: HeadWeights) -> str:
    """The rotary base of each layer (distinct values), from the ratio of its first two
    frequencies, ``inv_freq_1 / inv_freq_0 = base^(-2/dim)``, which a uniform scaling of the
    positions (linear RoPE scaling, ``inv_freq_0 = 1/factor``; said when there is one) leaves
    alone; with one rotated pair there is no base, only its frequency. Layers whose frequencies are
    all 0 (no rotary: SmolLM3's NoPE layers) are counted apart."""
    f = hw.rotary.inv_freq.double()
    turning = [l for l in range(hw.n_layers) if bool(f[l].any())]  # frequency 0: a layer without rotary (NoPE)
    plain = "" if len(turning) == hw.n_layers else f"; none on {hw.n_layers - len(turning)} layers (NoPE)"
    # a layer whose last pairs do not turn (Gemma 4's, proportional or narrower heads held wider): no base is
    # read from the ratio, which depends on a width the frequencies do not state
    some = {l: int((f[l] != 0).sum()) for l in turning if bool((f[l, -1:] == 0).all())}
    if some:
        turning = [l for l in turning if l not in some]
        counts = ", ".join(sorted({f"{n} of {f.shape[1]}" for n in some.values()}))
        plain += f"; on {len(some)} layers only the first pairs turn ({counts}; the model's notes say how)"
    if not turning:
        return plain.removeprefix("; ")
    if f.shape[1] < 2:
        return "one frequency " + ", ".join(f"{v:g}" for v in sorted({float(f[l, 0]) for l in turning})) + plain
    bases = sorted({round(float((f[l, 0] / f[l, 1]) ** (hw.rotary.dim / 2)), -1) for l in turning})
    scaled = sorted({round(float(f[l, 0]), 6) for l in turning if abs(float(f[l, 0]) - 1) > 1e-9})  # inv_freq_0 = 1 unscaled
    return "base " + ", ".join(f"{b:g}" for b in bases) + (
        f", positions scaled by {', '.join(f'{v:g}' for v in scaled)}" if scaled else "") + plain


def _unembedding(hw: HeadWeights) -> str:
    """``W_U``'s shape, its bias, and whether it is tied: the embedding's transpose, value by value."""
    if hw.W_U is None:
        return "none"
    return f"W_U {hw.W_U.shape[0]} x {hw.W_U.shape[1]}" + (" + bias" if hw.b_U is not None else "") + (
        ", tied (W_E transposed)" if tied(hw) else "")


def _relative(hw: HeadWeights) -> str:
    """Relative positions: DeBERTa's, which terms, how many offsets, and their buckets; T5's bias alone."""
    if hw.pos_Q is None and hw.pos_K is None:
        return "relative, none in the residual"  # (the bias by offset: said after)
    rows = (hw.pos_Q if hw.pos_Q is not None else hw.pos_K).shape[2]
    terms = " and ".join(t for t, p in (("content-to-position", hw.pos_K), ("position-to-content", hw.pos_Q))
                         if p is not None)
    size, top = hw.rel_buckets
    spread = (f"offsets in {size} log-spaced buckets each side up to {top}" if size else
              f"offsets -{rows // 2} .. {rows // 2 - 1}, clamped beyond")
    return f"relative (disentangled): {terms} logits, {spread}"


def card_rows(hw: HeadWeights) -> list[tuple[str, str]]:
    """``(field, value)`` rows describing ``hw``; its notes are ``hw.meta.notes``."""
    m = hw.meta
    gqa = "" if hw.n_kv_heads == hw.n_heads else f"  (GQA: {hw.n_heads // hw.n_kv_heads} query heads per K/V head)"
    if hw.rotary is not None and not bool(hw.rotary.inv_freq.any()):
        pos = "none: no rotary on any layer (NoPE), positions only through the causal mask"
    elif hw.rotary is not None:
        pos = f"rotary on {hw.rotary.dim} of {hw.d_head} head dims ({hw.rotary.style} pairs), {_rotary_bases(hw)}"
    elif hw.alibi is not None:
        slopes = hw.alibi.double()
        pos = (f"ALiBi: logit bias -m_h {'(i - j)' if hw.causal else '|i - j|'}, slopes m_h from "
               f"{float(slopes.max()):.4g} to {float(slopes.min()):.4g} "
               f"over {len(slopes)} heads")
    elif hw.positions == "relative":
        pos = _relative(hw)
    elif hw.W_pos is not None:
        pos = f"learned absolute, {hw.W_pos.shape[1]} positions"
    else:
        pos = "none"
    if hw.rel_bias is not None:
        n, far = hw.rel_bias_buckets
        pos += f"; a learned bias on the logits by offset, {n} buckets (both ways) up to {far}"
    windows = sorted({w for w in hw.sliding_window if w is not None})
    rows = [
        ("model", m.name),
        ("source", m.source),
        ("family", m.family),
        ("dtype", f"{m.dtype} (stored as {m.source_dtype})"),
        ("layers", str(hw.n_layers)),
        ("heads per layer", f"{hw.n_heads}"),
        ("K/V heads per layer", _kv_heads(hw, gqa)),
        ("d_model", str(hw.d_model)),
        ("d_head", str(hw.d_head)),
        ("vocabulary", _fmt_int(hw.n_vocab)),
        ("attention", ("causal" if hw.causal else "bidirectional") + (f", sliding window {windows}{'' if hw.causal else ' (|i - j| < w)'} on {sum(w is not None for w in hw.sliding_window)} layers" if windows else "")),
        ("logit scale", f"{hw.scale:.6g}" + ("" if hw.attn_softcap is None else f", soft-capped at {hw.attn_softcap:g} (c tanh(l / c))")),
        ("normalisation", f"{hw.norm_placement}-norm: {hw.attn_norm.describe()}" if hw.attn_norm else "none before the attention"),
    ]
    if hw.first_layer_unnormed:
        rows[-1] = (rows[-1][0], rows[-1][1] + ("; layer 0 reads the residual without it" if hw.norm_placement == "pre"
                                                 else "; layer 0 reads the raw embeddings, no norm before it"))
    if hw.qk_norm is not None:
        q = hw.qk_norm[0]
        own = any(hw.qk_norm_per_head)
        rows.append(("QK-norm", q.describe() + (", per head" + (" (a gain for each head)" if own else "")
                                                 if hw.qk_norm_scope == "head" else ", over all heads of a layer")))
        if hw.qk_norm_layers:
            plain = [str(l) for l in range(hw.n_layers) if not hw.qk_normed(l)]
            rows[-1] = (rows[-1][0], rows[-1][1] + f"; not on layers {', '.join(plain)}" if plain else rows[-1][1])
    if hw.attn_out_norm is not None:
        rows.append(("attention-output norm", hw.attn_out_norm.describe()))
    if hw.W_G is not None:
        rows.append(("output gate", "each head's z times sigmoid(W_G x" + (" + b_G" if hw.b_G is not None else "")
                     + ") of its query's input, before W_O"))
    if hw.v_norm is not None:
        rows.append(("value norm", hw.v_norm.describe() + ", per value head, before W_O"))
    if hw.q_latent is not None or hw.kv_latent is not None:
        parts = [f"queries scaled per token by an RMSNorm on a rank-{hw.q_latent.W.shape[1]} latent"
                 if hw.q_latent is not None else None,
                 f"values and keys (from key dim {hw.kv_latent_from}) by one on a rank-{hw.kv_latent.W.shape[1]} latent"
                 if hw.kv_latent is not None else None]
        rows.append(("latent attention", "; ".join(p for p in parts if p)))
    if hw.sinks is not None and bool(hw.sinks.isfinite().any()):  # (a layer without sinks holds -inf)
        on = hw.sinks.isfinite().all(-1)
        some = "" if bool(on.all()) else f" on layers {', '.join(str(i) for i in on.nonzero().flatten().tolist())}"
        finite = hw.sinks[on]
        rows.append(("attention sinks", f"a learned logit per head{some}, {float(finite.min()):.3g} to "
                                        f"{float(finite.max()):.3g}: a key every query sees, with no value"))
    rows += [
        ("positions", pos),
        ("unembedding", _unembedding(hw)),
        ("processing", ", ".join(m.processing) or "none"),
        ("attention parameters", _fmt_int(hw.n_attention_params())),
    ]
    return rows


def card_dict(hw: HeadWeights) -> dict:
    """The card as plain Python values, for JSON: the shapes and settings as numbers, booleans and
    lists (``None`` where the model has none), the norms by kind, each layer's rotary frequencies
    (or ALiBi's slopes), the processing, the notes, and under ``card`` the rows :func:`describe` prints, by field."""
    m = hw.meta
    kind = lambda n: None if n is None else n.kind  # noqa: E731
    return {
        "model": m.name, "source": m.source, "family": m.family, "dtype": m.dtype, "source_dtype": m.source_dtype,
        "layers": hw.n_layers, "heads": hw.n_heads, "kv_heads": hw.n_kv_heads,
        "kv_heads_by_layer": list(m.kv_heads_own) or None, "d_model": hw.d_model, "d_head": hw.d_head,
        "vocabulary": hw.n_vocab, "causal": hw.causal,
        "sliding_window": list(hw.sliding_window) if any(w is not None for w in hw.sliding_window) else None,
        "logit_scale": float(hw.scale), "softcap": hw.attn_softcap, "norm_placement": hw.norm_placement,
        "norms": {"attention": kind(hw.attn_norm), "qk": kind(hw.qk_norm[0]) if hw.qk_norm is not None else None,
                  "attention_output": kind(hw.attn_out_norm), "value": kind(hw.v_norm)},
        "positions": hw.positions,
        "rotary": None if hw.rotary is None else {
            "dim": hw.rotary.dim, "style": hw.rotary.style,
            "inv_freq": [[float(f) for f in row] for row in hw.rotary.inv_freq.double()]},
        "alibi_slopes": None if hw.alibi is None else [float(v) for v in hw.alibi.double()],
        "processing": list(m.processing), "attention_parameters": hw.n_attention_params(), "notes": list(m.notes),
        "card": dict(card_rows(hw)),
    }


def describe(hw: HeadWeights) -> str:
    """A human summary of ``hw``: :func:`card_rows`, then the notes."""
    rows = card_rows(hw)
    m = hw.meta
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += [f"note: {n}" for n in m.notes]
    return "\n".join(lines)


def _kv_heads(hw: HeadWeights, gqa: str) -> str:
    """The card's K/V head count: the one every layer holds, or, where layers differ, each layer's own beside the
    count held (a layer with fewer repeats each for the query heads that share it)."""
    own = hw.meta.kv_heads_own
    if not own:
        return f"{hw.n_kv_heads}{gqa}"
    return (f"{', '.join(map(str, own))} by layer, held as {hw.n_kv_heads} (a layer with fewer repeats each for the "
            "query heads that share it)")
