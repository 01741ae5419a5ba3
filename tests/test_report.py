"""The report: its files, its embedded numbers against the score tables, its size on a 7B-shape
model, the explainers' Python side against closed forms, and the command's options and errors."""

from __future__ import annotations

import base64
import json
import math
import re

import numpy as np
import pytest
import torch

import compscope
from compscope.cli.main import main
from compscope.loading import sources
from compscope.errors import OptionError

pytest.importorskip("plotly")
pytest.importorskip("pandas")


def _document(index_html: str) -> dict:
    m = re.search(r'<script type="application/json" id="compscope-data">(.*?)</script>', index_html, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def _decode(entry: dict, n: int) -> np.ndarray:
    """An independent reading of a packed table (the layout of compscope.report.payload's docstring)."""
    raw = base64.b64decode(entry["b64"])
    if entry["enc"] == "f4":
        return np.frombuffer(raw, "<f4").astype(np.float64)
    q = np.frombuffer(raw, "<u2").astype(np.float64)
    v = entry["lo"] + q / 65534 * (entry["hi"] - entry["lo"])
    v[q == 65535] = np.nan
    assert v.size == n
    return v


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "report"
    assert main(["report", "--out", str(out), "--quiet"]) == 0
    return out


def test_files_and_offline(toy_report, capsys):
    names = {p.name for p in toy_report.iterdir()}
    assert {"index.html", "scores.parquet", "head_labels.csv", "axioms.csv", "verdict.csv", "circuit_graph.png",
            "circuit_graph.svg", "heatmap_K.png", "heatmap_Q.svg"} <= names
    page = (toy_report / "index.html").read_text()
    skeleton = re.sub(r"<script([^>]*)>.*?</script>", r"<script\1></script>", page, flags=re.S)  # tags, not code
    assert re.findall(r"<script[^>]*>", skeleton) == ["<script>", '<script type="application/json" id="compscope-data">',
                                                      "<script>"]  # plotly inline: nothing is fetched
    assert "<link" not in skeleton and "http" not in skeleton
    assert "Plotly" in page and page.count('id="compscope-data"') == 1


def test_embedded_pairs_equal_the_table(toy_report):
    """Every stored pair value, read back independently, equals the engine's table (float32)."""
    import compscope
    from compscope.results.table import read_scores

    doc = _document((toy_report / "index.html").read_text())
    L, H = doc["L"], doc["H"]
    with pytest.raises(compscope.LoadError, match="holds the metrics identity, embed"):
        read_scores(toy_report / "scores.parquet")
    table = read_scores(toy_report / "scores.parquet", metric="identity")
    assert doc["metrics"] == ["identity", "embed"]
    for key, entry in doc["tables"].items():
        metric, kind, measure = key.split("|")
        if metric != table.metric:
            continue
        got = _decode(entry, H * H * L * (L - 1) // 2)
        dense = table.dense(measure, kind).numpy()
        want = np.concatenate([dense[l1, :, l2, :].ravel() for l1 in range(L) for l2 in range(l1 + 1, L)])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        # the layer summary: the largest value of each block (reader layer row, writer layer column)
        assert entry["max"][1][0] == pytest.approx(float(np.nanmax(dense[0, :, 1, :])), rel=1e-9)
        assert entry["max"][0][1] is None
    # the pair details are compose_pair's (principal angles in degrees)
    rep = compscope.compose_pair("induction-2l", (0, 0), (1, 1), "K")
    det = doc["details"]["identity|K|0.0|1.1"]
    np.testing.assert_allclose(det["angles_deg"], rep.angles_degrees, atol=1e-5)
    np.testing.assert_allclose(det["writer_sv"], rep.writer_singular_values.numpy(), rtol=1e-5)
    assert det["measures"]["tight"] == pytest.approx(rep.measures["tight"], abs=1e-6)
    shown = det["writer_sv"] + det["angles_deg"] + list(det["measures"].values())
    assert all(x == round(x, 6) for x in shown)  # to 6 places


def test_labels_and_verdict_from_data(toy_report):
    """On the toy model the labels come from data: its previous-token heads 0.0, 0.1 and induction heads 1.0-1.3."""
    doc = _document((toy_report / "index.html").read_text())
    assert doc["labels"]["source"] == "data"
    assert sorted(map(tuple, doc["labels"]["roles"]["previous_token"])) == [(0, 0), (0, 1)]
    assert sorted(map(tuple, doc["labels"]["roles"]["induction"])) == [(1, h) for h in range(4)]
    assert doc["weight_labels"]["source"] == "weights"
    k_auroc = [r["auroc"] for r in doc["verdict"] if r["kind"] == "K" and r["measure"] == "frobenius" and r["metric"] == "identity"]
    assert k_auroc == [1.0]
    # its truth: 2 previous-token heads before 4 induction heads make 8 true K-pairs, each a pair that talks
    summary = doc["verdict_summary"]
    assert summary[1] == "true previous-token -> induction K-pairs: 8 (previous-token >= 0.4, induction >= 0.3)"
    assert summary[2].startswith("  confirmed by the K intervention (effect >= 0.05): 8; the K interventions themselves separate the 8")
    # the rows come in the printed verdict's order (the page sorts nothing), a group's kinds together
    import pandas as pd

    from compscope.data.verdict import ranked

    groups = [(r["measure"], r["metric"]) for r in doc["verdict"]]
    runs = [g for i, g in enumerate(groups) if i == 0 or g != groups[i - 1]]
    saved = pd.read_csv(toy_report / "verdict.csv").to_dict("records")
    assert runs == [key for key, _ in ranked(saved)] and len(runs) == len(set(groups))
    # the graph's K edges: the strongest by frobenius_baselined, all above the baseline, from previous-token heads
    k_edges = doc["edges"]["K"]
    assert k_edges and all(v > 0 for *_, v in k_edges)
    assert {(l1, h1) for l1, h1, *_ in k_edges[:4]} <= {(0, 0), (0, 1)}


def test_the_verdict_taken_apart_by_head(toy_report):
    """For every measure x metric the report computed, the toy's two previous-token writers and four
    induction readers; weighted by their true pairs, each side's shares average to the verdict's own
    K AUROC of that measure and metric (the report's scores and the verdict's are of the same
    weights), and the K interventions separate every true pair (share 1)."""
    doc = _document((toy_report / "index.html").read_text())
    rows = doc["verdict_by_head"]
    auroc = {(r["measure"], r["metric"]): r["auroc"] for r in doc["verdict"] if r["kind"] == "K"}
    keys = sorted({(r["measure"], r["metric"]) for r in rows})
    assert keys == sorted((m, met) for m in doc["measures"] if m != "interventions" for met in doc["metrics"])
    for key in keys:
        mine = [r for r in rows if (r["measure"], r["metric"]) == key]
        assert [(r["side"], r["layer"], r["head"]) for r in mine] == \
            [("writer", 0, 0), ("writer", 0, 1)] + [("reader", 1, h) for h in range(4)]
        for side in ("writer", "reader"):
            part = [r for r in mine if r["side"] == side]
            assert sum(r["true_pairs"] for r in part) == 8
            mean = sum(r["true_pairs"] * r["measure_true"] for r in part) / 8
            assert mean == pytest.approx(auroc[key], abs=1e-9), key
            assert all(r["effect_true"] == 1.0 for r in part)


def test_the_verdict_taken_apart_by_head_keeps_the_verdicts_thresholds(tmp_path):
    """A saved verdict with a stricter previous-token threshold (0.75: only 0.0 of the toy's two
    previous-token heads, 0.79 and 0.71): the report's rows follow its truth, read from run.json."""
    v = tmp_path / "v"
    assert main(["validate", "--out", str(v), "--sequences", "8", "--intervention-sequences", "4", "--metric", "identity",
                 "--prev-threshold", "0.75"]) == 0
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "rep"), "--no-figures", "--quiet"]) == 0
    doc = _document((tmp_path / "rep" / "index.html").read_text())
    import pandas as pd

    prev = {(r["layer"], r["head"]): r["previous_token"] for r in pd.read_csv(v / "head_labels.csv").to_dict("records")}
    strict = sorted(h for h, x in prev.items() if x >= 0.75)
    mine = [r for r in doc["verdict_by_head"] if (r["measure"], r["metric"]) == ("frobenius", "identity")]
    assert sorted((r["layer"], r["head"]) for r in mine if r["side"] == "writer") == strict
    assert len(strict) == 1 and all(r["true_pairs"] == 1 for r in mine if r["side"] == "reader")


