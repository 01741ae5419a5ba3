"""Recompute an attention layer from ``HeadWeights`` alone (eager, float32).

The reference forward that ties the canonical weights to the model they came from: the
consistency tests match it against each family's own implementation, and the data-based
measures (activation labels, interventions) run on it. A layer in steps, each one function:

    x = read_input(hw, l, resid)                      what the heads read (after the norm, pre-LN)
    q, k, v = project(hw, l, "Q", x), ...             each of Q, K, V may read a different x
    pattern = attend(hw, l, q, k)                      (head_states: both steps at once)
    o = head_outputs(hw, l, pattern, v, x)             per head: W_O^h z_h,  (batch, seq, head, d_model)
                                                       (z_h gated by its query's input, where the model gates)
    out = combine(hw, l, o)                            Σ_h o_h + b_O, then the attention-output norm
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..errors import OptionError
from .heads import HeadWeights, Norm


def input_norm(hw: HeadWeights) -> Norm | None:
    """The norm the heads apply to the residual before reading it: ``attn_norm`` for pre-LN
    models, None otherwise (post-LN models read the normed residual itself)."""
    return hw.attn_norm if hw.norm_placement == "pre" else None


def layer_input_norm(hw: HeadWeights, layer: int) -> Norm | None:
    """:func:`input_norm` of ``layer``: None also for a first layer that reads the residual itself
    (``first_layer_unnormed``: ModernBERT's, GPT-1's)."""
    return None if layer == 0 and getattr(hw, "first_layer_unnormed", False) else input_norm(hw)


def same_reads(a: HeadWeights, b: HeadWeights) -> bool:
    """Whether the heads of ``a`` and ``b`` (weights of one model, processed or not) read the same
    thing from a residual (:func:`read_input`): the same input norm, or none in either."""
    if a is b:
        return True
    na, nb = input_norm(a), input_norm(b)
    if getattr(a, "first_layer_unnormed", False) != getattr(b, "first_layer_unnormed", False):
        return False
    if na is None or nb is None:
        return na is nb
    same = (na.kind, na.eps, na.offset) == (nb.kind, nb.eps, nb.offset)
    for x, y in ((na.weight, nb.weight), (na.bias, nb.bias)):
        same = same and (x is y or (x is not None and y is not None and x.shape == y.shape
                                    and x.device == y.device and bool(torch.equal(x, y))))
    return same


def read_input(hw: HeadWeights, layer: int, resid: Tensor) -> Tensor:
    """What ``layer``'s heads read from the residual ``resid: (..., d_model)``: ``attn_norm(resid)``
    for pre-LN models, the residual itself otherwise (and at a first layer that reads it unnormed)."""
    norm = layer_input_norm(hw, layer)
    return resid if norm is None else norm.apply(resid, layer)


def project(hw: HeadWeights, layer: int, kind: str, x: Tensor, positions: Tensor | None = None) -> Tensor:
    """Queries (``kind='Q'``), keys (``'K'``) or values (``'V'``) of every query head of ``layer``
    for the input ``x: (batch, seq, d_model)`` (or ``(batch, seq, head, d_model)``, one input per
    query head): ``(batch, head, seq, d_head)``, with biases, QK-norm and rotary positions. Shared
    K/V heads are computed once and repeated for their query heads at the end."""
    return finish_projection(hw, layer, kind, project_linear(hw, layer, kind, x), x.ndim == 4, positions)


def project_linear(hw: HeadWeights, layer: int, kind: str, x: Tensor) -> Tensor:
    """The linear part of :func:`project`, ``W x + b``: ``(batch, head, seq, d_head)``, one entry per
    K/V head for ``x: (batch, seq, d_model)``, per query head for ``(batch, seq, head, d_model)``."""
    w = {"Q": hw.W_Q, "K": hw.W_K, "V": hw.W_V}[kind][layer]
    b = {"Q": hw.b_Q, "K": hw.b_K, "V": hw.b_V}[kind]
    b = None if b is None else b[layer]
    if kind != "Q" and x.ndim == 4:  # one input per query head: each reads its own copy of its K/V head
        kv = list(hw.kv_map)
        w, b = w[kv], (None if b is None else b[kv])
    y = torch.einsum("hrd,bshd->bhsr", w, x) if x.ndim == 4 else torch.einsum("hrd,bsd->bhsr", w, x)
    y = y if b is None else y + b[None, :, None]
    return latent_scaled(hw, layer, kind, x, y)


def latent_scaled(hw: HeadWeights, layer: int, kind: str, x: Tensor, y: Tensor) -> Tensor:
    """``y = W x + b`` (:func:`project_linear`) times the per-token scale of multi-head latent attention's norm on
    its side (:class:`~compscope.core.heads.LatentNorm`): every query dim by ``s_q(x)``, every value dim and the key
    dims from ``kv_latent_from`` on by ``s_kv(x)``; ``y`` itself without one."""
    latent = hw.q_latent if kind == "Q" else hw.kv_latent
    if latent is None:
        return y
    s = latent.scale(layer, x)  # (batch, seq) or, one input per query head, (batch, seq, head)
    s = (s[:, None, :, None] if x.ndim == 3 else s.permute(0, 2, 1)[..., None]).to(y.dtype)
    cut = hw.kv_latent_from if kind == "K" else 0
    return y * s if cut == 0 else torch.cat([y[..., :cut], y[..., cut:] * s], dim=-1)


def finish_projection(hw: HeadWeights, layer: int, kind: str, y: Tensor, per_head_input: bool = False,
                      positions: Tensor | None = None) -> Tensor:
    """The rest of :func:`project` on ``y = W x + b`` (:func:`project_linear`): QK-norm and rotary
    positions for queries and keys (``positions`` default ``0 .. seq-1``), the value norm for values
    (Gemma 4: each value head RMS-normalised), then K/V heads repeated for their query heads (unless
    ``per_head_input``: already one per query head)."""
    if kind == "V" and hw.v_norm is not None:
        y = hw.v_norm.apply(y, layer)
    if kind != "V":
        if hw.qk_normed(layer):
            y = qk_normalise(hw, layer, kind, y, per_head_input=per_head_input)
        if hw.rotary is not None:
            y = hw.rotary.rotate(y, torch.arange(y.shape[2], device=y.device) if positions is None else positions, layer)
    return y[:, list(hw.kv_map)] if kind != "Q" and not per_head_input else y


def qk_normalise(hw: HeadWeights, layer: int, kind: str, y: Tensor, per_head_input: bool = False) -> Tensor:
    """QK-norm of queries (``kind='Q'``, ``y: (batch, head, seq, d_head)``) or keys (``'K'``, one entry
    per K head, or per query head with ``per_head_input``). Scope ``head``: each head's vector
    RMS-normalised on its own; ``layer`` (OLMo-2): one RMS over all the layer's query heads, or all
    its K heads, at once."""
    which = 0 if kind == "Q" else 1
    norm = hw.qk_norm[which]
    if hw.qk_norm_scope == "head":
        if not hw.qk_norm_per_head[which]:  # one gain (and bias) for every head
            return norm.apply(y, layer)
        return _per_head_affine(hw, norm, layer, kind, norm.normalise(y), per_head_input).to(y.dtype)
    if per_head_input and kind == "K":
        raise OptionError("a layer-wide QK-norm mixes every K head of the layer: keys of query heads that read "
                          "different inputs are not defined")
    b, n, s, r = y.shape
    return norm.apply(y.transpose(1, 2).reshape(b, s, n * r), layer).reshape(b, s, n, r).transpose(1, 2)


def _per_head_affine(hw: HeadWeights, norm, layer: int, kind: str, z: Tensor, per_head_input: bool) -> Tensor:
    """``z: (batch, head, seq, d_head)`` normalised per head, times each head's own gain (plus its
    bias): gains stored side by side, ``(heads * d_head,)`` per layer; keys read per query head take
    their K head's."""
    r = z.shape[-1]
    g, b = norm.gain(layer), (None if norm.bias is None else norm.bias[layer])
    kv = list(hw.kv_map) if kind == "K" and per_head_input else slice(None)
    if g is not None:
        z = z * g.reshape(-1, r)[kv].to(z.dtype)[None, :, None, :]
    return z if b is None else z + b.reshape(-1, r)[kv].to(z.dtype)[None, :, None, :]


