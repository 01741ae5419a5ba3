"""The report in a real browser: headless Chromium opens it from disk with the network off, every
figure renders without a console error, and the communication explainer, set by its sliders and
by dragging on the plane, shows the measures Python computes for the same matrices.

Needs Debian's ``chromium`` and the ``playwright`` package (``.ci/run`` installs chromium); skipped,
saying which is missing, where they cannot be had."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from compscope.cli.main import main

pytest.importorskip("plotly")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium)")

FIGURES = ("heatmap", "graph-fig", "pair-fig", "ex-down", "ex-up", "ex-bottleneck", "ex-polarizer", "ex-channel")


@pytest.fixture(scope="module")
def browser():
    """``open(out) -> (page, requests, errors)``: a report folder opened offline in one headless Chromium."""
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield lambda out: _opened(chromium, out)
        chromium.close()


def _opened(chromium, out):
    ctx = chromium.new_context(offline=True, viewport={"width": 1300, "height": 900})
    requests, errors = [], []
    ctx.route("**/*", lambda route: (requests.append(route.request.url), route.continue_() if
                                     route.request.url.startswith("file:") else route.abort()))
    pg = ctx.new_page()
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto((out / "index.html").as_uri())
    pg.wait_for_function("window.compscopeMeasures !== undefined")
    return pg, requests, errors


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    out = tmp_path_factory.mktemp("browser") / "report"
    assert main(["report", "--out", str(out), "--quiet", "--no-figures"]) == 0
    return (*browser(out), out)


def _measures(pg) -> dict[str, float | None]:
    cells = pg.eval_on_selector_all("[id^=ch-m-]", "els => els.map(e => [e.id.slice(5), e.textContent])")
    return {k: (None if v == "—" else float(v)) for k, v in cells}


def test_every_figure_renders_offline(page):
    pg, requests, errors, out = page
    assert all(u.startswith("file:") for u in requests), requests
    for fig in FIGURES:
        n = pg.evaluate(f"(() => {{ const g = document.getElementById('{fig}'); return g.data ? g.data.length : 0; }})()")
        svgs = pg.evaluate(f"document.querySelectorAll('#{fig} .main-svg').length")
        assert n > 0 and svgs > 0, fig
    # a small model's heads are each named on the axes (writers of layer 0, readers of layer 1)
    axis = lambda a: pg.evaluate(f"document.getElementById('heatmap').layout.{a}axis.ticktext")  # noqa: E731
    assert axis("x") == ["0.0", "0.1", "0.2", "0.3"] and axis("y") == ["1.0", "1.1", "1.2", "1.3"]
    # switching the heatmap to the layer summary and another kind redraws without an error
    pg.select_option("#sel-view", "layers")
    pg.select_option("#sel-kind", "V")
    assert pg.evaluate("document.getElementById('heatmap').data[0].z.length") == 2  # 2 layers
    # the model's own effects on data draw as a heatmap too, titled as such
    pg.select_option("#sel-view", "pairs")
    pg.select_option("#sel-kind", "K")
    pg.select_option("#sel-measure", "interventions")
    assert "interventional effect on data" in pg.evaluate("document.getElementById('heatmap').layout.title.text")
    assert pg.evaluate("document.getElementById('heatmap').data[0].z.length") == 4  # reader heads of layer 1
    assert errors == []


def test_a_model_with_many_heads_names_its_layers_on_the_axes(browser, tmp_path):
    """Past 48 heads per axis the pair heatmap names each layer's block, not each head."""
    from compscope.toy.model import ToyConfig, ToyTransformer
    from compscope.toy.storage import save_toy

    cfg = ToyConfig(n_layers=3, n_heads=25, d_model=50, d_head=2, d_vocab=20, n_ctx=16)
    folder = save_toy(ToyTransformer(cfg, seed=0), tmp_path / "wide")
    assert main(["report", str(folder), "--out", str(tmp_path / "report"), "--data", "none", "--quiet", "--no-figures"]) == 0
    pg, _, errors = browser(tmp_path / "report")
    axis = lambda a: pg.evaluate(f"document.getElementById('heatmap').layout.{a}axis.ticktext")  # noqa: E731
    assert axis("x") == ["L0", "L1"] and axis("y") == ["L1", "L2"]  # 50 writers, 50 readers
    # without data, the verdict's place says how to get one for this model
    assert f"No data for this report. Run compscope validate {folder} --out DIR and pass --data DIR" in \
        pg.inner_text("#verdict")
    assert errors == []


