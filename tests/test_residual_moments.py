"""The activations metric from data (compscope.data.residual_moments): the moments by hand, and the
GL(d) invariance it buys, on a toy model and the same model in another residual basis."""

import importlib.util

import pytest
import torch

import compscope

from compscope.cli.main import main
from compscope.api import scores
from compscope.errors import OptionError
from compscope.core.metrics import activations
from compscope.data.residual_moments import residual_second_moments, toy_activation_metric
from compscope.toy import repeated_random
from compscope.toy.model import ToyConfig, ToyTransformer

ALL = ["frobenius", "tight", "overlap", "shared_dims", "bandwidth", "spectral"]


def toy(norm="none", seed=0):
    cfg = ToyConfig(n_layers=3, n_heads=2, d_model=8, d_head=3, d_vocab=11, n_ctx=6, norm=norm)
    return ToyTransformer(cfg, seed=seed).double()


def test_layer_zero_moment_is_that_of_token_plus_position_embeddings():
    m = toy()
    t = repeated_random(5, 3, 11, seed=1)
    x = m.W_E[t] + m.W_pos[None, : t.shape[1]]  # (batch, pos, d)
    want = torch.einsum("bpi,bpj->ij", x, x) / x.shape[0] / x.shape[1]
    torch.testing.assert_close(residual_second_moments(m, t)[0], want, rtol=1e-12, atol=1e-12)
    # centred: the mean of the 30 rows taken out first, the covariance with divisor n (not n - 1)
    xc = x.reshape(-1, 8) - x.reshape(-1, 8).mean(0)
    torch.testing.assert_close(residual_second_moments(m, t, centred=True)[0], xc.T @ xc / 30, rtol=1e-12, atol=1e-12)


def test_heads_read_the_normed_residual():
    m = toy(norm="rmsnorm")
    m.blocks[1].ln1.w.data.uniform_(0.5, 2.0)
    t = repeated_random(4, 3, 11, seed=2)
    cache = {}
    m(t, cache=cache)
    r = cache["resid_pre.1"]
    x = r / r.pow(2).mean(-1, keepdim=True).add(m.cfg.norm_eps).sqrt() * m.blocks[1].ln1.w
    x = x.reshape(-1, 8)
    torch.testing.assert_close(residual_second_moments(m, t)[1], x.T @ x / x.shape[0], rtol=1e-12, atol=1e-12)


def _in_another_basis(m: ToyTransformer, T: torch.Tensor) -> ToyTransformer:
    """The same model with residual x -> T x: every reader W -> W T^-1, writer W_O -> T W_O,
    embeddings -> T e (rows: e T^T), unembedding -> W_U T^-1."""
    out = ToyTransformer(m.cfg, seed=0).double()
    Ti = torch.linalg.inv(T)
    out.W_E.data = m.W_E.data @ T.T
    out.W_pos.data = m.W_pos.data @ T.T
    out.W_U.data = m.W_U.data @ Ti
    for b, b2 in zip(m.blocks, out.blocks):
        for name in ("W_Q", "W_K", "W_V"):
            getattr(b2, name).data = getattr(b, name).data @ Ti
        b2.W_O.data = T @ b.W_O.data
    return out


@pytest.mark.parametrize("centred", [False, True])
def test_scores_under_the_data_metric_do_not_see_a_change_of_residual_basis(centred):
    """Same logits, different basis: every measure is unchanged under the activations (and the
    covariance) metric estimated from each model's own residuals, and changes under the identity
    metric."""
    m = toy(seed=3)
    g = torch.Generator().manual_seed(4)
    T = torch.randn(8, 8, generator=g, dtype=torch.float64) + 3 * torch.eye(8, dtype=torch.float64)
    m2 = _in_another_basis(m, T)
    t = repeated_random(40, 3, 11, seed=5)
    torch.testing.assert_close(m(t), m2(t), rtol=1e-9, atol=1e-9)
    hw, hw2 = m.head_weights(), m2.head_weights()
    G, G2 = residual_second_moments(m, t, centred), residual_second_moments(m2, t, centred)
    a = scores(hw, "QKV", ALL, activations(G, ridge=0.0), pairs="all", precision="float64", progress=False)
    b = scores(hw2, "QKV", ALL, activations(G2, ridge=0.0), pairs="all", precision="float64", progress=False)
    for key, v in a.values.items():
        torch.testing.assert_close(b.values[key], v, rtol=1e-4, atol=1e-5, equal_nan=True)
    raw, raw2 = (scores(h, "K", ["frobenius"], progress=False).dense("frobenius", "K") for h in (hw, hw2))
    assert (raw - raw2).nan_to_num().abs().max() > 1e-2


