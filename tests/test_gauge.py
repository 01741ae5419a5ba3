"""Gauge checks on models (compscope.analysis.gauge): each change is what it says (a symmetry is
checked on the model's attention, and a broken one is caught), and which scores it keeps
follows from the measures' declared invariances."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import compscope
from compscope.analysis.gauge import (CHANGES, KEPT, SAME, gain_rescale, gauge_check, linear, map_residual,
                                      model_change, permutation, permute_residual, rotation)
from compscope.core.processing import fold_norm

pytest.importorskip("transformers")


def _load(variant: str):
    from hf_tiny import BY_ID, build

    return compscope.load(build(BY_ID[variant]))


@pytest.mark.parametrize("variant", ["gpt2", "llama-gqa-bias", "neox-partial-rotary-parallel", "gemma3-text", "bert",
                                     "olmo-parameter-free-layernorm", "olmo2-layer-qk-norm", "phi-partial-rotary-qk-layernorm",
                                     "gptj-interleaved-rotary", "opt", "qwen3.5-gated-attention-deltanet",
                                     "modernbert-biases", "modernbert-local-both-sides", "t5-encoder-wide-heads",
                                     "xlm-roberta-xl-pre-ln", "openai-gpt-post-ln",
                                     "deepseek-v3-latent-attention", "deepseek-v3-no-query-latent-yarn-bias"])
def test_symmetries_leave_the_attention_as_it_was_and_linear_maps_do_not(variant):
    """Every change a model allows; those it refuses (``_REFUSED``) by the rules of the module: a
    post-LN model or a gain on the attention output allows no map but a permutation, and a model
    without pre-norm gains has none to rescale."""
    hw = _load(variant)
    refused = set()
    for build in (permutation, rotation, gain_rescale, linear):
        try:
            c = build(hw, seed=1)
        except compscope.ProcessingError:
            refused.add(build.__name__)
            continue
        if build is linear:
            assert not c.symmetry and model_change(c) > 1e-2
        else:
            assert c.symmetry and model_change(c) < SAME / 5, (variant, c.name)
    assert refused == _REFUSED.get(variant, set())


_POST_LN = {"rotation", "gain_rescale", "linear"}
#: the changes each model refuses: post-LN (BERT, GPT-1), a gain on the attention output (Gemma 3;
#: OLMo 2, whose only norms sit there), no gain to rescale (OLMo's parameter-free LayerNorm)
_REFUSED = {"bert": _POST_LN, "openai-gpt-post-ln": _POST_LN, "olmo2-layer-qk-norm": _POST_LN,
            "gemma3-text": {"rotation", "linear"}, "olmo-parameter-free-layernorm": {"gain_rescale"}}


def test_a_change_that_forgets_the_norm_gains_is_caught():
    """Permuting the residual without permuting the norms' gains and biases is no symmetry of a
    model whose gains are not all equal: the check sees it."""
    hw = _load("gpt2")
    c = permutation(hw, seed=2)
    perm_only = dataclasses.replace(c, hw=c.hw.replace(attn_norm=hw.attn_norm, final_norm=hw.final_norm))
    assert model_change(perm_only) > 1e-2


def test_rotation_keeps_the_mean_direction_of_layernorm_models_and_folds_the_gains():
    hw = _load("gpt2")
    c = rotation(hw, seed=3)
    ones = torch.ones(hw.d_model, dtype=torch.float64)
    torch.testing.assert_close(c.T @ ones, ones)
    torch.testing.assert_close(c.T @ c.T.T, torch.eye(hw.d_model, dtype=torch.float64))
    assert c.weights == "folded" and c.hw.attn_norm.weight is None


def test_gain_rescale_leaves_the_folded_weights_as_they_were():
    """``W diag(g)`` is what the model reads: trading ``s`` between ``g`` and ``W`` leaves it."""
    hw = _load("llama-gqa-bias")
    c = gain_rescale(hw, seed=4)
    assert not torch.allclose(c.hw.W_Q, hw.W_Q)
    a, b = fold_norm(hw), fold_norm(c.hw)
    for name in ("W_Q", "W_K", "W_V", "W_U"):
        torch.testing.assert_close(getattr(b, name).double(), getattr(a, name).double(), rtol=1e-5, atol=1e-6)
    for norm in ("attn_norm", "final_norm"):  # every gain traded, the final norm's against W_U
        g0, g1 = getattr(hw, norm), getattr(c.hw, norm)
        assert all(not torch.allclose(g0.gain(l), g1.gain(l)) for l in range(g0.weight.shape[0])), norm
    assert not torch.allclose(c.hw.W_U, hw.W_U)


@pytest.mark.parametrize("variant", ["gpt2", "llama-gqa-bias", "bert"])
def test_permutation_by_indexing_is_the_matrix_map_and_moves_the_norms(variant):
    """``permute_residual`` (indexing, in each tensor's dtype) gives exactly the weights that
    ``T W`` and ``W T⁻¹`` give for ``T = I[perm]`` (float64 products of float32 values, so exact),
    and carries every norm's gain and bias to the permuted coordinates."""
    hw = _load(variant)
    perm = torch.randperm(hw.d_model, generator=torch.Generator().manual_seed(5))
    T = torch.eye(hw.d_model, dtype=torch.float64)[perm]
    bare = hw.replace(attn_norm=None, final_norm=None, attn_out_norm=None)
    a, b = permute_residual(hw, perm), map_residual(bare, T)
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E", "W_pos", "W_U", "b_O"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == getattr(hw, name).dtype, name
            assert torch.equal(x.double(), y), name
    for k, v in a.embed_extra.items():
        assert torch.equal(v.double(), b.embed_extra[k]), k
    for name in ("attn_norm", "final_norm"):
        n0, n1 = getattr(hw, name), getattr(a, name)
        if n0 is not None and n0.weight is not None:  # (T g)_i = g_perm_i: the gain follows its coordinate
            torch.testing.assert_close(n1.weight.double(), (T @ n0.weight.double().T).T, rtol=0, atol=0)


def test_map_residual_refuses_norm_parameters_it_cannot_move():
    hw = _load("llama-gqa-bias")
    with pytest.raises(compscope.ProcessingError, match="attn_norm has a gain"):
        map_residual(hw, torch.eye(hw.d_model))


def test_refusals_become_notes():
    rows, notes = gauge_check(_load("bert"), ["rotation", "gain_rescale", "permutation"], kinds="K", progress=False)
    assert {r.change for r in rows} == {"permutation"}
    assert any("post-LN" in n for n in notes) and any("gain_rescale" in n for n in notes)
    rows, notes = gauge_check(_load("gemma3-text"), ["rotation"], kinds="K", progress=False)
    assert not rows and "attention-output norm" in notes[0]
    with pytest.raises(compscope.ProcessingError, match=r"no pre-norm gain .*\(norm placement 'pre', gains folded\)"):
        gain_rescale(fold_norm(_load("llama-gqa-bias")))
    with pytest.raises(compscope.ProcessingError, match=r"\(norm placement 'post'\)$"):
        gain_rescale(_load("bert"))


def _kept(rows, change, metric):
    return {r.measure: r.max_change <= KEPT for r in rows if r.change == change and r.metric == metric}


def test_which_scores_each_change_keeps():
    """Every measure is orthogonally invariant (declared; the axiom battery checks it): exact
    symmetries keep every score under both metrics. A trade of gains against the weights changes
    the scores of the weights as loaded (they do not include the gains). A general invertible map
    keeps the scores only under the embed metric, which moves with the model."""
    hw = _load("llama-gqa-bias")
    rows, _ = gauge_check(hw, CHANGES, measures="all", metrics=("identity", "embed", "unembed"), progress=False)
    for change in ("permutation", "rotation"):
        for metric in ("identity", "embed", "unembed"):
            assert all(_kept(rows, change, metric).values()), (change, metric)
    assert not any(_kept(rows, "gain_rescale", "identity").values())
    assert not any(_kept(rows, "linear", "identity").values())
    assert all(_kept(rows, "linear", "embed").values()) and all(_kept(rows, "linear", "unembed").values())
    assert all(r.model_change > 1e-2 for r in rows if r.change == "linear")  # not a symmetry with norms


def _mean_ranks(x):
    """Ranks 0 … n−1 of ``x``, tied values sharing the mean of their ranks."""
    import numpy as np

    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - counts + (counts - 1) / 2)[inverse]