def move(hw: HeadWeights, layer: int, y: Tensor, positions: Tensor) -> Tensor:
    """Queries or keys that :func:`project` made at position 0, ``y: (batch, head, seq, d_head)``,
    as they would be at ``positions: (seq,)``: the rotary rotation ``R(p)`` (``R(0) = I``); the
    same ``y`` without rotary positions."""
    return y if hw.rotary is None else hw.rotary.rotate(y, positions, layer)


def attend(hw: HeadWeights, layer: int, q: Tensor, k: Tensor, positions: Tensor | None = None) -> Tensor:
    """The attention pattern ``(batch, head, q_pos, k_pos)`` of queries and keys from :func:`project`:
    scaled (and soft-capped) dot products, the ALiBi bias, the causal mask and the layer's sliding
    window (``|i − j| < w``: behind the query in a causal model, on both sides in an encoder),
    softmax (beside each head's sink logit, where the model has sinks: :func:`softmax_with_sink`)."""
    seq = q.shape[-2]
    positions = torch.arange(seq, device=q.device) if positions is None else positions.to(q.device)
    i, j = positions[:, None], positions[None, :]
    logits = with_bias(hw, layer, hw.logits(dot_products(hw, layer, q, k, i - j)), i - j)
    allowed = torch.ones(seq, seq, dtype=torch.bool, device=q.device)
    if hw.causal:
        allowed &= j <= i
    window = hw.sliding_window[layer] if hw.sliding_window else None
    if window is not None:
        allowed &= (i - j).abs() < window
    return softmax_with_sink(hw, layer, logits.masked_fill(~allowed, float("-inf")))