def test_toy_metric_by_name_and_errors():
    """By name, shrunk by Ledoit-Wolf by default as the library's metrics are: equal to the metric
    ``get_metric`` makes with those data."""
    from compscope.core.metrics import get_metric
    from compscope.data.residual_moments import MetricData

    met = toy_activation_metric("induction-2l", sequences=10, half=8)
    assert met.name == "activations" and set(met.sqrt) == {0, 1}
    hw = compscope.load("induction-2l")
    for shrinkage in ("ledoit-wolf", "none"):
        want = get_metric("activations", hw, model="induction-2l",
                          data=MetricData(sequences=10, length=16, shrinkage=shrinkage))
        got = toy_activation_metric("induction-2l", sequences=10, half=8, shrinkage=shrinkage)
        for layer in want.sqrt:
            torch.testing.assert_close(got.sqrt[layer], want.sqrt[layer])
            # the default is the shrunk one, and shrinking changes it
            assert torch.allclose(met.sqrt[layer], want.sqrt[layer]) == (shrinkage == "ledoit-wolf")
    with pytest.raises(OptionError, match="shrinkage='lw'"):
        toy_activation_metric("induction-2l", sequences=10, half=8, shrinkage="lw")
    with pytest.raises(OptionError, match="toy models only"):
        toy_activation_metric("smollm2")
    for bad, got in ((torch.zeros(0, 3, dtype=torch.long), r"shape \(0, 3\)"), (torch.zeros(3, 0, dtype=torch.long),
                     r"shape \(3, 0\)"), (torch.zeros(4, dtype=torch.long), r"shape \(4,\)"), ([[1, 2]], "a list")):
        with pytest.raises(OptionError, match=r"tokens must be a non-empty \(batch, pos\) tensor, got " + got):
            residual_second_moments(toy(), bad)


def test_cli_scores_with_the_data_metric(capsys, tmp_path):
    assert main(["scores", "--metric", "activations", "--kinds", "K", "--top", "1"]) == 0
    assert "metric activations" in capsys.readouterr().out
    import compscope

    native = tmp_path / "native"
    compscope.loading.formats.native.save(compscope.load("induction-2l"), native)
    assert main(["scores", str(native), "--metric", "activations"]) == 2  # weights alone do not run
    assert "native: a compscope model folder holds the attention heads alone, not a model that runs" in \
        capsys.readouterr().err
    folder = tmp_path / "no-config"  # a folder transformers cannot read: its own words, named
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"")
    from compscope.data.runner.hf import from_files

    has_transformers = importlib.util.find_spec("transformers") is not None
    with pytest.raises(compscope.CompscopeError, match="no-config: " + (
            "transformers could not load the model to run it" if has_transformers else
            "running this model on data needs transformers")):
        from_files(folder, compscope.load("induction-2l"), progress=False)


