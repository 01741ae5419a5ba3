"""Circuits read from the weights (spec, "Circuits from the weights"), float64.

- **Copying score** of a head: the eigenvalues ``λ`` of its token-space OV circuit
  ``W_U W_OV W_E`` (``n_vocab × n_vocab``) are, apart from zeros, those of the ``r × r`` matrix
  ``W_V (W_E W_U) W_O`` (``eig(XY) = eig(YX)`` away from 0); score ``Σλ / Σ|λ|``, real because
  complex eigenvalues come in conjugate pairs: 1 when every eigenvalue is positive (attending to
  a token raises that token's logit), −1 when every one is negative, 0 for a rotation.
- **Matching score**: the same for the token-space QK circuit ``W_Eᵀ W_QK W_E``, whose nonzero
  eigenvalues are those of ``(R(−δ) W_K) (W_E W_Eᵀ) W_Qᵀ``: 1 when every token attends most to
  itself. ``δ``: the rotary offset (query minus key position), 0 by default.
- **Positional previous-token score** (learned absolute positions only): attention from the
  positional parts alone, ``scale · (W_Q p_i)·(W_K p_j)`` over ``j ≤ i`` (every ``j`` for a
  bidirectional model; ``p = W_pos`` columns;
  token content, biases and norms left out), softmax, and the mean mass on ``j = i − 1`` over
  ``i ≥ 1``.
- **Zero-layer bigram** ``W_U W_E`` and **virtual heads** ``W_OV^{h2} W_OV^{h1}`` (the
  V-composition path through ``h1`` then ``h2``): the same copying score, from the ``d × d``
  matrix ``W_E W_U`` and from the ``r × r`` matrices ``(W_V^{h1} W_E W_U W_O^{h2})(W_V^{h2}
  W_O^{h1})``.
- **Induction circuit from the weights**: a previous-token head ``h1`` K-composing into a head
  ``h2`` that copies. A head ``h2`` in layer ``l2 ≥ 1`` gets
  ``max(copying(h2), 0) · max_{h1 in layers < l2} previous(h1) · K(h1 → h2)``, with ``K`` a
  composition measure (``frobenius`` by default, or any other); heads of layer 0 get 0 (no
  earlier head to compose with). Every factor is a number in ``[0, 1]`` for the measures of
  range ``[0, 1]``; the product is a ranking, not a probability.

``W_E W_U`` and ``W_E W_Eᵀ`` are ``d × d`` (formed once); nothing vocabulary-sized per head.
Norms are not part of these circuits: load with ``fold_norm=True`` to fold their gains in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import OptionError, WeightError
from ..core.factors import layer_factor, model_factor
from ..core.heads import HeadWeights

_F64 = torch.float64


def eigen_score(M: Tensor) -> Tensor:
    """``Σλ / Σ|λ|`` over the eigenvalues of each ``(…, r, r)`` matrix (0 where all are 0)."""
    lam = torch.linalg.eigvals(M.to(_F64))
    num, den = lam.sum(-1).real, lam.abs().sum(-1)
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.zeros_like(den))


def copying_scores(hw: HeadWeights) -> Tensor:
    """``(layer, head)`` copying scores (module docstring); needs ``W_U``."""
    if hw.W_U is None:
        raise WeightError(f"{hw.meta.name}: copying scores need the unembedding W_U, and this model has none")
    M = hw.W_E.to(_F64) @ hw.W_U.to(_F64)  # (d, d)
    return eigen_score(model_factor(hw, "V", _F64) @ M @ model_factor(hw, "O", _F64).mT)


def matching_scores(hw: HeadWeights, offset: float = 0.0) -> Tensor:
    """``(layer, head)`` same-token matching scores at rotary offset ``offset``."""
    N = hw.W_E.to(_F64) @ hw.W_E.to(_F64).T  # (d, d)
    out = []
    for layer in range(hw.n_layers):
        WK = layer_factor(hw, layer, "K", offset=offset, dtype=_F64)  # R(-δ) W_K per query head
        out.append(eigen_score(WK @ N @ layer_factor(hw, layer, "Q", dtype=_F64).mT))
    return torch.stack(out)


def bigram_copying(hw: HeadWeights) -> float:
    """Copying score of the zero-layer bigram ``W_U W_E`` (direct path from token to logit)."""
    if hw.W_U is None:
        raise WeightError(f"{hw.meta.name}: the bigram W_U W_E needs the unembedding W_U, and this model has none")
    return float(eigen_score(hw.W_E.to(_F64) @ hw.W_U.to(_F64)))


def virtual_copying(hw: HeadWeights) -> Tensor:
    """``(L, H, L, H)`` copying scores of the virtual heads ``W_OV^{h2} W_OV^{h1}`` for ``h1`` in
    an earlier layer than ``h2`` (NaN elsewhere); one ``r × r`` eigenproblem per pair."""
    if hw.W_U is None:
        raise WeightError(f"{hw.meta.name}: virtual copying scores need the unembedding W_U, and this model has none")
    L, H = hw.n_layers, hw.n_heads
    M = hw.W_E.to(_F64) @ hw.W_U.to(_F64)
    WV, WO = model_factor(hw, "V", _F64), model_factor(hw, "O", _F64).mT  # (L, H, r, d), (L, H, d, r)
    out = torch.full((L, H, L, H), float("nan"), dtype=_F64)
    for l1 in range(L - 1):
        left = WV[l1] @ M  # (H, r, d): W_V^{h1} W_E W_U
        for l2 in range(l1 + 1, L):
            a = torch.einsum("ird,jdk->ijrk", left, WO[l2])  # W_V^{h1} W_E W_U W_O^{h2}
            b = torch.einsum("jrd,idk->ijrk", WV[l2], WO[l1])  # W_V^{h2} W_O^{h1}
            out[l1, :, l2] = eigen_score(a @ b)
    return out


def positional_previous(hw: HeadWeights) -> Tensor:
    """``(layer, head)`` previous-token scores of the positional QK circuit (learned positions)."""
    if hw.W_pos is None:
        raise OptionError(f"{hw.meta.name}: positional scores need learned absolute positions (W_pos); "
                          f"this model's positions are {hw.positions!r}")
    P = hw.W_pos.to(_F64)  # (d, n)
    n = P.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril() if hw.causal else torch.ones(n, n, dtype=torch.bool)
    i = torch.arange(1, n)
    out = []
    for layer in range(hw.n_layers):
        q = layer_factor(hw, layer, "Q", dtype=_F64) @ P  # (H, r, n)
        k = layer_factor(hw, layer, "K", dtype=_F64) @ P
        logits = (hw.scale * q.mT @ k).masked_fill(~causal, float("-inf"))  # (H, n_query, n_key)
        out.append(logits.softmax(-1)[:, i, i - 1].mean(-1))
    return torch.stack(out)


def rotary_previous(hw: HeadWeights, window: int = 64, content: Mapping[int, Tensor] | None = None,
                    seed: int = 0) -> Tensor:
    """``(layer, head)`` previous-token scores of rotary heads from the weights: the QK logit as a
    function of the relative offset ``δ = i − j`` alone, with the content part under a stated
    distribution; softmax over ``δ = 0 … window − 1`` (the keys a query at position
    ``window − 1`` sees, within the layer's sliding window), and the mass on ``δ = 1``.

    - ``content=None`` (the weights alone): query and key tokens drawn independently and uniformly
      from the vocabulary, each embedding passed through the layer's attention norm (gain
      included), so the expected logit is ``μ_lᵀ W_Qᵀ R(−δ) W_K μ_l + biases`` with ``μ_l`` the mean
      normed embedding, and the score is the softmax of that expected logit.
    - ``content={layer: x (n, d_model)}``: samples of what each layer's heads read (the normed
      residual on data: :func:`compscope.data.residual_moments.residual_samples`). Each sample is
      a query at offset 0 and its own key at ``δ = 0`` (a token sees itself); the key at each
      ``δ ≥ 1`` is a sample drawn independently and uniformly (``seed``); the score is the
      softmax mass on ``δ = 1`` averaged over the queries, an expected softmax.

    A ranking of heads by how much their weights prefer the previous position; position-independent
    content (induction, duplicate tokens) is averaged out by design."""
    from ..core.attention import project, read_input

    if hw.rotary is None:
        raise OptionError(f"{hw.meta.name}: rotary scores need rotary positions; this model's are {hw.positions!r}")
    if content is not None:
        return _sampled_rotary_previous(hw, window, content, seed)
    E = hw.W_E.T.to(torch.float32)  # (n_vocab, d)
    out = []
    delta = torch.arange(window)
    for layer in range(hw.n_layers):
        mu = torch.zeros(hw.d_model, dtype=_F64)
        for part in E.split(8192):  # the normed embeddings, in chunks (vocabularies reach 262,144)
            mu += read_input(hw, layer, part).to(_F64).sum(0)
        mu = (mu / E.shape[0])[None, None].float()  # (1, 1, d): one token at one position
        q = project(hw, layer, "Q", mu, positions=torch.zeros(1))  # (1, H, 1, r), unrotated (position 0)
        k = project(hw, layer, "K", mu.expand(1, window, -1), positions=-delta)  # key at offset δ behind
        logits = hw.scale * (q @ k.transpose(-1, -2))[0, :, 0]  # (H, window)
        out.append(_window(hw, layer, logits, delta).double().softmax(-1)[:, 1])
    return torch.stack(out)


def _window(hw: HeadWeights, layer: int, logits: Tensor, delta: Tensor) -> Tensor:
    """``logits (..., window)`` with the offsets beyond ``layer``'s sliding window masked out."""
    w = hw.sliding_window[layer] if hw.sliding_window else None
    return logits if w is None else logits.masked_fill(delta >= w, float("-inf"))