def test_without_data_for_a_model_the_data_commands_refuse_the_page_says_why(browser, tmp_path, monkeypatch):
    """Where the data-based commands cannot run the model (compscope.data.runner.cannot_run says why:
    tested on such files in test_gguf_format.py), the verdict's place gives that reason, as text,
    instead of suggesting a command that would refuse it."""
    import compscope.data.runner as runner

    monkeypatch.setattr(runner, "cannot_run", lambda model: "m.gguf: <b>not</b> run by transformers")
    assert main(["report", "--out", str(tmp_path / "report"), "--data", "none", "--quiet", "--no-figures"]) == 0
    pg, _, errors = browser(tmp_path / "report")
    assert pg.inner_text("#verdict") == "No data for this report: m.gguf: <b>not</b> run by transformers"
    assert errors == []


def test_the_verdict_table_reads_as_the_printed_one(page):
    """The verdict's rows in the order and digits ``compscope validate`` prints them (ranked on the
    saved verdict.csv, Spearman to 2 decimals, the AUROCs to 3), with the K AUROC's standard error and
    the AUROCs within readers and writers beside them."""
    import pandas as pd

    from compscope.data.validate import ranked

    pg, _, errors, out = page
    cells = pg.eval_on_selector_all("#verdict-table tr", "rows => rows.slice(1).map(r => [...r.cells].map(c => c.textContent))")
    def fixed(v):  # an AUROC with nothing to compare (the toy's readers all true or all false per writer): a dash
        return "—" if v != v else f"{v:.3f}"

    want = [[m, met, *(f"{ks[k]['spearman']:.2f}" for k in "QKV"), f"{ks['K']['auroc']:.3f}",
             f"{ks['K']['auroc_se']:.3f}", f"{ks['K']['auroc_confirmed']:.3f}", fixed(ks["K"]["auroc_within_readers"]),
             fixed(ks["K"]["auroc_within_writers"]), ks["K"]["axioms"]]
            for (m, met), ks in ranked(pd.read_csv(out / "verdict.csv").to_dict("records"))]
    assert cells == want and len(cells) > 1 and errors == []
    assert any(row[-3] != "—" for row in cells) and all(row[-2] == "—" for row in cells)  # the toy: 4 readers, no writer with both


def test_the_graph_shows_each_label_from_data_with_its_standard_error(page):
    """Hovering a head of the circuit graph: each label from data with ``± its standard error``
    (3 significant digits, of the page's payload), the default model's verdict being run for the report."""
    pg, _, errors, _ = page
    doc = pg.evaluate("JSON.parse(document.getElementById('compscope-data').textContent)")
    texts = pg.evaluate("document.getElementById('graph-fig').data.filter(t => t.mode === 'markers').flatMap(t => t.text)")
    assert len(texts) == 8  # 2 layers x 4 heads
    for text in texts:
        l, h = map(int, re.match(r"head (\d+)\.(\d+)<br>", text).groups())
        for k in ("induction", "previous_token"):
            mean, err = doc["labels"]["scores"][k][l][h], doc["labels"]["errors"][k][l][h]
            assert f"{k} {mean:#.3g} ± {err:#.3g}" in text, (text, k)  # 3 significant digits, as the page shows numbers
    assert errors == []


def test_the_graph_shows_the_labels_on_text_beside_the_repeats(browser, tmp_path, capsys):
    """A verdict with labels on text (``validate --text-labels``): hovering a head shows, under the
    repeats' labels, the text's, each with ``± its standard error`` (the payload's); the verdict's
    summary shows validate's lines about them, spaced as printed (three spaces between heads)."""
    v = tmp_path / "v"
    assert main(["validate", "--text-labels", "--sample-sequences", "3", "--kinds", "K", "--metric", "identity",
                 "--sequences", "8", "--intervention-sequences", "2", "--out", str(v)]) == 0
    printed = [x.strip() for x in capsys.readouterr().out.splitlines() if x.startswith("  top ") and " heads there: " in x]
    assert len(printed) == 2 and all("   " in x for x in printed)
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "rep"), "--quiet", "--no-figures"]) == 0
    pg, _, errors = browser(tmp_path / "rep")
    doc = pg.evaluate("JSON.parse(document.getElementById('compscope-data').textContent)")
    text = doc["labels"]["text"]
    hovers = pg.evaluate("document.getElementById('graph-fig').data.filter(t => t.mode === 'markers').flatMap(t => t.text)")
    assert len(hovers) == 8
    for hover in hovers:
        l, h = map(int, re.match(r"head (\d+)\.(\d+)<br>", hover).groups())
        repeats, on_text = hover.split(f"<br>on {text['data']}:<br>")
        for k in ("induction", "previous_token"):
            assert f"{k} {doc['labels']['scores'][k][l][h]:#.3g} ± " in repeats, (hover, k)
            assert f"{k} {text['scores'][k][l][h]:#.3g} ± {text['errors'][k][l][h]:#.3g}" in on_text, (hover, k)
    summary = pg.inner_text("#verdict-summary")
    assert f"labelled again on {text['data']}:" in summary and all(x in summary for x in printed), (summary, printed)
    assert errors == []


