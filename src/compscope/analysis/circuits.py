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
  bidirectional model; ``i − j`` below the window of a local layer; ``p = W_pos`` columns;
  token content, biases and norms left out), softmax, and the mean mass on ``j = i − 1`` over
  ``i ≥ 1``.
- **Zero-layer bigram** ``W_U W_E`` and **virtual heads** ``W_OV^{h2} W_OV^{h1}`` (the
  V-composition path through ``h1`` then ``h2``): the same copying score, from the ``d × d``
  matrix ``W_E W_U`` and from the ``r × r`` matrices ``(W_V^{h1} W_E W_U W_O^{h2})(W_V^{h2}
  W_O^{h1})``.
- **Matching through a writer** (the K-composed QK circuit): the same-token matching score of
  ``W_Eᵀ W_Q^{h2ᵀ} R(−δ) W_K^{h2} W_OV^{h1} W_E``, the logit of a query token against a key
  position by the token ``h1`` moved there (for a previous-token ``h1``: the token before the
  key). Its nonzero eigenvalues are those of the ``r × r`` matrix
  ``(R(−δ) W_K^{h2} W_O^{h1}) (W_V^{h1} W_E W_Eᵀ W_Q^{h2ᵀ})``. 1 when every query attends most
  to the keys whose previous token is its own: the attention of an induction head.
- **Induction circuit from the weights**: a previous-token head ``h1`` K-composing into a head
  ``h2`` so that ``h2`` matches through ``h1``, and ``h2``'s OV copies. The attention half,
  ``induction_qk(h2) = max_{h1 in layers < l2} previous(h1) · max(K(h1 → h2), 0) · max(match(h1 → h2), 0)``
  with ``K`` a composition measure (``frobenius`` by default, or any other), is what an
  activation-based induction label measures; the circuit is
  ``induction(h2) = max(copying(h2), 0) · induction_qk(h2)``. Heads of layer 0 get 0 (no earlier
  head to compose with); a bidirectional model (an encoder) gets neither score, as its heads see
  the repeat ahead as well as behind. Every factor is a number in ``[0, 1]`` for the measures of range
  ``[0, 1]``; the product is a ranking, not a probability. The maximum is exact but visits the
  writers in decreasing ``previous · K`` (a bound of each product, as ``match ≤ 1``) and stops
  when no later writer can beat the best so far: one ``r × r`` eigenproblem for a few pairs
  per reader, not for all ``(L H)²``, and none for a pair whose matrix has a trace (the sum of
  its eigenvalues) that is not positive, as its ``max(match, 0)`` is then 0; the readers of one
  layer are searched at once, one per torch thread (:mod:`compscope.engine.threads`).

``W_E W_U`` and ``W_E W_Eᵀ`` are ``d × d`` (:mod:`compscope.core.vocab`: summed over the vocabulary
in chunks, once per model); nothing vocabulary-sized per head.
Norms are not part of these circuits: load with ``fold_norm=True`` to fold their gains in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from ..errors import OptionError, WeightError
from ..core.factors import layer_factor, model_factor
from ..core.heads import HeadWeights
from ..core.vocab import embed_gram, embed_unembed, mean_embedding
from ..engine.threads import thread_map, threaded
from ..results.table import Tabular

_F64 = torch.float64


def eigen_score(M: Tensor) -> Tensor:
    """``Σλ / Σ|λ|`` over the eigenvalues of each ``(…, r, r)`` matrix (0 where all are 0)."""
    M = M.to(_F64)
    lam = threaded(torch.linalg.eigvals, M.reshape(-1, *M.shape[-2:])).reshape(M.shape[:-1])
    num, den = lam.sum(-1).real, lam.abs().sum(-1)
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.zeros_like(den))


def copying_scores(hw: HeadWeights) -> Tensor:
    """``(layer, head)`` copying scores (module docstring); needs ``W_U``."""
    if hw.W_U is None:
        raise WeightError(f"{hw.meta.name}: copying scores need the unembedding W_U, and this model has none")
    M = embed_unembed(hw)  # (d, d)
    return eigen_score(model_factor(hw, "V", _F64) @ M @ model_factor(hw, "O", _F64).mT)


def matching_scores(hw: HeadWeights, offset: float = 0.0) -> Tensor:
    """``(layer, head)`` same-token matching scores at rotary offset ``offset``."""
    N = embed_gram(hw)  # (d, d)
    out = []
    for layer in range(hw.n_layers):
        WK = layer_factor(hw, layer, "K", offset=offset, dtype=_F64)  # R(-δ) W_K per query head
        out.append(eigen_score(WK @ N @ layer_factor(hw, layer, "Q", dtype=_F64).mT))
    return torch.stack(out)


