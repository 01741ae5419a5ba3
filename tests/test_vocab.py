"""``compscope.core.vocab``: d x d products over the vocabulary, in chunks, kept per model."""

from __future__ import annotations

import gc

import torch

from compscope import load
from compscope.core import vocab


def test_chunked_product_equals_the_dense_one():
    g = torch.Generator().manual_seed(0)
    A, B = torch.randn(5, 103, generator=g), torch.randn(103, 7, generator=g)
    dense = A.double() @ B.double()
    for chunk in (1, 10, 103, 1000):
        assert torch.allclose(vocab.vocab_product(A, B, chunk), dense, rtol=0, atol=1e-12)


def test_products_are_kept_while_the_weights_live_and_unchanged():
    hw = load("induction-2l")
    E, U = hw.W_E.double(), hw.W_U.double()
    N = vocab.embed_gram(hw)
    assert torch.allclose(N, E @ E.T, rtol=1e-14, atol=1e-12)
    assert torch.allclose(vocab.embed_unembed(hw), E @ U, rtol=1e-14, atol=1e-12)
    assert torch.allclose(vocab.unembed_gram(hw), U.T @ U, rtol=1e-14, atol=1e-12)
    assert vocab.embed_gram(hw) is N  # computed once
    hw2 = hw.replace(W_E=hw.W_E.clone() * 2)  # another embedding: its own product
    assert torch.allclose(vocab.embed_gram(hw2), 4 * N, rtol=1e-14, atol=1e-12)
    hw.W_E.mul_(3)  # changed in place: recomputed, not served stale
    E3 = hw.W_E.double()
    assert torch.allclose(vocab.embed_gram(hw), E3 @ E3.T, rtol=1e-14, atol=1e-12)
    key = id(hw.W_E)
    del hw, hw2, N
    gc.collect()
    assert not any(k[1] == key for k in vocab._KEPT)


def test_a_tied_unembedding_shares_the_embeddings_product_and_an_untied_one_does_not():
    hw = load("induction-2l")
    tied = hw.replace(W_U=hw.W_E.T.clone())  # equal values, its own tensor
    E = tied.W_E.double()
    N = vocab.embed_gram(tied)
    assert vocab.embed_unembed(tied) is N and vocab.unembed_gram(tied) is N
    assert torch.allclose(N, E @ E.T, rtol=1e-14, atol=1e-12)
    tied.W_U.mul_(2)  # no longer tied: each product its own again
    U = tied.W_U.double()
    assert torch.allclose(vocab.embed_unembed(tied), 2 * N, rtol=1e-14, atol=1e-12)
    assert torch.allclose(vocab.unembed_gram(tied), U.T @ U, rtol=1e-14, atol=1e-12)
    assert vocab.embed_gram(tied) is N
    nearly = hw.replace(W_U=hw.W_E.T.clone())
    nearly.W_U[0, 0] += 1e-6  # one entry off: not tied
    assert vocab.embed_unembed(nearly) is not vocab.embed_gram(nearly)
    assert torch.allclose(vocab.embed_unembed(nearly), E @ nearly.W_U.double(), rtol=1e-14, atol=1e-12)
