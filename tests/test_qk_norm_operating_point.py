"""QK-norm linearised from the weights (``compscope.core.processing.linearise_qk_norm``): exact
against autograd through HuggingFace's own QK-norm modules where every input has the same RMS,
the isotropic operating point against samples through the model's own attention norm, how it
sits with the other steps, and the errors."""

from __future__ import annotations

import re

import pytest
import torch

import compscope
from compscope.core.heads import Norm
from compscope.core.processing import (QK_NORM_LINEARISED, fold_norm, fold_qk_norm_gains, isotropic_read_moment,
                                       linearise_qk_norm, qk_norm_jacobians)
from compscope.data.norm_linearisation import JacobianMean


def _tiny(variant):
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    model = build(BY_ID[variant])
    return model, compscope.load(model)


def _jacobian(module, y: torch.Tensor) -> torch.Tensor:
    return torch.autograd.functional.jacobian(lambda v: module(y + v), torch.zeros_like(y))


@pytest.mark.parametrize("variant", ["gemma3-text", "gemma3-text-mqa-bias", "qwen3-qk-norm"])
def test_at_one_input_it_is_the_jacobian_of_the_models_own_qk_norm(variant):
    """Second moment ``x0 x0ᵀ`` and mean ``x0``: the operating point is one input, where the
    second-order formula is the exact Jacobian; autograd through HF's ``q_norm``/``k_norm`` (gain
    included) at ``y0 = W x0 + b``."""
    model, hw = _tiny(variant)
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(hw.n_layers, hw.d_model, generator=g)
    lin = linearise_qk_norm(hw, moments=x0[:, :, None] * x0[:, None, :], means=x0)
    assert lin.qk_norm is None and lin.meta.processing == ("linearise_qk_norm (given moments)",)
    for l, layer in enumerate(model.model.layers):
        attn = layer.self_attn
        for W, b, Wl, bl, module in ((hw.W_Q, hw.b_Q, lin.W_Q, lin.b_Q, attn.q_norm),
                                     (hw.W_K, hw.b_K, lin.W_K, lin.b_K, attn.k_norm)):
            for h in range(W.shape[1]):
                y0 = W[l, h] @ x0[l] + (0 if b is None else b[l, h])
                J = _jacobian(module, y0.detach())
                torch.testing.assert_close(Wl[l, h], (J @ W[l, h]).detach(), atol=1e-5, rtol=1e-4)
                if b is not None:
                    torch.testing.assert_close(bl[l, h], (J @ b[l, h]).detach(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_inputs_of_one_rms_give_the_mean_jacobian_exactly(kind):
    """Inputs whose queries all have the same RMS after centring (``±a q_i``, ``q_i`` orthonormal
    and centred, drawn with unequal weights): ``E[1/s] = 1/s̄`` and ``E[z zᵀ/s] = P Σ P/s̄³``, so
    the second-order Jacobian is the mean Jacobian over the samples (``JacobianMean``, itself
    checked against autograd), for an anisotropic ``Σ``."""
    from compscope.toy import ToyConfig, ToyTransformer

    r, d = 4, 12
    m = ToyTransformer(ToyConfig(n_layers=2, n_heads=2, d_model=d, d_head=r, d_vocab=10, n_ctx=8, norm=kind,
                                 positions="rotary", qk_norm=True), seed=2)
    hw = m.head_weights().replace(qk_norm=tuple(Norm(kind, n.weight, n.bias, 0.01) for n in m.head_weights().qk_norm))
    g = torch.Generator().manual_seed(5)
    P = torch.eye(r, dtype=torch.float64) - (1.0 / r if kind == "layernorm" else 0.0)
    rank = r - 1 if kind == "layernorm" else r  # orthonormal directions (with zero mean for a LayerNorm)
    basis = torch.linalg.qr(P @ torch.randn(r, rank, generator=g, dtype=torch.float64))[0]
    counts = torch.arange(1, basis.shape[1] + 1)
    ys = torch.cat([s * 1.7 * basis[:, i].expand(int(counts[i]), r) for i in range(basis.shape[1]) for s in (1, -1)])
    l, h = 1, 0
    W = hw.W_Q[l, h].double()
    xs = ys @ torch.linalg.pinv(W).T  # W x = y exactly (W has full row rank)
    torch.testing.assert_close(xs @ W.T, ys)
    M = torch.zeros(hw.n_layers, d, d, dtype=torch.float64)
    M[l] = xs.T @ xs / len(xs)
    M[0] = torch.eye(d, dtype=torch.float64)
    J_q, _ = qk_norm_jacobians(hw, M)
    acc = JacobianMean(Norm(kind, None, None, 0.01))
    acc.add(ys)
    torch.testing.assert_close(J_q[l, h], acc.mean(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_the_isotropic_moment_is_that_of_the_attention_norm_on_isotropic_residuals(kind):
    """``isotropic_read_moment``: the second moment and mean of the model's own attention norm
    (gain and bias perturbed) applied to Gaussian residuals, within Monte Carlo error; and the
    Jacobians from its structure (no ``d × d`` matrix) equal those from the matrices themselves."""
    from compscope.toy import ToyConfig
    from toy_tiny import perturbed_toy

    hw = perturbed_toy(ToyConfig(n_layers=2, n_heads=2, d_model=6, d_head=2, d_vocab=10, n_ctx=8, norm=kind,
                                 positions="rotary", qk_norm=True), seed=1).head_weights()
    g = torch.Generator().manual_seed(9)
    x = 3.0 * torch.randn(400_000, hw.d_model, generator=g, dtype=torch.float64)
    for l in range(hw.n_layers):
        M, mean = isotropic_read_moment(hw, l)
        n = hw.attn_norm.apply(x, l).double()
        torch.testing.assert_close(M, n.T @ n / len(n), atol=0.02, rtol=0.02)
        torch.testing.assert_close(mean, n.mean(0), atol=0.02, rtol=0.0)
    _same_as_the_matrices(hw)


def test_the_isotropic_moment_without_a_norm_or_a_gain_by_hand():
    """No norm before the heads (the toy): the residual itself, ``E[x xᵀ] = I``, mean 0. OLMo's
    LayerNorm without gain or bias: the centring projector scaled to mean square 1,
    ``d/(d−1) (I − 11ᵀ/d)``, mean 0."""
    for hw, centred in ((compscope.load("induction-2l"), False), (_tiny("olmo-parameter-free-layernorm")[1], True)):
        d = hw.d_model
        eye = torch.eye(d, dtype=torch.float64)
        want = (eye - 1.0 / d) * d / (d - 1) if centred else eye
        for l in range(hw.n_layers):
            M, mean = isotropic_read_moment(hw, l)
            assert M.dtype == mean.dtype == torch.float64
            torch.testing.assert_close(M, want, rtol=0, atol=1e-15)
            torch.testing.assert_close(mean, torch.zeros(d, dtype=torch.float64), rtol=0, atol=0)


def _same_as_the_matrices(hw):
    """``qk_norm_jacobians(hw)`` (the isotropic point from its structure) equals the Jacobians at the
    stacked ``isotropic_read_moment`` matrices given as moments and means."""
    moments, means = zip(*(isotropic_read_moment(hw, l) for l in range(hw.n_layers)))
    structured = qk_norm_jacobians(hw)
    given = qk_norm_jacobians(hw, torch.stack(moments), torch.stack(means))
    for a, b in zip(structured, given):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("variant", ["gemma3-text", "gemma3-text-mqa-bias", "qwen3-qk-norm",
                                     "chameleon-swin-norm-after"])
def test_the_isotropic_point_of_hf_models_from_its_structure(variant):
    """The same on HuggingFace configs: Gemma's ``1 + w`` gains, query and key biases, GQA, and
    Chameleon's swin-norm layers, whose heads read the residual with no norm before them (their
    isotropic point the residual itself, ``E[x xᵀ] = I``) through a per-head LayerNorm QK-norm."""
    _same_as_the_matrices(_tiny(variant)[1])


def test_it_commutes_with_folding_the_norm_gains():
    """Folding the attention norm's gains into ``W_Q``, ``W_K`` first or after gives the same
    weights: the operating point is the same input, its gain on either side."""
    _, hw = _tiny("gemma3-text")
    a = fold_norm(linearise_qk_norm(hw))
    b = linearise_qk_norm(fold_norm(hw))
    for name in ("W_Q", "W_K"):
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=1e-5, atol=1e-7)
    assert b.meta.processing == ("fold_norm", QK_NORM_LINEARISED)
    assert compscope.load(b).meta.processing == b.meta.processing  # held as it is


def test_the_logit_scale_goes_back_into_the_reader():
    """``W_Q`` scaled by ``c``: QK-norm's output does not change, nor do the linearised weights,
    while the weights as read grow by ``c`` (what ``read_gain`` would wrongly count)."""
    _, hw = _tiny("gemma3-text")
    big = hw.replace(W_Q=hw.W_Q * 7.0)
    torch.testing.assert_close(linearise_qk_norm(big).W_Q, linearise_qk_norm(hw).W_Q, rtol=1e-4, atol=1e-6)
    r = compscope.scores(linearise_qk_norm(hw), "K", ["read_gain"], progress=False).dense("read_gain", "K")
    r_big = compscope.scores(linearise_qk_norm(big), "K", ["read_gain"], progress=False).dense("read_gain", "K")
    torch.testing.assert_close(r_big, r, rtol=1e-3, atol=1e-6, equal_nan=True)


def test_the_errors_name_the_model_and_the_step():
    _, gemma = _tiny("gemma3-text")
    _, llama = _tiny("llama-mha")
    _, olmo = _tiny("olmo2-layer-qk-norm")
    _, biased = _tiny("gemma3-text-mqa-bias")
    with pytest.raises(compscope.ProcessingError, match=f"^linearise_qk_norm: {llama.meta.name} has no QK-norm"):
        linearise_qk_norm(llama)
    with pytest.raises(compscope.ProcessingError, match="all heads of a layer at once"):
        linearise_qk_norm(olmo)
    with pytest.raises(compscope.ProcessingError, match="already moved into W_Q, W_K"):
        linearise_qk_norm(fold_qk_norm_gains(gemma))
    L, d = gemma.n_layers, gemma.d_model
    at_moments = linearise_qk_norm(gemma, moments=torch.eye(d, dtype=torch.float64).expand(L, d, d))
    for once in (linearise_qk_norm(gemma), at_moments):  # twice, at either operating point
        for again in ({}, {"moments": torch.eye(d, dtype=torch.float64).expand(L, d, d)}):
            with pytest.raises(compscope.ProcessingError, match="linearise_qk_norm was already applied"):
                linearise_qk_norm(once, **again)
    with pytest.raises(compscope.ProcessingError, match="has no QK-norm"):
        fold_qk_norm_gains(linearise_qk_norm(gemma))
    with pytest.raises(compscope.ProcessingError, match="where= says what given moments are of"):
        linearise_qk_norm(gemma, where="text")
    with pytest.raises(compscope.ProcessingError, match=r"moments of shape \(2, 3\); expected"):
        linearise_qk_norm(gemma, moments=torch.zeros(2, 3))
    with pytest.raises(compscope.ProcessingError, match="means= without moments="):  # a mean alone sets no point
        linearise_qk_norm(gemma, means=torch.zeros(L, d))
    with pytest.raises(compscope.ProcessingError, match=rf"means of shape \({L}, {d + 1}\); expected \({L}, {d}\)"):
        linearise_qk_norm(gemma, moments=torch.eye(d).expand(L, d, d), means=torch.zeros(L, d + 1))
    L, d = biased.n_layers, biased.d_model
    for one_side in ({"b_K": None}, {"b_Q": None}, {}):  # a bias on either side alone asks for the means too
        with pytest.raises(compscope.ProcessingError, match="query or key biases; give the mean"):
            linearise_qk_norm(biased.replace(**one_side), moments=torch.eye(d).expand(L, d, d))
    from compscope.data.norm_linearisation import check_parts

    for lin in (linearise_qk_norm(gemma), at_moments):
        with pytest.raises(compscope.ProcessingError, match="already linearised from the weights"):
            check_parts(lin, "qk")


def test_the_loaders_qk_norm_note_gives_way_to_the_linearisations():
    """After linearising, one note speaks of QK-norm: the linearisation's, naming its operating point;
    the model's other notes stay, in their order."""
    _, gemma = _tiny("gemma3-text")
    assert any(n.startswith("QK-norm:") for n in gemma.meta.notes)
    L, d = gemma.n_layers, gemma.d_model
    for lin, where in ((linearise_qk_norm(gemma), "isotropic normalised input"),
                       (linearise_qk_norm(gemma, moments=torch.eye(d).expand(L, d, d)), "given second moments")):
        about = [n for n in lin.meta.notes if "QK-norm" in n]
        assert len(about) == 1 and about[0].startswith(f"QK-norm linearised (its Jacobian at {where}"), lin.meta.notes
        others = [n for n in gemma.meta.notes if not n.startswith("QK-norm:")]
        assert [n for n in lin.meta.notes if n not in about] == others


def test_load_cli_and_validate_take_it(tmp_path, capsys):
    """``load(..., linearise_qk_norm=True)``, ``scores --linearise-qk-norm`` (the scores of those
    weights), and ``validate --linearise-qk-norm``: the labels and interventions of the model as it
    is, the measures of the linearised weights, the heads' own scores read from the norms as they are."""
    from compscope.cli.main import main
    from compscope.data.validate import validate

    model, hw = _tiny("gemma3-text")
    folder = tmp_path / "gemma3"
    model.save_pretrained(folder)
    lin = compscope.load(folder, linearise_qk_norm=True)
    assert lin.meta.processing == (QK_NORM_LINEARISED,)
    torch.testing.assert_close(lin.W_K, linearise_qk_norm(compscope.load(folder)).W_K, rtol=0, atol=0)
    assert main(["scores", str(folder), "--linearise-qk-norm", "--kinds", "K", "--measure", "read_gain",
                 "--top", "1", "--out", str(tmp_path / "k.csv")]) == 0
    assert f"processing {QK_NORM_LINEARISED}" in capsys.readouterr().out
    import pandas as pd

    table = pd.read_csv(tmp_path / "k.csv")
    want = compscope.scores(lin, "K", ["read_gain"], progress=False).dense("read_gain", "K")
    assert len(table) > 0 and set(table["processing"]) == {QK_NORM_LINEARISED}
    for row in table.itertuples():
        v = float(want[row.src_layer, row.src_head, row.dst_layer, row.dst_head])
        assert abs(row.value - v) <= 1e-5 * max(1.0, abs(v))
    opts = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    plain, iso = validate(model, **opts), validate(model, linearise_qk_norm=True, **opts)
    assert iso.options["weights_processing"] == [QK_NORM_LINEARISED]
    torch.testing.assert_close(iso.effects.by_kind["K"], plain.effects.by_kind["K"], atol=0, rtol=0, equal_nan=True)
    assert pd.DataFrame(iso.heads).equals(pd.DataFrame(plain.heads))  # the heads' own scores: the norms as they are
    torch.testing.assert_close(iso.tables["identity"].dense("read_gain", "K"), want, equal_nan=True)
    with pytest.raises(compscope.ProcessingError, match="already linearised from the weights"):
        validate(model, linearise_qk_norm=True, linearise_norms="qk", **opts)
    assert main(["validate", str(folder), "--sequences", "4", "--half", "4", "--intervention-sequences", "2",
                 "--kinds", "K", "--metric", "identity", "--linearise-qk-norm"]) == 0
    assert f"(weights: {QK_NORM_LINEARISED})" in capsys.readouterr().out


def test_validate_at_the_texts_moment_reads_the_models_own_attention_norm(tmp_path, capsys, monkeypatch):
    """``validate(linearise_qk_norm='text')``: the measures of ``linearise_qk_norm(hw, M, m)`` with ``M``,
    ``m`` the sample second moment and mean of each layer's ``input_layernorm`` output, computed here
    through the HF model's own modules on the metrics' tokens; one pass of the model for it and the
    ``covariance`` metric after it; the interventions and the heads' own scores those of the model as
    it is; a note naming the text; the CLI's ``--linearise-qk-norm text``; bad values refused by name."""
    import pandas as pd

    from compscope.cli.main import main
    from compscope.data import residual_moments
    from compscope.data.residual_moments import MetricData, metric_tokens
    from compscope.data.runner import runner_for
    from compscope.data.validate import validate

    model, hw = _tiny("gemma3-text-mqa-bias")  # query and key biases: the mean enters
    data = MetricData(sequences=6, length=12)
    tokens = metric_tokens(runner_for(model, progress=False), *data.resolved(runner_for(model, progress=False)))
    states = model.model(tokens, output_hidden_states=True).hidden_states  # with autograd: the step detaches
    xs = [layer.input_layernorm(states[l]).reshape(-1, hw.d_model).double() for l, layer in enumerate(model.model.layers)]
    M = torch.stack([x.T @ x / x.shape[0] for x in xs])
    m = torch.stack([x.mean(0) for x in xs])
    assert M.requires_grad
    want = compscope.scores(linearise_qk_norm(hw, M, m), "K", ["read_gain"], "identity", progress=False).dense("read_gain", "K")

    made, sums = [], residual_moments.ResidualSums

    def counted(*args):
        made.append(1)
        return sums(*args)

    monkeypatch.setattr(residual_moments, "ResidualSums", counted)
    opts = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", progress=False)
    plain = validate(model, metrics=("identity",), **opts)  # nothing reads text data: none given
    opts["metric_data"] = data
    made.clear()
    text = validate(model, linearise_qk_norm="text", metrics=("identity", "covariance"), **opts)
    assert len(made) == 1  # the operating point and the covariance metric: one pass
    assert text.options["weights_processing"] == ["linearise_qk_norm (given moments)"]
    torch.testing.assert_close(text.tables["identity"].dense("read_gain", "K"), want, rtol=1e-4, atol=1e-7, equal_nan=True)
    torch.testing.assert_close(text.effects.by_kind["K"], plain.effects.by_kind["K"], atol=0, rtol=0, equal_nan=True)
    assert pd.DataFrame(text.heads).equals(pd.DataFrame(plain.heads))
    said = [n for n in text.notes if n.startswith("QK-norm linearised")]
    assert len(said) == 1 and said[0].startswith(
        "QK-norm linearised (its Jacobian at the second moment of what the heads read on 6 repeated random sequences"), text.notes
    for bad in ("tex", 1, None, ["text"]):
        with pytest.raises(compscope.OptionError, match=r"^linearise_qk_norm=.*expected False, True or one of isotropic, text"):
            validate(model, linearise_qk_norm=bad, **opts)
    with pytest.raises(compscope.ProcessingError, match="has no QK-norm"):
        validate(_tiny("llama-mha")[0], linearise_qk_norm="text", **opts)
    folder = tmp_path / "gemma3"
    model.save_pretrained(folder)
    assert main(["validate", str(folder), "--sequences", "4", "--half", "4", "--intervention-sequences", "2",
                 "--kinds", "K", "--metric", "identity", "--metric-sequences", "6", "--metric-length", "12",
                 "--linearise-qk-norm", "text"]) == 0
    out = capsys.readouterr().out
    assert "(weights: linearise_qk_norm (given moments))" in out and "note: QK-norm linearised" in out, out
    for argv in (["validate", str(folder), "--linearise-qk-norm", "texts"], ["info", "--linearise-qk-norm", "isotropc"]):
        with pytest.raises(SystemExit):
            main(argv)
        err = capsys.readouterr().err
        assert f"argument --linearise-qk-norm: {argv[-1]!r} is no POINT (isotropic, text)" in err, err
    assert main(["info", "--linearise-qk-norm", str(folder)]) == 0  # a word far from every POINT is the model
    assert main(["info", str(folder), "--linearise-qk-norm"]) == 0
    assert re.findall(r"^processing +(.*)$", capsys.readouterr().out, re.M) == ["linearise_qk_norm (isotropic input)"] * 2


def test_scores_and_pair_take_the_texts_point_and_the_other_commands_refuse_it(tmp_path, capsys, monkeypatch):
    """``scores --linearise-qk-norm text --metric covariance``: the table of ``validate``'s weights at
    the same point under the same metric (one pass over the text for both in each); ``pair`` the same
    pair's values; ``info``, ``circuits``, ``report`` and a sweep's scores tasks, which read the weights
    alone, refuse ``text`` by name; processed weights under a metric on data (here ``--fold-norm``) read the
    unprocessed model's residual as ``validate`` does."""
    import pandas as pd

    from compscope.cli.main import main
    from compscope.data import residual_moments
    from compscope.data.residual_moments import MetricData
    from compscope.data.validate import validate

    model, _ = _tiny("gemma3-text")
    folder = tmp_path / "gemma3"
    model.save_pretrained(folder)
    data = ["--metric-sequences", "6", "--metric-length", "12"]
    opts = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", progress=False,
                metric_data=MetricData(sequences=6, length=12))
    every = (["--fold-value-bias", "--linearise-qk-norm", "text", "--fold-norm"], {"linearise_qk_norm": "text", "fold_norm": True})
    for flags, kw in ((["--linearise-qk-norm", "text"], {"linearise_qk_norm": "text"}), (["--fold-norm"], {"fold_norm": True}),
                      every):  # the value bias moves no score; the steps in load's order whatever the flags' order
        want = validate(str(folder), metrics=("covariance",), **kw, **opts).tables["covariance"].dense("read_gain", "K")
        out = tmp_path / "k.csv"
        made, sums = [], residual_moments.ResidualSums
        monkeypatch.setattr(residual_moments, "ResidualSums", lambda *a: made.append(1) or sums(*a))
        assert main(["scores", str(folder), *flags, "--metric", "covariance", *data, "--kinds", "K", "--measure",
                     "read_gain", "--out", str(out)]) == 0, flags
        monkeypatch.setattr(residual_moments, "ResidualSums", sums)
        assert len(made) == 1, flags  # one pass over the text
        printed = capsys.readouterr().out
        table = pd.read_csv(out)
        assert len(table) == int(torch.isfinite(want).sum()) > 0
        for row in table.itertuples():
            v = float(want[row.src_layer, row.src_head, row.dst_layer, row.dst_head])
            assert abs(row.value - v) <= 1e-5 * max(1.0, abs(v)), (flags, row)
        made.clear()  # and from Python: compscope.scores with the same steps as keywords, one pass
        monkeypatch.setattr(residual_moments, "ResidualSums", lambda *a: made.append(1) or sums(*a))
        t = compscope.scores(str(folder), "K", ["read_gain"], "covariance", metric_data=MetricData(sequences=6, length=12),
                             progress=False, fold_value_bias=flags is every[0], **kw)
        monkeypatch.setattr(residual_moments, "ResidualSums", sums)
        assert len(made) == 1, flags
        torch.testing.assert_close(t.dense("read_gain", "K"), want, rtol=1e-5, atol=1e-7, equal_nan=True)
        if flags is every[0]:
            assert t.processing == ("fold_norm", "linearise_qk_norm (given moments)", "fold_value_bias")
            assert "processing fold_norm, linearise_qk_norm (given moments), fold_value_bias" in printed, printed
        elif kw.get("linearise_qk_norm") == "text":
            assert "linearise_qk_norm (given moments)" in printed, printed
            row = table.iloc[0]
            assert main(["pair", str(folder), f"{row.src_layer}.{row.src_head}", f"{row.dst_layer}.{row.dst_head}",
                         "--kind", "K", "--metric", "covariance", *data, "--linearise-qk-norm", "text"]) == 0
            said = capsys.readouterr().out
            assert "linearise_qk_norm (given moments)" in said.splitlines()[0], said
            assert f"read_gain {row.value:.4f}"[:14] in " ".join(said.split()), said
    for argv in (["info"], ["circuits"], ["report", "--out", str(tmp_path / "r")]):
        assert main([argv[0], str(folder), *argv[1:], "--linearise-qk-norm", "text"]) == 2, argv
        assert "linearise_qk_norm='text' runs the model over text" in capsys.readouterr().err, argv
    assert main(["sweep", str(folder), "--out", str(tmp_path / "s"), "--linearise-qk-norm", "text"]) == 2
    assert ("--linearise-qk-norm text: --job validate takes it (each verdict runs its model over the --metric-* text)"
            in capsys.readouterr().err)
    with pytest.raises(compscope.ProcessingError, match=r"linearise_qk_norm='tex': expected True or False \(or 'isotropic'\)"):
        compscope.load(folder, linearise_qk_norm="tex")


def test_the_readme_route_from_python_reads_one_pass():
    """The README's Python route: ``qk_norm_on_text(runner, runner.hw)`` then ``get_metric('covariance',
    hw, model=runner)`` runs the model over the text once, and the table equals ``compscope scores``'s
    of the same weights under that metric."""
    from compscope.core.metrics import get_metric
    from compscope.data import residual_moments
    from compscope.data.norm_linearisation import qk_norm_on_text

    model, _ = _tiny("gemma3-text")
    runner = compscope.runner_for(model)
    hw = qk_norm_on_text(runner, runner.hw)
    sums = runner._moments
    met = get_metric("covariance", hw, model=runner)
    assert runner._moments is sums  # the same pass's sums
    t = compscope.scores(hw, "K", ["read_gain"], met, progress=False)
    G = residual_moments.runner_second_moments(runner, sums.tokens, hw=hw, centred=True, shrinkage="ledoit-wolf")
    from compscope.core.metrics import activations

    want = compscope.scores(hw, "K", ["read_gain"], activations(G, name="covariance"), progress=False)
    torch.testing.assert_close(t.dense("read_gain", "K"), want.dense("read_gain", "K"), equal_nan=True)
    assert hw.meta.processing == ("linearise_qk_norm (given moments)",)


def test_a_model_after_an_option_whose_value_may_be_left_out_stays_the_model(tmp_path):
    """``--linearise-qk-norm`` and ``--linearise-norms`` take an optional word; a built-in name, an existing
    path or a hub id after them is the model (the option takes its default), any other word is the
    option's to take or refuse."""
    from compscope.cli.common import leave_model_names

    assert leave_model_names(["info", "--linearise-qk-norm", "gemma3-270m"]) == ["info", "--linearise-qk-norm=isotropic", "gemma3-270m"]
    assert leave_model_names(["validate", "--linearise-norms", str(tmp_path), "--top", "3"]) == \
        ["validate", "--linearise-norms=all", str(tmp_path), "--top", "3"]
    assert leave_model_names(["scores", "--linearise-qk-norm", "google/gemma-3-270m"])[1] == "--linearise-qk-norm=isotropic"
    for kept in (["scores", "--linearise-qk-norm", "text"], ["scores", "--linearise-qk-norm", "texts"],
                 ["validate", "--linearise-norms", "qk"], ["validate", "--linearise-norms", "keys"],
                 ["scores", "--linearise-qk-norm", "--top", "3"], ["scores", "--linearise-qk-norm"],
                 ["scores", "--fold-norm", "gemma3-270m"], ["info", "--linearise-qk-norm", "a\x00b"],
                 ["info", "--linearise-qk-norm", "x" * 5000]):
        assert leave_model_names(kept) == kept


def test_processing_runs_in_one_order_whatever_the_keywords_and_checks_each_option():
    """``load``'s processing keywords (``core.processing.process``) run fold, QK-norm linearised, centre, value
    bias in that order whatever order they are given in; ``linearise_qk_norm=True`` and ``'isotropic'`` are one
    step; None is off; any other value is refused naming its option ('isotropic' only for the linearisation)."""
    from compscope.core.processing import fold_value_bias, process

    _, hw = _tiny("gemma3-text")
    want = fold_value_bias(linearise_qk_norm(fold_norm(hw)))
    assert want.meta.processing == ("fold_norm", QK_NORM_LINEARISED, "fold_value_bias")
    for kw in (dict(fold_value_bias=True, linearise_qk_norm=True, fold_norm=True),
               dict(linearise_qk_norm="isotropic", center_writing=None, fold_value_bias=True, fold_norm=True)):
        for got in (process(hw, **kw), compscope.load(hw, **kw)):
            assert got.meta.processing == want.meta.processing, kw
            for name in ("W_Q", "W_K", "W_V", "W_O"):
                assert torch.equal(getattr(got, name), getattr(want, name)), (kw, name)
    assert process(hw, fold_norm=None, linearise_qk_norm=None).meta.processing == ()
    for name in ("fold_norm", "linearise_qk_norm", "center_writing", "fold_value_bias"):
        for bad in ("yes", 1, "isotropic"):
            if name == "linearise_qk_norm" and bad == "isotropic":
                continue
            hint = r" \(or 'isotropic'\)" if name == "linearise_qk_norm" else "$"
            with pytest.raises(compscope.ProcessingError, match=rf"^{name}={bad!r}: expected True or False{hint}"):
                compscope.load(hw, **{name: bad})
