"""Recompute an attention layer from ``HeadWeights`` alone (eager, float32).

The reference forward that ties the canonical weights to the model they came from: the
consistency tests match it against each family's own implementation, and the data-based
measures (activation labels, interventions) run on it. A layer in steps, each one function:

    x = read_input(hw, l, resid)                      what the heads read (after the norm, pre-LN)
    pattern, v = head_states(hw, l, x_q, x_k, x_v)    Q, K and V may each read a different x
    o = head_outputs(hw, l, pattern, v)                per head: W_O^h z_h,  (batch, seq, head, d_model)
    out = combine(hw, l, o)                            Σ_h o_h + b_O, then the attention-output norm
"""

from __future__ import annotations

import torch
from torch import Tensor

from .heads import HeadWeights


def read_input(hw: HeadWeights, layer: int, resid: Tensor) -> Tensor:
    """What ``layer``'s heads read from the residual ``resid: (..., d_model)``: ``attn_norm(resid)``
    for pre-LN models, the residual itself otherwise (post-LN models read the normed residual)."""
    if hw.norm_placement == "pre" and hw.attn_norm is not None:
        return hw.attn_norm.apply(resid, layer)
    return resid


def head_states(hw: HeadWeights, layer: int, x_q: Tensor, x_k: Tensor | None = None, x_v: Tensor | None = None,
                positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Attention pattern ``(batch, head, q_pos, k_pos)`` and values ``(batch, head, k_pos, d_head)``
    of ``layer`` when queries read ``x_q``, keys ``x_k`` and values ``x_v`` (each ``(batch, seq,
    d_model)``, or ``(batch, seq, head, d_model)`` for one input per query head; ``x_k``, ``x_v``
    default to ``x_q``)."""
    x_k = x_q if x_k is None else x_k
    x_v = x_q if x_v is None else x_v
    kv = list(hw.kv_map)

    def project(w: Tensor, x: Tensor) -> Tensor:
        if x.ndim == 4:  # one input per query head
            return torch.einsum("hrd,bshd->bhsr", w, x)
        return torch.einsum("hrd,bsd->bhsr", w, x)

    q = project(hw.W_Q[layer], x_q)
    k = project(hw.W_K[layer][kv], x_k)
    v = project(hw.W_V[layer][kv], x_v)
    if hw.b_Q is not None:
        q = q + hw.b_Q[layer][None, :, None]
    if hw.b_K is not None:
        k = k + hw.b_K[layer][kv][None, :, None]
    if hw.b_V is not None:
        v = v + hw.b_V[layer][kv][None, :, None]
    if hw.qk_norm is not None:
        q, k = hw.qk_norm[0].apply(q, layer), hw.qk_norm[1].apply(k, layer)
    seq = x_q.shape[1]
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


def head_outputs(hw: HeadWeights, layer: int, pattern: Tensor, v: Tensor) -> Tensor:
    """What each head writes, ``W_O^h z_h`` with ``z = pattern @ v``: ``(batch, seq, head, d_model)``
    (no bias, no attention-output norm)."""
    return torch.einsum("hdr,bhsr->bshd", hw.W_O[layer], pattern @ v)


def combine(hw: HeadWeights, layer: int, outputs: Tensor) -> Tensor:
    """What ``layer``'s attention adds to the residual from its heads' outputs ``(batch, seq, head,
    d_model)``: ``Σ_h o_h + b_O``, then the attention-output norm if the model has one."""
    out = outputs.sum(-2)
    if hw.b_O is not None:
        out = out + hw.b_O[layer]
    if hw.attn_out_norm is not None:
        out = hw.attn_out_norm.apply(out, layer)
    return out


def attention_pattern_and_values(
    hw: HeadWeights, layer: int, resid: Tensor, positions: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Attention pattern ``(batch, head, q_pos, k_pos)`` and values ``(batch, head, k_pos, d_head)``
    of ``layer`` for the residual ``resid: (batch, seq, d_model)`` (before ``attn_norm`` for
    pre-LN models)."""
    return head_states(hw, layer, read_input(hw, layer, resid), positions=positions)


def attention_forward(hw: HeadWeights, layer: int, resid: Tensor, positions: Tensor | None = None) -> Tensor:
    """What ``layer``'s attention adds to the residual: ``Σ_h W_O^h z_h + b_O`` (then the
    attention-output norm, if the model has one). ``resid: (batch, seq, d_model)``."""
    pattern, v = attention_pattern_and_values(hw, layer, resid, positions)
    out = torch.einsum("hdr,bhsr->bsd", hw.W_O[layer], pattern @ v)  # heads summed inside: no (head, d) stack
    return combine(hw, layer, out[..., None, :])
