"""What the metrics estimated on data are estimated on: ``MetricData`` (API) and
``--metric-sequences``, ``--metric-length``, ``--metric-seed``, ``--metric-shrinkage`` (command
line). The defaults are the metrics' own (each layer's ``G`` shrunk by Ledoit-Wolf); other data
reach the estimate, are recorded with the metric and the table, and options that would change
nothing are refused."""

from __future__ import annotations

import json
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import compscope
from compscope.cli.main import main
from compscope.core.metrics import activations, get_metric
from compscope.data.residual_moments import MetricData, residual_second_moments
from compscope.errors import OptionError
from compscope.loading.builtin import find_toy
from compscope.toy.storage import held_out_repeats, load_toy


def _by_hand(sequences: int, half: int, seed: int, centred: bool = False) -> dict[int, torch.Tensor]:
    """The toy's residual moments, from its own cache on its held-out repeats (not the runner)."""
    model, _ = load_toy(find_toy("induction-2l"))
    with torch.no_grad():
        return residual_second_moments(model, held_out_repeats(model, sequences, half, seed), centred=centred)


@pytest.mark.parametrize("name, centred", [("activations", False), ("covariance", True)])
def test_the_data_asked_for_are_the_data_estimated_on(name, centred):
    hw = compscope.load("induction-2l")
    got = get_metric(name, hw, model="induction-2l", data=MetricData(sequences=20, length=40, seed=3, shrinkage="none"))
    want = activations(_by_hand(20, 20, 3, centred), name=name)  # the sample moment, asked for
    for layer in want.sqrt:
        torch.testing.assert_close(got.sqrt[layer], want.sqrt[layer], rtol=1e-6, atol=1e-8)
    assert got.data == "20 held-out repeated random sequences [t, t], |t| = 20 (seed 3)"
    default = get_metric(name, hw, model="induction-2l")  # the defaults: 200 sequences, |t| = 32, seed 12346, shrunk
    x = _rows_by_hand(200, 32, 12346)[1]
    shrunk, rho = _ledoit_wolf_dense(x, centred)
    torch.testing.assert_close(default.sqrt[1], activations({0: shrunk, 1: shrunk}, name=name).sqrt[1],
                               rtol=1e-6, atol=1e-8)
    assert default.data.startswith("200 held-out repeated random sequences [t, t], |t| = 32 (seed 12346); "
                                   "Ledoit-Wolf shrinkage ")
    assert f"{rho:.2g}" in default.data  # layer 1's intensity among those said
    assert (got.sqrt[1] - default.sqrt[1]).abs().max() > 1e-3  # other data, another metric


def _text_runner():
    """The default toy's runner with a stand-in tokenizer (one id per character): a model with text."""
    from compscope.data.runner import runner_for

    runner = runner_for("induction-2l", progress=False)

    class Chars:
        def encode(self, text, add_special_tokens=False):
            return [ord(c) % runner.hw.n_vocab for c in text]

    runner.tokenizer = Chars()
    runner.__class__ = type("TextRunner", (compscope.data.runner.Runner,), {"_run": type(runner)._run})
    return runner


def test_a_model_with_a_tokenizer_is_estimated_on_that_much_text():
    """The runner's tokenizer (a stand-in: one id per character) reads the docstrings; the metric
    is the moment of the runner's residual on ``natural_text`` with the sizes and seed asked for."""
    from compscope.data.residual_moments import runner_second_moments
    from compscope.data.sequences import natural_text

    runner = _text_runner()
    got = get_metric("activations", runner.hw, model=runner, data=MetricData(sequences=5, length=16, seed=7))
    tokens = natural_text(runner.tokenizer, 5, 16, 7, runner.bos)
    want = activations(runner_second_moments(runner, tokens, shrinkage="ledoit-wolf"))
    torch.testing.assert_close(got.sqrt[1], want.sqrt[1])
    assert got.data.startswith("5 sequences of 16 tokens of standard-library docstrings (seed 7); Ledoit-Wolf shrinkage")