def test_the_verdict_table_shows_the_span_near_a_threshold_when_it_moves(browser, tmp_path):
    """A verdict whose K AUROC moves with heads near a threshold (here set in its ``verdict.csv``):
    the table gains the column ``near a threshold``, ``low–high`` per row; with no such row, no column.
    Beside AUROC K, its standard error (``± SE``), where the verdict has one (here set too): not for a
    verdict written before it was kept."""
    import pandas as pd

    v = tmp_path / "v"
    assert main(["validate", "--out", str(v), "--sequences", "8", "--intervention-sequences", "2", "--metric", "identity",
                 "--kinds", "K"]) == 0
    rows = pd.read_csv(v / "verdict.csv")
    assert (rows.auroc_near_low == rows.auroc_near_high).all()  # the default model: no head near a threshold
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "same"), "--no-figures", "--quiet"]) == 0
    pg, _, errors = browser(tmp_path / "same")
    assert "near a threshold" not in pg.eval_on_selector_all("#verdict-table th", "els => els.map(e => e.textContent)")
    rows.drop(columns="auroc_se").to_csv(v / "verdict.csv", index=False)
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "older"), "--no-figures", "--quiet"]) == 0
    pg, _, errors1 = browser(tmp_path / "older")
    assert "± SE" not in pg.eval_on_selector_all("#verdict-table th", "els => els.map(e => e.textContent)")
    rows["auroc_near_low"] = rows.auroc - 0.25
    rows["auroc_se"] = rows.auroc_se.where(rows.kind != "K", 0.0126)
    rows.to_csv(v / "verdict.csv", index=False)
    assert main(["report", "--data", str(v), "--out", str(tmp_path / "moved"), "--no-figures", "--quiet"]) == 0
    pg, _, errors2 = browser(tmp_path / "moved")
    header = pg.eval_on_selector_all("#verdict-table th", "els => els.map(e => e.textContent)")
    assert header[-2:] == ["near a threshold", "axioms kept"] and header[-7:-5] == ["AUROC K", "± SE"]
    cells = pg.eval_on_selector_all("#verdict-table tr", "rows => rows.slice(1).map(r => [...r.cells].map(c => c.textContent))")
    by = {(r.measure, r.metric): r for r in rows.itertuples()}
    assert len(cells) == len(by) and errors == [] and errors1 == [] and errors2 == []
    for cell in cells:
        r = by[(cell[0], cell[1])]
        assert cell[-2] == f"{r.auroc - 0.25:.3f}–{r.auroc:.3f}" and cell[-7] == f"{r.auroc:.3f}"  # the AUROC K
        assert cell[-6] == "0.013"  # (its standard error)


def test_the_verdict_says_its_truth_and_ranks_heads_as_printed(page):
    """Above the table, the lines ``compscope validate`` prints above its own (an indented one as an
    item under the line before); below it, each head score from the weights against its label, with
    the CLI's digits and the count of heads labelled (the toy: 4 induction heads, 2 previous-token)."""
    pg, _, errors, _ = page
    doc = pg.evaluate("JSON.parse(document.getElementById('compscope-data').textContent)")
    shown = pg.eval_on_selector_all("#verdict-summary p, #verdict-summary li", "els => els.map(e => [e.tagName, e.textContent])")
    assert shown == [["LI" if line.startswith("  ") else "P", line.strip()] for line in doc["verdict_summary"]]
    assert [tag for tag, _ in shown] == ["P", "P", "LI", "LI"]  # what it ran on; the truth; confirmed; the writer's role
    cells = pg.eval_on_selector_all("#verdict-heads tr", "rows => rows.slice(1).map(r => [...r.cells].map(c => c.textContent))")
    want = [[r["score"], "previous-token" if r["score"] == "previous_token" else "induction", f"{r['spearman']:.2f}",
             f"{r['precision_top5']:.2f}", str(r["true_heads"])] for r in doc["verdict_heads"]]
    assert cells == want and [c[0] for c in cells] == ["induction", "induction_qk", "previous_token"]
    assert [c[-1] for c in cells] == ["4", "4", "2"] and errors == []