def bigram_copying(hw: HeadWeights) -> float:
    """Copying score of the zero-layer bigram ``W_U W_E`` (direct path from token to logit)."""
    if hw.W_U is None:
        raise WeightError(f"{hw.meta.name}: the bigram W_U W_E needs the unembedding W_U, and this model has none")
    return float(eigen_score(embed_unembed(hw)))


def virtual_copying(hw: HeadWeights) -> Tensor:
    """``(L, H, L, H)`` copying scores of the virtual heads ``W_OV^{h2} W_OV^{h1}`` for ``h1`` in
    an earlier layer than ``h2`` (NaN elsewhere); one ``r × r`` eigenproblem per pair."""
    if hw.W_U is None:
        raise WeightError(f"{hw.meta.name}: virtual copying scores need the unembedding W_U, and this model has none")
    L, H = hw.n_layers, hw.n_heads
    M = embed_unembed(hw)
    WV, WO = model_factor(hw, "V", _F64), model_factor(hw, "O", _F64).mT  # (L, H, r, d), (L, H, d, r)
    out = torch.full((L, H, L, H), float("nan"), dtype=_F64)
    for l1 in range(L - 1):
        left = WV[l1] @ M  # (H, r, d): W_V^{h1} W_E W_U
        for l2 in range(l1 + 1, L):
            a = torch.einsum("ird,jdk->ijrk", left, WO[l2])  # W_V^{h1} W_E W_U W_O^{h2}
            b = torch.einsum("jrd,idk->ijrk", WV[l2], WO[l1])  # W_V^{h2} W_O^{h1}
            out[l1, :, l2] = eigen_score(a @ b)
    return out