def test_a_corpus_of_ones_own_is_the_text_estimated_on(tmp_path):
    """``MetricData(corpus=FILE)``: the moment of the runner's residual on ``natural_text`` of that
    file (not the docstrings), recorded by the file's name and SHA-256 (hashlib here)."""
    import hashlib

    from compscope.data.residual_moments import runner_second_moments
    from compscope.data.sequences import natural_text

    body = "".join(f"line {i}: the cat sat on the mat, then {i * 7 % 13} dogs ran.\n" for i in range(60))
    path = tmp_path / "mine.txt"
    path.write_text(body)
    runner = _text_runner()
    got = get_metric("covariance", runner.hw, model=runner, data=MetricData(sequences=5, length=16, seed=7, corpus=path))
    tokens = natural_text(runner.tokenizer, 5, 16, 7, runner.bos, corpus=path)
    assert bytes(tokens[0].tolist()) in bytes(runner.tokenizer.encode(body))
    want = activations(runner_second_moments(runner, tokens, centred=True, shrinkage="ledoit-wolf"), name="covariance")
    torch.testing.assert_close(got.sqrt[1], want.sqrt[1])
    digest = hashlib.sha256(body.encode()).hexdigest()[:12]
    assert got.data.startswith(f"5 sequences of 16 tokens of mine.txt (sha256 {digest}) (seed 7); Ledoit-Wolf shrinkage")
    docstrings = get_metric("covariance", runner.hw, model=runner, data=MetricData(sequences=5, length=16, seed=7))
    assert (got.sqrt[1] - docstrings.sqrt[1]).abs().max() > 1e-3  # other text, another metric
    assert MetricData(corpus=path).cli_flags() == ["--metric-corpus", str(path)]
    assert MetricData(corpus=path) == MetricData(corpus=str(path))  # kept as a string: compared, hashed, JSON


def test_a_corpus_is_refused_where_it_cannot_be_read_or_used(tmp_path, capsys):
    with pytest.raises(OptionError, match=f"metric data: corpus {tmp_path / 'none.txt'}: no such file"):
        MetricData(corpus=tmp_path / "none.txt")
    with pytest.raises(OptionError, match="metric data: corpus=3: expected the path of a UTF-8 text file"):
        MetricData(corpus=3)
    (tmp_path / "latin1.txt").write_bytes("na\xefve".encode("latin-1"))
    with pytest.raises(OptionError, match="metric data: corpus .*latin1.txt: not UTF-8 text"):
        MetricData(corpus=tmp_path / "latin1.txt")  # before any model is loaded
    text = tmp_path / "t.txt"
    text.write_text("some text " * 100)
    with pytest.raises(OptionError, match="induction-2l step 4000 is one of compscope's toy models, which have no tokenizer"):
        get_metric("covariance", compscope.load("induction-2l"), model="induction-2l", data=MetricData(corpus=text))
    assert main(["scores", "--metric", "covariance", "--metric-corpus", str(text), "--kinds", "K"]) == 2
    assert "which have no tokenizer" in capsys.readouterr().err
    assert main(["scores", "--metric", "identity", "--metric-corpus", str(text)]) == 2
    assert "--metric-corpus: for the metrics estimated on data" in capsys.readouterr().err
    assert main(["scores", "--metric", "covariance", "--metric-corpus", str(tmp_path)]) == 2
    assert f"metric data: corpus {tmp_path}: not a file" in capsys.readouterr().err


@pytest.mark.parametrize("field, value", [("sequences", 0), ("length", 3), ("seed", -1), ("sequences", 2.5),
                                          ("length", True)])
def test_bad_metric_data_are_refused_by_name(field, value):
    with pytest.raises(OptionError, match=f"metric data: {field}="):
        MetricData(**{field: value})


def test_the_least_metric_data_are_taken_and_the_defaults_are_the_documented_ones():
    """Each field's least value is taken as given (1 sequence of 4 tokens, seed 0); left out, the documented
    defaults: for a toy model 200 held-out repeats of 64 tokens, for any other model 64 sequences of 128
    tokens, seed 12346 for both."""
    from compscope.data.runner import runner_for

    toy = runner_for("induction-2l")
    assert MetricData(sequences=1, length=4, seed=0).resolved(toy) == (1, 4, 0)
    assert MetricData().resolved(toy) == (200, 64, 12346)
    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    model = build(BY_ID["gpt2"])
    assert MetricData().resolved(runner_for(model, compscope.load(model))) == (64, 128, 12346)