def relative_index(hw: HeadWeights, offset: Tensor) -> Tensor:
    """The row ``ρ(δ)`` of ``pos_Q`` and ``pos_K`` that the query-minus-key offsets ``δ = offset``
    (integers) read: ``clamp(b(δ) + k, 0, 2k − 1)`` with ``2k`` rows, ``b(δ) = δ`` without buckets and,
    with ``rel_buckets = (s, m)`` (DeBERTa-v2's log buckets, in float32 as it computes them), ``b(δ) = δ``
    for ``|δ| ≤ s/2`` and ``sign(δ) (s/2 + ⌈ln(|δ| / (s/2)) / ln((m − 1) / (s/2)) (s/2 − 1)⌉)`` beyond."""
    k = (hw.pos_Q if hw.pos_Q is not None else hw.pos_K).shape[2] // 2
    offset = offset.long()
    size, top = hw.rel_buckets
    if size:
        mid = size // 2
        far = offset.abs()
        inside = (offset < mid) & (offset > -mid)
        ref = torch.where(inside, torch.full_like(far, mid - 1), far)
        log = torch.ceil(torch.log(ref / mid) / torch.log(torch.tensor((top - 1) / mid)) * (mid - 1)) + mid
        offset = torch.where(ref <= mid, offset.float(), log * torch.sign(offset)).long()
    return (offset + k).clamp(0, 2 * k - 1)