def test_pack_tables_budget_on_a_7b_shape():
    """32 layers x 32 heads: pairs as 16-bit codes (error within the stated bound), the tables
    past the budget as layer summaries only, and the page under 20 MB."""
    from plotly.offline import get_plotlyjs

    from compscope.defaults import REPORT_MEASURES
    from compscope.report.payload import PAIR_BUDGET, pack_tables
    from compscope.results.table import ScoreTable

    L, H = 32, 32
    g = torch.Generator().manual_seed(0)
    mask = torch.zeros(L, H, L, H, dtype=torch.bool)
    for l1 in range(L):
        mask[l1, :, l1 + 1:, :] = True
    measures = list(REPORT_MEASURES)  # what a report holds by default
    tables = {}
    for metric in ("identity", "embed"):
        values = {}
        for m in measures:
            for k in "QKV":
                v = torch.rand(L, H, L, H, generator=g, dtype=torch.float64)
                values[m, k] = torch.where(mask, v, torch.full_like(v, float("nan")))
        tables[metric] = ScoreTable(values, metric, "seven-b-shape")
    packed, how = pack_tables(tables, "QKV", measures)
    stored = [e for e in packed.values() if e["enc"]]
    assert all(e["enc"] == "u2" for e in stored) and 0 < len(stored) < len(packed)
    assert "layer x layer summaries only" in how
    assert sum(len(e["b64"]) for e in stored) * 3 / 4 <= PAIR_BUDGET
    assert all(e["max"][5][3] is not None and e["max"][3][5] is None for e in packed.values())
    size = sum(len(e["b64"]) for e in stored) + len(get_plotlyjs()) + len(json.dumps([e["max"] for e in packed.values()]))
    assert size < 20e6
    # the 16-bit codes: within (hi - lo) / 131068 of the value
    first = next(iter(packed))
    e = packed[first]
    n = H * H * L * (L - 1) // 2
    metric, kind, m = first.split("|")
    dense = tables[metric].values[m, kind].numpy()
    want = np.concatenate([dense[l1, :, l2, :].ravel() for l1 in range(L) for l2 in range(l1 + 1, L)])
    assert np.nanmax(np.abs(_decode(e, n) - want)) <= (e["hi"] - e["lo"]) / 131068 * 1.0001


def test_sixteen_bit_codes_of_a_constant_a_partly_missing_and_an_empty_table():
    """Under a budget too small for float32 (2 bytes a pair here): a table of one value decodes to it
    exactly, a missing pair (65535) to NaN beside the others within the stated error, a table with no
    value to NaN everywhere (range 0 to 0); each block's summary skips what is missing. At the
    budget's edges: float32 while 4 bytes a pair fit, and one byte short of 16-bit codes for every
    table, the last table as its summaries only."""
    from compscope.report.payload import pack_tables
    from compscope.results.table import ScoreTable

    L, H = 3, 2
    n = H * H * L * (L - 1) // 2  # 12 pairs
    g = torch.Generator().manual_seed(3)
    later = torch.zeros(L, H, L, H, dtype=torch.bool)
    for l1 in range(L):
        later[l1, :, l1 + 1:, :] = True
    nan = torch.full((L, H, L, H), float("nan"), dtype=torch.float64)
    spread = torch.where(later, torch.rand(L, H, L, H, generator=g, dtype=torch.float64) * 3 - 1, nan)
    spread[0, 1, 2, 0] = float("nan")  # one pair the measure leaves undefined
    values = {("tight", "K"): torch.where(later, torch.full_like(nan, 0.25), nan), ("overlap", "K"): spread,
              ("bandwidth", "K"): nan.clone()}
    tables = {"identity": ScoreTable(values, "identity", "hand")}
    packed, how = pack_tables(tables, "K", ["tight", "overlap", "bandwidth"], budget=2 * n * 3)
    assert how.startswith("every pair as 16-bit codes")
    assert all(e["enc"] == "u2" for e in packed.values())
    const = packed["identity|K|tight"]
    assert (const["lo"], const["hi"]) == (0.25, 0.25)
    assert np.array_equal(_decode(const, n), np.full(n, 0.25))
    part = packed["identity|K|overlap"]
    want = np.concatenate([spread[l1, :, l2, :].numpy().ravel() for l1 in range(L) for l2 in range(l1 + 1, L)])
    got = _decode(part, n)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(want).sum() == 1
    assert np.nanmax(np.abs(got - want)) <= (part["hi"] - part["lo"]) / 131068 * 1.0001
    assert part["max"][2][0] == pytest.approx(float(np.nanmax(spread[0, :, 2, :].numpy())), rel=1e-12)
    assert part["mean"][2][0] == pytest.approx(float(np.nanmean(spread[0, :, 2, :].numpy())), rel=1e-12)
    empty = packed["identity|K|bandwidth"]
    assert (empty["lo"], empty["hi"]) == (0.0, 0.0) and np.isnan(_decode(empty, n)).all()
    assert empty["max"] == empty["mean"] == [[None] * L for _ in range(L)]
    assert part["mean"][0] == [None] * L and part["mean"][1][1] is None  # no block above or on the diagonal
    # float32 while 4 bytes a pair fit; 16-bit codes of as many tables as 2 bytes a pair fit, the rest summaries
    names = ["tight", "overlap", "bandwidth"]
    assert {e["enc"] for e in pack_tables(tables, "K", names, budget=4 * n * 3)[0].values()} == {"f4"}
    assert {e["enc"] for e in pack_tables(tables, "K", names, budget=4 * n * 3 - 1)[0].values()} == {"u2"}
    packed, how = pack_tables(tables, "K", names, budget=2 * n * 3 - 1)
    assert [packed[f"identity|K|{m}"]["enc"] for m in names] == ["u2", "u2", None]
    assert how.startswith("pairs of the first 2 of 3 tables as 16-bit codes; the rest as layer x layer summaries only")
    assert packed["identity|K|bandwidth"]["max"] == empty["max"] and "b64" not in packed["identity|K|bandwidth"]


def test_colour_centres_are_the_random_subspace_baselines():
    """d = 64, r = 8: frobenius centred on d^-1/2 alone, on the median over pairs and kinds of
    frobenius - frobenius_baselined beside it (missing pairs skipped); frobenius_baselined on 0,
    overlap on r/d, shared_dims on r^2/d; a measure without a baseline on none."""
    from compscope.report.payload import colour_centres
    from compscope.results.table import ScoreTable

    nan = float("nan")
    fro = {"Q": torch.tensor([0.5, 0.375, 0.25]), "K": torch.tensor([0.125, nan, 1.0])}
    base = {"Q": torch.tensor([0.25, 0.0, 0.0]), "K": torch.tensor([0.0, 0.5, 0.5])}  # .25 .375 .25 .125 .5
    values = {("frobenius", k): fro[k] for k in "QK"} | {("frobenius_baselined", k): base[k] for k in "QK"}
    values |= {("overlap", "Q"): fro["Q"], ("shared_dims", "Q"): fro["Q"], ("tight", "Q"): fro["Q"]}
    got = colour_centres({"identity": ScoreTable(values, "identity", "hand")}, 64, 8)
    assert got == {"frobenius": 0.25, "frobenius_baselined": 0.0, "overlap": 8 / 64, "shared_dims": 1.0, "tight": None}
    alone = colour_centres({"identity": ScoreTable({("frobenius", "K"): fro["K"]}, "identity", "hand")}, 64, 8)
    assert alone == {"frobenius": 0.125}
    none_finite = {("frobenius", "K"): fro["K"], ("frobenius_baselined", "K"): torch.full((3,), nan)}
    assert colour_centres({"identity": ScoreTable(none_finite, "identity", "hand")}, 16, 8)["frobenius"] == 0.25


