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
- ``linearise_qk_norm``: QK-norm replaced by its mean Jacobian at the isotropic operating point,
  ``W_Q ← diag(γ_q) J_q W_Q`` (keys alike), from the weights alone; approximate, for analysis
  (:func:`linearise_qk_norm`; on data instead: :mod:`compscope.data.norm_linearisation`).
- ``fold_value_bias``: attention rows sum to 1, so ``b_V`` adds the constant
  ``W_O b_V`` to a head's output: ``b_O ← b_O + Σ_h W_O^h b_V^h``, ``b_V ← 0``.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from ..errors import ProcessingError
from .attention import layer_input_norm
from .heads import HeadWeights, Norm


def _check_once(hw: HeadWeights, step: str) -> None:
    if step in hw.meta.processing:
        raise ProcessingError(f"{step} was already applied to {hw.meta.name}")


#: the note of :func:`fold_norm` on weights whose norms carry no gains or biases (a TransformerLens
#: model loaded with ``fold_ln``, or weights folded elsewhere): the step changes nothing
FOLDED_ALREADY = ("fold_norm changed nothing: the norms carry no gains or biases (folded before loading, or norms "
                  "without parameters)")


def fold_norm(hw: HeadWeights) -> HeadWeights:
    """Fold the attention-input norm gains/biases into ``W_Q, W_K, W_V`` (and ``W_G``, an output gate's; the
    final norm into ``W_U``)."""
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
        if hw.first_layer_unnormed:  # (its first layer reads the residual itself: nothing to fold there)
            g[0] = 1
        changes.update(W_Q=hw.W_Q * g[:, None, None], W_K=hw.W_K * g[:, None, None], W_V=hw.W_V * g[:, None, None])
        if hw.W_G is not None:  # the output gate reads the same input
            changes["W_G"] = hw.W_G * g[:, None, None]
    if n.weight is not None or n.bias is not None:  # multi-head latent attention's latents read it too
        for name in ("q_latent", "kv_latent"):
            lat = getattr(hw, name)
            if lat is None:
                continue
            W = lat.W if n.weight is None else lat.W * g[:, None, :]
            b = lat.b
            if n.bias is not None:
                extra = torch.einsum("lkd,ld->lk", lat.W, n.bias.to(lat.W.dtype))
                if hw.first_layer_unnormed:
                    extra[0] = 0
                b = extra if b is None else b + extra
            changes[name] = dataclasses.replace(lat, W=W, b=b)
    if n.bias is not None:
        for wn, bn in (("W_Q", "b_Q"), ("W_K", "b_K"), ("W_V", "b_V"), ("W_G", "b_G")):
            w, b = getattr(hw, wn), getattr(hw, bn)
            if w is None:
                continue
            extra = torch.einsum("lhrd,ld->lhr", w, n.bias)
            if hw.first_layer_unnormed:
                extra[0] = 0
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
    bare = all(x is None or (x.weight is None and x.bias is None) for x in (n, f))
    return hw.replace(step="fold_norm", note=FOLDED_ALREADY if bare else None, **changes)  # recorded, and said


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


#: how :func:`linearise_qk_norm` is recorded in ``meta.processing``: at the isotropic operating point,
#: and at second moments given to it
QK_NORM_LINEARISED = "linearise_qk_norm (isotropic input)"
QK_NORM_AT_MOMENTS = "linearise_qk_norm (given moments)"


def qk_norm_linearised(hw: HeadWeights) -> bool:
    """Whether :func:`linearise_qk_norm` replaced ``hw``'s QK-norm (at either operating point)."""
    return any(step in (QK_NORM_LINEARISED, QK_NORM_AT_MOMENTS) for step in hw.meta.processing)


