"""The direct path of an intervention read in the writer's own coordinates.

For a model whose heads read a pre-norm (or no norm) of the residual and whose attention output
is not normed, removing writer ``h1``'s output adds ``δ = W_O u`` to the residual ``r`` that every
later layer reads along the direct path (:mod:`compscope.data.intervene`), with ``u = z̄ − z``
for mean-ablation (``−z`` for zero-ablation) in the writer's ``d_head`` coordinates (``z``: its
attention-weighted values). A reader's linear projection of the normed input
``N(r + δ) = g ⊙ c(r + δ) / σ' + β`` — ``c`` centring for LayerNorm and the identity for RMSNorm,
``σ'² = ‖c(r + δ)‖² / d + ε``, ``g`` the gain, ``β`` the bias — is then

    W N(r + δ) + b = (σ / σ') (y − k) + (M u) / σ' + k,
    σ'² = σ² + (2 ⟨c(r), W̃ u⟩ + uᵀ (W̃ᵀ W̃) u) / d,

with ``y = W N(r) + b`` the clean projection, ``k = W β + b``, ``W̃ = c(W_O)`` (centred over the
residual's coordinates for LayerNorm) and ``M = W diag(g) W̃``, one ``d_head × d_head`` matrix per
reader head. Without a norm it is ``y + M u`` with ``M = W W_O``. QK-norm, rotary positions and the
repeat of shared K/V heads follow as in :func:`~compscope.core.attention.project`.

So the work per (writer, later layer, kind) is ``d_head`` wide where the plain route's is
``d_model`` wide: ``M`` is formed once per pair, independent of the data, and ``⟨c(r), W̃ u⟩`` is
one ``d_model × d_head`` product shared by the kinds. The plain route (the residual changed, normed
and projected) stays the definition, and the tests hold this one to it. Where ``δ`` nearly cancels
the residual (``σ'² < CANCELLATION · σ²`` at some position), the sum for ``σ'²`` would lose
digits, so that (writer, later layer) takes the plain route.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.attention import finish_projection, input_norm, layer_input_norm, project_linear, read_input

#: ``σ'² / σ²`` below which a (writer, later layer) takes the plain route (module docstring)
CANCELLATION = 1e-2


def applies(hw, paths: str, post_ln_mlp) -> bool:
    """Whether the direct path of ``hw``'s interventions is ``r + W_O u`` read through a pre-norm
    (or none): direct paths only, no attention-output norm, not post-LN, no latent norm (multi-head latent
    attention's second scale per token)."""
    return (paths == "direct" and post_ln_mlp is None and hw.attn_out_norm is None and hw.norm_placement != "post"
            and hw.q_latent is None and hw.kv_latent is None)


@dataclass(frozen=True)
class Readers:
    """Per layer of one trace (index = layer), what the later layers' reads need: ``lin[l][kind]``
    the clean ``y = W N(r) + b`` ``(batch, head, seq, d_head)`` per K/V head; ``centred[l]`` ``c(r)``
    and ``sigma2[l]`` ``σ²`` (float64, ``(batch, seq)``), None without a norm; ``gained[l][kind]``
    ``W diag(g)`` ``(head, d_head, d_model)``; ``shift[l][kind]`` ``k = W β + b`` or None."""

    lin: list[dict[str, Tensor]]
    centred: list[Tensor | None]
    sigma2: list[Tensor | None]
    gained: list[dict[str, Tensor]]
    shift: list[dict[str, Tensor | None]]


def readers(hw, resid: list[Tensor], kinds: str) -> Readers:
    """:class:`Readers` of the residuals ``resid`` that each layer reads in a clean trace (``resid[l]``
    for layer ``l``)."""
    lin, centred, sigma2, gained, shift = [], [], [], [], []
    weights = {"Q": hw.W_Q, "K": hw.W_K, "V": hw.W_V}
    biases = {"Q": hw.b_Q, "K": hw.b_K, "V": hw.b_V}
    for l in range(hw.n_layers):
        r = resid[l]
        norm = layer_input_norm(hw, l)
        lin.append({k: project_linear(hw, l, k, read_input(hw, l, r)) for k in kinds})
        g = None if norm is None else norm.gain(l)
        beta = None if norm is None or norm.bias is None else norm.bias[l]
        gained.append({k: weights[k][l] if g is None else weights[k][l] * g.to(weights[k].dtype) for k in kinds})
        sh = {}
        for k in kinds:
            b = None if biases[k] is None else biases[k][l]
            wb = None if beta is None else torch.einsum("hrd,d->hr", weights[k][l], beta.to(weights[k].dtype))
            sh[k] = b if wb is None else (wb if b is None else wb + b)
        shift.append(sh)
        if norm is None:
            centred.append(None)
            sigma2.append(None)
            continue
        c = r.float()
        if norm.kind == "layernorm":
            c = c - c.mean(-1, keepdim=True)
        centred.append(c)
        sigma2.append(c.double().pow(2).mean(-1) + norm.eps)
    return Readers(lin, centred, sigma2, gained, shift)


def writer_columns(hw, layer: int, head: int) -> tuple[Tensor, Tensor]:
    """``W̃ = c(W_O^h)`` ``(d_model, d_head)`` (centred over the residual's coordinates where the
    heads read a LayerNorm) and its Gram ``W̃ᵀ W̃`` in float64. (Every layer after the first reads a
    norm where the model has one: only a first layer may read the residual unnormed.)"""
    w = hw.W_O[layer][head]
    norm = input_norm(hw)
    if norm is not None and norm.kind == "layernorm":
        w = w - w.mean(0, keepdim=True)
    return w, (w.double().mT @ w.double())


def changed_reads(hw, R: Readers, l1: int, h1: int, u: Tensor, kinds: str,
                  plain: Callable[[int], dict[str, Tensor]]) -> Iterator[tuple[int, dict[str, Tensor]]]:
    """``(l2, {kind: changed queries / keys / values})`` for every layer after ``l1`` when writer
    ``h1``'s ``u: (batch, seq, d_head)`` is taken out (module docstring); ``plain(l2)`` gives
    them by the plain route where the residual nearly cancels."""
    wc, gram = writer_columns(hw, l1, h1)
    d = hw.d_model
    quad = ((u.double() @ gram) * u.double()).sum(-1)  # uᵀ W̃ᵀW̃ u, (batch, seq)
    for l2 in range(l1 + 1, hw.n_layers):
        if R.sigma2[l2] is None:
            scale = inv = None
        else:
            dot = ((R.centred[l2] @ wc.to(R.centred[l2].dtype)) * u.to(R.centred[l2].dtype)).sum(-1).double()
            s2 = R.sigma2[l2] + (2 * dot + quad) / d
            if bool((s2 < CANCELLATION * R.sigma2[l2]).any()):
                yield l2, plain(l2)
                continue
            inv = s2.rsqrt()
            scale = (R.sigma2[l2].sqrt() * inv)[:, None, :, None].to(u.dtype)  # σ / σ', (batch, 1, seq, 1)
            inv = inv[:, None, :, None].to(u.dtype)
        out = {}
        for kind in kinds:
            y = R.lin[l2][kind]
            m = torch.einsum("hrd,dw->hrw", R.gained[l2][kind], wc.to(R.gained[l2][kind].dtype))
            pre = torch.einsum("hrw,bsw->bhsr", m, u.to(m.dtype)).to(y.dtype)  # M u, then in place
            if scale is None:
                pre += y
            else:
                k = R.shift[l2][kind]
                pre.mul_(inv).addcmul_(scale, y)  # (σ/σ') y + M u / σ' ...
                if k is not None:  # ... + (1 − σ/σ') k
                    pre.add_(k[None, :, None].to(y.dtype) * (1 - scale))
            out[kind] = finish_projection(hw, l2, kind, pre)
        yield l2, out