def test_graph_edges_are_the_strongest_pairs_above_the_baseline():
    """Per kind, the n largest pairs, largest first, only those strictly above the centre (none
    given: all), each ``[l1, h1, l2, h2, value]``."""
    from compscope.report.payload import graph_edges
    from compscope.results.table import ScoreTable

    t = torch.full((3, 1, 3, 1), float("nan"), dtype=torch.float64)
    t[0, 0, 1, 0], t[0, 0, 2, 0], t[1, 0, 2, 0] = 0.5, 0.125, -0.25
    table = ScoreTable({("frobenius_baselined", "K"): t, ("frobenius_baselined", "V"): -t}, "identity", "hand")
    got = graph_edges(table, "KV", "frobenius_baselined", 0.125)
    assert got == {"K": [[0, 0, 1, 0, 0.5]], "V": [[1, 0, 2, 0, 0.25]]}  # 0.125 is not above 0.125
    assert graph_edges(table, "K", "frobenius_baselined", None, n=2) == {"K": [[0, 0, 1, 0, 0.5], [0, 0, 2, 0, 0.125]]}
    assert graph_edges(table, "K", "frobenius_baselined", None)["K"][-1] == [1, 0, 2, 0, -0.25]


def test_labels_in_the_page_keep_a_missing_score_missing():
    """A score the labels lack (None: copying without an unembedding) stays null in the page; a
    NaN entry becomes null, the others rounded to 6 places."""
    from compscope.report.collect import Labels
    from compscope.report.payload import labels_json, verdict_json

    prev = torch.tensor([[0.1234567, float("nan")], [1.0, 0.0]])
    lab = Labels("weights", {"previous_token": prev, "copying": None}, {"previous_token": [(1, 0)]}, "rule")
    got = labels_json(lab)
    assert got["scores"] == {"previous_token": [[0.123457, None], [1.0, 0.0]], "copying": None}
    assert got["roles"] == {"previous_token": [[1, 0]]} and got["errors"] == {} and got["text"] is None
    assert labels_json(None) is None and verdict_json(None) is None  # no labels, no verdict


def test_the_axiom_table_marks_each_outcome_against_what_was_declared():
    """yes / VIOLATED for a declared property, (yes) / no for a declared failure, yes? / no? where
    nothing was declared; axioms in the order met, one row per measure."""
    from compscope.analysis.axioms import AxiomResult
    from compscope.report.payload import axioms_json

    R = AxiomResult
    results = [R("a", "scale", "satisfies", True, 0.0, ""), R("a", "gauge", "satisfies", False, 0.5, "pair 3"),
               R("b", "scale", "fails", True, 0.0, "", "by design"), R("b", "gauge", "fails", False, 1.0, "", "why"),
               R("c", "scale", "undeclared", True, 0.0, ""), R("c", "gauge", "undeclared", False, 2.0, "pair 1")]
    got = axioms_json(results)
    assert got["axioms"] == ["scale", "gauge"]
    marks = {r["measure"]: [(c["mark"], c["reason"], c["where"]) for c in r["cells"]] for r in got["rows"]}
    assert marks == {"a": [("yes", "", ""), ("VIOLATED", "", "pair 3")],
                     "b": [("(yes)", "by design", ""), ("no", "why", "")],
                     "c": [("yes?", "", ""), ("no?", "", "pair 1")]}
    assert [r["measure"] for r in got["rows"]] == ["a", "b", "c"]


def test_tracked_curves_in_the_page():
    """Every writer -> later-reader pair's series for each kind asked for, rounded to 6 places;
    previous-token -> induction pairs highlighted, and without activation labels (roles refused)
    none highlighted and no formation step; a kind not asked for is passed over."""
    from compscope.report.payload import track_json
    from compscope.results.table import ScoreTable

    t = torch.full((2, 2, 2, 2), float("nan"), dtype=torch.float64)
    tables = [[ScoreTable({("tight", "K"): t, ("tight", "V"): t}, "identity", "toy")]] * 2

    class Run:
        steps = [0, 50]

        def __init__(self, labelled):
            self.tables, self.labelled = tables, labelled

        def roles(self):
            if not self.labelled:
                raise OptionError("the last checkpoint has no activation labels")
            return [(0, 1)], [(1, 0), (0, 0)]

        def formation_step(self):
            return 50

        def series(self, m, k, pair, metric):
            return [0.1234567 * (pair[1] + 2 * pair[3]), 1.0 if k == "K" else 2.0]

    got = track_json(Run(True), "K")
    assert got["steps"] == [0, 50] and got["formation"] == 50 and len(got["panels"]) == 1
    panel = got["panels"][0]
    assert (panel["kind"], panel["measure"], panel["metric"]) == ("K", "tight", "identity")
    assert [(s["pair"], s["highlight"], s["values"]) for s in panel["series"]] == [
        ("0.0->1.0", False, [0.0, 1.0]), ("0.0->1.1", False, [0.246913, 1.0]),
        ("0.1->1.0", True, [0.123457, 1.0]), ("0.1->1.1", False, [0.37037, 1.0])]
    plain = track_json(Run(False), "KV")
    assert plain["formation"] is None and [p["kind"] for p in plain["panels"]] == ["K", "V"]
    assert not any(s["highlight"] for p in plain["panels"] for s in p["series"])
    assert [p["kind"] for p in track_json(Run(True), "V")["panels"]] == ["V"]  # a kind not asked for is passed over
    assert track_json(None, "K") is None


def test_explainer_measures_against_closed_forms():
    """Two rank-1 maps: frobenius = tight = spectral = |cos|, overlap = shared_dims = cos², bandwidth 1
    (0 when orthogonal), whatever the lengths; the polarizer chain of the seed."""
    from compscope.report.explainers import channel_measures, polarizer_chain, rank1_baseline

    for wa, ra, wl, rl in ((30, 75, 1.5, 1.0), (10, 190, 0.2, 3.0), (0, 90, 1, 1), (45, 45, 2, 0.5)):
        c = abs(math.cos(math.radians(ra - wa)))
        m = channel_measures(wa, ra, wl, rl)
        for name in ("frobenius", "tight", "spectral"):
            assert m[name] == pytest.approx(c, abs=1e-12)
        assert m["overlap"] == pytest.approx(c * c, abs=1e-12) and m["shared_dims"] == pytest.approx(c * c, abs=1e-12)
        assert m["bandwidth"] == (0.0 if c < 1e-12 else pytest.approx(1.0))
        assert m["frobenius_baselined"] == pytest.approx(c - rank1_baseline(2), abs=1e-12)
    # E|cos| = 2/pi for two random lines in the plane; 256 seeded draws, sd of |cos| about 0.31
    assert abs(rank1_baseline(2) - 2 / math.pi) < 4 * 0.31 / 16
    np.testing.assert_allclose(polarizer_chain([0, 90]).numpy(), np.zeros((2, 2)), atol=1e-15)
    np.testing.assert_allclose(polarizer_chain([0, 45, 90]).numpy(), [[0, 0], [0.5, 0]], atol=1e-15)