def test_second_moments_of_a_transformers_model_equal_what_its_attention_reads():
    """A tiny random Llama: G_l from the runner equals E[x xᵀ] of the input HF's own self_attn
    receives (after input_layernorm, gain included), by a hook on that module; the covariance of
    the same tokens is taken from the same pass (the model runs once per batch, not twice)."""
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build, random_ids

    import compscope
    from compscope.data.residual_moments import data_activation_metric, runner_second_moments
    from compscope.data.runner import runner_for

    model = build(BY_ID["llama-gqa-bias"])
    runner = runner_for(model, compscope.load(model))
    ids = random_ids(batch=5)
    seen = {}
    hooks = [b.self_attn.register_forward_pre_hook(
        lambda m, a, k, i=i: seen.__setitem__(i, k["hidden_states"].detach()), with_kwargs=True)
        for i, b in enumerate(model.model.layers)]
    with torch.no_grad():
        model(input_ids=ids)
    for h in hooks:
        h.remove()
    traced = []
    trace = runner.trace
    runner.trace = lambda tokens: traced.append(len(tokens)) or trace(tokens)
    got = runner_second_moments(runner, ids, batch_size=2)
    cov = runner_second_moments(runner, ids, batch_size=2, centred=True)
    assert traced == [2, 2, 1]
    for layer, x in seen.items():
        x = x.reshape(-1, x.shape[-1]).double()
        torch.testing.assert_close(got[layer], x.T @ x / x.shape[0], rtol=1e-5, atol=1e-7)
        xc = x - x.mean(0)
        torch.testing.assert_close(cov[layer], xc.T @ xc / x.shape[0], rtol=1e-5, atol=1e-7)
    met = data_activation_metric(runner, sequences=4, seq_len=8)  # no tokenizer: repeated random sequences
    assert met.name == "activations" and set(met.sqrt) == set(range(runner.hw.n_layers))
    met = data_activation_metric(runner, sequences=4, seq_len=8, centred=True)
    assert met.name == "covariance" and set(met.sqrt) == set(range(runner.hw.n_layers))
    assert traced == [2, 2, 1, 4]  # other tokens: one more pass, shared by both metrics
    # the metric maker shrinks by Ledoit-Wolf by default, as MetricData() does; 'none' is the sample moment
    from compscope.data.residual_moments import metric_tokens

    tokens = metric_tokens(runner, 4, 8, 12346)
    for shrinkage in ("ledoit-wolf", "none"):
        want = activations(runner_second_moments(runner, tokens, centred=True, shrinkage=shrinkage), name="covariance")
        got = data_activation_metric(runner, sequences=4, seq_len=8, centred=True,
                                     **({} if shrinkage == "ledoit-wolf" else {"shrinkage": shrinkage}))
        for layer in want.sqrt:
            torch.testing.assert_close(got.sqrt[layer], want.sqrt[layer])
    shrunk, plain = (data_activation_metric(runner, sequences=4, seq_len=8, shrinkage=s) for s in ("ledoit-wolf", "none"))
    assert max(float((shrunk.sqrt[l] - plain.sqrt[l]).abs().max()) for l in plain.sqrt) > 1e-6
    assert traced == [2, 2, 1, 4]  # every estimate from the same sums
    with pytest.raises(OptionError, match="shrinkage='lw'"):
        data_activation_metric(runner, sequences=4, seq_len=8, shrinkage="lw")
    with pytest.raises(OptionError, match="shrinkage='sample'"):
        runner_second_moments(runner, tokens, shrinkage="sample")


def test_moments_and_samples_on_a_runner_refuse_tokens_that_are_not_a_batch_of_ids():
    """``runner_second_moments`` on no sequence gave NaN moments, ``residual_samples`` failed inside torch: both
    refuse empty tokens, a list and a 1-D tensor by name, the samples also a single position (nothing after it)."""
    from compscope.data.residual_moments import residual_samples, runner_second_moments
    from compscope.data.runner import runner_for

    runner = runner_for("induction-2l", device="cpu", progress=False)
    ok = torch.zeros(3, 6, dtype=torch.long)
    for bad, said in ((ok[:0], r"shape \(0, 6\)"), (ok[:, :0], r"shape \(3, 0\)"), (ok[0], r"shape \(6,\)"),
                      (ok.tolist(), "a list")):
        for f in (runner_second_moments, residual_samples):
            with pytest.raises(OptionError, match=r"tokens must be a non-empty \(batch, seq\) tensor, got " + said):
                f(runner, bad)
    with pytest.raises(OptionError, match=r"residual samples need \(batch, seq\) tokens with seq >= 2, got shape"):
        residual_samples(runner, ok[:, :1])
    assert runner_second_moments(runner, ok[:, :1])[0].isfinite().all()  # one position is a moment all the same


