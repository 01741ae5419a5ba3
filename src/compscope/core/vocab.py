"""``d × d`` products summed over the vocabulary, float64: ``W_E W_Eᵀ``, ``W_E W_U`` and
``W_Uᵀ W_U`` (``W_E: (d, n_vocab)``, ``W_U: (n_vocab, d)``), and the mean (normalised) embedding.

The vocabulary runs to 262,144 tokens (Gemma 3), so a float64 copy of ``W_E`` alone is 1.3 GB
there; the sums are taken over chunks of tokens instead, each chunk cast to float64, and each
product is kept for as long as the tensors it came from live unchanged, so the scores that share one (the
matching scores, the matching through writers, the embed metric) compute it once. Where the
unembedding is the embedding's transpose (tied, as in SmolLM2; not Gemma's, whose ``W_E`` carries
the ``√d`` scale), the three products are one, computed once.
"""

from __future__ import annotations

import weakref

import torch
from torch import Tensor

from .heads import HeadWeights, Norm

_F64 = torch.float64
#: tokens per chunk: 16,384 x d_model float64 (84 MB at d = 640) per operand
CHUNK = 16384

#: (name, id(W_E), id(W_U)) -> (the tensors' versions, product); an entry goes with either tensor
_KEPT: dict[tuple[str, int, int], tuple[tuple[int, int], Tensor]] = {}


def vocab_product(A: Tensor, B: Tensor, chunk: int = CHUNK) -> Tensor:
    """``A @ B`` for ``A (d1, V)`` and ``B (V, d2)``, float64, summed over ``V`` in chunks."""
    out = torch.zeros(A.shape[0], B.shape[1], dtype=_F64)
    for s in range(0, A.shape[1], chunk):
        out += A[:, s:s + chunk].to(_F64) @ B[s:s + chunk].to(_F64)
    return out


def _tied(E: Tensor, U: Tensor) -> bool:
    """Whether ``U`` is ``Eᵀ``, value by value."""
    return U.shape == E.T.shape and torch.equal(U.T, E)


def tied(hw: HeadWeights) -> bool:
    """Whether the unembedding is the embedding's transpose, value by value (False without one)."""
    return hw.W_U is not None and _tied(hw.W_E, hw.W_U)


def _kept(name: str, E: Tensor, U: Tensor) -> Tensor:
    """The product ``name`` of ``E = W_E`` and ``U = W_U`` (or ``W_E`` again), computed once while
    both tensors live unchanged (an in-place change bumps a tensor's version)."""
    key, versions = (name, id(E), id(U)), (E._version, U._version)
    hit = _KEPT.get(key)
    if hit is not None and hit[0] == versions:
        return hit[1]
    if hit is None:
        for t in {id(E): E, id(U): U}.values():  # ids are not reused before these run
            weakref.finalize(t, _KEPT.pop, key, None)
    if name != "EE" and _tied(E, U):
        product = _kept("EE", E, E)  # tied (W_U = W_Eᵀ): W_E W_U = W_Uᵀ W_U = W_E W_Eᵀ
    else:
        A, B = {"EE": (E, E.T), "EU": (E, U), "UU": (U.T, U)}[name]
        product = vocab_product(A, B)
    _KEPT[key] = (versions, product)
    return product


def embed_gram(hw: HeadWeights) -> Tensor:
    """``W_E W_Eᵀ`` ``(d, d)`` float64."""
    return _kept("EE", hw.W_E, hw.W_E)


def embed_unembed(hw: HeadWeights) -> Tensor:
    """``W_E W_U`` ``(d, d)`` float64 (``hw.W_U`` must not be None)."""
    return _kept("EU", hw.W_E, hw.W_U)


def unembed_gram(hw: HeadWeights) -> Tensor:
    """``W_Uᵀ W_U`` ``(d, d)`` float64 (``hw.W_U`` must not be None)."""
    return _kept("UU", hw.W_E, hw.W_U)


def mean_embedding(hw: HeadWeights, norm: Norm | None = None) -> Tensor:
    """``(d_model,)`` float64: the mean over the vocabulary of the embeddings, each passed through
    ``norm.normalise`` (no gain or bias) when a norm is given."""
    mu = torch.zeros(hw.d_model, dtype=_F64)
    for part in hw.W_E.T.split(CHUNK):
        mu += (part if norm is None else norm.normalise(part)).to(_F64).sum(0)
    return mu / hw.W_E.shape[1]