def test_weights_only_labels_and_training_curves(tmp_path, capsys):
    """--data none: labels from the weights, said so; --run: the tracked checkpoints' curves."""
    run = tmp_path / "run"
    assert main(["train", "--preset", "tiny", "--out", str(run), "--steps", "12", "--checkpoints", "3"]) == 0
    capsys.readouterr()
    final = sorted((run / "checkpoints").iterdir())[-1]
    out = tmp_path / "rep"
    assert main(["report", str(final), "--run", str(run), "--data", "none", "--kinds", "K", "--no-figures",
                 "--measure", "frobenius", "--metric", "identity", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "heads labelled from weights" in text and f"wrote {out / 'index.html'}" in text
    assert "copying: " in text and "(from the weights)" not in text
    doc = _document((out / "index.html").read_text())
    assert doc["labels"]["source"] == "weights" and doc["verdict"] is None
    from compscope.toy.train import checkpoint_steps

    assert doc["track"]["steps"] == checkpoint_steps(12, 3)
    panel = doc["track"]["panels"][0]
    assert panel["kind"] == "K" and len(panel["series"]) == 4 and len(panel["series"][0]["values"]) == len(doc["track"]["steps"])
    assert not list(out.glob("*.png"))


def test_the_models_own_effects_are_a_table_beside_the_measures(toy_report):
    """With data the page holds the interventional effects as one more table per kind, stored as
    the measures' pairs are; read back independently they equal a verdict's own effects (the
    report's data run is validate with its defaults)."""
    from compscope.data.validate import validate

    doc = _document((toy_report / "index.html").read_text())
    L, H = doc["L"], doc["H"]
    assert doc["measures"][-1] == "interventions" and doc["centres"]["interventions"] is None
    assert doc["effects_note"] == "mean-ablation, direct path, 16 sequences"
    v = validate("induction-2l", progress=False)
    for kind in "QKV":
        got = _decode(doc["tables"][f"data|{kind}|interventions"], H * H * L * (L - 1) // 2)
        dense = v.effects.by_kind[kind].numpy()
        want = np.concatenate([dense[l1, :, l2, :].ravel() for l1 in range(L) for l2 in range(l1 + 1, L)])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert not any(k.startswith("data|") for k in doc["tables"] if not k.endswith("|interventions"))


def test_data_folder_is_read_and_checked(tmp_path, capsys):
    v = tmp_path / "v"
    assert main(["validate", "--out", str(v), "--sequences", "8", "--intervention-sequences", "4", "--metric", "identity"]) == 0
    printed = capsys.readouterr().out.splitlines()
    out = tmp_path / "rep"
    assert main(["report", "--data", str(v), "--out", str(out), "--no-figures", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == str(out / "index.html")
    doc = _document((out / "index.html").read_text())
    assert doc["labels"]["source"] == "data" and {r["metric"] for r in doc["verdict"]} == {"identity"}
    # the page's summary is what validate printed above its table: its first line, then the truth's lines
    summary = doc["verdict_summary"]
    first_truth = printed.index(summary[1])
    assert summary[0] == printed[0] and summary[0].startswith("induction-2l: 8 repeated random sequences [t, t], |t| = 32")
    assert summary[1].startswith("true previous-token -> induction K-pairs: ")
    assert summary[1:] == printed[first_truth:first_truth + len(summary) - 1] and printed[first_truth + len(summary) - 1] == ""
    import pandas as pd

    saved = pd.read_parquet(v / "interventions.parquet")  # the folder's effects, pair by pair
    k = saved[saved.kind == "K"]
    packed = _decode(doc["tables"]["data|K|interventions"], 4 * 4)  # layer 0 -> 1: writer head, then reader head
    np.testing.assert_allclose(packed, k.sort_values(["src_head", "dst_head"]).effect.to_numpy(), rtol=1e-6)
    assert doc["effects_note"] == "mean-ablation, direct path, 4 sequences"
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "rep1"), "--no-figures"]) == 0
    rows = pd.read_csv(v / "verdict.csv")
    k_rows = list(rows[rows.kind == "K"].itertuples())
    top = max((round(r.auroc, 3), round(r.spearman, 2)) for r in k_rows)  # the best K row as printed; the first of ties
    best = next(r for r in k_rows if (round(r.auroc, 3), round(r.spearman, 2)) == top)
    said = capsys.readouterr().out
    assert (f"best measure x metric on data: {best.measure}, {best.metric} (AUROC of the true previous-token -> "
            f"induction K-pairs {best.auroc:.3f}, Spearman with interventions {best.spearman:.2f})") in said
    # the toy's roles from data; copying, which the data do not label, said to come from the weights
    assert "heads labelled from data: previous-token: 0.0 0.1   induction: 1.0 1.1 1.2 1.3   copying (from the weights): " in said
    run = json.loads((v / "run.json").read_text())
    (v / "run.json").write_text(json.dumps({k: x for k, x in run.items() if k != "true_pairs"}))  # an older or edited run.json
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "rep3"), "--no-figures", "--quiet"]) == 0
    assert _document((tmp_path / "rep3" / "index.html").read_text())["verdict_summary"] is None
    (v / "interventions.parquet").write_bytes(b"not parquet")
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "rep2"), "--no-figures"]) == 2
    assert "interventions.parquet: cannot read the interventions" in capsys.readouterr().err
    (v / "interventions.parquet").unlink()  # an older folder without them: the report has no effects table
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "rep2"), "--no-figures", "--quiet"]) == 0
    assert "interventions" not in _document((tmp_path / "rep2" / "index.html").read_text())["measures"]
    capsys.readouterr()
    (v / "head_labels.csv").write_text("layer,head\n0,0\n")
    assert main(["report", "--data", str(v), "--out", str(out), "--no-figures"]) == 2
    assert "head_labels.csv" in capsys.readouterr().err
    assert main(["report", "--data", str(tmp_path), "--out", str(out), "--no-figures"]) == 2
    assert f"--data {tmp_path}: not a folder written by `compscope validate --out`" in capsys.readouterr().err
    with pytest.raises(OptionError, match=rf"^data {re.escape(str(tmp_path))}: not a folder written by"):  # as Python names it
        compscope.write_report("induction-2l", out, data=tmp_path, progress=False)
    with pytest.raises(OptionError, match=r"^data .*head_labels\.csv: expected columns"):
        compscope.write_report("induction-2l", out, data=v, progress=False)


def test_the_labels_standard_errors_reach_the_page_from_a_folder_or_a_verdict_in_hand(tmp_path):
    """The page's labels from data carry their standard errors: those of ``head_labels.csv``'s
    ``<label>_error`` columns, or of the verdict in hand (the default model's, run by the report);
    a folder written before those columns existed gives none."""
    import pandas as pd

    from compscope.data.head_labels import LABELS

    v = tmp_path / "v"
    assert main(["validate", "--out", str(v), "--sequences", "8", "--intervention-sequences", "2", "--metric", "identity",
                 "--kinds", "K"]) == 0
    lab = pd.read_csv(v / "head_labels.csv").sort_values(["layer", "head"])
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "rep"), "--no-figures", "--quiet"]) == 0
    errors = _document((tmp_path / "rep" / "index.html").read_text())["labels"]["errors"]
    assert set(errors) == set(LABELS)
    for k in LABELS:
        np.testing.assert_allclose(np.array(errors[k]).ravel(), lab[f"{k}_error"].to_numpy(), rtol=1e-5, atol=1e-6)
    assert max(max(row) for row in errors["induction"]) > 0
    lab.drop(columns=[f"{k}_error" for k in LABELS]).to_csv(v / "head_labels.csv", index=False)
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "old"), "--no-figures", "--quiet"]) == 0
    doc = _document((tmp_path / "old" / "index.html").read_text())
    assert doc["labels"]["source"] == "data" and doc["labels"]["errors"] == {}
    assert main(["report", "--out", str(tmp_path / "auto"), "--kinds", "K", "--metric", "identity", "--no-figures",
                 "--quiet"]) == 0  # the default model: its verdict is run, in hand
    in_hand = _document((tmp_path / "auto" / "index.html").read_text())["labels"]["errors"]
    assert set(in_hand) == set(LABELS) and all(x is not None and x >= 0 for row in in_hand["induction"] for x in row)


