"""Recompute an attention layer from ``HeadWeights`` alone (eager, float32).

The reference forward that ties the canonical weights to the model they came from: the
consistency tests match it against each family's own implementation, and data-based
measures (interventions, induction scores) run on it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .heads import HeadWeights


def attention_pattern_and_values(
    hw: HeadWeights, layer: int, resid: Tensor, positions: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Attention pattern ``(batch, head, q_pos, k_pos)`` and values ``(batch, head, k_pos, d_head)``
    of ``layer`` for the residual ``resid: (batch, seq, d_model)`` (before ``attn_norm`` for
    pre-LN models)."""
    x = resid
    if hw.norm_placement == "pre" and hw.attn_norm is not None:
        x = hw.attn_norm.apply(resid, layer)
    kv = list(hw.kv_map)
    q = torch.einsum("hrd,bsd->bhsr", hw.W_Q[layer], x)
    k = torch.einsum("hrd,bsd->bhsr", hw.W_K[layer][kv], x)
    v = torch.einsum("hrd,bsd->bhsr", hw.W_V[layer][kv], x)
    if hw.b_Q is not None:
        q = q + hw.b_Q[layer][None, :, None]
    if hw.b_K is not None:
        k = k + hw.b_K[layer][kv][None, :, None]
    if hw.b_V is not None:
        v = v + hw.b_V[layer][kv][None, :, None]
    if hw.qk_norm is not None:
        q, k = hw.qk_norm[0].apply(q, layer), hw.qk_norm[1].apply(k, layer)
    seq = resid.shape[1]
    if positions is None:
        positions = torch.arange(seq)
    if hw.rotary is not None:
        q, k = hw.rotary.rotate(q, positions, layer), hw.rotary.rotate(k, positions, layer)
    logits = hw.scale * (q @ k.transpose(-1, -2))
    i, j = positions[:, None], positions[None, :]
    allowed = torch.ones(seq, seq, dtype=torch.bool)
    if hw.causal:
        allowed &= j <= i
    window = hw.sliding_window[layer] if hw.sliding_window else None
    if window is not None:
        allowed &= (i - j) < window
    logits = logits.masked_fill(~allowed, float("-inf"))
    return logits.softmax(-1), v


def attention_forward(hw: HeadWeights, layer: int, resid: Tensor, positions: Tensor | None = None) -> Tensor:
    """What ``layer``'s attention adds to the residual: ``Σ_h W_O^h z_h + b_O`` (then the
    attention-output norm, if the model has one). ``resid: (batch, seq, d_model)``."""
    pattern, v = attention_pattern_and_values(hw, layer, resid, positions)
    z = pattern @ v  # (batch, head, seq, d_head)
    out = torch.einsum("hdr,bhsr->bsd", hw.W_O[layer], z)
    if hw.b_O is not None:
        out = out + hw.b_O[layer]
    if hw.attn_out_norm is not None:
        out = hw.attn_out_norm.apply(out, layer)
    return out