def test_the_data_travel_with_the_table(tmp_path):
    t = compscope.scores("induction-2l", "K", ["frobenius"], "covariance", metric_data=MetricData(sequences=12), progress=False)
    assert t.info["metric_data"].startswith("12 held-out repeated random sequences [t, t], |t| = 32 (seed 12346); "
                                            "Ledoit-Wolf shrinkage")
    assert compscope.read_scores(t.save(tmp_path / "t.parquet")).info["metric_data"] == t.info["metric_data"]
    plain = compscope.scores("induction-2l", "K", ["frobenius"], "embed", progress=False)
    assert "metric_data" not in plain.info  # a metric from the weights has none (and is given none: refused, below)


def test_command_line(tmp_path, capsys):
    assert main(["scores", "--metric", "covariance", "--metric-sequences", "12", "--metric-seed", "5", "--kinds", "K",
                 "--measure", "frobenius", "--top", "1"]) == 0
    assert "estimated on 12 held-out repeated random sequences [t, t], |t| = 32 (seed 5)" in capsys.readouterr().out
    for argv in (["scores", "--metric-sequences", "12"], ["validate", "--metric", "identity", "--metric-seed", "1"],
                 ["pair", "0.0", "1.1", "--metric-length", "8"], ["intervene", "--metric", "embed", "--metric-sequences", "3"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "for the metrics estimated on data" in err, argv
        assert ("and --linearise-qk-norm text, and none is selected" in err) == (argv[0] != "intervene"), err
    with pytest.raises(SystemExit):
        main(["scores", "--metric", "activations", "--metric-length", "3"])
    assert "--metric-length: '3': expected an integer >= 4" in capsys.readouterr().err
    # a length given is kept or refused (the toy takes 64 tokens), as a |t| given is; the default is cut to fit
    assert main(["scores", "--metric", "activations", "--metric-length", "65", "--kinds", "K"]) == 2
    assert ("metric data: length=65: longer than the 64 tokens induction-2l step 4000 takes; give a length <= 64, "
            "or leave it out for the default (cut to fit)") in capsys.readouterr().err
    assert main(["scores", "--metric", "activations", "--metric-length", "64", "--metric-sequences", "4", "--kinds", "K",
                 "--measure", "frobenius", "--top", "1"]) == 0
    assert "estimated on 4 held-out repeated random sequences [t, t], |t| = 32 (seed 12346)" in capsys.readouterr().out
    assert main(["validate", "--metric", "covariance", "--metric-sequences", "12", "--metric-length", "20", "--kinds", "K",
                 "--sequences", "8", "--half", "8", "--intervention-sequences", "2", "--out", str(tmp_path / "v")]) == 0
    assert "note: metrics on data estimated on 12 held-out repeated random sequences" in capsys.readouterr().out
    run = json.loads((tmp_path / "v" / "run.json").read_text())
    assert run["activations_metric_data"].startswith("12 held-out repeated random sequences [t, t], |t| = 10 "
                                                     "(seed 12346); Ledoit-Wolf shrinkage")


def test_intervene_and_pair_take_the_data():
    from compscope.data.intervene import against_measures

    data = MetricData(sequences=12, length=20, seed=4, shrinkage="none")
    _, table, _ = against_measures("induction-2l", "K", metric="covariance", sequences=4, metric_data=data)
    assert table.info["metric_data"] == "12 held-out repeated random sequences [t, t], |t| = 10 (seed 4)"
    rep = compscope.compose_pair("induction-2l", (0, 0), (1, 1), "K", "covariance", metric_data=data)
    want = compscope.compose_pair("induction-2l", (0, 0), (1, 1), "K", activations(_by_hand(12, 10, 4, True), name="covariance"))
    assert rep.measures["frobenius"] == pytest.approx(want.measures["frobenius"], rel=1e-6)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """A short training run of the default preset with 2 checkpoints."""
    import dataclasses

    from compscope.toy import PRESETS, train

    p = PRESETS["induction-2l"]
    out = tmp_path_factory.mktemp("run") / "tiny"
    train(p.model, p.data, dataclasses.replace(p.train, steps=8, n_checkpoints=2, eval_sequences=4, batch_size=4), out,
          name="tiny", progress=False)
    return out


def test_track_estimates_each_checkpoint_on_the_data_asked_for(short_run):
    from compscope.analysis.tracking import list_checkpoints

    data = MetricData(sequences=12, length=20, seed=4)
    tr = compscope.track(short_run, "K", ["frobenius"], ["covariance"], metric_data=data, progress=False)
    for c, (table,) in zip(list_checkpoints(short_run), tr.tables):
        want = compscope.scores(c.path, "K", ["frobenius"], "covariance", metric_data=data, progress=False)
        torch.testing.assert_close(table.dense("frobenius", "K"), want.dense("frobenius", "K"), equal_nan=True)
        assert table.info["metric_data"].startswith("12 held-out repeated random sequences [t, t], |t| = 10 (seed 4); "
                                                    "Ledoit-Wolf shrinkage")
    # the table says, per checkpoint, what its G was estimated on and which weights it read
    df = compscope.track(short_run, "K", ["frobenius"], ["covariance", "identity"], metric_data=data,
                         progress=False).to_pandas()
    for i, c in enumerate(list_checkpoints(short_run)):
        rows = df[df.step == c.step]
        assert set(rows[rows.metric == "covariance"].metric_data) == {tr.tables[i][0].info["metric_data"]}
        assert rows[rows.metric == "identity"].metric_data.isna().all()
        assert set(rows.weights_hash) == {tr.hashes[i]}
    assert main(["track", str(short_run), "--metric", "identity", "--metric-seed", "4"]) == 2


def test_track_says_where_each_metrics_g_came_from(short_run, tmp_path, capsys):
    """``compscope track`` names a file metric by its name and says where each ``G`` came from (one
    estimated on data: the last checkpoint's); a metric from the weights leaves its rows'
    ``metric_data`` empty."""
    import numpy as np
    import pandas as pd

    d = compscope.load(short_run / "final").d_model
    np.save(tmp_path / "twice.npy", 2 * np.eye(d))
    assert main(["track", str(short_run), "--metric", str(tmp_path / "twice.npy"), "--metric", "covariance",
                 "--metric-sequences", "6", "--metric", "embed", "--quiet", "--out", str(tmp_path / "t.parquet")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("; kinds K; metrics twice, covariance, embed")
    assert out[1].startswith("metric twice, with G given as the file twice.npy (SHA-256 ")
    assert out[2].startswith("metric covariance, estimated on 6 held-out repeated random sequences")
    assert out[2].endswith("(the last checkpoint's G; each checkpoint has its own)") and "embed," not in out[3]
    df = pd.read_parquet(tmp_path / "t.parquet")
    assert set(df[df.metric == "twice"].metric_data) == {out[1].split(", with ", 1)[1]}
    assert df[df.metric == "embed"].metric_data.isna().all()


def test_a_sweep_task_carries_the_data_only_where_a_metric_reads_them(tmp_path, capsys):
    """The covariance task's options hold the data asked for, and how ``G`` is estimated (always:
    its default changed), and its rows are the scores under them; the identity task's options are
    those of a sweep without them (the same task, skipped on a rerun)."""
    out = tmp_path / "ds"
    assert main(["sweep", "induction-2l", "--metric", "covariance", "--metric", "identity", "--metric-sequences", "12",
                 "--kinds", "K", "--out", str(out), "--quiet"]) == 0
    from compscope.sweep import read_dataset

    df = read_dataset(out)
    opts = {m: json.loads(o) for m, o in df.groupby("metric").options.first().items()}
    assert opts["covariance"]["metric_data"] == {"sequences": 12, "shrinkage": "ledoit-wolf"}
    assert "metric_data" not in opts["identity"]
    words = df.groupby("metric").metric_data.unique()  # the data in words, where a metric reads them
    assert len(words["covariance"]) == 1 and words["covariance"][0].startswith(
        "12 held-out repeated random sequences [t, t], |t| = 32 (seed 12346); Ledoit-Wolf shrinkage")
    assert df[df.metric == "identity"].metric_data.isna().all()
    want = compscope.scores("induction-2l", "K", ["frobenius"], "covariance", metric_data=MetricData(sequences=12),
                            progress=False).to_pandas().set_index(["src_layer", "src_head", "dst_layer", "dst_head"]).value
    got = df[df.metric == "covariance"].set_index(["src_layer", "src_head", "dst_layer", "dst_head"]).value
    assert got.sort_index().to_numpy() == pytest.approx(want.sort_index().to_numpy(), rel=1e-6)
    capsys.readouterr()
    assert main(["sweep", "induction-2l", "--metric", "identity", "--kinds", "K", "--out", str(out), "--quiet"]) == 0
    assert "nothing to do (1 tasks already done)" in capsys.readouterr().out
    assert main(["sweep", "induction-2l", "--metric", "covariance", "--metric-sequences", "12", "--metric-shrinkage",
                 "none", "--kinds", "K", "--out", str(out), "--quiet"]) == 0  # the sample moment: another task
    assert "computed 1 tasks, skipped 0 already done" in capsys.readouterr().out
    df = read_dataset(out)
    opts = {json.dumps(json.loads(o)["metric_data"], sort_keys=True) for o in df[df.metric == "covariance"].options}
    assert opts == {'{"sequences": 12, "shrinkage": "ledoit-wolf"}', '{"sequences": 12, "shrinkage": "none"}'}
    assert main(["sweep", "induction-2l", "--metric", "identity", "--metric-seed", "1", "--out", str(out)]) == 2


def test_a_sweep_task_on_a_corpus_is_the_corpus_text_too(tmp_path, monkeypatch):
    """``sweep --metric-corpus FILE``: the tasks hold the file and the SHA-256 of its text, so that
    the same file edited makes other tasks (not ones already done); the metric from the weights'
    task holds neither."""
    import hashlib

    import compscope.sweep as sweeps

    made = []  # the tasks the command makes (none is run)
    monkeypatch.setattr(sweeps, "sweep", lambda tasks, *a, **k: made.append(tasks) or
                        type("R", (), {"done": 0, "failed": {}, "skipped": len(tasks)})())
    path = tmp_path / "mine.txt"
    for text in ("first text " * 50, "second text " * 50):
        path.write_text(text)
        assert main(["sweep", "induction-2l", "--metric", "covariance", "--metric", "identity", "--metric-corpus", str(path),
                     "--kinds", "K", "--out", str(tmp_path / "ds"), "--quiet"]) == 0
        on_data, plain = made[-1]
        assert on_data.options["metric_data"] == {"corpus": str(path), "shrinkage": "ledoit-wolf"}
        assert on_data.options["corpus_sha256"] == hashlib.sha256(text.encode()).hexdigest()[:12]
        assert "metric_data" not in plain.options and "corpus_sha256" not in plain.options
    assert made[0][0].key() != made[1][0].key() and made[0][1].key() == made[1][1].key()


def test_the_report_and_its_verdict_take_the_data():
    from compscope.report.collect import collect

    data = MetricData(sequences=12, seed=4)
    rep = collect("induction-2l", kinds="K", metrics=("identity", "covariance"), metric_data=data, progress=False,
                  detail_pairs=2)
    words = rep.options["metric_data"]["covariance"]
    assert set(rep.options["metric_data"]) == {"covariance"}
    assert words.startswith("12 held-out repeated random sequences [t, t], |t| = 32 (seed 4); Ledoit-Wolf shrinkage")
    assert f"metric covariance estimated on {words}" in rep.notes  # on the page and in the summary
    want = compscope.validate("induction-2l", kinds="K", metric_data=data, progress=False)
    got = {(r["measure"], r["metric"]): r["spearman"] for r in rep.verdict}
    assert got == pytest.approx({(r["measure"], r["metric"]): r["spearman"] for r in want.rows})
    assert main(["report", "--metric", "identity", "--data", "none", "--metric-length", "8", "--out", "unused"]) == 2


# ---------------------------------------------------------------- Ledoit-Wolf shrinkage of G
def _rows_by_hand(sequences: int, half: int, seed: int) -> dict[int, torch.Tensor]:
    """Every residual row the toy's heads read on its held-out repeats, from its own cache (float64)."""
    model, _ = load_toy(find_toy("induction-2l"))
    cache: dict = {}
    with torch.no_grad():
        model(held_out_repeats(model, sequences, half, seed), cache=cache)
        return {l: (cache[f"resid_pre.{l}"] if blk.ln1 is None else blk.ln1(cache[f"resid_pre.{l}"]))
                .reshape(-1, model.cfg.d_model).double() for l, blk in enumerate(model.blocks)}


def _ledoit_wolf_dense(x: torch.Tensor, centred: bool) -> tuple[torch.Tensor, float]:
    """Ledoit and Wolf (2004), term by term over the samples: ``S``, ``m = tr S / d``,
    ``δ² = |S − m I|² / d``, ``b̄² = Σ_k |y_k y_kᵀ − S|² / (n² d)``, ``ρ = min(b̄², δ²) / δ²``."""
    y = x - x.mean(0) if centred else x
    n, d = y.shape
    S = y.T @ y / n
    m = torch.trace(S) / d
    eye = torch.eye(d, dtype=S.dtype)
    delta2 = float(((S - m * eye) ** 2).sum()) / d
    beta2 = sum(float(((torch.outer(r, r) - S) ** 2).sum()) for r in y) / (n * n * d)
    rho = min(beta2, delta2) / delta2
    return (1 - rho) * S + rho * m * eye, rho


@pytest.mark.parametrize("centred", [False, True])
def test_ledoit_wolf_is_the_papers_estimate_of_the_toys_own_residual(centred):
    """The shrunk moments from the runner's running sums (the fourth moment of ``x − μ`` expanded in
    them) equal Ledoit and Wolf's estimate taken sample by sample from the toy's own cache, and
    scikit-learn's where it is installed."""
    from compscope.data.residual_moments import runner_second_moments
    from compscope.data.runner import runner_for

    runner = runner_for("induction-2l", progress=False, device="cpu")  # to 1e-6 against float64: the CPU's float32
    model = runner.model
    tokens = held_out_repeats(model, 12, 10, 5)
    got = runner_second_moments(runner, tokens, centred=centred, shrinkage="ledoit-wolf")
    plain = runner_second_moments(runner, tokens, centred=centred)
    rows = _rows_by_hand(12, 10, 5)
    for l, x in rows.items():
        want, rho = _ledoit_wolf_dense(x, centred)
        assert 0 < rho < 1
        torch.testing.assert_close(got[l], want, rtol=1e-6, atol=1e-9)
        assert float((got[l] - plain[l]).abs().max()) > 1e-6  # it did shrink
        sklearn = pytest.importorskip("sklearn.covariance")
        sk, sk_rho = sklearn.ledoit_wolf(x.numpy(), assume_centered=not centred)
        assert rho == pytest.approx(sk_rho, rel=1e-6)
        torch.testing.assert_close(got[l], torch.from_numpy(sk), rtol=1e-6, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(3, 40), d=st.integers(2, 6), shift=st.floats(-50, 50), seed=st.integers(0, 2**16))
def test_the_centred_fourth_moment_from_running_sums(n, d, shift, seed):
    """``Σ |x − μ|⁴`` from ``Σ |x|⁴``, ``Σ |x|² x``, ``Σ x xᵀ`` and ``Σ x``, whatever the mean (float64)."""
    from compscope.data.residual_moments import ResidualSums

    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) + shift
    sq = (x * x).sum(1)
    sums = ResidualSums(None, torch.zeros(1, 1), 1, {0: x.T @ x}, {0: x.sum(0)}, n, {0: (sq * sq).sum()}, {0: sq @ x})
    y = x - x.mean(0)
    want = float(((y * y).sum(1) ** 2).sum())
    assert float(sums.fourth(0, True)) == pytest.approx(want, rel=1e-7, abs=1e-9 * float((sq * sq).sum()))
    assert float(sums.fourth(0, False)) == pytest.approx(float((sq * sq).sum()), rel=1e-12)


def test_ledoit_wolf_leaves_a_multiple_of_the_identity_as_it_is():
    """Rows ``±√d·3 e_i`` (each basis vector both ways): the sample moment is ``9 I`` exactly, ``δ² = 0``, so the
    estimate is the sample moment with intensity 0, centred or not (the mean is 0)."""
    from compscope.data.residual_moments import ResidualSums

    d = 4
    x = torch.cat([3 * d**0.5 * torch.eye(d, dtype=torch.float64), -3 * d**0.5 * torch.eye(d, dtype=torch.float64)])
    sq = (x * x).sum(1)
    sums = ResidualSums(None, torch.zeros(1, 1), 1, {0: x.T @ x}, {0: x.sum(0)}, 2 * d, {0: (sq * sq).sum()},
                        {0: sq @ x})
    for centred in (False, True):
        shrunk, rho = sums.ledoit_wolf(0, centred)
        assert rho == 0.0 and torch.equal(shrunk, 9 * torch.eye(d, dtype=torch.float64))


def test_shrinkage_reaches_the_metric_the_table_and_the_command_line(capsys):
    from compscope.data.residual_moments import runner_second_moments
    from compscope.data.runner import runner_for

    data = MetricData(sequences=20, length=40, seed=3, shrinkage="ledoit-wolf")
    got = get_metric("covariance-own", compscope.load("induction-2l"), model="induction-2l", data=data)
    runner = runner_for("induction-2l", progress=False)
    moments = runner_second_moments(runner, held_out_repeats(runner.model, 20, 20, 3), batch_size=20, centred=True,
                                    shrinkage="ledoit-wolf")
    want = activations(moments, name="covariance")
    for layer in want.sqrt:
        torch.testing.assert_close(got.sqrt[layer], want.sqrt[layer], rtol=1e-6, atol=1e-8)
    assert got.own_reads and re.fullmatch(r"20 held-out repeated random sequences \[t, t\], \|t\| = 20 \(seed 3\); "
                                          r"Ledoit-Wolf shrinkage [0-9.e-]+(-[0-9.e-]+ per layer| in every layer)", got.data)
    # the intensities said are the lowest and highest of the layers': (1 - rho) S off the diagonal
    sample = runner_second_moments(runner, held_out_repeats(runner.model, 20, 20, 3), batch_size=20, centred=True)
    rho = [float(1 - moments[layer][0, 1] / sample[layer][0, 1]) for layer in sorted(sample)]
    assert f"{min(rho):.2g}" != f"{max(rho):.2g}" and got.data.endswith(
        f"; Ledoit-Wolf shrinkage {min(rho):.2g}-{max(rho):.2g} per layer")
    t = compscope.scores("induction-2l", "K", ["frobenius"], "covariance", progress=False,
                         metric_data=MetricData(shrinkage="ledoit-wolf"))
    assert "Ledoit-Wolf shrinkage" in t.info["metric_data"]
    assert MetricData(shrinkage="ledoit-wolf") == MetricData() and MetricData().shrinks  # the default, spelled out
    assert not MetricData(shrinkage="none").shrinks and MetricData(shrinkage="none").cli_flags() == [
        "--metric-shrinkage", "none"]
    with pytest.raises(OptionError, match="metric data: shrinkage='lw': expected one of ledoit-wolf, none"):
        MetricData(shrinkage="lw")
    assert main(["scores", "--metric", "covariance", "--metric-shrinkage", "ledoit-wolf", "--kinds", "K",
                 "--measure", "frobenius", "--top", "1"]) == 0
    assert "; Ledoit-Wolf shrinkage" in capsys.readouterr().out
    assert main(["scores", "--metric", "covariance", "--metric-shrinkage", "none", "--kinds", "K",
                 "--measure", "frobenius", "--top", "1"]) == 0
    out = capsys.readouterr().out  # the sample moment: no shrinkage said
    assert "estimated on 200 held-out repeated random sequences [t, t], |t| = 32 (seed 12346), processing" in out
    with pytest.raises(SystemExit):
        main(["scores", "--metric", "covariance", "--metric-shrinkage", "lw"])
    assert main(["scores", "--metric-shrinkage", "ledoit-wolf"]) == 2
    assert "for the metrics estimated on data" in capsys.readouterr().err


def test_which_metrics_are_estimated_on_data():
    """Names are (one or several, in any collection); a metric in hand was estimated already,
    whatever its name, and a Gram matrix of one's own is one metric, not rows of names."""
    from compscope.core.metrics import on_data

    own = compscope.metric_from_gram(torch.eye(4), name="activations")
    assert on_data("activations") == ["activations"]
    assert on_data(["embed", "covariance-own", "identity", "activations"]) == ["covariance-own", "activations"]
    assert on_data(("identity",)) == [] and on_data({"covariance"}) == ["covariance"]
    assert on_data(own) == [] and on_data([own, "embed"]) == []
    assert on_data(torch.eye(4)) == []


def test_data_nothing_would_read_are_refused_from_python_as_from_the_command_line(short_run, tmp_path):
    """``metric_data`` given where no metric is estimated on data (and nothing else reads its text)
    is named, as ``--metric-*`` is on the command line, not silently unused; a typo in the metric
    is named as a typo first."""
    from compscope.data.intervene import against_measures

    data = MetricData(sequences=8)
    unused = "metric_data: for the metrics estimated on data .* none is selected \\(metrics: "
    calls = [(lambda: compscope.scores("induction-2l", "K", metric="identity", metric_data=data), "identity\\)"),
             (lambda: compscope.scores("induction-2l", "K", metric=torch.eye(64), metric_data=data), "custom\\)"),
             (lambda: compscope.compose_pair("induction-2l", (0, 0), (1, 0), metric="embed", metric_data=data), "embed\\)"),
             (lambda: compscope.validate("induction-2l", metrics=("identity",), metric_data=data, progress=False),
              "identity\\)"),
             (lambda: against_measures("induction-2l", "K", metric="embed", metric_data=data), "embed\\)"),
             (lambda: compscope.track(short_run, "K", ["frobenius"], ["identity"], metric_data=data, progress=False),
              "identity\\)"),
             (lambda: compscope.write_report("induction-2l", tmp_path / "r", metrics=["identity"], data="none",
                                             metric_data=data), "identity\\)")]
    for call, names in calls:
        with pytest.raises(OptionError, match=unused + names):
            call()
    assert not (tmp_path / "r").exists()
    with pytest.raises(OptionError, match="unknown metric 'activatons'"):
        compscope.scores("induction-2l", "K", metric="activatons", metric_data=data)
    # read where a metric is estimated on data, or where a verdict may run (a toy's report, 'auto')
    compscope.scores("induction-2l", "K", ["frobenius"], metric="activations", metric_data=data, progress=False)
    from compscope.report.build import build

    with pytest.raises(OptionError, match="detail_pairs"):  # past the data check, to the next option
        build("induction-2l", tmp_path / "r", command="c", metrics=["identity"], data="auto", metric_data=data,
              detail_pairs=-1)


def test_a_metric_of_ones_own_named_like_one_on_data_reads_no_data():
    """A Gram matrix of one's own called ``activations`` is not estimated on data: a verdict with
    it records no data, and data given for it are refused as unread."""
    own = compscope.metric_from_gram(torch.eye(64), name="activations", ridge=0.0)
    small = dict(kinds="K", sequences=4, half=4, intervention_sequences=2, progress=False)
    v = compscope.validate("induction-2l", metrics=[own], **small)
    assert list(v.tables) == ["activations"] and v.options["activations_metric_data"] is None
    assert compscope.validate("induction-2l", **small).options["activations_metric_data"].startswith("200 held-out")
    with pytest.raises(OptionError, match="metric_data: .* none is selected \\(metrics: activations\\)"):
        compscope.validate("induction-2l", metrics=[own], metric_data=MetricData(sequences=8), **small)