def test_the_labels_on_text_reach_the_page_from_a_folder_or_a_verdict_in_hand(tmp_path, capsys):
    """A verdict with labels on text (``validate --text-labels``): the page's labels carry them, those
    of ``head_labels_text.csv`` with their standard errors and what the text was, and its summary the
    lines ``validate`` printed about them; a verdict in hand gives the same page data as its folder; a
    folder without them gives none, and a broken ``head_labels_text.csv`` is refused by name."""
    import pandas as pd

    import compscope
    from compscope.data.head_labels import LABELS
    from compscope.data.residual_moments import SampleData

    v = tmp_path / "v"
    assert main(["validate", "--text-labels", "--sample-sequences", "3", "--sample-length", "24", "--kinds", "K",
                 "--metric", "identity", "--sequences", "8", "--intervention-sequences", "2", "--out", str(v)]) == 0
    printed = capsys.readouterr().out.splitlines()
    at = next(i for i, x in enumerate(printed) if x.startswith("labelled again on "))
    text_block = printed[at:at + 4]  # the line naming the text, two of top heads, one of rank correlations
    assert text_block[1].startswith("  top induction heads there: ") and " ± " in text_block[1]

    assert main(["report", "--data", str(v), "--out", str(tmp_path / "rep"), "--no-figures", "--quiet"]) == 0
    doc = _document((tmp_path / "rep" / "index.html").read_text())
    text, run = doc["labels"]["text"], json.loads((v / "run.json").read_text())
    assert text["data"] == run["text_labels_data"] == "3 repeated random sequences [t, t], |t| = 12 (seed 12346)"
    lab = pd.read_csv(v / "head_labels_text.csv").sort_values(["layer", "head"])
    assert set(text["scores"]) == set(text["errors"]) == set(LABELS)
    for k in LABELS:
        np.testing.assert_allclose(np.array(text["scores"][k]).ravel(), lab[k].to_numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.array(text["errors"][k]).ravel(), lab[f"{k}_error"].to_numpy(), rtol=1e-5, atol=1e-6)
    assert doc["verdict_summary"][1:5] == text_block  # after the line of what the verdict ran on, as validate prints
    assert doc["verdict_summary"][5].startswith("true previous-token -> induction K-pairs: ")

    common = dict(sequences=8, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    verdict = compscope.validate("induction-2l", text_labels=True, sample_data=SampleData(sequences=3, length=24), **common)
    compscope.write_report("induction-2l", tmp_path / "in_hand", kinds="K", metrics=("identity",), data=verdict,
                           figures=False, progress=False)
    in_hand = _document((tmp_path / "in_hand" / "index.html").read_text())
    assert in_hand["labels"]["text"] == text and in_hand["verdict_summary"] == doc["verdict_summary"]

    (v / "head_labels_text.csv").unlink()
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "none"), "--no-figures", "--quiet"]) == 0
    doc = _document((tmp_path / "none" / "index.html").read_text())
    assert doc["labels"]["text"] is None and not any("labelled again" in x for x in doc["verdict_summary"])
    lab.iloc[:-1].to_csv(v / "head_labels_text.csv", index=False)  # a head short
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "bad"), "--no-figures", "--quiet"]) == 2
    assert "head_labels_text.csv: expected columns" in capsys.readouterr().err


def test_a_verdict_of_another_compscope_version_says_so_in_the_report(tmp_path):
    """A verdict folder whose run.json names another compscope version than the one writing the
    report: a note says both; the same version, or none recorded (an older folder), gives none."""
    import compscope

    v = tmp_path / "v"
    assert main(["validate", "--out", str(v), "--sequences", "8", "--intervention-sequences", "2", "--metric", "identity",
                 "--kinds", "K"]) == 0
    run = json.loads((v / "run.json").read_text())
    assert run["compscope"] == compscope.__version__

    def notes(name: str) -> list[str]:
        assert main(["report", "--data", str(v), "--out", str(tmp_path / name), "--no-figures", "--quiet"]) == 0
        return [n for n in _document((tmp_path / name / "index.html").read_text())["notes"] if "computed by compscope" in n]

    assert notes("same") == []
    (v / "run.json").write_text(json.dumps({**run, "compscope": "0.0.9"}))
    assert notes("other") == [f"the verdict was computed by compscope 0.0.9 (its run.json), this report by "
                              f"{compscope.__version__}: run `compscope validate` again for a verdict of this version"]
    (v / "run.json").write_text(json.dumps({k: x for k, x in run.items() if k != "compscope"}))
    assert notes("unrecorded") == []


def test_a_verdict_on_some_writers_says_so_in_the_report(tmp_path, capsys):
    """A folder from `validate --writers 0.1`: the page's effects table holds that writer's row and
    NaN elsewhere (the folder's own effects), and the page and the summary line name the writer."""
    v = tmp_path / "v"
    assert main(["validate", "--out", str(v), "--sequences", "8", "--intervention-sequences", "4", "--metric", "identity",
                 "--kinds", "K", "--writers", "0.1"]) == 0
    capsys.readouterr()
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "rep"), "--no-figures"]) == 0
    assert "Spearman with interventions" in (said := capsys.readouterr().out)
    assert "interventions: mean-ablation, direct path, 4 sequences, writers 0.1 only)" in said
    doc = _document((tmp_path / "rep" / "index.html").read_text())
    assert doc["effects_note"] == "mean-ablation, direct path, 4 sequences, writers 0.1 only"
    assert "on 4 of them, writers 0.1 (" in doc["verdict_summary"][0]  # the summary names it as validate prints it
    assert " among their pairs at AUROC " in doc["verdict_summary"][2]
    import pandas as pd

    saved = pd.read_parquet(v / "interventions.parquet")
    assert set(saved.src_head) == {1} and len(saved) == 4
    packed = _decode(doc["tables"]["data|K|interventions"], 4 * 4).reshape(4, 4)  # writer head x reader head
    assert np.isnan(packed[[0, 2, 3]]).all()
    np.testing.assert_allclose(packed[1], saved.sort_values("dst_head").effect.to_numpy(), rtol=1e-6)


