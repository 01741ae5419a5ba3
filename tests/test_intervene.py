"""Interventional composition (compscope.data.intervene): against a hand-written patched forward pass
of layer 1, zero effects for a silent writer, and the default model's known circuit."""

import math

import pytest
import torch

from compscope.analysis.stats import spearman
from compscope.cli.main import main
from compscope.errors import OptionError
from compscope.data.intervene import against_measures, interventional_composition
from compscope.toy import repeated_random
from compscope.toy.model import ToyConfig, ToyTransformer


def toy(seed=0, **kw):
    cfg = ToyConfig(n_layers=2, n_heads=3, d_model=12, d_head=4, d_vocab=10, n_ctx=8, **kw)
    return ToyTransformer(cfg, seed=seed).double()


def tokens(n=6, half=4, vocab=10):
    return repeated_random(n, half, vocab, seed=3)


def _layer1_by_hand(m, x_q, x_k, x_v):
    """Patterns ``(batch, head, i, j)`` and outputs ``(batch, pos, head, d)`` of layer 1 of a
    norm-free toy with learned positions, from what each head reads per kind."""
    b = m.blocks[1]
    q = torch.einsum("hrd,bshd->bhsr", b.W_Q, x_q)
    k = torch.einsum("hrd,bshd->bhsr", b.W_K, x_k)
    v = torch.einsum("hrd,bshd->bhsr", b.W_V, x_v)
    T = q.shape[2]
    logits = (q @ k.mT) / math.sqrt(q.shape[-1])
    p = logits.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    return p, torch.einsum("hdr,bhsr->bshd", b.W_O, p @ v)


@pytest.mark.parametrize("ablation", ["mean", "zero"])
def test_effects_equal_a_hand_written_patched_layer(ablation):
    m, t = toy(), tokens()
    got = interventional_composition(m, t, "QKV", ablation)
    cache = {}
    m(t, cache=cache)
    x = cache["resid_pre.1"][:, :, None, :].expand(-1, -1, 3, -1)  # every head reads the clean residual
    p0, o0 = _layer1_by_hand(m, x, x, x)
    assert torch.allclose(p0, cache["pattern.1"])
    for h1 in range(3):
        w = cache["head_out.0"][:, :, h1]
        delta = ((w.mean(0, keepdim=True) if ablation == "mean" else 0 * w) - w)[:, :, None, :]
        for kind in "QKV":
            xs = {k: x + delta if k == kind else x for k in "QKV"}
            p, o = _layer1_by_hand(m, xs["Q"], xs["K"], xs["V"])
            if kind in "QK":
                want = 0.5 * (p - p0).abs().sum(-1).mean(dim=(0, 2))
            else:
                n0, n1 = o0.norm(dim=-1), o.norm(dim=-1)
                want = ((n1 - n0).abs() / n0).mean(dim=(0, 1))
            torch.testing.assert_close(got[kind][0, h1, 1], want, rtol=1e-10, atol=1e-12)
    assert torch.isnan(got["K"][1]).all() and torch.isnan(got["K"][:, :, 0]).all()  # only layer 0 -> layer 1


def test_a_writer_that_writes_nothing_has_no_effect():
    m = toy(seed=1)
    m.blocks[0].W_O.data[1] = 0
    got = interventional_composition(m, tokens())
    for kind in "QKV":
        assert torch.equal(got[kind][0, 1, 1], torch.zeros(3, dtype=torch.float64))
        assert (got[kind][0, 0, 1] > 0).all()


def test_options_are_checked():
    m, t = toy(), tokens()
    with pytest.raises(OptionError, match="ablation"):
        interventional_composition(m, t, ablation="resample")
    with pytest.raises(OptionError, match="kinds"):
        interventional_composition(m, t, "X")
    with pytest.raises(OptionError, match="batch, pos"):
        interventional_composition(m, t[0])
    with pytest.raises(OptionError, match="toy models"):
        against_measures("smollm2")


def test_default_model_k_composition_by_measures_ranks_like_the_intervention():
    """The previous-token heads 0.0 and 0.1 K-compose into the induction heads of layer 1 far
    more than 0.2 and 0.3 do, on data; frobenius ranks the 16 pairs as the intervention does."""
    effects, table, half = against_measures("induction-2l", "K", sequences=50)
    k = effects["K"][0, :, 1]  # (h1, h2)
    assert half == 32 and k[:2].min() > 2 * k[2:].max()
    assert spearman(table.dense("frobenius", "K"), effects["K"]) > 0.8


def test_cli_prints_each_kind_with_the_measures_rank_correlations(capsys):
    assert main(["intervene", "--kinds", "K", "--sequences", "20", "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[1].startswith("K  strongest effects: 0.")
    assert "frobenius" in out[2] and "over 16 pairs" in out[2]
    assert main(["intervene", "smollm2"]) == 2
    assert "toy models" in capsys.readouterr().err