def test_residual_samples_are_the_normed_residual_after_the_first_position():
    """Every sample is a row of ``ln1(resid_pre)`` (computed by hand, as above) at a position after
    the first; with ``n`` at least the number of such positions the samples are all of them; a
    smaller ``n`` draws a seeded subset; the rotary content of ``head_circuits`` takes them."""
    from compscope.data.residual_moments import residual_samples
    from compscope.data.runner import ToyRunner

    m = ToyTransformer(ToyConfig(n_layers=2, n_heads=2, d_model=8, d_head=4, d_vocab=11, n_ctx=6, norm="rmsnorm",
                                 positions="rotary"), seed=4)
    m.blocks[1].ln1.w.data.uniform_(0.5, 2.0)
    t = repeated_random(5, 3, 11, seed=2)
    cache = {}
    m(t, cache=cache)
    runner = ToyRunner(m, m.head_weights())
    every = residual_samples(runner, t, n=10_000, batch_size=2, progress=False)
    for layer in range(2):
        r = cache[f"resid_pre.{layer}"][:, 1:]
        x = (r / r.pow(2).mean(-1, keepdim=True).add(m.cfg.norm_eps).sqrt() * m.blocks[layer].ln1.w).reshape(-1, 8)
        got = every[layer]
        assert got.shape == (5 * 5, 8)
        order = lambda a: a[torch.argsort(a[:, 0])]  # noqa: E731  (the same rows, whatever their order)
        torch.testing.assert_close(order(got), order(x).float(), rtol=1e-5, atol=1e-6)
    few = residual_samples(runner, t, n=7, seed=3, progress=False)
    again = residual_samples(runner, t, n=7, seed=3, progress=False)
    assert few[0].shape == (7, 8) and torch.equal(few[1], again[1])
    assert all(bool(torch.isclose(every[1], row, rtol=1e-5, atol=1e-6).all(-1).any()) for row in few[1])
    # two positions, one after the first: every sequence's (more sequences than positions, batched by two)
    two = residual_samples(runner, t[:, :2], n=10_000, batch_size=2, progress=False)
    for layer in range(2):
        assert two[layer].shape == (5, 8) and all(bool(torch.isclose(every[layer], row, rtol=1e-5, atol=1e-6)
                                                      .all(-1).any()) for row in two[layer])
    with pytest.raises(OptionError, match="seq >= 2"):
        residual_samples(runner, t[:, :1])
    from compscope.analysis.circuits import head_circuits

    c = head_circuits(runner.hw, content=every)
    assert c.content == "activations" and c.previous.shape == (2, 2) and bool(((c.previous > 0) & (c.previous < 1)).all())


def test_activations_metric_without_a_tokenizer_fits_learned_positions_and_the_bos():
    """No tokenizer: the metric reads repeated random sequences ``[bos] t t`` that fit the learned
    context (32 positions with a BOS: |t| = 15, 31 tokens); a ``bos_token_id`` outside the
    vocabulary (GPT-2's 50256 in a 61-token config) is no token the model takes, so none is used."""
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    import compscope
    from compscope.data.residual_moments import data_activation_metric, metric_tokens, tokens_data
    from compscope.data.runner import runner_for

    for bos, half in ((0, 15), (None, 16)):
        model = build(BY_ID["gpt2"], **({"bos_token_id": bos} if bos is not None else {}))
        runner = runner_for(model, compscope.load(model))
        assert runner.bos == bos and runner.n_ctx == 32
        t = metric_tokens(runner, 4, 128, 0)
        body = t[:, 1:] if bos is not None else t
        assert t.shape == (4, 2 * half + (bos is not None)) and torch.equal(body[:, :half], body[:, half:])
        assert f"|t| = {half}" in tokens_data(runner, 4, 128, 0)
        met = data_activation_metric(runner, sequences=4)
        assert set(met.sqrt) == {0, 1}


@pytest.mark.parametrize("variant", ["gpt2", "gemma3-text"])
def test_a_folder_without_tokenizer_files_has_no_tokenizer(tmp_path, variant):
    """For a folder without tokenizer files transformers builds a tokenizer of special tokens
    alone (GPT-2's encodes any text to nothing, Gemma's to ``<unk>``); the runner has no
    tokenizer then, and the activations metric runs on repeated random sequences instead of
    failing for want of text."""
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    from compscope.data.residual_moments import data_activation_metric
    from compscope.data.runner import runner_for

    build(BY_ID[variant], bos_token_id=0).save_pretrained(tmp_path)
    runner = runner_for(tmp_path, progress=False)
    assert runner.tokenizer is None
    assert set(data_activation_metric(runner, sequences=4).sqrt) == set(range(runner.hw.n_layers))