def _sampled_rotary_previous(hw: HeadWeights, window: int, content: Mapping[int, Tensor], seed: int) -> Tensor:
    """:func:`rotary_previous` with the content drawn from samples (its docstring)."""
    from ..core.attention import move, project

    missing = [l for l in range(hw.n_layers) if l not in content]
    if missing:
        raise OptionError(f"{hw.meta.name}: content samples are missing for layers {missing}")
    g = torch.Generator().manual_seed(seed)
    delta = torch.arange(window)
    out = []
    for layer in range(hw.n_layers):
        x = content[layer]
        if x.ndim != 2 or x.shape[1] != hw.d_model or x.shape[0] == 0:
            raise OptionError(f"{hw.meta.name}: content samples of layer {layer} must be (n, {hw.d_model}), "
                              f"got {tuple(x.shape)}")
        x = x.float()[None]  # (1, n, d)
        n = x.shape[1]
        q = project(hw, layer, "Q", x, positions=torch.zeros(n))[0]  # (H, n, r)
        k = project(hw, layer, "K", x, positions=torch.zeros(n))  # (1, H, n, r), unrotated: R(0) = I
        draws = torch.randint(n, (window, n), generator=g)
        draws[0] = torch.arange(n)  # δ = 0: the query's own key
        logits = torch.stack([(q * move(hw, layer, k[:, :, draws[d]], torch.full((n,), -float(d)))[0]).sum(-1)
                              for d in range(window)], -1)  # (H, n, window): the key drawn for δ, rotated back δ
        logits = _window(hw, layer, hw.scale * logits, delta)
        out.append(logits.double().softmax(-1)[..., 1].mean(-1))
    return torch.stack(out)


