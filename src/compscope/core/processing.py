"""Opt-in weight transforms. Each returns a new ``HeadWeights`` and appends its name to
``meta.processing``; none is ever applied by default.

- ``fold_norm``: a pre-norm reads ``N(x) = gain ⊙ n(x) + beta``; with ``W' = W diag(gain)``
  and ``b' = b + W beta`` every reader ``W N(x) + b = W' n(x) + b'`` is unchanged, and the
  norm keeps only its gainless part ``n``. Applied to ``W_Q, W_K, W_V`` (and the final norm
  into ``W_U, b_U``). Refused for post-LN models, where the norm acts on the residual itself.
  After ``fold_value_bias`` the new value bias ``W_V beta`` goes straight into ``b_O``.
- ``center_writing``: every reader of a LayerNorm model removes the mean over ``d_model``
  first, so writers may drop it: ``W_O ← (I - 11ᵀ/d) W_O`` (and ``b_O``, ``W_E``, ``W_pos``).
  Refused unless every norm reading the residual is a pre-LayerNorm (and refused when
  ``W_U`` reads the residual without a final norm).
- ``fold_value_bias``: attention rows sum to 1, so ``b_V`` adds the constant
  ``W_O b_V`` to a head's output: ``b_O ← b_O + Σ_h W_O^h b_V^h``, ``b_V ← 0``.
"""

from __future__ import annotations


import torch
from torch import Tensor

from ..errors import ProcessingError
from .heads import HeadWeights, Norm


def _check_once(hw: HeadWeights, step: str) -> None:
    if step in hw.meta.processing:
        raise ProcessingError(f"{step} was already applied to {hw.meta.name}")


def fold_norm(hw: HeadWeights) -> HeadWeights:
    """Fold the attention-input norm gains/biases into ``W_Q, W_K, W_V`` (and the final norm into ``W_U``)."""
    _check_once(hw, "fold_norm")
    if hw.norm_placement != "pre" or hw.attn_norm is None:
        raise ProcessingError(
            f"fold_norm: {hw.meta.name} has norm placement '{hw.norm_placement}'; folding norm gains into the "
            "reading weights preserves the model only for pre-norm models"
        )
    n = hw.attn_norm
    changes: dict = {}
    if n.weight is not None:
        g = torch.stack([n.gain(l) for l in range(hw.n_layers)])  # (L, d)
        changes.update(W_Q=hw.W_Q * g[:, None, None], W_K=hw.W_K * g[:, None, None], W_V=hw.W_V * g[:, None, None])
    if n.bias is not None:
        for wn, bn in (("W_Q", "b_Q"), ("W_K", "b_K"), ("W_V", "b_V")):
            w, b = getattr(hw, wn), getattr(hw, bn)
            extra = torch.einsum("lhrd,ld->lhr", w, n.bias)
            changes[bn] = extra if b is None else b + extra
        if "fold_value_bias" in hw.meta.processing:  # keep b_V folded: its new part goes to b_O too
            b_v = changes.pop("b_V")[:, list(hw.kv_map)]
            extra = torch.einsum("lhdr,lhr->ld", hw.W_O, b_v)
            changes["b_O"] = extra if hw.b_O is None else hw.b_O + extra
    changes["attn_norm"] = Norm(n.kind, None, None, n.eps)
    f = hw.final_norm
    if f is not None and hw.W_U is not None:
        W_U, b_U = hw.W_U, hw.b_U
        if f.bias is not None:
            extra = W_U @ f.bias[0]
            b_U = extra if b_U is None else b_U + extra
        if f.weight is not None:
            W_U = W_U * f.gain(0)[None, :]
        changes.update(W_U=W_U, b_U=b_U, final_norm=Norm(f.kind, None, None, f.eps))
    return hw.replace(step="fold_norm", **changes)


#: how :func:`fold_qk_norm_gains` is recorded in ``meta.processing``
QK_GAINS_FOLDED = "fold_qk_norm_gains (approximate)"