def test_each_row_is_the_largest_change_over_the_largest_score_and_the_rank_correlation():
    """``max_change = max |a − b| / max |a|`` and ``spearman`` (Pearson of mean ranks, numpy) over all
    pairs' scores ``a`` before and ``b`` after the change, of every kind, recomputed from the engine's scores of the
    change's two models; the ``unembed`` metric only where the model has an unembedding; the
    printed table puts each group's cells under its measures' names (right-aligned)."""
    import numpy as np

    from compscope.analysis.gauge import format_gauge
    from compscope.engine.composition import scores

    hw, names = _load("llama-gqa-bias"), ["frobenius", "overlap"]
    rows, _ = gauge_check(hw, ["gain_rescale", "linear"], kinds="KV", measures=names, metrics=("identity", "unembed"),
                          progress=False)
    want = {(c, m) for c in ("gain_rescale", "linear") for m in ("identity", "unembed")}
    assert {(r.change, r.metric) for r in rows} == want
    for r in rows:
        c = gain_rescale(hw, seed=0) if r.change == "gain_rescale" else linear(hw, seed=0)
        a, b = (scores(x, "KV", [r.measure], r.metric, pairs="all", precision="float64", ridge=0.0, progress=False)
                for x in (c.base, c.hw))
        a, b = (torch.cat([s.dense(r.measure, k).flatten() for k in "KV"]).double() for s in (a, b))
        ok = torch.isfinite(a) & torch.isfinite(b)
        a, b = a[ok].numpy(), b[ok].numpy()
        assert r.max_change == pytest.approx(abs(a - b).max() / abs(a).max(), rel=1e-9)
        assert r.spearman == pytest.approx(np.corrcoef(_mean_ranks(a), _mean_ranks(b))[0, 1], rel=1e-9)
    bert_rows, _ = gauge_check(_load("bert"), ["permutation"], kinds="K", measures=names,
                               metrics=("identity", "unembed"), progress=False)
    assert {r.metric for r in bert_rows} == {"identity"}  # an encoder: no W_U to build the unembed metric from
    lines = format_gauge("llama", rows, [], 0).splitlines()
    head = lines[3]
    ends = [head.index(m) + len(m) for m in names]
    for line in lines[4:]:
        change, metric = line[:13].strip(), line[35:44].strip()  # "change weights model metric", weights "as loaded"
        group = {r.measure: r for r in rows if (r.change, r.metric) == (change, metric)}
        for m, end in zip(names, ends):
            cell = line[:end].split()[-1]
            want = "=" if group[m].max_change <= KEPT else f"{group[m].spearman:.3f}"
            assert line[end - 1] != " " and line[end:end + 1] in ("", " ") and cell == want, (line, m)