def dot_products(hw: HeadWeights, layer: int, q: Tensor, k: Tensor, offset: Tensor) -> Tensor:
    """``q·k`` of every query ``q (..., head, a, d_head)`` with every key ``k (..., head, b, d_head)``:
    ``(..., head, a, b)``, before the logit scale; with DeBERTa's relative positions (``pos_Q``,
    ``pos_K``) plus ``q_i · pos_K[ρ(δ_ij)]`` and ``k_j · pos_Q[ρ(δ_ij)]`` for the offsets ``δ = offset
    (a, b)`` (:func:`relative_index`)."""
    qk = q @ k.transpose(-1, -2)
    if hw.pos_Q is None and hw.pos_K is None:
        return qk
    idx = relative_index(hw, offset.to(q.device))  # (a, b)
    if hw.pos_K is not None:  # content to position: each query against the position keys, then each key's row
        c2p = q @ hw.pos_K[layer].to(q.device, q.dtype).transpose(-1, -2)  # (..., head, a, 2k)
        qk = qk + c2p.gather(-1, idx.expand(*c2p.shape[:-1], idx.shape[-1]))
    if hw.pos_Q is not None:  # position to content: each key against the position queries, then each query's row
        p2c = k @ hw.pos_Q[layer].to(k.device, k.dtype).transpose(-1, -2)  # (..., head, b, 2k)
        qk = qk + p2c.gather(-1, idx.T.expand(*p2c.shape[:-1], idx.shape[0])).transpose(-1, -2)
    return qk


def paired_dot_products(hw: HeadWeights, layer: int, q: Tensor, k: Tensor, offset: int) -> Tensor:
    """:func:`dot_products` of each query in ``q (..., head, n, d_head)`` with its own key in ``k`` (the
    same shape) at one offset ``δ = offset``: ``(..., head, n)``."""
    qk = (q * k).sum(-1)
    if hw.pos_Q is None and hw.pos_K is None:
        return qk
    row = int(relative_index(hw, torch.tensor(offset)))
    for pos, content in ((hw.pos_K, q), (hw.pos_Q, k)):
        if pos is not None:
            qk = qk + (content * pos[layer, :, row].to(content.device, content.dtype)[:, None]).sum(-1)
    return qk


def softmax_with_sink(hw: HeadWeights, layer: int, logits: Tensor, head_axis: int = -3) -> Tensor:
    """``softmax(logits)`` over the last axis of ``logits`` (its heads on ``head_axis``); where
    ``layer`` has attention sinks (gpt-oss), over the keys and one more logit per head, ``s_h``, the
    sink, whose share is then dropped: ``p_j = e^{ℓ_j} / (e^{s_h} + Σ_k e^{ℓ_k})``, each row summing
    to less than 1."""
    if hw.sinks is None:
        return logits.softmax(-1)
    shape = [1] * logits.ndim
    shape[head_axis] = -1
    sink = hw.sinks[layer].to(logits.device, logits.dtype).reshape(shape).expand(*logits.shape[:-1], 1)
    return torch.cat([logits, sink], -1).softmax(-1)[..., :-1]


def with_bias(hw: HeadWeights, layer: int, logits: Tensor, offset: Tensor) -> Tensor:
    """Attention ``logits (..., head, *shape)`` of ``layer`` plus the bias each head adds for the
    query-minus-key offsets ``offset`` (``shape``, broadcast): ALiBi's ``−m_h |δ|`` (``−m_h δ`` on every key a
    causal model's query sees), or a learned bias by offset bucket (``rel_bias[layer, h, β(δ)]``:
    :func:`bias_bucket`); unchanged without either. (A bias that grows with the key position alone, ``m_h j`` as
    Bloom adds it, differs by ``m_h i``, the same for every key of a query: the softmax does not see it.)"""
    if hw.rel_bias is not None:
        b = hw.rel_bias[layer].to(logits.device, logits.dtype)[:, bias_bucket(hw, offset.to(logits.device))]
        return logits + b  # (head, *shape)
    if hw.alibi is None:
        return logits
    m = hw.alibi.to(logits.device, logits.dtype).reshape(-1, *(1,) * offset.ndim)
    return logits - m * offset.to(logits.device, logits.dtype).abs()


def bias_bucket(hw: HeadWeights, offset: Tensor) -> Tensor:
    """The bucket ``β(δ)`` of ``rel_bias`` for the query-minus-key offsets ``δ = offset`` (T5's
    bidirectional buckets, in float32 as MPNet computes them; ``rel_bias_buckets = (n, D)``, ``e = n/4``):
    ``n/2`` for a key after its query (``δ < 0``), plus ``|δ|`` where ``|δ| < e``, else
    ``min(e + ⌊ln(|δ| / e) / ln(D / e) · e⌋, n/2 − 1)``."""
    n, far = hw.rel_bias_buckets
    half = n // 2
    exact = half // 2
    offset = offset.long()
    size = offset.abs()
    large = exact + (torch.log(size.float() / exact) / math.log(far / exact) * (half - exact)).to(torch.long)
    large = torch.clamp(large, max=half - 1)
    return (offset < 0).long() * half + torch.where(size < exact, size, large)


