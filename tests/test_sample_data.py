"""What the residual is sampled on, for a rotary head's previous-token score with the residual as
content and for the norms' mean Jacobians: ``SampleData`` (API) and ``--sample-sequences``,
``--sample-length``, ``--sample-seed``, ``--sample-positions`` (command line). The samples are
checked against the toy's own forward cache, the counts in the recorded words against the samples'
own shape; options that would change nothing are refused."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import torch

import compscope
from compscope.cli.main import main
from compscope.data.residual_moments import SampleData, content_samples
from compscope.data.runner import runner_for
from compscope.data.sequences import repeats
from compscope.errors import OptionError
from compscope.toy.model import ToyConfig, ToyTransformer
from compscope.toy.storage import save_toy

#: a rotary toy of context 16: sampled sequences are [t, t] with |t| = 8, 15 positions after the first
CONFIG = dict(n_layers=2, n_heads=2, d_model=16, d_head=4, d_vocab=20, n_ctx=16, positions="rotary", norm="rmsnorm")


@pytest.fixture(scope="module")
def rotary(tmp_path_factory):
    return save_toy(ToyTransformer(ToyConfig(**CONFIG), seed=5), tmp_path_factory.mktemp("rot") / "toy")


def _read_by_hand(folder, n: int, seed: int) -> dict[int, torch.Tensor]:
    """Every residual the toy's heads read after the first position of ``n`` repeated sequences of
    ``seed`` (the toy's own cache and ``ln1``, not the runner), in the order of the positions."""
    from compscope.toy.storage import load_toy

    model, _ = load_toy(folder)
    tokens = repeats(n, 8, 20, seed).tokens
    cache: dict = {}
    with torch.no_grad():
        model(tokens, cache=cache)
        return {l: blk.ln1(cache[f"resid_pre.{l}"])[:, 1:].reshape(-1, 16) for l, blk in enumerate(model.blocks)}


@pytest.mark.parametrize("field, value", [("sequences", 0), ("length", 3), ("seed", -1), ("positions", 0),
                                          ("sequences", 2.5), ("positions", "a"), ("seed", True)])
def test_bad_sample_data_are_refused_by_name(field, value):
    with pytest.raises(OptionError, match=f"sample data: {field}"):
        SampleData(**{field: value})
    with pytest.raises(OptionError, match="expected a compscope.SampleData"):
        content_samples(compscope.load("induction-2l"), "induction-2l", data=(3, 8))
    hw = compscope.load("induction-2l")
    for model in (None, hw):  # nothing to run: the error says what to pass
        with pytest.raises(OptionError, match=r"^the activations content is sampled by running the model: pass"):
            content_samples(hw, model)


def test_the_least_sample_data_are_taken_and_the_defaults_are_the_documented_ones():
    """Each field's least value is taken as given (1 sequence of 4 tokens, seed 0, 1 position); left out,
    the documented defaults: 16 sequences of 128 tokens, seed 12346, 1024 positions."""
    least = SampleData(sequences=1, length=4, seed=0, positions=1)
    assert least.resolved() == (1, 4, 0, 1)
    assert SampleData().resolved() == (16, 128, 12346, 1024)
    assert SampleData().recorded() == {"sequences": 16, "length": 128, "seed": 12346, "positions": 1024}


def test_the_content_is_sampled_on_the_data_asked_for(rotary):
    """Fewer positions than asked: every one, each a row of the toy's own cache; more: that many
    distinct rows of it, another seed another draw; the words count what was drawn."""
    runner = runner_for(str(rotary), progress=False)
    hw = runner.hw
    want = _read_by_hand(rotary, 3, 12346)
    got = content_samples(hw, runner, SampleData(sequences=3), progress=False)
    for l in range(2):
        assert got[l].shape == (45, 16)  # 3 sequences x 15 positions
        torch.testing.assert_close(got[l][torch.argsort(got[l][:, 0])], want[l][torch.argsort(want[l][:, 0])],
                                   atol=1e-5, rtol=1e-5)
    assert SampleData(sequences=3).content(runner).endswith("all 45 positions after the first")
    assert SampleData(sequences=3, positions=45).content(runner).endswith("all 45 positions after the first")
    assert SampleData(sequences=3, positions=44).content(runner).endswith("44 of the 45 positions after the first, "
                                                                            "drawn by the same seed")
    assert "3 repeated random sequences [t, t], |t| = 8 (seed 12346)" in SampleData(sequences=3).content(runner)
    # an odd length: [t, t] of |t| = 4 is 8 tokens, 7 positions after the first; the shortest, 4: |t| = 2
    odd = SampleData(sequences=3, length=9)
    assert odd.tokens(runner).shape == (3, 8) and content_samples(hw, runner, odd, progress=False)[1].shape == (21, 16)
    assert odd.content(runner).endswith("all 21 positions after the first")
    assert SampleData(sequences=2, length=4).tokens(runner).shape == (2, 4)

    few = content_samples(hw, runner, SampleData(sequences=3, positions=10, seed=7), progress=False)
    other = content_samples(hw, runner, SampleData(sequences=3, positions=10, seed=8), progress=False)
    own = _read_by_hand(rotary, 3, 7)
    for l in range(2):
        assert few[l].shape == (10, 16)
        distance = torch.cdist(few[l], own[l], compute_mode="donot_use_mm_for_euclid_dist")
        assert float(distance.min(1).values.max()) < 1e-4  # each drawn row is one of the cache's rows
    assert not torch.equal(few[0], other[0])
    assert SampleData(sequences=3, positions=10).content(runner).endswith(
        "10 of the 45 positions after the first, drawn by the same seed")


def test_head_circuits_take_the_data(rotary, capsys):
    from compscope.analysis.circuits import rotary_previous

    runner = runner_for(str(rotary), progress=False)
    data = SampleData(sequences=3, positions=20)
    c = compscope.head_circuits(str(rotary), content="activations", sample_data=data, progress=False)
    by_hand = rotary_previous(runner.hw, content=content_samples(runner.hw, runner, data, progress=False))
    torch.testing.assert_close(c.previous, by_hand)
    with pytest.raises(OptionError, match="content='activations' only"):
        compscope.head_circuits(str(rotary), sample_data=data)

    assert main(["circuits", str(rotary), "--content", "activations", "--sample-sequences", "3",
                 "--sample-positions", "20"]) == 0
    assert ("content from the residual each layer reads on 3 repeated random sequences [t, t], |t| = 8 (seed 12346); "
            "20 of the 45 positions after the first") in capsys.readouterr().out
    assert main(["circuits", str(rotary), "--sample-seed", "3"]) == 2
    assert "--sample-seed: for --content activations only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["circuits", str(rotary), "--content", "activations", "--sample-length", "2"])
    assert "--sample-length: '2': expected an integer >= 4" in capsys.readouterr().err
    assert main(["circuits", str(rotary), "--content", "activations", "--sample-length", "17"]) == 2  # it takes 16
    assert "sample data: length=17: longer than the 16 tokens" in capsys.readouterr().err


def test_validate_records_the_data_and_refuses_them_where_nothing_is_sampled(rotary, tmp_path, capsys):
    common = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    v = compscope.validate(str(rotary), sample_data=SampleData(sequences=3, seed=4), **common)
    assert v.options["sample_data"] == {"sequences": 3, "length": 128, "seed": 4, "positions": 1024}
    assert v.options["activations_content_data"].startswith("3 repeated random sequences [t, t], |t| = 8 (seed 4)")
    assert any(n.startswith("the previous-token score's activations content sampled on 3 repeated") for n in v.notes)
    default = compscope.validate(str(rotary), **common)
    assert default.options["sample_data"]["sequences"] == 16 and not any("sampled on" in n for n in default.notes)

    with pytest.raises(OptionError, match="positions are 'learned', none of those"):  # learned positions, nothing linearised
        compscope.validate("induction-2l", sample_data=SampleData(sequences=3), **common)
    with pytest.raises(OptionError, match="positions are 'learned', none of those"):  # None linearises nothing either
        compscope.validate("induction-2l", linearise_norms=None, sample_data=SampleData(sequences=3), **common)
    assert main(["validate", "--sample-sequences", "3", "--kinds", "K", "--sequences", "4", "--half", "4"]) == 2
    assert "none of those" in capsys.readouterr().err

    assert main(["validate", str(rotary), "--sample-sequences", "2", "--sample-positions", "5", "--kinds", "K",
                 "--metric", "identity", "--sequences", "4", "--half", "4", "--intervention-sequences", "2",
                 "--out", str(tmp_path / "v")]) == 0
    run = json.loads((tmp_path / "v" / "run.json").read_text())
    assert run["sample_data"] == {"sequences": 2, "length": 128, "seed": 12346, "positions": 5}


def test_the_norms_are_linearised_on_the_data_asked_for(tmp_path):
    """``validate(linearise_norms=True, sample_data=...)`` linearises on those sequences: its weights'
    note names them, and the verdict equals one on weights linearised on the same tokens by hand."""
    from compscope.data.norm_linearisation import linearise_norms

    m = ToyTransformer(ToyConfig(**CONFIG, qk_norm=True, attn_out_norm=True), seed=4)
    folder = save_toy(m, tmp_path / "norms")
    data = SampleData(sequences=2, length=8, seed=3)
    v = compscope.validate(str(folder), sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                           linearise_norms=True, sample_data=data, progress=False)
    assert v.notes[0] == "norms linearised (their mean Jacobian) on 2 repeated random sequences [t, t], |t| = 4 (seed 3)"
    runner = runner_for(str(folder), progress=False)
    lin = linearise_norms(runner, tokens=repeats(2, 4, 20, 3).tokens, progress=False)
    table = compscope.scores(lin, kinds="K", measures="all", metric="identity", pairs="all", progress=False)
    for m_ in table.measures:
        torch.testing.assert_close(v.tables["identity"].dense(m_, "K"), table.dense(m_, "K"), equal_nan=True)
    # linearise_norms itself takes the SampleData: the same tokens, the same note; tokens and data together refused
    direct = linearise_norms(runner, data=data, progress=False)
    assert direct.meta.notes[-1] == v.notes[0]
    for name in ("W_Q", "W_K", "W_O"):
        assert torch.equal(getattr(direct, name), getattr(lin, name)), name
    with pytest.raises(OptionError, match="give tokens or data"):
        linearise_norms(runner, tokens=repeats(2, 4, 20, 3).tokens, data=data)
    with pytest.raises(OptionError, match="sample data: expected a compscope.SampleData, got dict"):
        linearise_norms(runner, data={"sequences": 2})


def test_validate_labels_the_heads_on_the_sample_text_too(tmp_path, capsys):
    """``text_labels``: the labels of ``text_labels`` on the sample data's tokens, saved, printed
    beside the repeats' and recorded; they count as a use of the sample data on any model."""
    from compscope.data.head_labels import text_labels
    from compscope.data.residual_moments import metric_tokens

    common = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    data = SampleData(sequences=5, length=24, seed=2)
    v = compscope.validate("induction-2l", sample_data=data, text_labels=True, **common)
    runner = runner_for("induction-2l", progress=False)
    want = text_labels(runner, metric_tokens(runner, 5, 24, 2), progress=False)
    for k in ("induction", "previous_token", "duplicate_token", "sink"):
        torch.testing.assert_close(v.text_labels.mean[k], want.mean[k])
    assert v.options["text_labels_data"] == "5 repeated random sequences [t, t], |t| = 12 (seed 2)"
    assert "labelled again on 5 repeated random sequences" in v.format()
    paths = v.save(tmp_path / "v")
    assert paths[-1].name == "head_labels_text.csv" and len(paths) == 6
    for path, frame in ((paths[0], v.labels.to_pandas()), (paths[-1], v.text_labels.to_pandas())):
        pd.testing.assert_frame_equal(pd.read_csv(path), frame, check_dtype=False, check_exact=False, rtol=1e-12)
    assert compscope.validate("induction-2l", **common).text_labels is None
    with pytest.raises(OptionError, match="text_labels='yes': expected True or False"):
        compscope.validate("induction-2l", text_labels="yes", **common)

    assert main(["validate", "--text-labels", "--sample-sequences", "3", "--kinds", "K", "--metric", "identity",
                 "--sequences", "4", "--half", "4", "--intervention-sequences", "2", "--out", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    assert "top induction heads there:" in out and "rank correlation with the repeats' labels" in out
    saved = pd.read_csv(tmp_path / "w" / "head_labels_text.csv").set_index(["layer", "head"])
    for name, key in (("induction", "induction"), ("previous-token", "previous_token")):
        line = next(x for x in out.splitlines() if x.startswith(f"  top {name} heads there: "))
        shown = re.findall(r"(\d+)\.(\d+) (-?[0-9.]+) ± ([0-9.e-]+)(?:\s|$)", line)
        assert len(shown) == 5, line  # each of the top heads with the standard error of head_labels_text.csv
        for l, h, v, e in shown:
            assert float(v) == round(saved.loc[(int(l), int(h)), key], 2)
            assert e == f"{saved.loc[(int(l), int(h)), f'{key}_error']:.2g}" and float(e) > 0  # two significant digits
        assert [float(v) for *_, v, _ in shown] == sorted(saved[key].round(2), reverse=True)[:5]

    assert main(["validate", "--text-labels", "--sample-sequences", "1", "--kinds", "K", "--metric", "identity",
                 "--sequences", "4", "--half", "4", "--intervention-sequences", "2"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  top induction heads there: "))
    assert "±" not in line and len(re.findall(r"\d+\.\d+ -?[0-9.]+", line)) == 5  # one sequence: no standard error


def test_text_labels_take_the_sample_data_or_its_defaults():
    """``compscope.text_labels(model)`` labels the heads on the sample data's default text, and
    ``text_labels(model, SampleData(...))`` on that text: the same labels, errors and words as on its
    tokens given outright; anything else is refused by name."""
    from compscope.data.head_labels import text_labels

    runner = runner_for("induction-2l", progress=False)
    for given in (None, SampleData(sequences=3, length=24, seed=5)):
        data = given or SampleData()
        got = compscope.text_labels(runner, given, progress=False)
        if given is None:  # the data-level function with its tokens left out takes the defaults too
            left_out = text_labels(runner, progress=False)
            assert left_out.data == data.text(runner) and torch.equal(left_out.mean["induction"], got.mean["induction"])
        want = text_labels(runner, data.tokens(runner), progress=False, data=data.text(runner))
        assert got.data == want.data == data.text(runner)
        for k in ("induction", "previous_token", "duplicate_token", "sink"):
            torch.testing.assert_close(got.mean[k], want.mean[k], rtol=0, atol=0)
            torch.testing.assert_close(got.error[k], want.error[k], rtol=0, atol=0, equal_nan=True)
    assert compscope.text_labels(runner, SampleData(sequences=3, length=24), progress=False, data="mine").data == "mine"
    with pytest.raises(OptionError, match="or a SampleData, got str"):
        compscope.text_labels(runner, "some text", progress=False)


def test_a_corpus_of_ones_own_is_what_validate_samples(tmp_path):
    """``SampleData(corpus=FILE)`` on a model with a tokenizer (a rotary toy with QK- and
    attention-output norms given a stand-in one, an id per byte): the norms are linearised on that
    file's text (the verdict equals one on weights linearised by hand on the same tokens), the heads
    are labelled on it too, and the file is named where the data are recorded."""
    import hashlib

    from compscope.data.head_labels import text_labels
    from compscope.data.norm_linearisation import linearise_norms
    from compscope.data.runner import Runner
    from compscope.data.sequences import natural_text

    folder = save_toy(ToyTransformer(ToyConfig(**CONFIG, qk_norm=True, attn_out_norm=True), seed=4), tmp_path / "norms")
    runner = runner_for(str(folder), progress=False)

    class Bytes:
        def encode(self, text, add_special_tokens=False):
            return [b % 20 for b in text.encode()]

    runner.tokenizer = Bytes()
    runner.__class__ = type("TextRunner", (Runner,), {"_run": type(runner)._run})
    body = "".join(f"{i} plus {i} is {2 * i}; " for i in range(40))
    path = tmp_path / "sums.txt"
    path.write_text(body)
    data = SampleData(sequences=3, length=8, seed=3, corpus=path)
    v = compscope.validate(runner, sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                           linearise_norms=True, text_labels=True, sample_data=data, progress=False)
    words = f"3 sequences of 8 tokens of sums.txt (sha256 {hashlib.sha256(body.encode()).hexdigest()[:12]}) (seed 3)"
    assert v.notes[0] == f"norms linearised (their mean Jacobian) on {words}"
    tokens = natural_text(Bytes(), 3, 8, 3, runner.bos, corpus=path)
    lin = linearise_norms(runner, tokens=tokens, progress=False)
    table = compscope.scores(lin, kinds="K", measures="all", metric="identity", pairs="all", progress=False)
    for m_ in table.measures:
        torch.testing.assert_close(v.tables["identity"].dense(m_, "K"), table.dense(m_, "K"), equal_nan=True)
    want = text_labels(runner, tokens, progress=False)
    torch.testing.assert_close(v.text_labels.mean["previous_token"], want.mean["previous_token"])
    assert v.options["text_labels_data"] == words
    assert v.options["sample_data"] == {"sequences": 3, "length": 8, "seed": 3, "positions": 1024, "corpus": str(path)}


def test_the_verdicts_contents_sample_on_a_bar_shown_by_default(rotary, bars):
    """``previous_contents``: the weights alone (``embed``) and, for rotary heads, samples of what each layer
    reads, taken on a bar that is on unless ``progress=False``."""
    from compscope.data.validate import previous_contents

    runner = runner_for(str(rotary), progress=False)
    del bars[:]
    got = previous_contents(runner.hw, runner, data=SampleData(sequences=3))
    assert list(got) == ["embed", "activations"] and got["embed"] is None and got["activations"][1].shape == (45, 16)
    previous_contents(runner.hw, runner, progress=False, data=SampleData(sequences=3))
    assert [(b.desc, b.total, b.n, b.enabled) for b in bars] == [("residual samples", 3, 3, True),
                                                                ("residual samples", 3, 3, False)]


def test_learned_positions_with_a_norm_inside_take_sample_data_for_the_linearisation(tmp_path):
    """Sample data for the norms' mean Jacobians alone (learned positions: no activations content): taken
    where ``linearise_norms`` is asked for, and the linearisation is the one on that sample; refused without it."""
    from compscope.data.norm_linearisation import linearise_norms

    folder = save_toy(ToyTransformer(ToyConfig(**{**CONFIG, "positions": "learned", "qk_norm": True}), seed=5),
                      tmp_path / "toy")
    common = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    sample = SampleData(sequences=3, length=8, seed=4)
    v = compscope.validate(str(folder), linearise_norms="qk", sample_data=sample, **common)
    assert v.options["sample_data"] == {"sequences": 3, "length": 8, "seed": 4, "positions": 1024}
    want = linearise_norms(runner_for(str(folder)), "qk", data=sample, progress=False).meta.notes[-1]
    assert "(seed 4)" in want and want in v.notes
    with pytest.raises(OptionError, match="positions are 'learned', none of those"):
        compscope.validate(str(folder), sample_data=sample, **common)