def test_without_norms_a_linear_map_is_a_symmetry():
    rows, notes = gauge_check("induction-2l", ["linear"], kinds="K", progress=False)
    assert rows and all(r.symmetry and r.model_change < SAME / 5 for r in rows)
    assert not any(_kept(rows, "linear", "identity").values()) and all(_kept(rows, "linear", "embed").values())


def test_cli_gauge(capsys):
    from compscope.cli.main import main

    assert main(["gauge", "--kinds", "K", "--change", "permutation", "--change", "linear"]) == 0
    out = capsys.readouterr().out
    assert "permutation" in out and "linear" in out and out.count("\n") >= 7
    with pytest.raises(SystemExit) as e:  # argparse: an unknown change is a usage error
        main(["gauge", "--change", "nope"])
    assert e.value.code == 2


def test_cli_gauge_writes_every_row_to_the_table_named(capsys, tmp_path):
    """``gauge --out``: one row per change, metric and measure, the fields of ``gauge_check``'s rows for the same
    options (read back from parquet); a name other than .csv or .parquet is refused before the work."""
    import dataclasses

    from compscope.cli.main import main

    pd = pytest.importorskip("pandas")
    out = tmp_path / "gauge.parquet"
    changes = ["--change", "permutation", "--change", "gain_rescale"]
    assert main(["gauge", "--kinds", "K", *changes, "--out", str(out)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote {out}\n")
    rows, _ = gauge_check("induction-2l", ["permutation", "gain_rescale"], kinds="K", progress=False)
    got = pd.read_parquet(out).to_dict("records")
    assert got and len(got) == len(rows) and list(got[0]) == [f.name for f in dataclasses.fields(rows[0])]
    for a, b in zip(got, map(dataclasses.asdict, rows)):
        assert {k: a[k] for k in ("change", "weights", "symmetry", "metric", "measure")} == \
            {k: b[k] for k in ("change", "weights", "symmetry", "metric", "measure")}
        for k in ("model_change", "max_change", "spearman"):
            assert a[k] == pytest.approx(b[k], rel=1e-9, abs=1e-15, nan_ok=True), (a, k)
    assert main(["gauge", "--out", str(tmp_path / "g.txt")]) == 2
    err = capsys.readouterr()
    assert "--out" in err.err and ".csv or .parquet" in err.err and err.out == ""


def test_only_metrics_of_each_models_own_weights_are_taken():
    """A metric estimated on data, or a Metric object made for the unchanged model, cannot follow a
    change: refused by name before any scoring (a Metric object once failed hashing)."""
    import re

    from compscope.core.metrics import get_metric
    from compscope.errors import OptionError

    hw = compscope.load("induction-2l")
    for metrics, named in ((["activations"], "activations"), ([get_metric("embed", hw)], "a Metric (embed)"), ([], "(none)")):
        with pytest.raises(OptionError, match=re.escape(f"metrics {named}: a gauge check")):
            gauge_check(hw, ("permutation",), metrics=metrics, progress=False)
    rows, _ = gauge_check(hw, ("permutation",), kinds="K", measures=["frobenius"], metrics="embed", progress=False)
    assert [r.metric for r in rows] == ["embed"]
