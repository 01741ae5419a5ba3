"""Write a collected report: ``index.html`` (self-contained: plotly's JavaScript, the page's own
script and every number embedded; nothing is fetched), the tables beside it (Parquet/CSV) and
static figures (PNG and SVG) for papers."""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path

from ..errors import OptionError
from ..results.files import check_folder
from . import payload as P

#: the name the page gives the interventional effects among the measures (table key ``data|KIND|interventions``)
EFFECTS = "interventions"


def check_out(out: str | Path, option: str = "--out") -> Path:
    """``out`` as a folder that can be written (its parent must exist); an error naming it (as
    ``option``) otherwise."""
    out = check_folder(out, option)
    if out.suffix.lower() in (".html", ".htm"):
        raise OptionError(f"{option} {out}: give a folder; the report is written to {out}/index.html")
    return out


def require_plotly():
    """plotly's JavaScript, or an ``OptionError`` saying how to install it."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as e:
        raise OptionError("the report needs plotly: pip install 'compscope[report]'") from e
    return get_plotlyjs()


def document(rep, command: str, version: str) -> dict:
    """The JSON document the page reads (``compscope.report.payload``)."""
    from ..core.card import card_rows
    from ..core.metrics import on_data
    from .explainers import explainer_json

    hw = rep.hw
    first = next(iter(rep.tables.values()))
    measures, packed = list(rep.options["measures"]), dict(rep.tables)
    if rep.effects:  # the model's own effects, as one more table of pairs (metric 'data'), packed first
        from ..results.table import ScoreTable

        values = {(EFFECTS, k): t for k, t in rep.effects.items() if k in rep.options["kinds"]}
        packed = {"data": ScoreTable(values, "data", rep.model), **packed}
        measures.append(EFFECTS)
    tables, how = P.pack_tables(packed, rep.options["kinds"], measures)
    centres = P.colour_centres(rep.tables, hw.d_model, hw.d_head)
    if rep.effects:
        centres[EFFECTS] = None
    edge_measure = "frobenius_baselined" if "frobenius_baselined" in first.measures else first.measures[0]
    return {
        "model": rep.model, "model_arg": rep.options.get("model"), "model_flags": rep.options.get("model_flags", []),
        "metric_data_flags": rep.options.get("metric_data_flags", []),
        "on_data": on_data(list(rep.options.get("metric_data") or {})),  # what the data flags apply to
        "metric_args": rep.options.get("metric_args") or {},
        "ridge": rep.options.get("ridge"),  # given for each metric with a G (None: the default), the pair command's too
        "cannot_run": rep.options.get("cannot_run"),
        "command": command, "version": version, "card": card_rows(hw), "notes": rep.notes,
        "L": hw.n_layers, "H": hw.n_heads, "d": hw.d_model, "r": hw.d_head,
        "kinds": rep.options["kinds"], "measures": measures, "metrics": list(rep.tables), "effects_note": rep.effects_note,
        "stored": how, "centres": centres, "tables": tables,
        "labels": P.labels_json(rep.labels),
        "weight_labels": P.labels_json(rep.weight_labels) if rep.data_labels is not None else None,
        "edges": P.graph_edges(first, rep.options["kinds"], edge_measure, centres.get(edge_measure)),
        "edge_measure": edge_measure, "edge_metric": first.metric,
        "details": P.details_json(rep.details), "axioms": P.axioms_json(rep.axioms),
        "verdict": P.verdict_json(rep.verdict), "verdict_heads": rep.verdict_heads,
        "verdict_summary": rep.verdict_summary, "verdict_by_head": rep.verdict_by_head,
        "track": P.track_json(rep.track, rep.options["kinds"]),
        "explainer": explainer_json(),
    }


def _asset(name: str) -> str:
    return (resources.files("compscope.report") / "assets" / name).read_text(encoding="utf-8")


def _json_for_script(doc: dict) -> str:
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    return text.replace("</", "<\\/")


def _clean(doc):
    """Plain JSON: numpy and torch scalars as Python numbers, NaN and infinities as ``null``."""
    import math

    if hasattr(doc, "item") and not isinstance(doc, (dict, list, tuple, str)):
        doc = doc.item()
    if isinstance(doc, dict):
        return {k: _clean(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [_clean(v) for v in doc]
    if isinstance(doc, float) and not math.isfinite(doc):
        return None
    return doc


def render(doc: dict, plotly_js: str) -> str:
    """The page: one HTML file with every script inline."""
    title = f"compscope report: {html.escape(doc['model'])}"
    return (_asset("page.html").replace("{{TITLE}}", title)
            .replace("{{STYLE}}", _asset("style.css"))
            .replace("{{PLOTLY}}", plotly_js.replace("</script", "<\\/script"))
            .replace("{{DATA}}", _json_for_script(_clean(doc)))
            .replace("{{SCRIPT}}", _asset("report.js") + "\n" + _asset("explainers.js")))


def write(rep, out: str | Path, *, command: str, version: str, figures: bool = True) -> list[Path]:
    """Write the report of ``rep`` into the folder ``out``; the paths written."""
    out = check_out(out)
    plotly_js = require_plotly()
    out.mkdir(exist_ok=True)
    doc = document(rep, command, version)
    paths = [out / "index.html"]
    paths[0].write_text(render(doc, plotly_js), encoding="utf-8")
    paths += write_tables(rep, out)
    if figures:
        from .figures import write_figures

        paths += write_figures(rep, doc, out)
    return paths


def write_tables(rep, out: Path) -> list[Path]:
    """``scores.parquet`` (every metric), ``head_labels.csv`` (weights, and data when there are
    data), ``axioms.csv`` and ``verdict.csv`` (with data)."""
    import pandas as pd

    from ..results.table import write_frame

    paths = [write_frame(pd.concat([t.to_pandas() for t in rep.tables.values()], ignore_index=True), out / "scores.parquet")]
    L, H = rep.hw.n_layers, rep.hw.n_heads
    rows = []
    for l in range(L):
        for h in range(H):
            row = {"layer": l, "head": h}
            for src in (rep.weight_labels, rep.data_labels):
                if src is not None:
                    row.update({f"{src.source}_{k}": float(v[l, h]) for k, v in src.scores.items()})
            rows.append(row)
    pd.DataFrame(rows).to_csv(out / "head_labels.csv", index=False)
    pd.DataFrame([{"measure": r.measure, "axiom": r.axiom, "declared": r.declared, "holds": r.holds, "reason": r.reason}
                  for r in rep.axioms]).to_csv(out / "axioms.csv", index=False)
    paths += [out / "head_labels.csv", out / "axioms.csv"]
    if rep.verdict:
        pd.DataFrame(rep.verdict).to_csv(out / "verdict.csv", index=False)
        paths.append(out / "verdict.csv")
    return paths