@pytest.mark.parametrize("centred", [True, False])
@pytest.mark.parametrize("own", [False, True])
def test_the_metrics_by_name_are_the_moments_of_the_held_out_repeats(own, centred):
    """``metric='covariance'`` (``'activations'``, and their ``-own`` variants) on the default model:
    every score equals the one under ``activations(G)`` (with ``own_reads``) with ``G`` the covariance
    (the second moment) computed here by hand (ln1 of the cached residual, centred or not) on the same
    held-out sequences; and it differs from the other moment's, and the ``-own`` variant from the
    other. Weights alone are refused with a one-line error naming the metric."""
    import dataclasses

    import compscope
    from compscope.data.residual_moments import METRIC_SEED, TOY_SEQUENCES
    from compscope.loading.builtin import find_toy
    from compscope.toy.storage import held_out_repeats, load_toy

    model, _ = load_toy(find_toy("induction-2l"))
    tokens = held_out_repeats(model, TOY_SEQUENCES, 32, METRIC_SEED)
    cache = {}
    with torch.no_grad():
        model(tokens, cache=cache)
    G = {}
    for layer, blk in enumerate(model.blocks):
        x = cache[f"resid_pre.{layer}"]
        x = (x if blk.ln1 is None else blk.ln1(x)).reshape(-1, x.shape[-1]).double()
        x = x - x.mean(0) if centred else x
        G[layer] = x.T @ x / x.shape[0]
    name = ("covariance" if centred else "activations") + ("-own" if own else "")
    want = scores("induction-2l", "QK", ALL, dataclasses.replace(activations(G), own_reads=own), pairs="all", progress=False)
    sample = compscope.MetricData(shrinkage="none")  # the moment itself (the default shrinks it: test_metric_data)
    got = scores("induction-2l", "QK", ALL, name, pairs="all", progress=False, metric_data=sample)
    assert set(got.to_pandas().metric) == {name}
    for key, v in want.values.items():
        torch.testing.assert_close(got.values[key], v, rtol=1e-4, atol=1e-5, equal_nan=True)
    flip = {"covariance": "activations", "activations": "covariance"}
    for other in (name.replace(name.split("-")[0], flip[name.split("-")[0]]), name[:-4] if own else name + "-own"):
        second = scores("induction-2l", "K", ["frobenius"], other, progress=False, metric_data=sample).dense("frobenius", "K")
        assert (second - got.dense("frobenius", "K")).nan_to_num().abs().max() > 1e-3, other
    for device in ({}, {"device": "cpu"}):  # a device given does not make weights a model to run
        with pytest.raises(OptionError, match=f"metric '{name}' is estimated on data"):
            scores(compscope.load("induction-2l"), "K", ["frobenius"], name, progress=False, **device)


def test_the_kept_sums_serve_weights_whose_heads_read_the_same():
    """``ResidualSums.serves`` (via ``same_reads``): weights whose heads read the residual through the
    same input norm (QK-norm linearised, a copy on the same device) reuse the sums; folded gains, which
    change what the heads read, do not, nor a first layer that reads the residual without the norm; a model
    without a pre-norm reads the residual itself."""
    pytest.importorskip("transformers")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from hf_tiny import BY_ID, build

    from compscope.core.attention import same_reads
    from compscope.core.processing import fold_norm, linearise_qk_norm

    hw = compscope.load(build(BY_ID["gemma3-text"]))
    copy = hw.replace(attn_norm=type(hw.attn_norm)(hw.attn_norm.kind, hw.attn_norm.weight.clone(), None,
                                                   hw.attn_norm.eps, hw.attn_norm.offset))
    assert same_reads(hw, hw) and same_reads(hw, linearise_qk_norm(hw)) and same_reads(hw, copy)
    assert not same_reads(hw, fold_norm(hw))
    moved = hw.replace(attn_norm=type(hw.attn_norm)(hw.attn_norm.kind, hw.attn_norm.weight + 1e-3, None,
                                                    hw.attn_norm.eps, hw.attn_norm.offset))
    assert not same_reads(hw, moved)
    skips = hw.replace(first_layer_unnormed=True)  # the same norm, but layer 0 reads the residual without it
    assert not same_reads(hw, skips) and not same_reads(skips, hw) and same_reads(skips, skips.replace(W_Q=skips.W_Q))
    bert = compscope.load(build(BY_ID["bert"]))  # post-LN: the heads read the residual itself
    assert same_reads(bert, bert.replace(W_Q=bert.W_Q * 2))
    assert not same_reads(hw, bert)


def test_metric_sequences_without_a_tokenizer_hold_no_special_token():
    """A model without a tokenizer estimates its metrics on repeated random sequences that, as the verdict's, hold
    none of its end, padding or mask tokens (RoBERTa's pad token would hold its positions back); with the avoided
    ids a large share of a small vocabulary, they would be drawn otherwise."""
    from hf_tiny import BY_ID, build

    from compscope.data.residual_moments import metric_tokens
    from compscope.data.runner import runner_for

    model = build(BY_ID["roberta-offset-positions"])
    model.config.eos_token_id, model.config.pad_token_id = 3, 1
    runner = runner_for(model, progress=False)
    assert runner.tokenizer is None and {1, 3} <= set(runner.special_ids())
    tokens = metric_tokens(runner, 16, 30, 12346)
    assert tokens.shape == (16, 30)
    assert not torch.isin(tokens, torch.tensor(runner.special_ids())).any()



