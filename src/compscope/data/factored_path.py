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

from ..core.attention import finish_projection, input_norm, project_linear, read_input

#: ``σ'² / σ²`` below which a (writer, later layer) takes the plain route (module docstring)
CANCELLATION = 1e-2


def applies(hw, paths: str, post_ln_mlp) -> bool:
    """Whether the direct path of ``hw``'s interventions is ``r + W_O u`` read through a pre-norm
    (or none): direct paths only, no attention-output norm, not post-LN."""
    return paths == "direct" and post_ln_mlp is None and hw.attn_out_norm is None and hw.norm_placement != "post"


@dataclass(frozen=True)
class Readers:
    """What the later layers' reads need, from one trace: ``lin[l][kind]`` the clean ``y = W N(r) + b``
    ``(batch, head, seq, d_head)`` per K/V head of layer ``l``; ``centred[l]`` ``c(r)`` float32 and
    ``sigma2[l]`` ``σ²`` float64 ``(batch, seq)``, None without a norm;
    ``gained[kind]`` ``W diag(g)`` ``(layer, head, d_head, d_model)``; ``shift[kind]`` ``k = W β + b``
    ``(layer, head, d_head)`` or None."""

    lin: list[dict[str, Tensor]]
    centred: list[Tensor] | None
    sigma2: list[Tensor] | None
    gained: dict[str, Tensor]
    shift: dict[str, Tensor | None]


def readers(hw, resid: list[Tensor], kinds: str) -> Readers:
    """:class:`Readers` of the residuals ``resid`` that each layer reads in a clean trace (``resid[l]``
    for layer ``l``)."""
    norm = input_norm(hw)
    lin = [{k: project_linear(hw, l, k, read_input(hw, l, resid[l])) for k in kinds} for l in range(hw.n_layers)]
    weights = {"Q": hw.W_Q, "K": hw.W_K, "V": hw.W_V}
    biases = {"Q": hw.b_Q, "K": hw.b_K, "V": hw.b_V}
    gained, shift = {}, {}
    for k in kinds:
        w = weights[k]  # (layer, head, d_head, d_model)
        gains = None if norm is None or norm.weight is None else torch.stack([norm.gain(l) for l in range(hw.n_layers)])
        gained[k] = w if gains is None else w * gains.to(w.dtype)[:, None, None]
        wb = None if norm is None or norm.bias is None else torch.einsum("lhrd,ld->lhr", w, norm.bias.to(w.dtype))
        b = biases[k]
        shift[k] = b if wb is None else (wb if b is None else wb + b)
    if norm is None:
        return Readers(lin, None, None, gained, shift)
    centred = [r.float() - r.float().mean(-1, keepdim=True) if norm.kind == "layernorm" else r.float() for r in resid]
    return Readers(lin, centred, [c.double().pow(2).mean(-1) + norm.eps for c in centred], gained, shift)


def writer_columns(hw, layer: int) -> tuple[Tensor, Tensor]:
    """``W̃ = c(W_O)`` ``(head, d_model, d_head)`` of every head of ``layer`` (centred over the
    residual's coordinates where the heads read a LayerNorm) and their Grams ``W̃ᵀ W̃`` in float64."""
    w = hw.W_O[layer]
    norm = input_norm(hw)
    if norm is not None and norm.kind == "layernorm":
        w = w - w.mean(1, keepdim=True)
    return w, (w.double().mT @ w.double())


@dataclass(frozen=True)
class Writers:
    """For the heads of one writer layer ``l1``, taken out with ``U: (batch, head, seq, d_head)``:
    ``columns`` ``W̃`` ``(head, d_model, d_head)``; ``s2[h][i]`` ``σ'²`` ``(batch, seq)`` float64 at
    layer ``l1 + 1 + i`` (None without a norm) and ``cancels[h][i]`` whether that layer takes the
    plain route (module docstring)."""

    layer: int
    columns: Tensor
    s2: Tensor | None
    cancels: list[list[bool]]


def writers(hw, R: Readers, l1: int, U: Tensor) -> Writers:
    """:class:`Writers` of layer ``l1``: every head and later layer together, with one look from the host
    (on a GPU each look waits for the work queued before it, so not one per pair)."""
    wc, gram = writer_columns(hw, l1)
    n_later = hw.n_layers - l1 - 1
    if R.sigma2 is None:
        return Writers(l1, wc, None, [[False] * n_later for _ in range(hw.n_heads)])
    Ud = U.double()
    quad = torch.einsum("bhsr,hrw,bhsw->hbs", Ud, gram, Ud)  # uᵀ W̃ᵀW̃ u per head
    s2 = []
    for l2 in range(l1 + 1, hw.n_layers):
        c = R.centred[l2]
        dot = torch.einsum("bsd,hdr,bhsr->hbs", c, wc.to(c.dtype), U.to(c.dtype)).double()  # ⟨c(r), W̃ u⟩
        s2.append(R.sigma2[l2] + (2 * dot + quad) / hw.d_model)
    s2 = torch.stack(s2, 1)  # (head, later layer, batch, seq)
    sigma2 = torch.stack(R.sigma2[l1 + 1:])
    cancels = (s2 < CANCELLATION * sigma2).flatten(2).any(2).tolist()
    return Writers(l1, wc, s2, cancels)


def changed_reads(hw, R: Readers, W: Writers, h1: int, u: Tensor, kinds: str,
                  plain: Callable[[int], dict[str, Tensor]]) -> Iterator[tuple[int, dict[str, Tensor]]]:
    """``(l2, {kind: changed queries / keys / values})`` for every layer after ``W.layer`` when its
    head ``h1``'s ``u: (batch, seq, d_head)`` is taken out (module docstring); ``plain(l2)`` gives
    them by the plain route where the residual nearly cancels."""
    l1, wc = W.layer, W.columns[h1]
    later = slice(l1 + 1, hw.n_layers)
    m = {k: torch.einsum("lhrd,dw->lhrw", R.gained[k][later], wc.to(R.gained[k].dtype)) for k in kinds}
    for i, l2 in enumerate(range(l1 + 1, hw.n_layers)):
        if W.cancels[h1][i]:
            yield l2, plain(l2)
            continue
        if W.s2 is None:
            scale = inv = None
        else:
            s2, sigma2 = W.s2[h1, i], R.sigma2[l2]
            inv = s2.rsqrt()
            scale = (sigma2.sqrt() * inv)[:, None, :, None].to(u.dtype)  # σ / σ', (batch, 1, seq, 1)
            inv = inv[:, None, :, None].to(u.dtype)
        out = {}
        for kind in kinds:
            y = R.lin[l2][kind]
            pre = torch.einsum("hrw,bsw->bhsr", m[kind][i], u.to(m[kind].dtype)).to(y.dtype)  # M u, then in place
            if scale is None:
                pre += y
            else:
                k = R.shift[kind]
                pre.mul_(inv).addcmul_(scale, y)  # (σ/σ') y + M u / σ' ...
                if k is not None:  # ... + (1 − σ/σ') k
                    pre.add_(k[l2][None, :, None].to(y.dtype) * (1 - scale))
            out[kind] = finish_projection(hw, l2, kind, pre)
        yield l2, out