def test_bad_out_and_help(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    for bad, words in ((f, "is a file"), (tmp_path / "missing" / "r", "the folder .* does not exist"), (tmp_path / "r.html", "give a folder")):
        assert main(["report", "--out", str(bad)]) == 2
        assert re.search(rf"--out {re.escape(str(bad))}: {words}", capsys.readouterr().err)
        with pytest.raises(compscope.OptionError, match=rf"^out {re.escape(str(bad))}: {words}"):  # Python: named as there
            compscope.write_report("induction-2l", bad, data="none", progress=False)
    # a count of detail pairs that is not one: refused before any table is computed (it was after them all)
    import compscope.report.collect as collect_module

    def no_work(*a, **k):
        raise AssertionError("the work started")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(collect_module, "collect", no_work)
        with pytest.raises(compscope.OptionError, match=r"^detail_pairs=-1: expected an integer >= 0$"):
            compscope.write_report("induction-2l", tmp_path / "r", detail_pairs=-1, progress=False)
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = capsys.readouterr().out
    assert "--quiet" in text and "--open" in text and "examples:" in text and "compscope report" in text


def test_one_layer_model_is_refused(tmp_path):
    from compscope.report.collect import collect
    from compscope.toy.model import ToyConfig, ToyTransformer
    from compscope.toy.storage import save_toy

    torch.manual_seed(0)
    model = ToyTransformer(ToyConfig(n_layers=1, n_heads=2, d_model=16, d_head=8, d_vocab=16, n_ctx=16))
    with pytest.raises(OptionError, match="at least 2 layers"):
        collect(save_toy(model, tmp_path / "one"), data="none", progress=False)


def test_open_hands_the_page_to_the_browser(tmp_path, monkeypatch, capsys):
    import webbrowser

    opened = []
    monkeypatch.setattr(webbrowser, "open", lambda uri: opened.append(uri) or True)
    out = tmp_path / "rep"
    assert main(["report", "--data", "none", "--no-figures", "--kinds", "K", "--quiet", "--open", "--out", str(out)]) == 0
    assert opened == [(out / "index.html").resolve().as_uri()]
    assert capsys.readouterr().err == ""
    # where no browser is known (a server), it says so and where the page is; the report is written all the same
    monkeypatch.setattr(webbrowser, "open", lambda uri: False)
    assert main(["report", "--data", "none", "--no-figures", "--kinds", "K", "--quiet", "--open", "--out", str(out)]) == 0
    assert capsys.readouterr().err == f"--open: no browser found to open it; open {out / 'index.html'} in one yourself\n"


def test_a_metric_of_ones_own_is_reported_under_its_name():
    """A ``Metric`` object beside a registered name given twice: one table each, under the
    Metric's own name, equal to the scores under that Metric (it once failed hashing the object)."""
    import dataclasses

    import compscope
    from compscope.core.metrics import get_metric
    from compscope.report.collect import collect

    hw = compscope.load("induction-2l")
    mine = dataclasses.replace(get_metric("embed", hw), name="my-embed")
    rep = collect("induction-2l", kinds="K", metrics=[mine, "identity", "identity"], data="none", progress=False,
                  detail_pairs=2)
    assert list(rep.tables) == ["my-embed", "identity"] and rep.options["metrics"] == ["my-embed", "identity"]
    want = compscope.scores(hw, "K", ["frobenius"], get_metric("embed", hw), progress=False).dense("frobenius", "K")
    torch.testing.assert_close(rep.tables["my-embed"].dense("frobenius", "K"), want, equal_nan=True)


def test_a_report_with_no_metric_that_applies_says_why():
    from hf_tiny import BY_ID, build

    from compscope.report.collect import collect

    with pytest.raises(OptionError, match=r"no metric given applies to .*: metric 'unembed': .*no unembedding"):
        collect(build(BY_ID["bert"]), metrics=("unembed",), data="none", progress=False)


def test_the_python_api_writes_the_page_the_command_writes(tmp_path, capsys):
    """``compscope.write_report`` and ``compscope report`` write the same page (but for the line
    that says what made it), and return / print where it is."""
    import compscope

    assert main(["report", "--out", str(tmp_path / "cli"), "--no-figures", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "cli" / "index.html")
    index = compscope.write_report(out=tmp_path / "api", figures=False, progress=False)
    assert index == tmp_path / "api" / "index.html"
    cli, api = (_document((tmp_path / d / "index.html").read_text()) for d in ("cli", "api"))
    assert api.pop("command") == f"compscope.write_report('induction-2l', out={str(tmp_path / 'api')!r})"
    cli.pop("command")
    assert api == cli


def test_the_made_by_line_of_the_python_api_names_every_option_that_changes_the_page(tmp_path):
    """Measures, metrics, detail pairs and the metric's data are named as given (a metric object by
    its kind, the data by the fields given); options left at their defaults are not."""
    import compscope
    from compscope.core.metrics import get_metric
    from compscope.data.residual_moments import MetricData

    index = compscope.write_report("induction-2l", tmp_path / "r", kinds="K", measures=("tight",),
                                   metrics=["identity", get_metric("embed", compscope.load("induction-2l")), "covariance"],
                                   data="none", detail_pairs=2, figures=False, progress=False,
                                   metric_data=MetricData(sequences=8, seed=0))
    assert _document(index.read_text())["command"] == (
        f"compscope.write_report('induction-2l', out={str(tmp_path / 'r')!r}, kinds='K', measures=('tight',), "
        "metrics=['identity', Metric, 'covariance'], data='none', detail_pairs=2, "
        "metric_data=MetricData(sequences=8, seed=0))")


def test_a_verdict_in_hand_is_the_reports_data(tmp_path, monkeypatch):
    """``data=`` a Verdict: the page holds its rows, truth lines, head rankings and effects, and
    nothing is validated again; a verdict of another model, or data of no known kind, is refused."""
    import dataclasses

    import compscope
    import compscope.data.validate as validation
    from compscope.data.validate import data_line, ranked, truth_lines

    v = compscope.validate("induction-2l", kinds="K", metrics=["identity"], sequences=8, intervention_sequences=4,
                           progress=False)
    monkeypatch.setattr(validation, "validate", lambda *a, **k: pytest.fail("validated again"))
    index = compscope.write_report("induction-2l", tmp_path / "r", kinds="K", metrics=["identity"], data=v,
                                   figures=False, progress=False)
    doc = _document(index.read_text())
    assert doc["verdict_summary"] == [data_line(v.model, v.options)] + truth_lines(v.options)
    assert doc["verdict_summary"][0].startswith("induction-2l: 8 repeated random sequences")
    assert [(r["measure"], r["metric"]) for r in doc["verdict"]] == [key for key, _ in ranked(v.rows)]
    assert doc["verdict_heads"] == v.heads and doc["labels"]["source"] == "data"
    packed = _decode(doc["tables"]["data|K|interventions"], 16)
    np.testing.assert_allclose(packed, v.effects.by_kind["K"][0, :, 1, :].numpy().ravel(), rtol=1e-6)
    assert "data='a Verdict given'" not in doc["command"] and "data=Verdict" in doc["command"]
    with pytest.raises(OptionError, match="a verdict of 'other-model', not of 'induction-2l'"):
        compscope.write_report("induction-2l", tmp_path / "r2", data=dataclasses.replace(v, model="other-model"),
                               figures=False, progress=False)
    with pytest.raises(OptionError, match="data=int: give 'auto', 'run', 'none', a folder"):  # before any loading
        compscope.write_report(tmp_path / "no-such-model", tmp_path / "r3", data=5, figures=False, progress=False)


def test_the_pair_command_of_a_metric_on_data_names_the_data_the_report_estimated_it_on(tmp_path, capsys):
    """A report whose covariance metric was estimated on 8 sequences with seed 0 and the sample
    moment (not shrunk) records those options (not the defaults) for the pair command of that metric only,
    and that command prints the pair's measures as the page holds them."""
    from compscope.data.residual_moments import MetricData

    assert MetricData().cli_flags() == []
    out = tmp_path / "rep"
    assert main(["report", "induction-2l", "--data", "none", "--kinds", "K", "--metric", "identity", "--metric",
                 "covariance", "--metric-sequences", "8", "--metric-seed", "0", "--metric-shrinkage", "none",
                 "--no-figures", "--quiet", "--out", str(out)]) == 0
    doc = _document((out / "index.html").read_text())
    flags = ["--metric-sequences", "8", "--metric-seed", "0", "--metric-shrinkage", "none"]
    assert doc["metric_data_flags"] == flags and doc["on_data"] == ["covariance"]
    key = next(k for k in doc["details"] if k.startswith("covariance|K|"))
    _, _, w, r = key.split("|")
    capsys.readouterr()
    assert main(["pair", "induction-2l", w, r, "--kind", "K", "--metric", "covariance", *flags]) == 0
    printed = capsys.readouterr().out
    head = printed.splitlines()[0]  # the metric, its condition numbers, and what it was estimated on
    assert ", metric covariance (largest condition number of 2 layers" in head
    assert " without), estimated on 8 held-out repeated random sequences" in head
    for measure, value in doc["details"][key]["measures"].items():
        assert re.search(rf"\b{measure}\b\s+{value:.4f}", printed), (measure, value, printed)
    assert main(["pair", "induction-2l", w, r, "--kind", "K", "--metric", "covariance"]) == 0  # the defaults differ
    assert capsys.readouterr().out != printed


def test_a_ridge_reaches_the_reports_metrics_its_verdict_and_its_pair_command(tmp_path, monkeypatch, capsys):
    """``compscope report --ridge R``: the page's pairs under ``embed`` are ``compose_pair``'s under R (not the default
    ridge's), the verdict it runs is asked for R, and the page holds R for the pair commands it suggests; with only
    the identity metric (no G) and no verdict run it is refused before any work. A verdict given (in hand or saved)
    under another ridge than the report's is named so in the notes."""
    import compscope
    import compscope.data.validate as V

    asked, real = [], V.validate
    monkeypatch.setattr(V, "validate", lambda *a, **k: asked.append(k.get("ridge")) or real(*a, **k))
    out = tmp_path / "rep"
    assert main(["report", "induction-2l", "--data", "run", "--kinds", "K", "--metric", "identity", "--metric", "embed",
                 "--ridge", "0.1", "--no-figures", "--quiet", "--out", str(out)]) == 0
    assert asked == [0.1]
    doc = _document((out / "index.html").read_text())
    assert doc["ridge"] == 0.1
    key = next(k for k in doc["details"] if k.startswith("embed|K|"))
    _, _, w, r = key.split("|")
    want, default = (compscope.compose_pair("induction-2l", w, r, "K", "embed", **kw).measures
                     for kw in ({"ridge": 0.1}, {}))
    assert doc["details"][key]["measures"] == pytest.approx(want, rel=1e-5, abs=1e-6)  # as stored: 6 digits
    assert max(abs(want[m] - default[m]) for m in want) > 1e-3  # the ridge changed the pair
    capsys.readouterr()
    assert main(["report", "--metric", "identity", "--data", "none", "--ridge", "0.1", "--out",
                 str(tmp_path / "no")]) == 2
    assert "--ridge 0.1: the identity metric has no G to regularise" in capsys.readouterr().err
    assert asked == [0.1] and not (tmp_path / "no").exists()
    # only the identity in the report's tables, but a verdict that runs judges metrics with a G: they take it
    assert main(["report", "--metric", "identity", "--kinds", "K", "--ridge", "0.1", "--no-figures", "--quiet",
                 "--out", str(tmp_path / "id")]) == 0
    assert asked == [0.1, 0.1] and _document((tmp_path / "id" / "index.html").read_text())["ridge"] == 0.1
    refused = r"^ridge=0\.1: the identity metric has no G to regularise"
    with monkeypatch.context() as m, pytest.raises(OptionError, match=refused):
        m.setattr(sources, "load_with_positional", lambda *a, **k: pytest.fail("loaded before the refusal"))
        compscope.write_report("induction-2l", tmp_path / "no", metrics=["identity"], data="none", ridge=0.1,
                               figures=False, progress=False)
    py = _document(compscope.write_report("induction-2l", tmp_path / "py", kinds="K", metrics=["embed"], data="none",
                                          ridge=0.1, figures=False, progress=False).read_text())
    assert py["ridge"] == 0.1 and "ridge=0.1" in py["command"]
    assert py["details"][key]["measures"] == pytest.approx(want, rel=1e-5, abs=1e-6)
    # a verdict of other metrics (another ridge, its run.json says) is named as such; of the same, not
    v = compscope.validate("induction-2l", kinds="K", metrics=["embed"], sequences=8, intervention_sequences=4,
                           ridge=0.1, progress=False)
    v.save(tmp_path / "v")
    said = ("the verdict's metrics were regularised with ridge 0.1, this report's with 1e-06: run "
            "`compscope validate --ridge 1e-06` for a verdict of the same metrics")
    for data, kw, noted in ((v, {}, True), (v, {"ridge": 0.1}, False), (str(tmp_path / "v"), {}, True),
                            (str(tmp_path / "v"), {"ridge": 0.1}, False)):
        index = compscope.write_report("induction-2l", tmp_path / "r", kinds="K", metrics=["embed"], data=data,
                                       figures=False, progress=False, **kw)
        notes = _document(index.read_text())["notes"]
        assert (said in notes) == noted, (data, kw, notes)
    # a run.json of before validate recorded its ridge: the default, which every verdict then had
    run = json.loads((tmp_path / "v" / "run.json").read_text())
    (tmp_path / "v" / "run.json").write_text(json.dumps({k: x for k, x in run.items() if k != "ridge"}))
    for kw, noted in (({}, False), ({"ridge": 0.1}, True)):
        index = compscope.write_report("induction-2l", tmp_path / "r", kinds="K", metrics=["embed"],
                                       data=str(tmp_path / "v"), figures=False, progress=False, **kw)
        notes = _document(index.read_text())["notes"]
        assert ("the verdict's metrics were regularised with ridge 1e-06, this report's with 0.1: run `compscope "
                "validate --ridge 0.1` for a verdict of the same metrics" in notes) == noted, (kw, notes)


def test_the_pair_command_of_a_gram_matrix_file_names_the_file(tmp_path, capsys):
    """A report under ``--metric FILE.npy`` records the file as the metric's command-line name (and
    no data flags for it), and that command prints the pair's measures as the page holds them; a
    metric given in Python only has no command-line name."""
    import numpy as np

    import compscope

    hw = compscope.load("induction-2l")
    E, P = hw.W_E.double(), hw.W_pos.double()
    np.save(tmp_path / "cov.npy", (E @ E.T / E.shape[1] + P @ P.T / P.shape[1] + torch.eye(64, dtype=torch.float64)).numpy())
    out = tmp_path / "rep"
    assert main(["report", "induction-2l", "--data", "none", "--kinds", "K", "--metric", "identity", "--metric",
                 str(tmp_path / "cov.npy"), "--no-figures", "--quiet", "--out", str(out)]) == 0
    doc = _document((out / "index.html").read_text())
    assert doc["metrics"] == ["identity", "cov"] and doc["on_data"] == []
    assert doc["metric_args"] == {"identity": "identity", "cov": str(tmp_path / "cov.npy")}
    key = next(k for k in doc["details"] if k.startswith("cov|K|"))
    _, _, w, r = key.split("|")
    capsys.readouterr()
    assert main(["pair", "induction-2l", w, r, "--kind", "K", "--metric", doc["metric_args"]["cov"]]) == 0
    printed = capsys.readouterr().out
    head = printed.splitlines()[0]  # which G, as the page's note, and its condition numbers
    assert ", metric cov (condition number " in head and " without), with G given as the file cov.npy (SHA-256 " in head
    assert any(n.startswith("metric cov with G given as the file cov.npy (SHA-256 ") for n in doc["notes"])
    for measure, value in doc["details"][key]["measures"].items():
        assert re.search(rf"\b{measure}\b\s+{value:.4f}", printed), (measure, value, printed)
    assert main(["report", "induction-2l", "--data", "none", "--metric", str(tmp_path / "cov.npy"), "--metric-seed", "0",
                 "--out", str(tmp_path / "r2")]) == 2  # data flags with no metric on data: refused, naming the file's
    assert "none is selected (metrics: cov)" in capsys.readouterr().err
    rep = compscope.write_report("induction-2l", tmp_path / "py", kinds="K", metrics=[torch.eye(64), "embed"], data="none",
                                 figures=False, progress=False)
    assert _document(rep.read_text())["metric_args"] == {"custom": None, "embed": "embed"}


@pytest.mark.parametrize(("variant", "flag"), [("llama-mha", "--fold-norm"), ("gemma3-text", "--linearise-qk-norm")])
def test_the_pair_command_the_page_suggests_loads_the_model_as_the_report_did(tmp_path, capsys, variant, flag):
    """A report of weights loaded with ``--fold-norm`` (or QK-norm linearised) records the flag for
    the pair command it suggests, and that command prints the pair's measures as the page holds them."""
    from hf_tiny import BY_ID, build

    folder = tmp_path / "model"
    build(BY_ID[variant]).save_pretrained(folder)
    out = tmp_path / "rep"
    assert main(["report", str(folder), flag, "--data", "none", "--kinds", "K", "--metric", "identity",
                 "--no-figures", "--quiet", "--out", str(out)]) == 0
    doc = _document((out / "index.html").read_text())
    assert doc["model_arg"] == str(folder) and doc["model_flags"] == [flag]
    capsys.readouterr()
    assert main(["pair", str(folder), "0.1", "1.2", "--kind", "K", "--metric", "identity", *doc["model_flags"]]) == 0
    printed = capsys.readouterr().out
    step = {"--fold-norm": "fold_norm", "--linearise-qk-norm": "linearise_qk_norm (isotropic input)"}[flag]
    assert f" (weights: {step}): 0.1 -> 1.2, K-composition" in printed.splitlines()[0], printed
    measures = doc["details"]["identity|K|0.1|1.2"]["measures"]
    assert set(measures) == {"frobenius", "frobenius_baselined", "tight", "overlap", "shared_dims", "bandwidth", "spectral", "read_gain"}
    for measure, value in measures.items():
        assert re.search(rf"\b{measure}\b\s+{value:.4f}", printed), (measure, value, printed)


def test_the_reports_verdict_judges_the_weights_its_tables_show(tmp_path):
    """A report of processed weights runs its verdict on the same processing (``--fold-norm``: the rows
    are ``validate(..., fold_norm=True)``'s, its first line says so, no note; ``--center-writing`` alike);
    a verdict of other weights (a saved one of the weights as read) comes with a note naming both; a
    step that moves no score (``fold_value_bias``) and a verdict that records no processing say nothing."""
    import compscope
    from compscope.report.collect import collect, judged_weights_note
    from hf_tiny import BY_ID, build

    llama, gpt2 = tmp_path / "llama", tmp_path / "gpt2"
    build(BY_ID["llama-mha"]).save_pretrained(llama)
    build(BY_ID["gpt2"]).save_pretrained(gpt2)
    opts = dict(kinds="K", metrics=["identity"], progress=False)
    said = lambda rep: [n for n in rep.notes if n.startswith("the verdict judged")]  # noqa: E731
    rep = collect(str(llama), data="run", processing={"fold_norm": True}, **opts)
    assert rep.verdict_summary[0].startswith("llama (weights: fold_norm): ") and said(rep) == []
    want = compscope.validate(str(llama), fold_norm=True, **opts)
    assert [(r["measure"], r["spearman"]) for r in rep.verdict if r["metric"] == "identity"] == \
        [(r["measure"], r["spearman"]) for r in want.rows]
    compscope.validate(str(llama), sequences=8, intervention_sequences=4, **opts).save(tmp_path / "v")
    rep = collect(str(llama), data=str(tmp_path / "v"), processing={"fold_norm": True}, **opts)
    assert said(rep) == ["the verdict judged the measures on the weights as read; the report's tables are of the "
                         "weights with fold_norm: its ranking of measure x metric is of those other weights"]
    rep = collect(str(gpt2), data="run", processing={"center_writing": True, "fold_value_bias": True}, **opts)
    assert rep.verdict_summary[0].startswith("gpt2 (weights: center_writing): ") and said(rep) == []
    compscope.validate(str(gpt2), sequences=8, intervention_sequences=4, **opts).save(tmp_path / "g")
    rep = collect(str(gpt2), data=str(tmp_path / "g"), processing={"center_writing": True}, **opts)
    assert said(rep) == ["the verdict judged the measures on the weights as read; the report's tables are of the "
                         "weights with center_writing: its ranking of measure x metric is of those other weights"]
    assert said(collect(str(llama), data="run", processing={"fold_value_bias": True}, **opts)) == []
    assert judged_weights_note(None, compscope.load(llama, fold_norm=True)) is None


def test_the_axiom_battery_runs_once_a_session_for_the_same_measures(monkeypatch):
    """The report's battery is ``check_axioms()`` of the registered measures; a second report of the
    session reuses it, and a measure registered since runs it again, with that measure."""
    from compscope.analysis import axioms
    from compscope.measures import MEASURES, Measure, get_measure, register
    from compscope.report import collect as c

    monkeypatch.setattr(c, "_BATTERY", {})
    assert c.axiom_battery() == axioms.check_axioms()
    ran = []
    monkeypatch.setattr(axioms, "check_axioms", lambda ms: ran.append([m.name for m in ms]) or [])
    assert c.axiom_battery() != [] and ran == []
    base = get_measure("overlap")
    monkeypatch.setattr(MEASURES, "_entries", dict(MEASURES._entries))
    register(Measure("overlap_twice", lambda p: 2 * base.exact(p), None, (0.0, 2.0), "2 x overlap", frozenset()))
    assert c.axiom_battery() == [] and ran == [MEASURES.names()] and ran[0][-1] == "overlap_twice"


def test_a_report_reads_text_with_the_tokenizer_given_and_its_pair_command_carries_it(tmp_path, capsys):
    """``report --tokenizer``: a folder without a tokenizer has its metric on data estimated on natural
    text cut by it (said in the page's notes); the pair command the page suggests carries the option,
    and prints the pair as the page holds it; refused where nothing in the report reads text."""
    from hf_tiny import BY_ID, build, word_tokenizer

    folder, tok = tmp_path / "model", word_tokenizer(tmp_path / "tok")
    build(BY_ID["llama-mha"]).save_pretrained(folder)
    out = tmp_path / "rep"
    data = ["--metric-sequences", "4", "--metric-length", "16"]
    assert main(["report", str(folder), "--data", "none", "--kinds", "K", "--metric", "covariance", *data,
                 "--tokenizer", str(tok), "--no-figures", "--quiet", "--out", str(out)]) == 0
    doc = _document((out / "index.html").read_text())
    assert doc["model_arg"] == str(folder) and doc["model_flags"] == ["--tokenizer", str(tok)]
    assert doc["metric_data_flags"] == data
    capsys.readouterr()
    assert main(["pair", str(folder), "0.1", "1.2", "--kind", "K", "--metric", "covariance", *doc["metric_data_flags"],
                 *doc["model_flags"]]) == 0
    printed = capsys.readouterr().out
    assert f"tokenised by the tokenizer {tok}" in printed.splitlines()[0]
    for measure, value in doc["details"]["covariance|K|0.1|1.2"]["measures"].items():  # 4 digits against the page's 6
        shown = float(re.search(rf"^{measure}\s+(-?[\d.]+)$", printed, re.M).group(1))
        assert shown == pytest.approx(value, abs=5e-5 + 1e-6), (measure, value, printed)
    # a run's checkpoints (--run) read text with the same tokenizer
    from compscope.data.residual_moments import MetricData
    from compscope.data.runner import runner_for
    from compscope.data.tokenizers import read_tokenizer
    from compscope.report.collect import collect

    build(BY_ID["llama-mha"], seed=1).save_pretrained(tmp_path / "run" / "step_1")
    build(BY_ID["llama-mha"], seed=2).save_pretrained(tmp_path / "run" / "step_2")
    runner = runner_for(folder, tokenizer=read_tokenizer(tok), tokenizer_said="the words")
    rep = collect(runner, kinds="K", metrics=["covariance"], data="none", run=tmp_path / "run", progress=False,
                  metric_data=MetricData(sequences=4, length=16))
    assert [tabs[0].info["metric_data"].split("; ")[0] for tabs in rep.track.tables] == \
        ["4 sequences of 16 tokens of standard-library docstrings (seed 12346), tokenised by the words"] * 2
    # a runner made in Python from a path: the page's pair command names that path, and a tokenizer
    # object (which has no path) by a placeholder; one made from a model object: MODEL
    assert (rep.options["model"], rep.options["model_flags"]) == (str(folder), ["--tokenizer", "TOKENIZER"])
    rep = collect(runner_for(folder), kinds="K", metrics=["identity"], data="auto", progress=False)
    assert (rep.options["model"], rep.options["model_flags"]) == (str(folder), [])
    assert f"no data: head labels from the weights; run `compscope validate {folder} --out DIR`" in " ".join(rep.notes)
    rep = collect(runner_for(runner.model), kinds="K", metrics=["identity"], data="none", progress=False)
    assert (rep.options["model"], rep.options["model_flags"]) == (None, [])
    assert main(["report", str(folder), "--data", "none", "--metric", "identity", "--tokenizer", str(tok),
                 "--out", str(tmp_path / "r2")]) == 2
    assert "--tokenizer: for the metrics estimated on data and --data run, and none is asked for" in capsys.readouterr().err
