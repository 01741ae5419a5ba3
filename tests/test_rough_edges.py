"""Each rough edge a new user hit, now a clear one-line error (exit status 2) or a fix, tested."""

import math
import re

import pandas as pd
import pytest
import torch

import compscope
from compscope.cli.main import main


def _one_line_error(capsys, argv, *needles) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("compscope: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, err
    return err


def _must_not_run(*a, **k):
    raise AssertionError("the work started")


def test_scores_out_in_a_missing_folder_fails_before_the_work(capsys, monkeypatch):
    import compscope.engine.composition as engine

    monkeypatch.setattr(engine, "_scores", lambda *a, **k: pytest.fail("scored before the --out check"))
    _one_line_error(capsys, ["scores", "--out", "/no/such/dir/x.csv"], "/no/such/dir", "does not exist")
    _one_line_error(capsys, ["scores", "--out", "x.txt"], ".csv or .parquet")


def test_scores_out_without_pandas_says_what_to_install(capsys, monkeypatch, tmp_path):
    import compscope.cli.common as common

    monkeypatch.setattr(common, "_importable", lambda m: m != "pyarrow")
    _one_line_error(capsys, ["scores", "--out", str(tmp_path / "x.parquet")], "pip install pyarrow")
    assert not (tmp_path / "x.parquet").exists()


def test_tables_are_written_after_a_plain_install(capsys, tmp_path):
    """pandas and pyarrow are dependencies: the README's --out works after `make demo`."""
    for name in ("x.parquet", "x.csv"):
        assert main(["scores", "--kinds", "K", "--measure", "frobenius", "--out", str(tmp_path / name)]) == 0
        assert (tmp_path / name).stat().st_size > 0
    capsys.readouterr()


def test_train_out_that_is_a_file_or_in_a_missing_folder(capsys, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    _one_line_error(capsys, ["train", "--preset", "tiny", "--out", str(f)], "is a file")
    missing = tmp_path / "no" / "such" / "run"
    _one_line_error(capsys, ["train", "--preset", "tiny", "--out", str(missing)], "does not exist")
    assert not (tmp_path / "no").exists()  # nothing created on the way


def test_train_layers_out_of_range(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--out", "x", "--layers", "9"])
    assert e.value.code == 2
    assert "1 to 4 layers" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("run") / "run"
    assert main(["train", "--preset", "tiny", "--out", str(run), "--steps", "8", "--checkpoints", "3"]) == 0
    return run


@pytest.mark.parametrize("plot", [False, True])
def test_track_with_a_pair_that_is_not_in_the_model(capsys, tiny_run, tmp_path, plot, monkeypatch):
    """Refused before any checkpoint is scored (once it came after all of them)."""
    pytest.importorskip("matplotlib")
    from compscope.analysis import tracking

    monkeypatch.setattr(tracking, "scores", _must_not_run)
    argv = ["track", str(tiny_run), "--measure", "frobenius", "--metric", "identity", "--pair", "9.9-9.9"]
    out = tmp_path / "t.csv"
    argv += ["--out", str(out)] + (["--plot", str(tmp_path / "p.png")] if plot else [])
    _one_line_error(capsys, argv, "9.9-9.9", "not a pair of this model")
    assert not out.exists()


def test_track_pair_that_is_not_a_pair(capsys, tiny_run):
    _one_line_error(capsys, ["track", str(tiny_run), "--pair", "1.2"], "--pair '1.2'")


def test_x_route_measures_of_the_top_pairs_say_so(capsys, tmp_path):
    """bandwidth and spectral on the top N pairs only: the header says it, the table keeps it."""
    out = tmp_path / "bw.parquet"
    assert main(["scores", "--kinds", "K", "--measure", "bandwidth", "--pairs", "5", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "note: bandwidth covers the top 5 of 16 pairs per kind by frobenius (--pairs all for every pair)" in text
    back = compscope.read_scores(out)
    assert back.info["partial"] == {"bandwidth": (5, 16)}
    assert int(torch.isfinite(back.dense("bandwidth", "K")).sum()) == 5
    assert main(["scores", "--kinds", "K", "--measure", "bandwidth", "--pairs", "all"]) == 0
    assert "note:" not in capsys.readouterr().out
    # without bandwidth or spectral, --pairs would choose nothing: refused rather than ignored
    assert main(["scores", "--kinds", "K", "--measure", "tight", "--pairs", "5"]) == 2
    assert "--pairs 5: it chooses the pairs of the measures computed per pair" in capsys.readouterr().err
    assert main(["scores", "--kinds", "K", "--pairs", "5"]) == 2  # the default measures hold neither
    capsys.readouterr()
    assert main(["scores", "--kinds", "K", "--measure", "all", "--pairs", "5", "--top", "1"]) == 0


def test_offset_on_a_model_without_rotary(capsys):
    _one_line_error(capsys, ["scores", "--offset", "5"], "--offset 5", "not rotary")
    _one_line_error(capsys, ["pair", "0.0", "1.1", "--offset", "2"], "not rotary")
    _one_line_error(capsys, ["circuits", "--offset", "1"], "not rotary")


def test_pair_takes_the_activations_metric_like_scores(capsys):
    assert main(["pair", "0.0", "1.1", "--metric", "activations"]) == 0
    out = capsys.readouterr().out
    assert "metric activations" in out
    rep = compscope.compose_pair("induction-2l", (0, 0), (1, 1), "K", "activations")
    table = compscope.scores("induction-2l", "K", ["tight"], "activations", progress=False)
    assert rep.measures["tight"] == pytest.approx(float(table.dense("tight", "K")[0, 0, 1, 1]), rel=1e-5)


def test_activations_metric_needs_the_model_not_its_weights(capsys, tmp_path):
    """The metric on data from weights alone is refused by name; processed weights under it read the
    model as it is (``fold_value_bias`` moves ``b_V`` into ``b_O`` and changes no reading or writing
    matrix, so the scores are those of the unprocessed weights)."""
    hw = compscope.load("induction-2l")
    with pytest.raises(compscope.OptionError, match="pass the model itself"):
        compscope.scores(hw, "K", metric="activations", progress=False)
    tables = []
    for flags in ([], ["--fold-value-bias"]):
        out = tmp_path / f"t{len(flags)}.csv"
        assert main(["scores", "--metric", "activations", "--kinds", "K", "--measure", "frobenius", "--out", str(out), *flags]) == 0
        tables.append(pd.read_csv(out))
    assert list(tables[1]["processing"].unique()) == ["fold_value_bias"]
    assert (tables[0]["value"] - tables[1]["value"]).abs().max() <= 1e-9 and len(tables[0]) == len(tables[1]) > 0


def test_read_scores_errors_and_processing_round_trip(tmp_path):
    with pytest.raises(compscope.LoadError, match="no such file"):
        compscope.read_scores(tmp_path / "missing.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(compscope.LoadError, match="cannot be read"):
        compscope.read_scores(bad)
    t = compscope.scores("induction-2l", "K", ["frobenius"], progress=False)
    for name in ("t.csv", "t.parquet"):
        back = compscope.read_scores(t.save(tmp_path / name))
        assert back.processing == () and back.model == "induction-2l"
        import pandas as pd

        df = pd.read_csv(tmp_path / name) if name.endswith("csv") else pd.read_parquet(tmp_path / name)
        assert not df["processing"].isna().any()
    t2 = compscope.scores(compscope.load("induction-2l", fold_value_bias=True), "K", ["frobenius"], progress=False)
    assert compscope.read_scores(t2.save(tmp_path / "c.csv")).processing == t2.processing != ()


def test_readme_names_exist_after_import_compscope():
    import compscope as cs

    assert callable(cs.data.residual_moments.residual_second_moments)
    assert callable(cs.data.intervene.interventional_composition)
    assert callable(cs.toy.train) and callable(cs.report.plots.plot_track)
    assert callable(cs.loading.formats.native.save)


def test_pair_report_repr_is_readable():
    rep = compscope.compose_pair("induction-2l", (0, 0), (1, 1))
    text = repr(rep)
    assert "tensor(" not in text and "dtype" not in text
    assert "principal angles (deg)" in text
    first = float(text.split("principal angles (deg) [")[1].split(",")[0])
    assert first == pytest.approx(math.degrees(float(rep.principal_angles[0])), rel=1e-2)


def test_train_progress_in_a_log_is_short_and_reaches_the_total(tmp_path, monkeypatch, capsys):
    """stderr not a terminal: a dozen lines at most, the last at the total."""
    import compscope.progress as progress

    monkeypatch.setattr(progress, "_Bar", lambda total, desc, enabled, delay=0.0, _B=progress._Bar: _B(total, desc, enabled, delay=0.0))
    from compscope.toy import PRESETS, train

    p = PRESETS["tiny"]
    train(p.model, p.data, p.train, tmp_path / "run")
    err = capsys.readouterr().err.strip().splitlines()
    assert 1 <= len(err) <= 12, err
    assert err[-1].startswith(f"training toy: {p.train.steps}/{p.train.steps} done")


def test_measure_all_on_the_command_line(capsys):
    """``--measure all`` means every registered measure (README: analyse your own model)."""
    from compscope.measures import MEASURES

    assert main(["scores", "--kinds", "K", "--measure", "all", "--top", "1"]) == 0
    rows = [l.split()[1] for l in capsys.readouterr().out.splitlines()[1:] if l.startswith("K ")]
    assert rows == MEASURES.names()


@pytest.mark.parametrize("command", ["intervene", "validate"])
@pytest.mark.parametrize("value", ["1", "0", "x"])
def test_half_length_below_two_names_the_option(capsys, command, value):
    with pytest.raises(SystemExit) as e:
        main([command, "--half", value])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "--half" in err and "expected an integer >= 2" in err


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self"), reason="needs Linux's /proc, where no folder can be made")
@pytest.mark.parametrize("argv", [["report"], ["validate"], ["train", "--preset", "tiny"], ["sweep", "induction-2l"]])
def test_an_out_folder_that_cannot_be_made_fails_before_the_work(capsys, argv):
    """The parent exists but refuses a new folder (here /proc; elsewhere no permission or a
    read-only disk): one line naming the option and folder, before any work, nothing left behind."""
    _one_line_error(capsys, argv + ["--out", "/proc/compscope-out"], "--out /proc/compscope-out", "cannot create")


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self"), reason="needs Linux's /proc, where no file can be made")
def test_an_out_file_that_cannot_be_made_fails_before_the_work(capsys, monkeypatch):
    import compscope.engine.composition as engine

    monkeypatch.setattr(engine, "_scores", lambda *a, **k: pytest.fail("scored before the --out check"))
    _one_line_error(capsys, ["scores", "--out", "/proc/compscope-out.csv"], "--out /proc/compscope-out.csv", "cannot create")


def test_the_file_system_refusing_a_write_is_one_line_naming_the_file(capsys, monkeypatch, tmp_path):
    """What the checks cannot foresee (a disk that fills during the work) still ends in one line,
    the file named, exit status 2."""
    import errno

    from compscope.results.table import ScoreTable

    def full(self, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(ScoreTable, "save", full)
    out = tmp_path / "k.csv"
    _one_line_error(capsys, ["scores", "--kinds", "K", "--measure", "frobenius", "--out", str(out)],
                    f"{out}: No space left on device")


@pytest.mark.parametrize("argv", [["validate"], ["report"], ["sweep", "induction-2l"], ["scores"], ["intervene"],
                                  ["pair", "0.0", "1.1"], ["track", "RUN"]])
def test_an_unknown_metric_is_refused_before_any_work(capsys, monkeypatch, tmp_path, tiny_run, argv):
    """A mistyped metric is a one-line error naming it and the metrics there are, before a model
    runs or a file is written (before, validate and report skipped it with a note after the
    work, and sweep failed every task)."""
    import compscope.data.runner as runner
    import compscope.engine.composition as engine

    monkeypatch.setattr(runner, "runner_for", _must_not_run)
    monkeypatch.setattr(engine, "scores", _must_not_run)
    out = tmp_path / "out"
    argv = [str(tiny_run) if a == "RUN" else a for a in argv]
    extra = ["--out", str(out)] if argv[0] in ("validate", "report", "sweep") else []
    _one_line_error(capsys, argv + extra + ["--metric", "identity", "--metric", "embd"],
                    "unknown metric 'embd'", "identity, embed, unembed, activations")
    assert not out.exists()


def test_report_without_plotly_names_a_mistyped_metric_first(capsys, monkeypatch, tmp_path):
    """Where plotly is not installed, ``report`` still names a mistyped metric (the user's own
    mistake) first; a correct command is then refused naming the package to install."""
    import sys

    for name in ("plotly", "plotly.offline"):
        monkeypatch.setitem(sys.modules, name, None)  # import of plotly fails as where it is not installed
    out = str(tmp_path / "r")
    _one_line_error(capsys, ["report", "--metric", "embd", "--out", out], "unknown metric 'embd'")
    _one_line_error(capsys, ["report", "--metric", "identity", "--out", out], "the report needs plotly", "compscope[report]")


@pytest.mark.parametrize("option, value, needle", [("--prev-threshold", "1.5", "in [0, 1]"),
                                                   ("--induction-threshold", "-0.1", "in [0, 1]"),
                                                   ("--effect-threshold", "-0.01", "never negative")])
def test_validate_thresholds_out_of_their_range(capsys, monkeypatch, option, value, needle):
    """Labels are fractions of attention and effects are not negative: a threshold outside those
    ranges would make every pair true (or none) and is refused before the model runs."""
    import compscope
    import compscope.data.runner as runner

    monkeypatch.setattr(runner, "runner_for", _must_not_run)
    _one_line_error(capsys, ["validate", option, value], option.removeprefix("--").replace("-", "_"), needle)
    with pytest.raises(compscope.OptionError, match=re.escape(needle)):
        compscope.validate("induction-2l", **{option.removeprefix("--").replace("-", "_"): float(value)})


def test_mean_ablation_on_one_sequence_is_refused(capsys, monkeypatch):
    """The mean of one sequence's head output is that output: every effect would be 0 and every
    rank correlation NaN (what intervene printed before). Refused, before the model runs; zero
    ablation on one sequence is fine."""
    import compscope.data.runner as runner
    from compscope.data.intervene import intervention_effects

    _one_line_error(capsys, ["intervene", "--sequences", "1", "--half", "4"], "mean-ablation on 1 sequence", "'zero'")
    _one_line_error(capsys, ["validate", "--intervention-sequences", "1"], "mean-ablation on 1 sequence")
    _one_line_error(capsys, ["validate", "--sequences", "1"], "mean-ablation on 1 sequence")
    assert main(["intervene", "--sequences", "1", "--half", "4", "--ablation", "zero", "--kinds", "K"]) == 0
    k = capsys.readouterr().out.splitlines()[1]
    assert k.startswith("K  strongest effects:") and float(k.split()[4]) > 0
    with pytest.raises(compscope.OptionError, match="mean-ablation on 1 sequence"):
        intervention_effects(runner.runner_for("induction-2l"), torch.zeros(1, 8, dtype=torch.long), "K")


def test_data_functions_take_a_model_or_a_runner_and_name_bad_tokens():
    """``intervention_effects`` and ``activation_labels`` run a model named as ``load`` names it
    (equal to passing its runner); float token ids, a bare tensor for the repeats, or not a tensor
    at all are OptionErrors naming what was expected (they were AttributeError/IndexError)."""
    from compscope.data.sequences import repeats

    runner = compscope.runner_for("induction-2l")
    reps = repeats(4, 8, runner.hw.n_vocab, seed=3, bos=runner.bos)
    by_name = compscope.intervention_effects("induction-2l", reps.tokens, "K", progress=False)
    by_runner = compscope.intervention_effects(runner, reps.tokens, "K", progress=False)
    torch.testing.assert_close(by_name.by_kind["K"], by_runner.by_kind["K"], atol=0, rtol=0, equal_nan=True)  # NaN: no pair
    a, b = (compscope.activation_labels(m, reps, progress=False) for m in ("induction-2l", runner))
    torch.testing.assert_close(a.induction, b.induction, atol=0, rtol=0)
    with pytest.raises(compscope.OptionError, match="integer token ids, got dtype float32"):
        compscope.intervention_effects(runner, reps.tokens.float(), "K")
    with pytest.raises(compscope.OptionError, match="integer token ids"):
        runner.trace(reps.tokens.bool())
    with pytest.raises(compscope.OptionError, match=r"\(batch, pos\) tensor, got a list"):
        compscope.intervention_effects(runner, [[1, 2, 3]], "K")
    with pytest.raises(compscope.OptionError, match="repeats\\(...\\).*got a Tensor"):
        compscope.activation_labels(runner, reps.tokens)
    from compscope.data.intervene import against_measures

    with pytest.raises(compscope.OptionError, match="one metric .*got 2"):
        against_measures(runner, "K", metric=["identity", "embed"], sequences=2)


@pytest.mark.parametrize("bad", [None, 3])
def test_metrics_that_are_no_list_are_refused_by_name(bad):
    """``validate(metrics=None)`` raised a TypeError from inside ``list()``."""
    import compscope

    with pytest.raises(compscope.OptionError, match=f"metrics: expected a metric's name, a Metric, or a list of them, got {type(bad).__name__}"):
        compscope.validate("induction-2l", metrics=bad, progress=False)


@pytest.mark.parametrize("option, value, message", [("batch_size", 0, "batch_size=0: expected a positive integer"),
                                                    ("seed", "a", "seed='a': expected an integer"),
                                                    ("sequences", True, "sequences=True: expected a positive integer")])
def test_validate_names_a_bad_count_or_seed(option, value, message):
    """batch_size=0 raised range()'s ValueError and a string seed torch's RuntimeError."""
    import re

    import compscope

    with pytest.raises(compscope.OptionError, match=re.escape(message)):
        compscope.validate("induction-2l", progress=False, **{option: value})


@pytest.mark.parametrize("offset, message", [("a", "offset='a': expected a finite number"),
                                             (float("nan"), "offset=nan: expected a finite number"),
                                             (2, "offset 2: induction-2l has 'learned' positions, not rotary")])
def test_the_api_checks_a_rotary_offset_as_the_command_line_does(offset, message):
    """``scores(offset='a')`` on a model without rotary positions was silently ignored."""
    import re

    import compscope

    for call in (lambda: compscope.scores("induction-2l", "K", offset=offset, progress=False),
                 lambda: compscope.compose_pair("induction-2l", (0, 0), (1, 1), offset=offset)):
        with pytest.raises(compscope.OptionError, match=re.escape(message)):
            call()


def test_activation_labels_name_a_bad_batch_size():
    """``batch_size=0`` raised range()'s ValueError."""
    import compscope

    with pytest.raises(compscope.OptionError, match="batch_size=0: expected a positive integer"):
        compscope.activation_labels("induction-2l", batch_size=0, progress=False)


def test_the_api_names_bad_counts_lists_and_budgets():
    """Each raised a TypeError or ValueError from inside, or (max_memory=-1) was taken silently."""
    import re

    import compscope

    t = compscope.scores("induction-2l", "K", ["frobenius"], progress=False)
    for call, message in ((lambda: t.top("K", "frobenius", "a"), "n='a': expected how many entries"),
                          (lambda: t.top("K", "frobenius", -1), "n=-1: expected how many entries"),
                          (lambda: compscope.check_axioms(seed="a"), "seed='a': expected an integer"),
                          (lambda: compscope.check_axioms(seed=-1), "seed=-1: expected an integer >= 0"),  # numpy's error
                          (lambda: compscope.check_axioms(trials=1.5), "trials=1.5: need an integer >= 1"),
                          (lambda: compscope.track(None), "source: expected a run folder"),
                          (lambda: compscope.scores("induction-2l", "K", measures=5), "measures: expected a name or a list"),
                          (lambda: compscope.scores("induction-2l", "K", max_memory=-1), "max_memory=-1: expected a positive"),
                          # 0 and True were refused only by the order of the checks; infinity raised OverflowError
                          (lambda: compscope.scores("induction-2l", "K", max_memory=0), "max_memory=0: expected"),
                          (lambda: compscope.scores("induction-2l", "K", max_memory=True), "max_memory=True: expected"),
                          (lambda: compscope.scores("induction-2l", "K", max_memory="1"), "max_memory='1': expected"),
                          (lambda: compscope.scores("induction-2l", "K", max_memory=float("inf")),
                           "max_memory=inf: expected a positive, finite number of bytes"),
                          # a seed numpy refuses deep inside, a tile size not an integer: named; a count of 0, or
                          # a negative ridge (G - λI: a metric other than asked), was taken silently
                          (lambda: compscope.scores("induction-2l", "K", seed=-1), "seed=-1: expected an integer >= 0"),
                          (lambda: compscope.scores("induction-2l", "K", block=1.5), "block=1.5: expected a positive integer"),
                          (lambda: compscope.scores("induction-2l", "K", width=0), "width=0: expected a positive integer"),
                          (lambda: compscope.scores("induction-2l", "K", baseline_samples=0),
                           "baseline_samples=0: expected a positive integer"),
                          # a count of top pairs must be a positive integer (0 and 2.5 were once a slip from passing)
                          (lambda: compscope.scores("induction-2l", "K", pairs=0), "pairs=0: use 'all' or a positive"),
                          (lambda: compscope.scores("induction-2l", "K", pairs=2.5), "pairs=2.5: use 'all' or a"),
                          (lambda: compscope.scores("induction-2l", "K", pairs="top"), "pairs='top': use 'all' or a"),
                          (lambda: compscope.scores("induction-2l", "K", metric="embed", ridge=-1e-7),
                           "ridge=-1e-07: expected a finite number >= 0"),
                          (lambda: compscope.scores("induction-2l", "K", ridge=float("nan")), "ridge=nan: expected a finite"),
                          (lambda: compscope.scores("induction-2l", "K", ridge=True), "ridge=True: expected a finite"),
                          (lambda: compscope.metric_from_gram(torch.eye(64), ridge=-0.5), "ridge=-0.5: expected a finite")):
        with pytest.raises(compscope.OptionError, match=re.escape(message)):
            call()
    assert [p[:4] for p in t.top("K", "frobenius", 2)] == [(0, 0, 1, 1), (0, 0, 1, 2)]  # the good call unchanged
    # the smallest good counts are taken: one Haar sample for the baseline, one top pair
    one = compscope.scores("induction-2l", "K", ["frobenius_baselined", "bandwidth"], baseline_samples=1, pairs=1,
                           progress=False)
    assert int(torch.isfinite(one.dense("frobenius_baselined", "K")).sum()) == 16
    assert int(torch.isfinite(one.dense("bandwidth", "K")).sum()) == 1


def test_a_misspelt_name_is_answered_with_the_closest_one():
    """An unknown measure, metric or axiom that is a typo of a registered one ends its error with
    the one meant; a name close to none gets the list alone."""
    from compscope import OptionError
    from compscope.errors import did_you_mean

    with pytest.raises(OptionError, match=r"unknown measure 'frobenious'; measures: .*; did you mean 'frobenius'\?$"):
        compscope.scores("induction-2l", "K", ["frobenious"], progress=False)
    with pytest.raises(OptionError, match=r"unknown metric 'covarince'; .*; did you mean 'covariance'\?$"):
        compscope.scores("induction-2l", "K", metric="covarince", progress=False)
    with pytest.raises(OptionError, match=r"unknown axioms \['gague'\]; .*; did you mean 'gauge'\?$"):
        compscope.check_axioms(axioms=["gague"])
    with pytest.raises(OptionError, match=r"unknown metric 'xyz'; metrics: [a-z, -]*$"):
        compscope.scores("induction-2l", "K", metric="xyz", progress=False)
    assert did_you_mean(["embd", "tite", "xyz"], ["embed", "tight"]) == "; did you mean 'embed' or 'tight'?"
    assert did_you_mean("q", ["embed"]) == ""


def test_axioms_refuses_a_negative_seed_on_the_command_line(capsys):
    """``compscope axioms --seed -1`` raised numpy's ValueError (its generator takes no negative seed)."""
    with pytest.raises(SystemExit):
        main(["axioms", "--seed", "-1"])
    assert "argument --seed: '-1': expected an integer >= 0" in capsys.readouterr().err


def test_a_gram_matrix_of_ones_own_that_cannot_be_one_is_named(tmp_path):
    """A complex ``G`` lost its imaginary part with a torch warning, a boolean one was read as 0/1, a
    damaged ``.safetensors`` file raised safetensors' own error, and a ``G`` with entries near 1e300 a
    LinAlgError from inside (one near 1e80 gave a table of NaN, silently: the whitened weights left
    float32 in the engine's bases). Each is named now; at the ends of the range taken (1e-60, 1e60),
    with weights scaled by 1e-30 or 1e30 too, the scale-free measures equal those of ``G`` itself."""
    import numpy as np

    G = np.full((64, 64), 1.0) + np.eye(64)  # positive definite
    for bad, words in ((G.astype(np.complex64), "a Gram matrix of torch.complex64 values; a Gram matrix is real"),
                       (np.eye(64, dtype=bool), "a Gram matrix of torch.bool values"),
                       (G * 1e300, "G's largest entry is 2e+300, beyond what the engine's float64 products"),
                       (G * 1e-70, "G's largest entry is 2e-70, beyond"),
                       (G * 1e60, "G's largest entry is 2e+60, beyond"), (G * 1e-60 / 4, "G's largest entry is 5e-61")):
        with pytest.raises(compscope.OptionError, match=re.escape(words)):
            compscope.scores("induction-2l", "K", ["frobenius"], bad, progress=False)
    (tmp_path / "g.safetensors").write_bytes(b"garbage!")
    with pytest.raises(compscope.OptionError, match=r"metric .*g\.safetensors: cannot read a Gram matrix from it \(ValueError: "
                                                    r"not a safetensors file"):
        compscope.scores("induction-2l", "K", ["frobenius"], str(tmp_path / "g.safetensors"), progress=False)
    want = compscope.scores("induction-2l", "K", ["frobenius", "tight", "read_gain"], G, progress=False)
    hw = compscope.load("induction-2l")
    for c, w in ((1e-60 / 2, 1.0), (1e60 / 2, 1.0), (1e-60 / 2, 1e-30), (1e-60 / 2, 1e30), (1e60 / 2, 1e-30), (1e60 / 2, 1e30)):
        scaled = hw.replace(W_Q=hw.W_Q * w, W_K=hw.W_K * w, W_V=hw.W_V * w, W_O=hw.W_O * w)
        t = compscope.scores(scaled, "K", ["frobenius", "tight", "read_gain"], G * c, progress=False)
        for m in ("frobenius", "tight"):
            torch.testing.assert_close(t.dense(m, "K"), want.dense(m, "K"), rtol=1e-5, atol=1e-7, equal_nan=True)
        gain = t.dense("read_gain", "K")
        assert torch.isfinite(gain[~want.dense("read_gain", "K").isnan()]).all() and (gain.nan_to_num() >= 0).all()


def test_a_one_layer_model_is_told_it_has_no_head_pair(tmp_path, capsys):
    """A one-layer model has no (earlier writer, later reader) pair: ``scores`` printed empty rows,
    ``intervene`` rank correlations of nan over 0 pairs, ``validate`` a table of nan, ``gauge`` nothing
    to compare; ``pair`` computed a metric before finding no pair. Each now says why, in one line,
    before any work; ``circuits``, which reads heads one by one, still runs."""
    from compscope.toy.model import ToyConfig, ToyTransformer
    from compscope.toy.storage import save_toy

    folder = save_toy(ToyTransformer(ToyConfig(n_layers=1, n_heads=2, d_model=16, d_head=8, d_vocab=16, n_ctx=16), seed=0),
                      tmp_path / "one")
    said = "toy: one layer, so no head pair composes (a writer's layer comes before its reader's)"
    for argv in (["scores", str(folder)], ["intervene", str(folder)], ["validate", str(folder)], ["gauge", str(folder)],
                 ["pair", str(folder), "0.0", "0.1"]):  # the report's: tests/test_report.py (it needs plotly first)
        _one_line_error(capsys, argv, said)
    for call in (lambda: compscope.scores(folder, progress=False), lambda: compscope.compose_pair(folder, "0.0", "0.1"),
                 lambda: compscope.intervention_effects(folder, progress=False),
                 lambda: compscope.validate(folder, progress=False), lambda: compscope.gauge_check(folder, progress=False)):
        with pytest.raises(compscope.OptionError, match=re.escape(said)):
            call()
    assert main(["circuits", str(folder), "--quiet"]) == 0