def head_states(hw: HeadWeights, layer: int, x_q: Tensor, x_k: Tensor | None = None, x_v: Tensor | None = None,
                positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Attention pattern ``(batch, head, q_pos, k_pos)`` and values ``(batch, head, k_pos, d_head)``
    of ``layer`` when queries read ``x_q``, keys ``x_k`` and values ``x_v`` (each ``(batch, seq,
    d_model)``, or ``(batch, seq, head, d_model)`` for one input per query head; ``x_k``, ``x_v``
    default to ``x_q``)."""
    x_k = x_q if x_k is None else x_k
    x_v = x_q if x_v is None else x_v
    q, k = project(hw, layer, "Q", x_q, positions), project(hw, layer, "K", x_k, positions)
    return attend(hw, layer, q, k, positions), project(hw, layer, "V", x_v, positions)


def head_outputs(hw: HeadWeights, layer: int, pattern: Tensor, v: Tensor, x: Tensor | None = None) -> Tensor:
    """What each head writes, ``W_O^h z_h`` with ``z = pattern @ v`` (times :func:`gate` of ``x``, what
    the queries read, where the model gates its heads' outputs): ``(batch, seq, head, d_model)`` (no
    bias, no attention-output norm)."""
    return written(hw, layer, gated(hw, layer, pattern @ v, x))


def gate(hw: HeadWeights, layer: int, x: Tensor) -> Tensor | None:
    """The output gate of every head of ``layer`` at each query position, ``σ(W_G x + b_G)``, for
    ``x: (batch, seq, d_model)``, what the queries read: ``(batch, head, seq, d_head)``; None for a model
    whose heads are not gated."""
    if hw.W_G is None:
        return None
    y = torch.einsum("hrd,bsd->bhsr", hw.W_G[layer], x)
    return torch.sigmoid(y if hw.b_G is None else y + hw.b_G[layer][None, :, None])


def gated(hw: HeadWeights, layer: int, z: Tensor, x: Tensor | None) -> Tensor:
    """``z: (..., head, seq, d_head)`` times the :func:`gate` of ``x`` where the model gates (``z`` as it
    is otherwise); refused without ``x`` there, rather than computing an ungated output."""
    if getattr(hw, "W_G", None) is None:  # (weights of another shape than HeadWeights: no gate either)
        return z
    if x is None:
        raise OptionError(f"{hw.meta.name} gates each head's output by what its query reads: give that input (x)")
    return z * gate(hw, layer, x)


def written(hw: HeadWeights, layer: int, z: Tensor) -> Tensor:
    """``W_O^h z_h`` for ``z: (batch, head, seq, d_head)``: :func:`head_outputs` of ``z = pattern @ v``."""
    return torch.einsum("hdr,bhsr->bshd", hw.W_O[layer], z)


def combine(hw: HeadWeights, layer: int, outputs: Tensor, norm: bool = True) -> Tensor:
    """What ``layer``'s attention adds to the residual from its heads' outputs ``(batch, seq, head,
    d_model)``: ``Σ_h o_h + b_O``, then the attention-output norm if the model has one (without
    ``norm``: what that norm takes)."""
    out = outputs.sum(-2)
    if hw.b_O is not None:
        out = out + hw.b_O[layer]
    if norm and hw.attn_out_norm is not None:
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
    x = read_input(hw, layer, resid)
    pattern, v = head_states(hw, layer, x, positions=positions)
    z = gated(hw, layer, pattern @ v, x)
    out = torch.einsum("hdr,bhsr->bsd", hw.W_O[layer], z)  # heads summed inside: no (head, d) stack
    return combine(hw, layer, out[..., None, :])
