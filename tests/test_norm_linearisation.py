"""Norms inside the heads' circuits linearised on data: the mean Jacobian against autograd through
independent norms (torch's own ``layer_norm``, ``rms_norm``) and through HuggingFace's own QK-norm
and attention-output norm modules, and the errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import compscope
from compscope.core.heads import Norm
from compscope.data.norm_linearisation import JacobianMean, linearise_norms


def _mean_jacobian(f, rows: torch.Tensor) -> torch.Tensor:
    """``E_n[∂f(y_n)/∂y_n]`` for a rowwise ``f``: the Jacobian of ``v ↦ mean_n f(y_n + v)`` at 0."""
    return torch.autograd.functional.jacobian(lambda v: f(rows + v).mean(0), torch.zeros_like(rows[0]))


def _linearised(variant: str, seq: int):
    """``(model, hw, runner, tokens, lin)``: the tiny ``variant`` built and read, its runner, three random sequences of
    ``seq`` tokens, and every norm inside its heads' circuits linearised on them."""
    pytest.importorskip("transformers")
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build, random_ids

    model = build(BY_ID[variant])
    hw = compscope.load(model)
    runner = runner_for(model, hw)
    tokens = random_ids(seq=seq, batch=3)
    return model, hw, runner, tokens, linearise_norms(runner, tokens=tokens, progress=False)


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["rmsnorm", "layernorm"]), r=st.integers(2, 9), n=st.integers(1, 7),
       eps=st.sampled_from([0.0, 1e-6, 0.5]), seed=st.integers(0, 2**16), scale=st.floats(0.05, 20.0))