def test_the_verdict_taken_apart_by_head_shows_one_measure_at_a_time(page):
    """The by-head table opens on the best measure x metric the verdict ranks among those the report
    computed, its rows as the payload holds them (3 decimals); choosing another redraws it."""
    from decimal import ROUND_HALF_UP, Decimal

    import pandas as pd

    from compscope.data.validate import ranked

    pg, _, errors, out = page
    doc = pg.evaluate("JSON.parse(document.getElementById('compscope-data').textContent)")
    have = {(r["measure"], r["metric"]) for r in doc["verdict_by_head"]}
    order = [key for key, _ in ranked(pd.read_csv(out / "verdict.csv").to_dict("records")) if key in have]
    options = pg.eval_on_selector_all("#by-head-choice option", "els => els.map(e => e.value)")
    assert options[0] == "|".join(order[0]) and sorted(options) == sorted("|".join(k) for k in have)

    def shown():
        return pg.eval_on_selector_all("#verdict-by-head tr", "rows => rows.slice(1).map(r => [...r.cells].map(c => c.textContent))")

    def want(key):
        # JavaScript's toFixed rounds the double's exact value half up (Python's format: half even)
        f = lambda v: "—" if v is None else str(Decimal(v).quantize(Decimal("0.001"), ROUND_HALF_UP))  # noqa: E731
        return [[f"{r['layer']}.{r['head']}", "previous-token writer" if r["side"] == "writer" else "induction reader",
                 f"{r['label']:.2f}", str(r["true_pairs"]), f(r["measure_true"]), f(r["measure_other"]),
                 f(r["effect_true"]), f(r["effect_other"])]
                for r in doc["verdict_by_head"] if (r["measure"], r["metric"]) == key]

    assert shown() == want(order[0]) and len(shown()) == 6
    last = options[-1]
    pg.select_option("#by-head-choice", last)
    assert shown() == want(tuple(last.split("|"))) and errors == []


def test_a_pair_shows_its_own_interventional_effect(page):
    """With data, the pair section's table ends with the pair's effect of that kind, to 3
    significant digits, equal to a fresh verdict's (the default model's previous-token head 0.0 ->
    induction head 1.1 under K; and the V effect of 0.1 -> 1.2)."""
    from compscope import validate

    pg, _, errors, _ = page
    effects = validate("induction-2l", progress=False).effects.by_kind
    for kind, (l1, h1, l2, h2) in (("K", (0, 0, 1, 1)), ("V", (0, 1, 1, 2))):
        pg.evaluate(f"showPair('identity', '{kind}', {l1}, {h1}, {l2}, {h2})")
        label, value = pg.eval_on_selector("#pair-effect", "r => [...r.cells].map(c => c.textContent)")
        assert label == f"effect on data ({kind} intervention)"
        assert float(value) == pytest.approx(float(effects[kind][l1, h1, l2, h2]), rel=5e-3)
    assert errors == []