def fold_qk_norm_gains(hw: HeadWeights) -> HeadWeights:
    """Move QK-norm's per-dimension gains into ``W_Q``, ``W_K`` (and their biases): ``diag(γ_q) W_Q``,
    ``diag(γ_k) W_K``, QK-norm left without gains. **Approximate, for analysis only**: the model
    divides ``q`` by ``rms(q)`` before the gain, and after this step by ``rms(γ ⊙ q)``; the two
    differ by a per-token scalar, which no subspace-based measure sees, but the model is not the
    same (``compscope validate --fold-qk-gains`` judges the measures of these weights against the
    data of the unchanged model). Recorded as ``fold_qk_norm_gains (approximate)``."""
    step = QK_GAINS_FOLDED
    _check_once(hw, step)
    if hw.qk_norm is None:
        raise ProcessingError(f"fold_qk_norm_gains: {hw.meta.name} has no QK-norm")
    nq, nk = hw.qk_norm
    if any(n.kind != "rmsnorm" or n.bias is not None for n in (nq, nk)):
        raise ProcessingError(f"fold_qk_norm_gains: {hw.meta.name}'s QK-norm is a {nq.kind}"
                              + (" with a bias" if nq.bias is not None or nk.bias is not None else "")
                              + "; only an RMSNorm's gains move into W_Q, W_K up to a per-token scalar")
    gq, gk = qk_gains(hw, 0), qk_gains(hw, 1)
    changes = {"W_Q": hw.W_Q * gq[..., None], "W_K": hw.W_K * gk[..., None],
               "qk_norm": (Norm(nq.kind, None, None, nq.eps), Norm(nk.kind, None, None, nk.eps))}
    if hw.b_Q is not None:
        changes["b_Q"] = hw.b_Q * gq
    if hw.b_K is not None:
        changes["b_K"] = hw.b_K * gk
    return hw.replace(step=step, **changes)


def qk_gains(hw: HeadWeights, which: int) -> Tensor:
    """``(L, heads or 1, d_head)``: QK-norm's gain per layer, for queries (``which=0``) or keys (``1``):
    one row per head where the model keeps one, one row for all heads where it shares it, ones
    where the norm has no gain."""
    n, heads = hw.qk_norm[which], (hw.n_heads, hw.n_kv_heads)[which]
    if n.weight is None:
        return torch.ones(hw.n_layers, 1, hw.d_head, device=hw.device)
    g = torch.stack([n.gain(l) for l in range(hw.n_layers)])
    return g[:, None, :] if g.shape[-1] == hw.d_head else g.reshape(hw.n_layers, heads, hw.d_head)


def center_writing(hw: HeadWeights) -> HeadWeights:
    """Remove the mean over ``d_model`` from everything written into the residual."""
    _check_once(hw, "center_writing")
    norms = [n for n in (hw.attn_norm, hw.final_norm) if n is not None]
    if hw.norm_placement != "pre" or not norms or any(n.kind != "layernorm" for n in norms):
        kinds = sorted({n.kind for n in norms}) or ["none"]
        raise ProcessingError(
            f"center_writing: {hw.meta.name} has {hw.norm_placement}-norm {'/'.join(kinds)}; centring writing "
            "weights preserves the model only when every reader is a pre-LayerNorm"
        )
    if hw.W_U is not None and hw.final_norm is None:
        raise ProcessingError(
            f"center_writing: {hw.meta.name} has an unembedding but no final norm; W_U reads the raw residual, "
            "so removing its mean would change the logits"
        )
    centre = lambda t: None if t is None else t - t.mean(dim=-2 if t.ndim >= 2 else -1, keepdim=True)  # noqa: E731
    return hw.replace(
        step="center_writing",
        W_O=hw.W_O - hw.W_O.mean(dim=-2, keepdim=True),
        b_O=None if hw.b_O is None else hw.b_O - hw.b_O.mean(-1, keepdim=True),
        W_E=centre(hw.W_E),
        W_pos=centre(hw.W_pos),
    )


def fold_value_bias(hw: HeadWeights) -> HeadWeights:
    """Move ``b_V`` into ``b_O`` (exact: attention weights sum to one)."""
    _check_once(hw, "fold_value_bias")
    if hw.b_V is None:
        return hw.replace(step="fold_value_bias")
    b_v = hw.b_V[:, list(hw.kv_map)]  # (L, H, r)
    extra = torch.einsum("lhdr,lhr->ld", hw.W_O, b_v)
    b_O = extra if hw.b_O is None else hw.b_O + extra
    return hw.replace(step="fold_value_bias", b_O=b_O, b_V=None)


#: name -> transform, in the order ``process`` applies them.
STEPS = {"fold_norm": fold_norm, "center_writing": center_writing, "fold_value_bias": fold_value_bias}


def process(hw: HeadWeights, *, fold_norm: bool = False, center_writing: bool = False, fold_value_bias: bool = False) -> HeadWeights:
    """Apply the requested transforms in a fixed order (fold, centre, value bias)."""
    wanted = {"fold_norm": fold_norm, "center_writing": center_writing, "fold_value_bias": fold_value_bias}
    for name, on in wanted.items():
        if on:
            hw = STEPS[name](hw)
    return hw


__all__ = ["STEPS", "center_writing", "fold_norm", "fold_value_bias", "process"]