@pytest.mark.parametrize("shown", [True, False])
def test_each_pass_over_data_counts_sequences_on_a_bar(bars, shown):
    """The moments' pass shows a bar where the runner does (``runner_for``'s ``progress``, on by
    default); the samples' passes where their own ``progress`` says, on by default. Each counts the
    5 sequences (9 tokens each, two at a time) to its total."""
    from compscope.data.residual_moments import SampleData, content_samples, residual_samples, runner_second_moments
    from compscope.data.runner import runner_for

    runner = runner_for("induction-2l", **({} if shown else {"progress": False}))
    t = repeated_random(5, 4, runner.hw.n_vocab, seed=1)
    assert t.shape == (5, 8)
    del bars[:]  # (only the passes' own)
    runner_second_moments(runner, t, batch_size=2)
    residual_samples(runner, t, n=6, batch_size=2, **({} if shown else {"progress": False}))
    content_samples(runner.hw, runner, SampleData(sequences=5, length=8, positions=6),
                    **({} if shown else {"progress": False}))
    assert [(b.desc, b.total, b.n, b.enabled) for b in bars] == [
        ("residual moments", 5, 5, shown), ("residual samples", 5, 5, shown), ("residual samples", 5, 5, shown)]


def test_a_toy_folders_folded_heads_read_the_norm_without_its_gain(tmp_path):
    """The metric by name for a toy folder: its unprocessed heads read ``ln1(x)`` with the gain, its heads with the
    gains folded read the norm's output without it; each ``G`` is the moment of that, computed here by hand from the
    toy's cache on the same held-out sequences."""
    from compscope.core.metrics import get_metric
    from compscope.data.residual_moments import METRIC_SEED, MetricData
    from compscope.toy.storage import held_out_repeats, save_toy

    m = ToyTransformer(ToyConfig(n_layers=2, n_heads=2, d_model=8, d_head=4, d_vocab=11, n_ctx=8, norm="rmsnorm"),
                       seed=3)
    for blk in m.blocks:
        blk.ln1.w.data.uniform_(0.5, 2.0)
    folder = save_toy(m, tmp_path / "normed")
    data = MetricData(sequences=6, length=8, shrinkage="none")
    cache = {}
    with torch.no_grad():
        m(held_out_repeats(m, 6, 4, METRIC_SEED), cache=cache)
    for folded in (False, True):
        hw = compscope.load(folder, fold_norm=folded)
        got = get_metric("activations", hw, model=str(folder), data=data)
        for layer, blk in enumerate(m.blocks):
            r = cache[f"resid_pre.{layer}"].double()
            x = r / r.pow(2).mean(-1, keepdim=True).add(m.cfg.norm_eps).sqrt()
            x = (x if folded else x * blk.ln1.w.double()).reshape(-1, 8)
            want = activations({layer: x.T @ x / x.shape[0]})
            torch.testing.assert_close(got.sqrt[layer], want.sqrt[layer], rtol=1e-4, atol=1e-6)


def test_repeats_in_place_of_text_take_half_the_length_after_a_bos_and_at_least_two_tokens():
    """A model without a tokenizer reads ``[bos] t t`` of at most ``seq_len`` tokens: ``|t| = (seq_len − 1) // 2``
    with a BOS token, ``seq_len // 2`` without, never below 2; a model's context caps ``seq_len`` first."""
    from types import SimpleNamespace

    from compscope.data.residual_moments import _repeat_half, _token_length

    for bos, seq_len, half in ((None, 9, 4), (1, 9, 4), (None, 8, 4), (1, 8, 3), (1, 4, 2), (None, 3, 2), (1, 2, 2)):
        assert _repeat_half(SimpleNamespace(bos=bos), seq_len) == half, (bos, seq_len)
    runner = SimpleNamespace(bos=1, n_ctx=7, tokenizer=None)
    assert _token_length(runner, 100) == 1 + 2 * 3  # cut to the 7 tokens the model takes
    assert _token_length(SimpleNamespace(bos=None, n_ctx=None, tokenizer="tok"), 100) == 100  # text: as asked