@dataclass(frozen=True)
class Circuits:
    """Per-head scores read from the weights, ``(layer, head)`` float64 each; ``copying`` is None
    without an unembedding (an encoder), ``previous`` without learned positions (no
    previous-token heads from the weights), ``induction`` without either."""

    model: str
    copying: Tensor | None
    matching: Tensor
    previous: Tensor | None
    induction: Tensor | None
    measure: str
    offset: float
    #: the content distribution of the rotary previous-token score: ``embed`` (the normed
    #: embeddings, weights only) or ``activations`` (samples of what each layer reads on data)
    content: str = "embed"


def head_circuits(hw: HeadWeights, measure: str = "frobenius", *, offset: float = 0.0,
                  content: Mapping[int, Tensor] | None = None) -> Circuits:
    """Copying, matching, positional previous-token and induction scores of every head
    (module docstring); ``measure``: the K-composition measure of the induction score;
    ``content``: samples of what each layer reads for the rotary previous-token score
    (:func:`rotary_previous`; None: the normed embeddings, weights only)."""
    from ..engine.composition import scores

    copying = None if hw.W_U is None else copying_scores(hw)
    matching = matching_scores(hw, offset)
    previous = positional_previous(hw) if hw.W_pos is not None else \
        rotary_previous(hw, content=content) if hw.rotary is not None else None
    induction = None
    if previous is not None and copying is not None:
        induction = torch.zeros_like(copying)
        if hw.n_layers > 1:
            K = scores(hw, "K", [measure], offset=offset, progress=False).dense(measure, "K")  # (L, H, L, H)
            for l2 in range(1, hw.n_layers):
                via = (previous[:l2, :, None] * K[:l2, :, l2]).flatten(0, 1).amax(0)  # best previous-token feeder per h2
                induction[l2] = copying[l2].clamp_min(0) * via
    used = "activations" if content is not None and hw.W_pos is None and hw.rotary is not None else "embed"
    return Circuits(hw.meta.name, copying, matching, previous, induction, measure, offset, used)