def induction_matching(hw: HeadWeights, offset: float = 0.0, progress: bool = False) -> Tensor:
    """``(L, H, L, H)`` matching scores of ``h2`` through ``h1`` (module docstring) for ``h1`` in an
    earlier layer than ``h2`` (NaN elsewhere), at rotary offset ``offset``; one ``r × r``
    eigenproblem per pair."""
    from ..progress import progress_bar

    L, H = hw.n_layers, hw.n_heads
    out = torch.full((L, H, L, H), float("nan"), dtype=_F64)
    writers = MatchingThroughWriters(hw, offset)
    bar = progress_bar(L * (L - 1) // 2, "matching through writers", enabled=progress)
    for l2 in range(1, L):
        Q2, K2 = writers.reader(l2)
        for l1 in range(l2):
            out[l1, :, l2] = _eigen_scores(_matching_matrices(K2, Q2, *writers.layer(l1)))  # (H1, H2)
            bar.update(1)
    bar.close()
    return out


class MatchingThroughWriters:
    """Matching through a writer (module docstring) at one rotary offset, float64, with what it
    has computed kept: each writer head's ``W_O^{h1ᵀ}`` and ``W_V^{h1} W_E W_Eᵀ`` (``(1, r, d)``
    each, only for the heads asked for) and each pair's positive part, so that several
    previous-token scores (contents) share the eigenproblems."""

    def __init__(self, hw: HeadWeights, offset: float = 0.0) -> None:
        self.hw, self.offset = hw, offset
        self.N = embed_gram(hw)  # (d, d)
        self.heads: dict[tuple[int, int], tuple[Tensor, Tensor]] = {}
        self.scores: dict[tuple[int, int, int, int], float] = {}

    def layer(self, l1: int) -> tuple[Tensor, Tensor]:
        """``(H, r, d)`` each, for every head of ``l1`` (not kept)."""
        return layer_factor(self.hw, l1, "O", dtype=_F64), layer_factor(self.hw, l1, "V", dtype=_F64) @ self.N

    def head(self, l1: int, h1: int) -> tuple[Tensor, Tensor]:
        """``(1, r, d)`` each, for head ``h1`` of ``l1`` (kept)."""
        if (l1, h1) not in self.heads:
            hw = self.hw
            O = hw.W_O[l1, h1].mT.to(_F64)  # (r, d)
            VN = hw.W_V[l1, hw.kv_map[h1]].to(_F64) @ self.N
            self.heads[l1, h1] = (O[None], VN[None])
        return self.heads[l1, h1]

    def reader(self, l2: int) -> tuple[Tensor, Tensor]:
        """``W_Q`` and ``R(−δ) W_K`` of every head of ``l2``, ``(H, r, d)`` float64."""
        return layer_factor(self.hw, l2, "Q", dtype=_F64), layer_factor(self.hw, l2, "K", offset=self.offset, dtype=_F64)

    def positive(self, l1: int, h1: int, l2: int, h2: int, reader: tuple[Tensor, Tensor]) -> float:
        """``max(match, 0)`` of ``h2`` (of ``l2``, whose :meth:`reader` is ``reader``) through ``h1``.
        The eigenvalues are solved only where their sum, the trace of the ``r × r`` matrix, is
        positive: elsewhere the score ``Σλ / Σ|λ|`` is not, and 0 comes back without them."""
        key = (l1, h1, l2, h2)
        if key not in self.scores:
            Q2, K2 = reader
            M = _matching_matrices(K2[h2:h2 + 1], Q2[h2:h2 + 1], *self.head(l1, h1))[0]  # (1, r, r)
            self.scores[key] = max(float(_eigen_scores(M)[0]), 0.0) if float(M[0].trace()) > 0 else 0.0
        return self.scores[key]


def _matching_matrices(K2: Tensor, Q2: Tensor, O1: Tensor, VN1: Tensor) -> Tensor:
    """``(H1, H2, r, r)``: ``(K2 O1ᵀ)(VN1 Q2ᵀ)`` for readers ``(H2, r, d)`` and writers ``(H1, r, d)``."""
    KO = torch.einsum("jrd,isd->ijrs", K2, O1)  # R(−δ) W_K^{h2} W_O^{h1}
    VQ = torch.einsum("isd,jqd->ijsq", VN1, Q2)  # W_V^{h1} W_E W_Eᵀ W_Q^{h2ᵀ}
    return KO @ VQ


def _eigen_scores(M: Tensor) -> Tensor:
    """:func:`eigen_score` of matching matrices ``(…, r, r)`` (one eigenproblem each; the
    benchmark counts them here)."""
    return eigen_score(M)


def induction_qk(hw: HeadWeights, previous: Tensor, K: Tensor, offset: float = 0.0, progress: bool = False,
                 matcher: MatchingThroughWriters | None = None) -> Tensor:
    """``(layer, head)``: ``max_{h1 earlier} previous(h1) · max(K(h1 → h2), 0) · max(match(h1 → h2), 0)``
    (module docstring) for ``previous (L, H)`` and K-composition scores ``K (L, H, L, H)``; exact,
    with the writers visited in decreasing ``previous · K`` until none can beat the best.
    ``matcher``: the matching scores computed for another ``previous`` (same ``hw`` and ``offset``)."""
    from ..progress import progress_bar

    L, H = previous.shape
    out = torch.zeros(L, H, dtype=_F64)
    matcher = MatchingThroughWriters(hw, offset) if matcher is None else matcher
    bar = progress_bar((L - 1) * H, "induction from the weights", enabled=progress)
    for l2 in range(1, L):
        bound = torch.nan_to_num(previous[:l2, :, None].double() * K[:l2, :, l2].double(), nan=0.0).clamp_min(0)
        bound = bound.reshape(l2 * H, H)  # (writer, reader)
        reader = matcher.reader(l2)

        def search(h2: int) -> float:
            best = 0.0
            for i in bound[:, h2].argsort(descending=True).tolist():
                u = float(bound[i, h2])
                if u <= best:
                    break
                best = max(best, u * matcher.positive(*divmod(i, H), l2, h2, reader))
            return best

        out[l2] = torch.tensor(thread_map(search, range(H)), dtype=_F64)  # readers in parallel
        bar.update(H)
    bar.close()
    return out


def positional_previous(hw: HeadWeights) -> Tensor:
    """``(layer, head)`` previous-token scores of the positional QK circuit (learned positions)."""
    if hw.W_pos is None:
        raise OptionError(f"{hw.meta.name}: positional scores need learned absolute positions (W_pos); "
                          f"this model's positions are {hw.positions!r}")
    from ..core.attention import attend

    P = hw.W_pos.to(_F64)  # (d, n)
    i = torch.arange(1, P.shape[1])
    out = []
    for layer in range(hw.n_layers):
        q = (layer_factor(hw, layer, "Q", dtype=_F64) @ P).mT  # (H, n, r)
        k = (layer_factor(hw, layer, "K", dtype=_F64) @ P).mT
        pattern = attend(hw, layer, q[None], k[None])[0]  # (H, n_query, n_key): the model's mask, window and cap
        out.append(pattern[:, i, i - 1].mean(-1))
    return torch.stack(out)


def rotary_previous(hw: HeadWeights, window: int = 64, content: Mapping[int, Tensor] | None = None,
                    seed: int = 0) -> Tensor:
    """``(layer, head)`` previous-token scores of heads with relative positions (rotary, ALiBi's
    bias ``−m_h δ``, or DeBERTa's ``q·pos_K[ρ(δ)] + k·pos_Q[ρ(δ)]``) from the weights: the QK logit as a
    function of the relative offset ``δ = i − j`` alone, with the content part under a stated distribution; softmax over
    ``δ = 0 … window − 1`` (the keys a query at position ``window − 1`` sees, within the layer's
    sliding window; ``δ = −(window − 1) … window − 1`` in a bidirectional model: :func:`offsets`),
    and the mass on ``δ = 1``. Without rotary the expected logit of the weights
    alone is the same at every ``δ`` but for ALiBi's bias, so that score depends on the slope alone.

    - ``content=None`` (the weights alone): query and key tokens drawn independently and uniformly
      from the vocabulary, each embedding passed through the layer's attention norm (gain
      included; post-LN: the norm whose output the layer reads), so the expected logit is
      ``μ_lᵀ W_Qᵀ R(−δ) W_K μ_l + biases`` with ``μ_l`` the mean normed embedding, and the score is the
      softmax of that expected logit.
    - ``content={layer: x (n, d_model)}``: samples of what each layer's heads read (the normed
      residual on data: :func:`compscope.data.residual_moments.residual_samples`). Each sample is
      a query at offset 0 and its own key at ``δ = 0`` (a token sees itself); the key at each
      ``δ ≥ 1`` is a sample drawn independently and uniformly (``seed``); the score is the
      softmax mass on ``δ = 1`` averaged over the queries, an expected softmax.

    A ranking of heads by how much their weights prefer the previous position; position-independent
    content (induction, duplicate tokens) is averaged out by design."""
    from ..core.attention import dot_products, input_norm, project, softmax_with_sink

    if not relative_positions(hw):
        raise OptionError(f"{hw.meta.name}: relative previous-token scores need rotary, ALiBi or relative "
                          f"positions; this model's are {hw.positions!r}")
    if content is not None:
        return _sampled_rotary_previous(hw, window, content, seed)
    out = []
    delta, previous = offsets(hw, window)
    norm = hw.attn_norm if hw.norm_placement == "post" else input_norm(hw)  # (post-LN: the norm that made it)
    shared = mean_embedding(hw, norm)  # the mean is linear in each layer's gain and bias
    for layer in range(hw.n_layers):
        unnormed = norm is not None and layer == 0 and hw.first_layer_unnormed  # (a first layer that reads it raw)
        mu = mean_embedding(hw) if unnormed else shared if norm is None else norm.affine(shared, layer)
        mu = mu[None, None].float()  # (1, 1, d): one token at one position
        q = project(hw, layer, "Q", mu, positions=torch.zeros(1))  # (1, H, 1, r), unrotated (position 0)
        k = project(hw, layer, "K", mu.expand(1, len(delta), -1), positions=-delta)  # key at offset δ behind
        logits = hw.logits(dot_products(hw, layer, q, k, delta[None])[0, :, 0])  # (H, offsets)
        out.append(softmax_with_sink(hw, layer, _window(hw, layer, logits, delta).double(), head_axis=0)[:, previous])
    return torch.stack(out)


def offsets(hw: HeadWeights, window: int) -> tuple[Tensor, int]:
    """The offsets ``δ = i − j`` a previous-token score spreads its softmax over, and the index of
    ``δ = 1`` among them: ``0 … window − 1`` in a causal model (a query at position ``window − 1``),
    ``−(window − 1) … window − 1`` in a bidirectional one (a query with ``window − 1`` keys on each side)."""
    if hw.causal:
        return torch.arange(window), 1
    return torch.arange(-(window - 1), window), window


def relative_positions(hw: HeadWeights) -> bool:
    """Whether ``hw``'s heads see positions only relative to each other: rotary, ALiBi, or DeBERTa's
    relative-position queries and keys."""
    return hw.rotary is not None or hw.alibi is not None or hw.positions == "relative"


def _window(hw: HeadWeights, layer: int, logits: Tensor, delta: Tensor) -> Tensor:
    """``logits (head, ..., window)`` with ALiBi's bias at each offset ``delta (window,)`` and the
    offsets beyond ``layer``'s sliding window masked out."""
    from ..core.attention import with_bias

    logits = with_bias(hw, layer, logits, delta.reshape((1,) * (logits.ndim - 2) + (-1,)))
    w = hw.sliding_window[layer] if hw.sliding_window else None
    return logits if w is None else logits.masked_fill(delta.abs() >= w, float("-inf"))


def _sampled_rotary_previous(hw: HeadWeights, window: int, content: Mapping[int, Tensor], seed: int) -> Tensor:
    """:func:`rotary_previous` with the content drawn from samples (its docstring)."""
    from ..core.attention import move, paired_dot_products, project, softmax_with_sink

    missing = [l for l in range(hw.n_layers) if l not in content]
    if missing:
        raise OptionError(f"{hw.meta.name}: content samples are missing for layers {missing}")
    g = torch.Generator().manual_seed(seed)
    delta, previous = offsets(hw, window)
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
        draws = torch.randint(n, (len(delta), n), generator=g)
        draws[previous - 1] = torch.arange(n)  # δ = 0: the query's own key
        logits = torch.stack([paired_dot_products(hw, layer, q, move(hw, layer, k[:, :, draws[t]],
                                                                     torch.full((n,), -float(d)))[0], d)
                              for t, d in enumerate(delta.tolist())], -1)  # (H, n, offsets): key drawn for δ, turned back δ
        logits = _window(hw, layer, hw.logits(logits), delta)
        out.append(softmax_with_sink(hw, layer, logits.double(), head_axis=0)[..., previous].mean(-1))
    return torch.stack(out)


def relative_kind(positions: str) -> str:
    """How a previous-token score read from relative positions names them: ``rotary``, ``ALiBi`` or ``relative``."""
    return {"alibi": "ALiBi", "relative": "relative"}.get(positions, "rotary")


def reads_content(hw: HeadWeights) -> bool:
    """Whether ``hw``'s previous-token score from the weights is the relative one, rotary, ALiBi or
    DeBERTa's (:func:`rotary_previous`), the only one that takes a content distribution."""
    return relative_positions(hw) and hw.W_pos is None


@dataclass(frozen=True)
class Circuits(Tabular):
    """Per-head scores read from the weights, ``(layer, head)`` float64 each; ``copying`` is None
    without an unembedding (an encoder), ``previous`` without learned or rotary positions (no
    previous-token heads from the weights), ``induction_qk`` without ``previous`` or for a
    bidirectional model (an induction head attends to the token after an earlier copy of the
    current one, which an encoder sees ahead as well as behind), ``induction`` without either
    ``copying`` or ``induction_qk``."""

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
    #: the attention half of ``induction`` (no copying factor): None without ``previous`` or for
    #: a bidirectional model
    induction_qk: Tensor | None = None

    def to_pandas(self):
        """One row per head: ``layer, head`` and each score the model has (``copying, matching, previous_token,
        induction, induction_qk``); the model, measure, offset and content in ``attrs``."""
        import pandas as pd

        L, H = self.matching.shape
        found = {"copying": self.copying, "matching": self.matching, "previous_token": self.previous,
                 "induction": self.induction, "induction_qk": self.induction_qk}
        df = pd.DataFrame({"layer": [l for l in range(L) for _ in range(H)], "head": list(range(H)) * L,
                           **{k: v.reshape(-1).tolist() for k, v in found.items() if v is not None}})
        df.attrs.update(model=self.model, measure=self.measure, offset=self.offset, content=self.content)
        return df

    def __repr__(self) -> str:
        from ..results.table import top_entries

        L, H = self.matching.shape
        scores = {"copying": self.copying, "matching": self.matching, "previous": self.previous,
                  "induction": self.induction}
        tops = "; ".join(f"top {k} " + ", ".join(f"{l}.{h} {v:.2f}" for (l, h), v in top_entries(t, 3))
                         for k, t in scores.items() if t is not None)
        return (f"Circuits({self.model!r}, {L} layers x {H} heads; measure {self.measure}, content {self.content}; "
                f"{tops})")


def head_circuits(hw: HeadWeights, measure: str = "frobenius", *, offset: float = 0.0,
                  content: Mapping[int, Tensor] | None = None, progress: bool = False,
                  positional: HeadWeights | None = None) -> Circuits:
    """Copying, matching, previous-token and induction scores (with its attention half) of every head
    (module docstring); ``measure``: the K-composition measure of the induction score;
    ``content``: samples of what each layer reads for the rotary previous-token score
    (:func:`rotary_previous`; None: the normed embeddings, weights only; ignored for other
    positions); ``progress``: a bar while the induction scores are computed; ``positional``: the
    weights the previous-token score reads (default ``hw``; :func:`positional_weights`)."""
    name = "activations" if content is not None and reads_content(hw) else "embed"
    return head_circuits_by_content(hw, {name: content}, measure, offset=offset, progress=progress,
                                    positional=positional)[name]


#: what a result read from both weights says of its previous-token scores (:func:`positional_weights`)
POSITIONAL_BEFORE_LINEARISED = "previous-token from the weights before QK-norm was linearised, its positional pattern as the model has it"


def positional_weights(hw: HeadWeights, before: HeadWeights | None) -> HeadWeights:
    """The weights the heads' previous-token scores read: ``hw``, or where ``hw``'s QK-norm was
    linearised, ``before`` — the same model before the linearisation, its QK-norm as it is (a
    positional pattern comes from the mean query and key, which QK-norm divides by their own RMS and
    the linearisation by a typical query's; every other processing step leaves queries and keys
    alone). Refused when ``before`` is not ``hw``'s model or when a linearised ``hw`` comes without it."""
    from ..core.processing import qk_norm_linearised

    if before is None:
        if qk_norm_linearised(hw):
            raise OptionError(f"{hw.meta.name}: QK-norm linearised, which loses the heads' positional patterns; give "
                              "positional= the weights before the linearisation (compscope.loading.sources.load_with_positional)")
        return hw
    if before is hw:
        return hw
    shape = lambda w: (w.meta.name, w.n_layers, w.n_heads, w.d_model, w.positions)  # noqa: E731
    if shape(before) != shape(hw):
        raise OptionError(f"positional: weights of {before.meta.name} ({before.n_layers} layers x {before.n_heads} heads, "
                          f"{before.positions}) for the scores of {hw.meta.name} ({hw.n_layers} x {hw.n_heads}, {hw.positions})")
    if qk_norm_linearised(before):
        raise OptionError(f"positional: {before.meta.name}'s QK-norm is linearised there too; give the weights before it")
    return before


def head_circuits_by_content(hw: HeadWeights, contents: Mapping[str, Mapping[int, Tensor] | None],
                             measure: str = "frobenius", *, offset: float = 0.0,
                             progress: bool = False, device: str | torch.device | None = None,
                             positional: HeadWeights | None = None) -> dict[str, Circuits]:
    """:func:`head_circuits` under each of several content distributions of the rotary
    previous-token score (``{name: samples}``; None: the normed embeddings), keyed alike. What
    does not depend on the content is computed once: the copying and matching scores, the
    K-composition scores and the matching through each writer. For a model whose previous-token
    score is not rotary, every entry is the same. ``device``: where the engine computes the
    K-composition scores (its default: CUDA when present); the rest runs on the CPU in float64.
    ``positional``: the weights the previous-token scores read (:func:`positional_weights`)."""
    from ..engine.composition import scores

    pos = positional_weights(hw, positional)
    copying = None if hw.W_U is None else copying_scores(hw)
    matching = matching_scores(hw, offset)
    K = matcher = None
    out, done = {}, {}
    for name, content in contents.items():
        key = id(content) if reads_content(hw) else None
        if key in done:
            out[name] = replace(done[key], content=name if reads_content(hw) else "embed")
            continue
        previous = positional_previous(pos) if hw.W_pos is not None else \
            rotary_previous(pos, content=content) if relative_positions(hw) else None
        qk = induction = None
        if previous is not None and hw.causal:
            qk = torch.zeros_like(matching)
            if hw.n_layers > 1:
                if K is None:
                    K = scores(hw, "K", [measure], offset=offset, progress=False, device=device).dense(measure, "K")
                    matcher = MatchingThroughWriters(hw, offset)
                qk = induction_qk(hw, previous, K, offset, progress, matcher)
            if copying is not None:
                induction = copying.clamp_min(0) * qk
        used = name if reads_content(hw) else "embed"
        out[name] = done[key] = Circuits(hw.meta.name, copying, matching, previous, induction, measure, offset, used, qk)
    return out