def isotropic_read_moment(hw: HeadWeights, layer: int) -> tuple[Tensor, Tensor]:
    """``(M (d, d), m (d,))``, float64: ``E[x xᵀ]`` and ``E[x]`` of what ``layer``'s heads read when the
    normalised residual is isotropic. After an RMSNorm ``x = γ ⊙ n + β`` with ``E[n nᵀ] = I`` (its
    output has mean square 1 per coordinate), after a LayerNorm ``E[n nᵀ] = d/(d−1) (I − 11ᵀ/d)``
    (centred, the same mean square); without a pre-norm the residual itself, ``E[x xᵀ] = I``.
    (:func:`qk_norm_jacobians` uses its structure and never forms it: ``d × d`` per layer.)"""
    d = hw.d_model
    M, m = torch.eye(d, dtype=torch.float64, device=hw.device), torch.zeros(d, dtype=torch.float64, device=hw.device)
    norm = layer_input_norm(hw, layer)
    if norm is None:
        return M, m
    if norm.kind == "layernorm":
        M = (M - 1.0 / d) * (d / (d - 1))
    g = norm.gain(layer)
    if g is not None:
        M = M * g.double()[:, None] * g.double()[None, :]
    if norm.bias is not None:
        m = norm.bias[layer].double()
        M = M + m[:, None] * m[None, :]
    return M, m


def _query_moment(hw: HeadWeights, layer: int, W: Tensor, b: Tensor | None, moment: Tensor | None,
                  mean: Tensor | None) -> Tensor:
    """``(heads, r, r)``: ``E[y yᵀ]`` of ``y = W x + b`` (``W: (heads, r, d)`` float64) for inputs ``x`` of
    second moment ``moment`` and mean ``mean`` (None: the isotropic point of ``layer``, from its
    structure ``c · (W Γ) P (W Γ)ᵀ + (W β)(W β)ᵀ``, no ``d × d`` matrix formed)."""
    if moment is None:
        norm = layer_input_norm(hw, layer)
        g = None if norm is None else norm.gain(layer)
        A = W if g is None else W * g.double().to(W.device)
        S = A @ A.transpose(-1, -2)
        if norm is not None and norm.kind == "layernorm":
            u = A.sum(-1)
            S = (S - u[..., :, None] * u[..., None, :] / hw.d_model) * (hw.d_model / (hw.d_model - 1))
        mean = None if norm is None or norm.bias is None else norm.bias[layer].double().to(W.device)
        if mean is not None:
            wm = W @ mean
            S = S + wm[..., :, None] * wm[..., None, :]
    else:
        S = W @ moment @ W.transpose(-1, -2)
    if b is not None:
        wm = torch.zeros_like(b) if mean is None else W @ mean
        S = S + wm[..., :, None] * b[..., None, :] + b[..., :, None] * wm[..., None, :] + b[..., :, None] * b[..., None, :]
    return S


def check_qk_norm_linearisable(hw: HeadWeights) -> None:
    """Refuse, naming the model, weights whose QK-norm :func:`linearise_qk_norm` cannot replace: none,
    one over all heads of a layer at once, gains already moved into ``W_Q``, ``W_K``."""
    if hw.qk_norm is None:
        raise ProcessingError(f"linearise_qk_norm: {hw.meta.name} has no QK-norm")
    if hw.qk_norm_scope != "head":
        raise ProcessingError(f"linearise_qk_norm: {hw.meta.name}'s QK-norm runs over all heads of a layer at once; "
                              "its Jacobian mixes heads, which per-head W_Q, W_K cannot hold")
    if QK_GAINS_FOLDED in hw.meta.processing:
        raise ProcessingError(f"linearise_qk_norm: {hw.meta.name}'s QK-norm gains were already moved into W_Q, W_K "
                              "(fold_qk_norm_gains); linearise the unprocessed QK-norm instead")