def test_a_pair_without_stored_spectra_gives_a_command_that_runs(page, capsys):
    """A pair whose spectra the page did not store names the command that prints it in full, with
    the model as the report was given it; that command runs."""
    import shlex

    pg, _, errors, _ = page
    key = "identity|K|0.0|1.1"
    pg.evaluate(f"window._kept = D.details['{key}']; delete D.details['{key}']; showPair('identity', 'K', 0, 0, 1, 1)")
    try:
        cmd = pg.eval_on_selector("#pair-fig code", "e => e.textContent")
        assert pg.eval_on_selector("#pair-effect", "r => r.cells[0].textContent") == "effect on data (K intervention)"
    finally:
        pg.evaluate(f"D.details['{key}'] = window._kept")
    assert cmd == "compscope pair induction-2l 0.0 1.1 --kind K --metric identity"
    capsys.readouterr()
    assert main(shlex.split(cmd)[1:]) == 0 and "0.0 -> 1.1" in capsys.readouterr().out
    # a model path a shell would split comes back whole; an object, as MODEL
    # (and the weights' processing flags after it)
    for given, flags, want in (("my models/it's here", [], "my models/it's here"), (None, ["--fold-norm"], "MODEL")):
        got = pg.evaluate(f"(() => {{ const k = [D.model_arg, D.model_flags]; D.model_arg = {json.dumps(given)};"
                          f" D.model_flags = {json.dumps(flags)};"
                          " try { return pairCommand('embed', 'V', 0, 2, 1, 3); } finally { [D.model_arg, D.model_flags] = k; } })()")
        assert shlex.split(got) == ["compscope", "pair", want, "0.2", "1.3", "--kind", "V", "--metric", "embed", *flags]
    # a metric estimated on data carries the data's options; another metric does not
    got = pg.evaluate("(() => { const k = [D.on_data, D.metric_data_flags]; D.on_data = ['covariance'];"
                      " D.metric_data_flags = ['--metric-seed', '0']; try { return [pairCommand('covariance', 'K', 0, 0, 1, 1),"
                      " pairCommand('identity', 'K', 0, 0, 1, 1)]; } finally { [D.on_data, D.metric_data_flags] = k; } })()")
    assert got == ["compscope pair induction-2l 0.0 1.1 --kind K --metric covariance --metric-seed 0",
                   "compscope pair induction-2l 0.0 1.1 --kind K --metric identity"]
    # a ridge given: on each metric with a G (the identity has none); the command runs and says it
    got = pg.evaluate("(() => { const k = D.ridge; D.ridge = 0.1; try { return [pairCommand('embed', 'K', 0, 0, 1, 1),"
                      " pairCommand('identity', 'K', 0, 0, 1, 1)]; } finally { D.ridge = k; } })()")
    assert got == ["compscope pair induction-2l 0.0 1.1 --kind K --metric embed --ridge 0.1",
                   "compscope pair induction-2l 0.0 1.1 --kind K --metric identity"]
    capsys.readouterr()
    assert main(shlex.split(got[0])[1:]) == 0 and "with ridge 0.1·tr(G)/d" in capsys.readouterr().out
    # a Gram matrix file by its path (quoted for a shell); a metric given in Python only, by the Python call
    got = pg.evaluate("(() => { const k = D.metric_args; D.metric_args = {'my cov': 'G files/my cov.npy', 'custom': null};"
                      " try { return [pairCommand('my cov', 'K', 0, 0, 1, 1), pairCommand('custom', 'V', 0, 1, 1, 2)]; }"
                      " finally { D.metric_args = k; } })()")
    assert shlex.split(got[0]) == ["compscope", "pair", "induction-2l", "0.0", "1.1", "--kind", "K", "--metric",
                                   "G files/my cov.npy"]
    assert got[1] == ('compscope.compose_pair("induction-2l", "0.1", "1.2", "V", metric=...)  '
                      "# metric: the custom you gave")
    assert errors == []


def test_explainer_measures_equal_python(page):
    from compscope.report.explainers import channel_measures

    pg, _, errors, _ = page
    for wa, wl, ra, rl in (("50", "2.3", "110", "0.7"), ("0", "1", "90", "1"), ("200", "0.4", "20", "3")):
        for slider, v in (("ch-wa", wa), ("ch-wl", wl), ("ch-ra", ra), ("ch-rl", rl)):
            pg.eval_on_selector(f"#{slider}", "(e, v) => { e.value = v; e.dispatchEvent(new Event('input')); }", v)
        shown = _measures(pg)
        want = channel_measures(float(wa), float(ra), float(wl), float(rl))
        assert set(shown) == set(want)
        for k, v in want.items():
            assert shown[k] == pytest.approx(v, abs=2e-10), (k, wa, ra)
    # drag on the plane: the writer's direction follows the pointer, and the measures follow it
    pg.locator("#ex-channel").scroll_into_view_if_needed()
    box = pg.locator("#ex-channel .nsewdrag").first.bounding_box()
    pg.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] * 0.3)
    pg.mouse.down()
    pg.mouse.move(box["x"] + box["width"] * 0.85, box["y"] + box["height"] * 0.2)
    pg.mouse.up()
    wa, wl = pg.input_value("#ch-wa"), pg.input_value("#ch-wl")
    assert 0 < float(wa) < 90  # up and to the right
    want = channel_measures(float(wa), float(pg.input_value("#ch-ra")), float(wl), float(pg.input_value("#ch-rl")))
    assert _measures(pg)["overlap"] == pytest.approx(want["overlap"], abs=2e-10)
    # the three-polarizer example, in the page's own words
    assert "amplitude out 0.500, intensity 0.250" in pg.text_content("#tp-text")
    assert errors == []