def test_mean_jacobian_is_autograd_through_torchs_own_norm(kind, r, n, eps, seed, scale):
    """``E[(1/s)(P − z zᵀ/r)]`` equals autograd through ``torch.nn.functional.layer_norm`` /
    ``rms_norm`` (float64, eps included), for each of several slots at once."""
    g = torch.Generator().manual_seed(seed)
    y = scale * torch.randn(n, 3, r, generator=g, dtype=torch.float64) + torch.randn(r, generator=g, dtype=torch.float64)
    if eps == 0.0 and kind == "layernorm" and r == 2:
        eps = 1e-6  # two centred entries are ±a: keep the Jacobian away from its pole at a = 0
    if kind == "layernorm":
        def f(x):
            return torch.nn.functional.layer_norm(x, (r,), eps=eps)
    else:
        def f(x):
            return torch.nn.functional.rms_norm(x, (r,), eps=eps)
    acc = JacobianMean(Norm(kind, None, None, eps))
    acc.add(y[: n // 2 + 1])
    if n // 2 + 1 < n:
        acc.add(y[n // 2 + 1 :])  # two batches: a running mean
    got = acc.mean()
    for slot in range(3):
        torch.testing.assert_close(got[slot], _mean_jacobian(f, y[:, slot]), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("variant", ["gemma3-text", "gemma3-text-mqa-bias", "qwen3-qk-norm", "gemma2-softcap",
                                     "hy-v3-qk-norm-biases-moe"])
def test_linearised_weights_hold_the_mean_jacobian_of_the_models_own_norm_modules(variant):
    """``W_Q ← J_q W_Q``, ``W_K ← J_k W_K`` (and biases), ``W_O ← J_o W_O``, with each ``J`` autograd
    through HuggingFace's own ``q_norm``, ``k_norm`` and ``post_attention_layernorm`` (gain
    included), averaged over the inputs they meet on the given tokens after the first position."""
    from compscope.core.attention import head_outputs, head_states, read_input

    model, hw, runner, tokens, lin = _linearised(variant, seq=9)
    parts = ("qk",) * (hw.qk_norm is not None) + ("output",) * (hw.attn_out_norm is not None)
    assert lin.meta.processing == (f"linearise_norms({', '.join(parts)})",)
    assert "3 given sequences of 9 tokens" in lin.meta.notes[-1]
    tr = runner.trace(tokens)
    layers = model.model.layers
    for l in range(hw.n_layers):
        x = read_input(hw, l, tr.resid[l])[:, 1:].reshape(-1, hw.d_model)
        attn = layers[l].self_attn
        if "qk" in parts:
            assert lin.qk_norm is None
            for W, b, Wl, bl, module in ((hw.W_Q, hw.b_Q, lin.W_Q, lin.b_Q, attn.q_norm),
                                         (hw.W_K, hw.b_K, lin.W_K, lin.b_K, attn.k_norm)):
                for h in range(W.shape[1]):
                    y = x @ W[l, h].T + (0 if b is None else b[l, h])
                    J = _mean_jacobian(module, y.detach())
                    torch.testing.assert_close(Wl[l, h], J @ W[l, h], atol=2e-5, rtol=1e-4)
                    if b is not None:
                        torch.testing.assert_close(bl[l, h], J @ b[l, h], atol=2e-5, rtol=1e-4)
        else:
            torch.testing.assert_close(lin.W_Q, hw.W_Q, atol=0, rtol=0)
        if "output" in parts:
            assert lin.attn_out_norm is None
            x_all = read_input(hw, l, tr.resid[l])
            pattern, v = head_states(hw, l, x_all)
            u = head_outputs(hw, l, pattern, v).sum(-2)[:, 1:].reshape(-1, hw.d_model)
            if hw.b_O is not None:
                u = u + hw.b_O[l]
            J = _mean_jacobian(layers[l].post_attention_layernorm, u.detach())
            torch.testing.assert_close(lin.W_O[l], torch.einsum("de,her->hdr", J, hw.W_O[l]), atol=2e-5, rtol=1e-4)
            if hw.b_O is not None:
                torch.testing.assert_close(lin.b_O[l], J @ hw.b_O[l], atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("variant, biased", [("deepseek-v3-latent-attention", False),
                                             ("deepseek-v3-no-query-latent-yarn-bias", False),
                                             ("deepseek-v3-latent-attention", True)])
def test_latent_norms_linearised_hold_the_mean_jacobian_of_each_sides_scaled_projection(variant, biased):
    """Part ``latent``: each side's projection times its latent norm's per-token scale, ``x̃ ↦ s(W̃_c x̃) W̃ x̃`` in the
    input with a 1 appended (the bias scaling with that 1, the latent's own too) and ``s(c) = (|c|²/r + eps)^(-1/2)``,
    is first checked to be what compscope's heads compute (``project_linear``, itself checked against the model's
    modules); its mean autograd Jacobian over the inputs met on the tokens (after the first position) is then
    ``[W_Q, b_Q]`` on every query dim, ``[W_V, b_V]`` on every value dim and ``[W_K, b_K]`` on the key dims from
    ``kv_latent_from`` on; the rotated key dims every head shares untouched, the latent norms gone. The second model
    has no query latent and biases on its key/value latent alone: the linearised values get a bias of their own. The
    third, the first with random biases given to its heads' projections (``hw=``) and none to its latents: they
    are scaled with the rest."""
    from compscope.core.attention import project_linear, read_input

    _, hw, runner, tokens, lin = _linearised(variant, seq=7)
    if biased:
        g = torch.Generator().manual_seed(4)
        hw = hw.replace(**{f"b_{k}": torch.randn(getattr(hw, f"W_{k}").shape[:-1], generator=g) for k in "QKV"})
        assert hw.q_latent.b is None and hw.kv_latent.b is None
        lin = linearise_norms(runner, hw=hw, tokens=tokens, progress=False)
        assert all(getattr(lin, f"b_{k}") is not None for k in "QKV")
    assert lin.meta.processing == ("linearise_norms(latent)",) and "3 given sequences of 7 tokens" in lin.meta.notes[-1]
    assert lin.q_latent is None and lin.kv_latent is None and lin.kv_latent_from == 0
    assert (hw.q_latent is None) == (variant == "deepseek-v3-no-query-latent-yarn-bias")
    for k, latent in (("Q", hw.q_latent), ("K", hw.kv_latent), ("V", hw.kv_latent)):  # a bias only where one was
        had = getattr(hw, f"b_{k}") is not None or (latent is not None and latent.b is not None)
        assert (getattr(lin, f"b_{k}") is not None) == had, k
    tr = runner.trace(tokens)
    cut = hw.kv_latent_from
    for l in range(hw.n_layers):
        x = read_input(hw, l, tr.resid[l])[:, 1:].reshape(-1, hw.d_model).double()
        x1 = torch.cat([x, torch.ones(len(x), 1, dtype=torch.float64)], 1)
        for kind, latent, dims in (("Q", hw.q_latent, slice(0, None)), ("K", hw.kv_latent, slice(cut, None)),
                                   ("V", hw.kv_latent, slice(0, None))):
            W, b = getattr(hw, f"W_{kind}")[l].double(), getattr(hw, f"b_{kind}")
            Wl, bl = getattr(lin, f"W_{kind}")[l].double(), getattr(lin, f"b_{kind}")
            if latent is None:
                torch.testing.assert_close(Wl, W, atol=0, rtol=0)
                continue
            Wt = torch.cat([W, torch.zeros_like(W[..., :1]) if b is None else b[l].double()[..., None]], -1)
            Wc = torch.cat([latent.W[l].double(), torch.zeros_like(latent.W[l, :, :1].double()) if latent.b is None
                            else latent.b[l].double()[:, None]], 1)

            def scaled(rows, Wt=Wt, Wc=Wc, latent=latent, dims=dims):  # (n, d + 1) -> (n, head, d_head)
                c = rows @ Wc.T
                s = torch.rsqrt(c.pow(2).mean(-1) + latent.eps)
                y = torch.einsum("hrd,nd->nhr", Wt, rows)
                return torch.cat([y[..., : dims.start], y[..., dims] * s[:, None, None]], -1)

            want = project_linear(hw, l, kind, x[None].float())[0].permute(1, 0, 2)  # (n, head, d_head)
            torch.testing.assert_close(scaled(x1).float(), want, atol=1e-5, rtol=1e-4)
            J = _mean_jacobian(scaled, x1)  # (head, d_head, d + 1)
            torch.testing.assert_close(Wl, J[..., :-1], atol=1e-6, rtol=1e-5)
            if bl is None:
                assert float(J[..., -1].abs().max()) == 0.0, kind
            else:
                torch.testing.assert_close(bl[l].double(), J[..., -1], atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(Wl[:, : dims.start], W[:, : dims.start], atol=0, rtol=0)  # (the shared rotated
            # key dims)


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_a_toy_with_gemmas_norms_is_linearised_through_its_own_norm_modules(kind):
    """A toy with QK-norm and an attention-output norm (no transformers needed): the same
    equalities, autograd through the toy's own ``q_norm``, ``k_norm`` and ``ln_out`` modules (gains
    and LayerNorm biases perturbed off their initial values), inputs from the toy's own forward cache."""
    from dataclasses import replace

    from compscope.data.runner import runner_for
    from compscope.toy import ToyConfig
    from compscope.toy.data import repeated_random
    from toy_tiny import perturbed_toy

    m = perturbed_toy(ToyConfig(n_layers=2, n_heads=2, d_model=12, d_head=4, d_vocab=10, n_ctx=8, norm=kind,
                                positions="rotary", qk_norm=True, attn_out_norm=True), seed=4)
    for blk in m.blocks:  # the key norm's eps its own, far from the query norm's: each side measured with its own
        blk.k_norm.eps = 0.5
    hw = m.head_weights()
    hw = replace(hw, qk_norm=(hw.qk_norm[0], replace(hw.qk_norm[1], eps=0.5)))
    tokens = repeated_random(3, 4, 10, seed=1)
    lin = linearise_norms(runner_for(m, hw), tokens=tokens, progress=False)
    assert lin.qk_norm is None and lin.attn_out_norm is None
    cache: dict = {}
    with torch.no_grad():
        m(tokens, cache=cache)
    for l, blk in enumerate(m.blocks):
        x = blk.ln1(cache[f"resid_pre.{l}"])[:, 1:].reshape(-1, hw.d_model).detach()
        for W, Wl, module in ((blk.W_Q, lin.W_Q, blk.q_norm), (blk.W_K, lin.W_K, blk.k_norm)):
            for h in range(W.shape[0]):
                J = _mean_jacobian(module, (x @ W[h].T).detach())
                torch.testing.assert_close(Wl[l, h], (J @ W[h]).detach(), atol=2e-5, rtol=1e-4)
        u = cache[f"head_out.{l}"].sum(2)[:, 1:].reshape(-1, hw.d_model).detach()
        J = _mean_jacobian(blk.ln_out, u)
        torch.testing.assert_close(lin.W_O[l], torch.einsum("de,her->hdr", J, blk.W_O).detach(), atol=2e-5, rtol=1e-4)


def test_one_pass_of_jacobians_serves_every_subset_of_the_parts():
    """``mean_jacobians`` measured once for both parts, applied to each subset, gives exactly what
    ``linearise_norms`` gives for that subset alone (the traces are the unprocessed model's);
    a part not measured is refused by name."""
    pytest.importorskip("transformers")
    from compscope.data.norm_linearisation import mean_jacobians
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build, random_ids

    model = build(BY_ID["gemma3-text"])
    hw = compscope.load(model)
    runner = runner_for(model, hw)
    tokens = random_ids(seq=6, batch=3)
    jac = mean_jacobians(runner, tokens=tokens, progress=False)
    assert jac.parts == ("qk", "output") and jac.data == "3 given sequences of 6 tokens"
    for parts in ("qk", "output", None):
        got, want = jac.apply(hw, parts), linearise_norms(runner, parts, tokens=tokens, progress=False)
        assert got.meta.processing == want.meta.processing and got.meta.notes == want.meta.notes
        for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_O"):
            a, b = getattr(got, name), getattr(want, name)
            assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), (parts, name)
        assert (got.qk_norm is None) == (want.qk_norm is None) and (got.attn_out_norm is None) == (want.attn_out_norm is None)
    only_qk = mean_jacobians(runner, "qk", tokens=tokens, progress=False)
    with pytest.raises(compscope.OptionError, match="^NormJacobians.apply: part 'output' was not measured"):
        only_qk.apply(hw, "output")
    # each error names the function called: mean_jacobians alone, or linearise_norms, which runs it
    with pytest.raises(compscope.OptionError, match="^mean_jacobians: unknown part 'values'"):
        mean_jacobians(runner, "values", tokens=tokens)
    with pytest.raises(compscope.OptionError, match=r"^mean_jacobians needs \(batch, seq\) tokens with seq >= 2"):
        mean_jacobians(runner, tokens=tokens[:, :1])
    empty = r"tokens must be a non-empty \(batch, seq\) tensor, got "
    for bad, said in ((tokens[:0], r"shape \(0, "), (tokens[0], r"shape \(\d+,\)"), (tokens.tolist(), "a list")):
        with pytest.raises(compscope.OptionError, match=empty + said):
            mean_jacobians(runner, tokens=bad)  # (each failed inside the function before)
    two = mean_jacobians(runner, "qk", tokens=tokens[:, :2], progress=False)  # one position after the first: enough
    assert all(bool(torch.isfinite(m).all()) for m in two.means.values()) and len(two.means) == len(only_qk.means)
    with pytest.raises(compscope.OptionError, match="^NormJacobians.apply: unknown part 'values'"):
        jac.apply(hw, "values")


def test_parts_and_the_errors_that_name_them():
    pytest.importorskip("transformers")
    from compscope.core.processing import fold_qk_norm_gains
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build, random_ids

    model = build(BY_ID["gemma3-text"])
    hw = compscope.load(model)
    runner = runner_for(model, hw)
    tokens = random_ids(seq=6, batch=2)
    only_qk = linearise_norms(runner, "qk", tokens=tokens, progress=False)
    assert only_qk.meta.processing == ("linearise_norms(qk)",) and only_qk.attn_out_norm is not None
    torch.testing.assert_close(only_qk.W_O, hw.W_O, atol=0, rtol=0)
    both = linearise_norms(runner, "qk, output", tokens=tokens, progress=False)
    torch.testing.assert_close(both.W_K, only_qk.W_K, atol=0, rtol=0)
    with pytest.raises(compscope.OptionError, match="^linearise_norms: unknown part 'values'"):
        linearise_norms(runner, "values", tokens=tokens)
    with pytest.raises(compscope.OptionError, match=r"^linearise_norms needs .* seq >= 2"):
        linearise_norms(runner, tokens=tokens[:, :1])
    with pytest.raises(compscope.ProcessingError, match="already moved into W_Q, W_K"):
        linearise_norms(runner, "qk", hw=fold_qk_norm_gains(hw), tokens=tokens)
    llama = build(BY_ID["llama-mha"])
    with pytest.raises(compscope.OptionError, match="no norm inside its heads' circuits"):
        linearise_norms(runner_for(llama, compscope.load(llama)), tokens=tokens)
    qwen = build(BY_ID["qwen3-qk-norm"])
    with pytest.raises(compscope.OptionError, match=r"no attention-output norm \(part 'output'\)"):
        linearise_norms(runner_for(qwen, compscope.load(qwen)), "output", tokens=tokens)
    with pytest.raises(compscope.OptionError, match=r"no latent norm \(part 'latent'\)"):
        linearise_norms(runner_for(qwen, compscope.load(qwen)), "latent", tokens=tokens)
    olmo = build(BY_ID["olmo2-layer-qk-norm"])
    with pytest.raises(compscope.ProcessingError, match="all heads of a layer at once"):
        linearise_norms(runner_for(olmo, compscope.load(olmo)), "qk", tokens=tokens)
    from compscope.core.heads import Norm
    from compscope.data.norm_linearisation import check_parts

    latent = compscope.load(build(BY_ID["deepseek-v3-latent-attention"]))  # no model has a latent norm and either
    assert check_parts(latent, None) == ("latent",)  # other yet: each given to it by hand
    gainless = Norm("rmsnorm", None, None, 1e-6)
    for other in ({"v_norm": gainless}, {"qk_norm": (gainless, gainless)}):
        with pytest.raises(compscope.ProcessingError, match="latent norm's scale sits before a QK-norm or value norm"):
            check_parts(latent.replace(**other), "latent")


def test_a_value_norm_is_measured_on_what_it_takes_value_biases_included():
    """Gemma 4's value norm, measured on text, reads ``W_V x + b_V`` at every position but the first, per K/V
    head: given weights with value biases (by hand: Gemma 4 has none), its mean Jacobian is
    :class:`JacobianMean`'s over those rows, and not the one without the biases."""
    pytest.importorskip("transformers")
    from compscope.core.attention import read_input
    from compscope.data.norm_linearisation import JacobianMean, mean_jacobians
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build, random_ids

    model = build(BY_ID["gemma4-widths-k-eq-v-scalars"])
    hw = compscope.load(model)
    runner = runner_for(model, hw, progress=False)
    tokens = random_ids(seq=7, batch=3)
    biased = hw.replace(b_V=0.5 * torch.randn(hw.W_V.shape[:3], generator=torch.Generator().manual_seed(2)))
    got = mean_jacobians(runner, "value", hw=biased, tokens=tokens, progress=False)
    plain = mean_jacobians(runner, "value", tokens=tokens, progress=False)
    tr = runner.trace(tokens)
    for l in range(hw.n_layers):
        x = read_input(biased, l, tr.resid[l]).double()
        y = torch.einsum("grd,bsd->bsgr", biased.W_V[l].double(), x)[:, 1:] + biased.b_V[l].double()
        want = JacobianMean(hw.v_norm)
        want.add(y.reshape(-1, *y.shape[2:]))
        torch.testing.assert_close(got.means["v", l], want.mean(), rtol=1e-6, atol=1e-8)
        assert not torch.allclose(got.means["v", l], plain.means["v", l], rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("call", ["mean_jacobians", "linearise_norms"])
def test_the_pass_over_text_counts_sequences_on_a_bar_shown_by_default(bars, call):
    pytest.importorskip("transformers")
    from compscope.data import norm_linearisation
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build, random_ids

    model = build(BY_ID["gemma3-text"])
    runner = runner_for(model, compscope.load(model), progress=False)
    del bars[:]  # (only the pass's own)
    getattr(norm_linearisation, call)(runner, tokens=random_ids(seq=9, batch=5), batch_size=2)
    assert [(b.total, b.n, b.enabled) for b in bars] == [(5, 5, True)]


def test_validate_judges_the_linearised_weights_of_the_unprocessed_model():
    """The labels and interventions come from the model as it is (the same as without the option);
    the measures read the linearised weights, recorded with the data they were linearised on."""
    pytest.importorskip("transformers")
    from compscope.data.validate import validate
    from hf_tiny import BY_ID, build

    model = build(BY_ID["gemma3-text"])
    opts = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    plain = validate(model, **opts)
    lin = validate(model, linearise_norms="qk", **opts)
    assert lin.options["weights_processing"] == ["linearise_norms(qk)"]
    assert plain.options["weights_processing"] == []
    assert not any("linearised (their mean Jacobian)" in n for n in plain.notes)
    import pandas as pd

    none = validate(model, linearise_norms=None, **opts)  # no norm, as False (linearise_norms reads None as every norm)
    assert none.options["weights_processing"] == [] and pd.DataFrame(none.rows).equals(pd.DataFrame(plain.rows))
    assert any("norms linearised (their mean Jacobian) on" in n for n in lin.notes)
    assert "(weights: linearise_norms(qk))" in lin.format()
    torch.testing.assert_close(lin.effects.by_kind["K"], plain.effects.by_kind["K"], atol=0, rtol=0, equal_nan=True)
    assert lin.rows[0]["measure"] == plain.rows[0]["measure"] and lin.rows != plain.rows
    with pytest.raises(compscope.ProcessingError, match="already moved"):
        validate(model, fold_qk_gains=True, linearise_norms=True, **opts)


def test_validate_notes_the_norms_its_measures_do_not_read():
    """Without ``linearise_norms`` a verdict says which norms inside the heads' circuits the
    measures leave out, and names the option for those it can linearise: none for a model without
    them, only the output norm once QK-norm's gains are folded or when its QK-norm is layer-wide."""
    pytest.importorskip("transformers")
    from compscope.data.validate import unread_norms
    from compscope.core.processing import fold_qk_norm_gains
    from hf_tiny import BY_ID, build

    def notes(model_id, fold=False):
        hw = compscope.load(build(BY_ID[model_id]))
        return unread_norms(fold_qk_norm_gains(hw) if fold else hw)

    both = "QK-norm (after W_Q, W_K) and an attention-output norm (after W_O), which the measures do not read"
    iso = "; --linearise-qk-norm (linearise_qk_norm=) reads QK-norm at the isotropic point, from the weights alone"
    assert notes("gemma3-text") == f"the heads' circuits hold {both}; --linearise-norms qk,output (linearise_norms=) " \
        "reads them through the mean Jacobian on text" + iso
    assert notes("gemma3-text", fold=True) == "the heads' circuits hold an attention-output norm (after W_O), which " \
        "the measures do not read; --linearise-norms output (linearise_norms=) reads it through the mean Jacobian on text"
    assert notes("qwen3-qk-norm").endswith("QK-norm (after W_Q, W_K), which the measures do not read; "
                                           "--linearise-norms qk (linearise_norms=) reads it through the mean Jacobian on text"
                                           + iso)
    assert notes("olmo2-layer-qk-norm").endswith(f"{both}; --linearise-norms output (linearise_norms=) reads it "
                                                 "through the mean Jacobian on text")
    assert notes("llama-mha") is None
    assert notes("deepseek-v3-latent-attention") == (
        "the heads' circuits hold latent norms (their per-token scales on W_Q, W_K, W_V: multi-head latent attention), "
        "which the measures do not read; --linearise-norms latent (linearise_norms=) reads them through the mean "
        "Jacobian on text")
    from compscope.data.validate import validate

    opts = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    model = build(BY_ID["gemma3-text"])

    def said(v):  # its notes, but the one on its rotary content (an object without a tokenizer: repeats)
        assert sum(n.startswith("gemma3_text has no tokenizer") for n in v.notes) == 1, v.notes
        return [n for n in v.notes if "no tokenizer" not in n]

    assert said(validate(model, **opts)) == [notes("gemma3-text")]
    assert not any("do not read" in n for n in validate(model, linearise_norms="qk", **opts).notes)
    assert said(validate(model, linearise_qk_norm=True, **opts)) == [notes("gemma3-text", fold=True)]  # the output norm's


def test_validate_linearises_a_latent_attention_models_latent_norms_by_default():
    """``linearise_norms=True`` on a model with multi-head latent attention: its latent norms (the one part it has),
    recorded; the labels and interventions as without it, the measures judged on other weights."""
    pytest.importorskip("transformers")
    from compscope.data.validate import validate
    from hf_tiny import BY_ID, build

    model = build(BY_ID["deepseek-v3-latent-attention"])
    opts = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    plain, lin = validate(model, **opts), validate(model, linearise_norms=True, **opts)
    assert lin.options["weights_processing"] == ["linearise_norms(latent)"]
    assert any("latent norms" in n and "do not read" in n for n in plain.notes)
    assert not any("do not read" in n for n in lin.notes)
    torch.testing.assert_close(lin.effects.by_kind["K"], plain.effects.by_kind["K"], atol=0, rtol=0, equal_nan=True)
    assert [r["auroc"] for r in lin.rows] != [r["auroc"] for r in plain.rows] or \
        [r["spearman"] for r in lin.rows] != [r["spearman"] for r in plain.rows]


def test_cli_validate_linearises_every_norm_the_model_has_or_the_parts_named(tmp_path, capsys):
    pytest.importorskip("transformers")
    from compscope.cli.main import main
    from hf_tiny import BY_ID, build

    folder = tmp_path / "gemma3"
    build(BY_ID["gemma3-text"]).save_pretrained(folder)
    small = ["--sequences", "4", "--half", "4", "--intervention-sequences", "2", "--kinds", "K", "--metric", "identity"]
    assert main(["validate", str(folder), *small, "--linearise-norms"]) == 0
    out = capsys.readouterr().out
    assert "(weights: linearise_norms(qk, output))" in out and "norms linearised (their mean Jacobian) on" in out
    assert main(["validate", str(folder), *small, "--linearise-norms", "output"]) == 0
    assert "(weights: linearise_norms(output))" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # refused as it is parsed, before any model loads
        main(["validate", "--linearise-norms", "keys", str(folder)])
    assert "invalid choice: 'keys'" in capsys.readouterr().err


def test_scores_and_pairs_read_the_weights_linearised_as_linearise_norms_gives_them(tmp_path, capsys):
    """``compscope.scores`` and ``compose_pair`` with ``linearise_norms`` (on ``sample_data``) score exactly the
    weights :func:`linearise_norms` gives on the same sample, after ``fold_norm``; the CLI's ``scores`` and ``pair``
    say so (``--linearise-norms``, ``--sample-*``). Refused: ``HeadWeights`` (nothing to run), sample options without
    the linearisation that reads them, a part the model lacks (named before the model runs)."""
    pytest.importorskip("transformers")
    from compscope.api import compose_pair, scores
    from compscope.cli.main import main
    from compscope.core.processing import fold_norm
    from compscope.data.residual_moments import SampleData
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build

    model = build(BY_ID["gemma3-text"])
    sample = SampleData(sequences=3, length=8)
    got = scores(model, "K", ["frobenius", "tight"], linearise_norms="qk", sample_data=sample, fold_norm=True,
                 progress=False)
    want_hw = linearise_norms(runner_for(model), "qk", hw=fold_norm(compscope.load(model)), data=sample,
                              progress=False)
    want = scores(want_hw, "K", ["frobenius", "tight"], progress=False)
    assert got.processing == want.processing == ("fold_norm", "linearise_norms(qk)")
    for key in want.values:
        torch.testing.assert_close(got.values[key], want.values[key], atol=0, rtol=0, equal_nan=True)
    plain = scores(model, "K", ["frobenius"], fold_norm=True, progress=False)
    finite = torch.isfinite(plain.values["frobenius", "K"])  # (the later readers' pairs)
    assert not torch.allclose(plain.values["frobenius", "K"][finite], got.values["frobenius", "K"][finite])
    pair = compose_pair(model, "0.1", "1.2", "K", linearise_norms=True, sample_data=sample)
    assert pair.measures == compose_pair(linearise_norms(runner_for(model), data=sample, progress=False), "0.1",
                                         "1.2", "K").measures
    with pytest.raises(compscope.OptionError, match="linearise_norms runs the model over text: pass the model itself"):
        scores(compscope.load(model), "K", linearise_norms=True)
    with pytest.raises(compscope.OptionError, match="^sample_data: the residual is sampled for linearise_norms"):
        scores(model, "K", sample_data=sample)
    with pytest.raises(compscope.OptionError, match=r"has no latent norm \(part 'latent'\)"):
        scores(model, "K", linearise_norms="latent")
    folder = tmp_path / "gemma3"
    model.save_pretrained(folder)
    small = ["--kinds", "K", "--measure", "frobenius", "--sample-sequences", "3", "--sample-length", "8"]
    assert main(["scores", str(folder), *small, "--linearise-norms", "output", "--top", "1"]) == 0
    assert "processing linearise_norms(output)" in capsys.readouterr().out
    assert main(["pair", str(folder), "0.1", "1.2", "--linearise-norms", "--sample-sequences", "3"]) == 0
    assert "(weights: linearise_norms(qk, output))" in capsys.readouterr().out
    assert main(["scores", str(folder), "--sample-sequences", "3"]) == 2
    assert "--sample-sequences: for --linearise-norms only" in capsys.readouterr().err


def test_validate_reads_the_heads_own_scores_with_the_norms_as_they_are():
    """The linearisation is for composition (what a writer changes); a head's own previous-token
    and induction scores read the exact norms, so they are those of the unlinearised weights."""
    pytest.importorskip("transformers")
    from compscope.data.validate import validate
    from hf_tiny import BY_ID, build

    model = build(BY_ID["gemma3-text"])
    opts = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    import pandas as pd

    # equal to the last digit, NaN (a precision with no labelled head) where NaN
    pd.testing.assert_frame_equal(pd.DataFrame(validate(model, linearise_norms=True, **opts).heads),
                                  pd.DataFrame(validate(model, **opts).heads), check_exact=True)


@pytest.mark.parametrize("bias", [False, True])
def test_a_latent_scale_linearised_with_a_large_eps_is_the_mean_autograd_jacobian(bias):
    """``x̃ ↦ s(x) W̃ x̃`` with ``s(x) = (|W_c x + b_c|²/r + eps)^(-1/2)`` and eps 0.7, large beside ``|c|²/r`` (so
    eps's own sign and place show): :class:`LatentScaleMean` over 50 rows in two batches, then
    :func:`latent_linearised`, equals the mean autograd Jacobian of that map in ``x̃ = [x; 1]`` (its last
    column the bias), with and without biases on the projection and the latent."""
    from compscope.core.heads import LatentNorm
    from compscope.data.norm_linearisation import LatentScaleMean, latent_linearised

    g = torch.Generator().manual_seed(5)
    d, rank, eps = 6, 3, 0.7
    Wc = 0.3 * torch.randn(1, rank, d, generator=g, dtype=torch.float64)
    bc = 0.2 * torch.randn(1, rank, generator=g, dtype=torch.float64) if bias else None
    latent = LatentNorm(Wc, bc, eps)
    W = torch.randn(2, 4, d, generator=g, dtype=torch.float64)  # (head, d_head, d_model)
    b = torch.randn(2, 4, generator=g, dtype=torch.float64) if bias else None
    x = torch.randn(50, d, generator=g, dtype=torch.float64)
    acc = LatentScaleMean(latent, 0)
    acc.add(x[:20])
    acc.add(x[20:])
    got_W, got_b = latent_linearised(W, b, latent, 0, acc.mean())
    Wt = torch.cat([W, torch.zeros(2, 4, 1, dtype=torch.float64) if b is None else b[..., None]], -1)
    Wct = torch.cat([Wc[0], torch.zeros(rank, 1, dtype=torch.float64) if bc is None else bc[0][:, None]], 1)

    def scaled(rows):  # (n, d + 1) -> (n, head, d_head)
        c = rows @ Wct.T
        return torch.einsum("hrd,nd->nhr", Wt, rows) * torch.rsqrt(c.pow(2).mean(-1) + eps)[:, None, None]

    J = _mean_jacobian(scaled, torch.cat([x, torch.ones(50, 1, dtype=torch.float64)], 1))  # (head, d_head, d + 1)
    torch.testing.assert_close(got_W, J[..., :-1], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got_b, J[..., -1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("gained, biased, with_b_O", [(False, False, False), (True, False, True), (False, True, False),
                                                      (True, True, True)])
def test_an_attention_output_norm_linearises_to_its_gain_times_its_mean_jacobian_and_its_bias(gained, biased, with_b_O):
    """Part ``output`` from given mean Jacobians ``J_l`` of an attention-output LayerNorm with or without gain
    ``γ_l`` and bias ``β_l``: ``W_O ← diag(γ_l) J_l W_O`` per head (``J_l W_O`` without a gain) and
    ``b_O ← diag(γ_l) J_l b_O + β_l`` (``β_l`` alone without ``b_O``; None with neither); the norm gone."""
    from dataclasses import replace

    from compscope.core.heads import Norm
    from compscope.data.norm_linearisation import NormJacobians
    from compscope.toy import ToyConfig, ToyTransformer

    g = torch.Generator().manual_seed(3)
    L, d = 2, 6
    cfg = ToyConfig(n_layers=L, n_heads=2, d_model=d, d_head=4, d_vocab=9, n_ctx=5)
    hw = ToyTransformer(cfg, seed=1).head_weights()
    gain = 1 + 0.5 * torch.randn(L, d, generator=g) if gained else None
    beta = 0.3 * torch.randn(L, d, generator=g) if biased else None
    b_O = torch.randn(L, d, generator=g) if with_b_O else None
    hw = replace(hw, attn_out_norm=Norm("layernorm", gain, beta, 1e-5), b_O=b_O)
    J = {("o", l): torch.randn(d, d, generator=g, dtype=torch.float64) for l in range(L)}
    lin = NormJacobians(J, ("output",), "given").apply(hw, "output")
    assert lin.attn_out_norm is None and (lin.b_O is None) == (not biased and not with_b_O)
    for l in range(L):
        M = J["o", l] if gain is None else torch.diag(gain[l].double()) @ J["o", l]
        for h in range(hw.n_heads):
            torch.testing.assert_close(lin.W_O[l, h].double(), M @ hw.W_O[l, h].double(), rtol=1e-5, atol=1e-6)
        if lin.b_O is not None:
            want = (beta[l].double() if biased else 0) + (M @ b_O[l].double() if with_b_O else 0)
            torch.testing.assert_close(lin.b_O[l].double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("with_bias", [False, True])
def test_a_value_norm_with_a_gain_and_a_bias_linearises_to_the_gain_times_its_mean_jacobian_plus_its_bias(with_bias):
    """Part ``value`` from given mean Jacobians ``J_l`` (per K/V head) of a LayerNorm with gain ``γ_l`` and bias
    ``β_l`` (Gemma 4's has neither; the general form): ``W_V ← diag(γ_l) J_l W_V`` and
    ``b_V ← diag(γ_l) J_l b_V + β_l``, ``b_V = β_l`` for a model without value biases; the value norm gone."""
    from dataclasses import replace

    from compscope.core.heads import Norm
    from compscope.data.norm_linearisation import NormJacobians
    from compscope.toy import ToyConfig, ToyTransformer

    g = torch.Generator().manual_seed(2)
    cfg = ToyConfig(n_layers=2, n_heads=2, d_model=6, d_head=4, d_vocab=9, n_ctx=5)
    hw = ToyTransformer(cfg, seed=1).head_weights()
    L, G, r = 2, 2, 4
    gain, beta = 1 + 0.5 * torch.randn(L, r, generator=g), 0.3 * torch.randn(L, r, generator=g)
    b_V = torch.randn(L, G, r, generator=g) if with_bias else None
    hw = replace(hw, v_norm=Norm("layernorm", gain, beta, 1e-5), b_V=b_V)
    J = {("v", l): torch.randn(G, r, r, generator=g, dtype=torch.float64) for l in range(L)}
    lin = NormJacobians(J, ("value",), "given").apply(hw, "value")
    assert lin.v_norm is None
    for l in range(L):
        for h in range(G):
            M = torch.diag(gain[l].double()) @ J["v", l][h]
            torch.testing.assert_close(lin.W_V[l, h].double(), M @ hw.W_V[l, h].double(), rtol=1e-5, atol=1e-6)
            want_b = beta[l].double() + (M @ b_V[l, h].double() if with_bias else 0)
            torch.testing.assert_close(lin.b_V[l, h].double(), want_b, rtol=1e-5, atol=1e-6)