def qk_norm_jacobians(hw: HeadWeights, moments: Tensor | None = None, means: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``(J_q (L, heads, r, r), J_k (L, kv_heads, r, r))``, float64: QK-norm's Jacobian without its gain
    at the operating point set by the second moment of what the heads read, ``moments (L, d, d)``
    with mean ``means (L, d)`` (default :func:`isotropic_read_moment`). With ``y = W x + b`` of
    second moment ``Σ = W M Wᵀ + W m bᵀ + b mᵀ Wᵀ + b bᵀ``, the mean Jacobian
    ``E[(1/s)(P − z zᵀ/r)]`` (``s² = |P y|²/r + ε``, ``z = P y / s``; ``P = I`` for an RMSNorm, ``I − 11ᵀ/r``
    for a LayerNorm) is taken at second order: ``J = (1/s̄)(P − P Σ P/(s̄² r))``, ``s̄² = tr(P Σ P)/r + ε``.
    Exact when every input's query has the same RMS (one input, say); for a spread of inputs it
    replaces ``E[1/s]`` by ``1/s̄`` and ``E[z zᵀ/s]`` by ``P Σ P/s̄³``. One layer at a time in float64;
    ``J = I`` on a layer without a QK-norm (``qk_norm_layers``)."""
    check_qk_norm_linearisable(hw)
    L, d = hw.n_layers, hw.d_model
    moments = None if moments is None else moments.detach()  # statistics, not parameters: no autograd graph
    means = None if means is None else means.detach()
    if moments is None and means is not None:
        raise ProcessingError("linearise_qk_norm: means= without moments=")
    if moments is not None and tuple(moments.shape) != (L, d, d):
        raise ProcessingError(f"linearise_qk_norm: moments of shape {tuple(moments.shape)}; expected (layers, d_model, "
                              f"d_model) = {(L, d, d)} for {hw.meta.name}")
    if means is not None and tuple(means.shape) != (L, d):
        raise ProcessingError(f"linearise_qk_norm: means of shape {tuple(means.shape)}; expected {(L, d)}")
    if moments is not None and means is None and (hw.b_Q is not None or hw.b_K is not None):
        raise ProcessingError(f"linearise_qk_norm: {hw.meta.name} has query or key biases; give the mean of what "
                              "the heads read (means=) with its second moment")
    out = []
    for which, (W, b) in enumerate(((hw.W_Q, hw.b_Q), (hw.W_K, hw.b_K))):
        norm, r = hw.qk_norm[which], hw.d_head
        P = torch.eye(r, dtype=torch.float64, device=hw.device)
        if norm.kind == "layernorm":
            P = P - 1.0 / r
        J = torch.empty(L, W.shape[1], r, r, dtype=torch.float64, device=hw.device)
        for layer in range(L):
            if not hw.qk_normed(layer):  # no QK-norm on this layer (Llama 4's NoPE layers): the identity
                J[layer] = torch.eye(r, dtype=torch.float64, device=hw.device)
                continue
            S = _query_moment(hw, layer, W[layer].double(), None if b is None else b[layer].double(),
                              None if moments is None else moments[layer].double().to(hw.device),
                              None if means is None else means[layer].double().to(hw.device))
            PSP = P @ S @ P
            s2 = torch.diagonal(PSP, dim1=-2, dim2=-1).sum(-1) / r + norm.eps
            J[layer] = (P - PSP / (s2[..., None, None] * r)) / s2.sqrt()[..., None, None]
        out.append(J)
    return out[0], out[1]


def qk_jacobian_changes(hw: HeadWeights, J_q: Tensor, J_k: Tensor) -> dict:
    """The ``HeadWeights`` fields with QK-norm replaced by the linear maps ``diag(γ) J``:
    ``W_Q ← diag(γ_q) J_q W_Q``, ``W_K ← diag(γ_k) J_k W_K`` (and their biases), per head, no QK-norm
    (one layer at a time in float64); layers without a QK-norm (``qk_norm_layers``) keep theirs."""
    changes: dict = {"qk_norm": None, "qk_norm_layers": ()}
    for which, (J, wn, bn) in enumerate(((J_q, "W_Q", "b_Q"), (J_k, "W_K", "b_K"))):
        gain = qk_gains(hw, which).double()
        W, b = getattr(hw, wn), getattr(hw, bn)
        new_W, new_b = torch.empty_like(W), None if b is None else torch.empty_like(b)
        for layer in range(hw.n_layers):
            if not hw.qk_normed(layer):  # no QK-norm here: the weights as they are
                new_W[layer] = W[layer]
                if b is not None:
                    new_b[layer] = b[layer]
                continue
            Jl = gain[layer][..., :, None] * J[layer].to(hw.device)
            new_W[layer] = (Jl @ W[layer].double()).to(W.dtype)
            if b is not None:
                new_b[layer] = (Jl @ b[layer].double()[..., None])[..., 0].to(b.dtype)
        changes[wn] = new_W
        if b is not None:
            changes[bn] = new_b
    return changes


def linearise_qk_norm(hw: HeadWeights, moments: Tensor | None = None, means: Tensor | None = None,
                      where: str | None = None) -> HeadWeights:
    """QK-norm replaced by its Jacobian at an operating point, from the weights (:func:`qk_norm_jacobians`):
    by default where the normalised residual the heads read is isotropic (:func:`isotropic_read_moment`),
    or at ``moments (L, d, d)`` (and ``means (L, d)``), second moments of what the heads read measured
    elsewhere. A QK-norm divides each query and key by its RMS, which takes the logit scale out of
    ``W_Q``, ``W_K``; the first-order model puts it back, ``W_Q ← diag(γ_q) J_q W_Q`` (keys alike), so a
    measure that keeps the reader's scale (``read_gain``) means it. **For analysis only**: the model
    is not the same. Recorded as ``linearise_qk_norm (isotropic input)`` (or ``(given moments)``); the
    loader's note on QK-norm gives way to one on the linearisation, which names the operating point
    (``where``: what the given moments are of, in words)."""
    step = QK_NORM_LINEARISED if moments is None else QK_NORM_AT_MOMENTS
    if where is not None and moments is None:
        raise ProcessingError("linearise_qk_norm: where= says what given moments are of; without moments= it has none")
    if qk_norm_linearised(hw):
        raise ProcessingError(f"linearise_qk_norm was already applied to {hw.meta.name}")
    J_q, J_k = qk_norm_jacobians(hw, moments, means)
    if moments is None:
        where = "isotropic normalised input"
    else:
        where = f"the second moment of {where}" if where else "given second moments of the heads' input"
    notes = tuple(n for n in hw.meta.notes if not n.startswith("QK-norm:"))
    note = (f"QK-norm linearised (its Jacobian at {where}): W_QK-based scores read this first-order model "
            "of the norm, an approximation")
    meta = dataclasses.replace(hw.meta, notes=notes)
    return hw.replace(step=step, note=note, meta=meta, **qk_jacobian_changes(hw, J_q, J_k))


def center_writing(hw: HeadWeights) -> HeadWeights:
    """Remove the mean over ``d_model`` from everything written into the residual."""
    check_centrable(hw)
    centre = lambda t: None if t is None else t - t.mean(dim=-2 if t.ndim >= 2 else -1, keepdim=True)  # noqa: E731
    return hw.replace(
        step="center_writing",
        W_O=hw.W_O - hw.W_O.mean(dim=-2, keepdim=True),
        b_O=None if hw.b_O is None else hw.b_O - hw.b_O.mean(-1, keepdim=True),
        W_E=centre(hw.W_E),
        W_pos=centre(hw.W_pos),
        embed_extra={k: centre(v) for k, v in hw.embed_extra.items()},  # (token types: written as W_E is)
    )


def check_centrable(hw: HeadWeights) -> None:
    """Refuse, naming the model, weights :func:`center_writing` would change the model of (a reader
    that is not a pre-LayerNorm, an unembedding reading the raw residual), or centres twice."""
    _check_once(hw, "center_writing")
    norms = [n for n in (hw.attn_norm, hw.final_norm) if n is not None]
    if hw.norm_placement != "pre" or not norms or any(n.kind != "layernorm" for n in norms):
        kinds = sorted({n.kind for n in norms}) or ["none"]
        raise ProcessingError(
            f"center_writing: {hw.meta.name} has {hw.norm_placement}-norm {'/'.join(kinds)}; centring writing "
            "weights preserves the model only when every reader is a pre-LayerNorm"
        )
    if hw.first_layer_unnormed:
        raise ProcessingError(f"center_writing: {hw.meta.name}'s first layer reads the residual without a norm, so "
                              "removing the embeddings' mean would change what it reads")
    if hw.W_U is not None and hw.final_norm is None:
        raise ProcessingError(
            f"center_writing: {hw.meta.name} has an unembedding but no final norm; W_U reads the raw residual, "
            "so removing its mean would change the logits"
        )


def fold_value_bias(hw: HeadWeights) -> HeadWeights:
    """Move ``b_V`` into ``b_O`` (exact: attention weights sum to one; refused where attention sinks
    take a share of each row, so that they do not, and where a value norm follows the bias)."""
    _check_once(hw, "fold_value_bias")
    if hw.sinks is not None and hw.b_V is not None:
        raise ProcessingError(f"fold_value_bias: {hw.meta.name} has attention sinks, so a head's attention sums to less "
                              "than 1 and the value bias it writes depends on the query: it cannot move into b_O")
    if hw.W_G is not None and hw.b_V is not None:
        raise ProcessingError(f"fold_value_bias: {hw.meta.name} gates each head's output by its query, so the value "
                              "bias a head writes depends on the query: it cannot move into b_O")
    if hw.v_norm is not None and hw.b_V is not None:
        raise ProcessingError(f"fold_value_bias: {hw.meta.name} normalises each value head after its bias, so the "
                              "bias is no constant a head writes: it cannot move into b_O")
    if hw.kv_latent is not None and hw.b_V is not None:
        raise ProcessingError(f"fold_value_bias: {hw.meta.name} scales each value, bias and all, by its latent norm's "
                              "scale for the token, so the bias is no constant a head writes: it cannot move into b_O")
    if hw.b_V is None:
        return hw.replace(step="fold_value_bias")
    b_v = hw.b_V[:, list(hw.kv_map)]  # (L, H, r)
    extra = torch.einsum("lhdr,lhr->ld", hw.W_O, b_v)
    b_O = extra if hw.b_O is None else hw.b_O + extra
    return hw.replace(step="fold_value_bias", b_O=b_O, b_V=None)


#: name -> transform, in the order ``process`` applies them.
STEPS = {"fold_norm": fold_norm, "linearise_qk_norm": linearise_qk_norm, "center_writing": center_writing,
         "fold_value_bias": fold_value_bias}


def weights_said(steps) -> str:
    """`` (weights: STEP, ...)`` for the processing ``steps`` a result was computed on, as the
    commands' first lines say it after the model's name; empty without any."""
    return f" (weights: {', '.join(steps)})" if steps else ""


def process(hw: HeadWeights, *, fold_norm: bool = False, linearise_qk_norm: bool | str = False, center_writing: bool = False,
            fold_value_bias: bool = False) -> HeadWeights:
    """Apply the requested transforms in a fixed order (fold, QK-norm linearised, centre, value bias).
    ``linearise_qk_norm``: True or ``'isotropic'`` (the weights alone); ``'text'``, which runs the model,
    is refused here (:func:`compscope.data.norm_linearisation.qk_norm_on_text` does it)."""
    if linearise_qk_norm == "text":
        raise ProcessingError("linearise_qk_norm='text' runs the model over text: compscope validate, scores and pair "
                              "take it (--linearise-qk-norm text), or compscope.data.norm_linearisation.qk_norm_on_text"
                              "(runner, hw); weights alone take the isotropic point (--linearise-qk-norm)")
    wanted = {"fold_norm": fold_norm, "linearise_qk_norm": linearise_qk_norm, "center_writing": center_writing,
              "fold_value_bias": fold_value_bias}
    for name, on in wanted.items():
        if not (isinstance(on, bool) or on is None or (name == "linearise_qk_norm" and on == "isotropic")):
            raise ProcessingError(f"{name}={on!r}: expected True or False"
                                  + (" (or 'isotropic')" if name == "linearise_qk_norm" else ""))
        if on:
            hw = STEPS[name](hw)
    return hw


__all__ = ["STEPS", "weights_said", "center_writing", "fold_norm", "fold_value_bias", "linearise_qk_norm", "process"]
