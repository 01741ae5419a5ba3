"""The verdict's result: :class:`Verdict` (what :func:`compscope.data.validate.validate` measured and
its judgement), the files it writes and the table it prints, and the order its rows are ranked in
(:func:`ranked`), which the report and the sweep share."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor

from ..core.processing import weights_said
from ..errors import OptionError
from .separation import BY_HEAD_COLUMNS, NEAR, auroc_by_head, by_head_lines


@dataclass
class Verdict:
    """Everything :func:`validate` measured, and the judgement (module docstring)."""

    model: str
    labels: object  # ActivationLabels
    effects: object  # Effects
    tables: dict  # metric -> ScoreTable
    rows: list[dict]
    heads: list[dict]
    options: dict
    notes: list[str]
    text_labels: object  # TextLabels when asked for, else None

    def verdict_frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows)

    def __repr__(self) -> str:
        o = self.options
        best = next((ks["K"] for _, ks in ranked(self.rows) if "K" in ks), None)
        head = (f"best by K: {best['measure']} ({best['metric']}) AUROC {_auroc(best['auroc'])}, "
                f"rho {_fmt(best['spearman'])}; " if best else "")
        return (f"Verdict({self.model!r}: {o['sequences']} sequences, {self.effects.sequences} intervened; "
                f"{o['true_pairs']} true K-pairs, {o.get('confirmed_pairs') or 0} confirmed; {head}"
                f"{len(self.rows)} rows: .format() prints the table, .verdict_frame() gives them)")

    def auroc_by_head(self, measure: str, metric: str):
        """Where ``measure`` under ``metric`` finds the true previous-token -> induction K-pairs and
        where it misses them: one row per previous-token writer and induction reader
        (:func:`auroc_by_head`), the share of the false pairs its true pairs score above by the
        measure (``measure_true``; its other pairs: ``measure_other``) and by the K interventions
        (``effect_true``, ``effect_other``). Weighted by ``true_pairs``, each side's
        ``measure_true`` averages to the verdict's AUROC, ``effect_true`` to its ceiling."""
        import pandas as pd

        o = self.options
        if "K" not in self.effects.by_kind:
            raise OptionError("auroc_by_head: this verdict has no K-composition (kinds without 'K')")
        if metric not in self.tables:
            raise OptionError(f"auroc_by_head: no metric {metric!r} in this verdict; it has {', '.join(self.tables)}")
        table = self.tables[metric]
        if measure not in table.measures:
            raise OptionError(f"auroc_by_head: no measure {measure!r} in this verdict; it has {', '.join(table.measures)}")
        df = pd.DataFrame(auroc_by_head(table.dense(measure, "K"), self.effects.by_kind["K"], self.labels.previous_token,
                                        self.labels.induction, o["prev_threshold"], o["induction_threshold"]),
                          columns=list(BY_HEAD_COLUMNS))
        df.attrs.update(measure=measure, metric=metric)
        return df

    def format_by_head(self, measure: str | None = None, metric: str | None = None) -> str:
        """:meth:`auroc_by_head` as ``compscope validate --by-head`` prints it; without ``measure``
        or ``metric``, the best-ranked row of the table with the one given (neither: the best)."""
        if measure is None or metric is None:
            k_keys = [(m, met) for (m, met), ks in ranked(self.rows) if "K" in ks]  # best first
            if not k_keys:
                raise OptionError("auroc_by_head: this verdict has no K-composition (kinds without 'K')")
            best = next(((m, met) for m, met in k_keys if measure in (None, m) and metric in (None, met)), None)
            if best is None:
                asked = f"measure {measure!r}" if metric is None else f"metric {metric!r}"
                k_rows = [r for r in self.rows if r["kind"] == "K"]
                raise OptionError(f"auroc_by_head: no K row of {asked} in this verdict; it has measures "
                                  f"{', '.join(dict.fromkeys(r['measure'] for r in k_rows))} under metrics "
                                  f"{', '.join(dict.fromkeys(r['metric'] for r in k_rows))}")
            measure, metric = best
        df = self.auroc_by_head(measure, metric)
        row = next(r for r in self.rows if (r["measure"], r["metric"], r["kind"]) == (measure, metric, "K"))
        head = (f"{measure} ({metric}) by head: AUROC {_auroc(row['auroc'])}, the K interventions' "
                f"{_auroc(self.options.get('interventions_auroc'))}; the share of the false K-pairs that each head's "
                "true pairs score above (their AUROC), and its other pairs (-: none)")
        return "\n".join([head, *by_head_lines(df.to_dict("records"))])

    def interventions_frame(self):
        """One row per pair and kind (:meth:`compscope.data.intervene.Effects.to_pandas`)."""
        return self.effects.to_pandas()

    def save(self, out: str | Path) -> list[Path]:
        """Write ``head_labels.csv``, ``interventions.parquet``, ``verdict.csv``, ``heads.csv`` and
        ``run.json`` (options, thresholds, versions, notes; strict JSON, a value that is not a
        number as ``null``) into the folder ``out`` (created; its parent must exist), and
        ``head_labels_text.csv`` when the heads were labelled on text too."""
        import pandas as pd

        from ..results.files import check_folder, write_json

        out = check_folder(out)
        out.mkdir(exist_ok=True)
        labels = self.labels.to_pandas()
        paths = [out / "head_labels.csv", out / "interventions.parquet", out / "verdict.csv", out / "heads.csv",
                 out / "run.json"]
        labels.to_csv(paths[0], index=False)
        self.interventions_frame().to_parquet(paths[1], index=False)
        self.verdict_frame().to_csv(paths[2], index=False)
        pd.DataFrame(self.heads).to_csv(paths[3], index=False)
        write_json(paths[4], {"model": self.model, **self.options, "notes": self.notes})
        if self.text_labels is not None:
            paths.append(out / "head_labels_text.csv")
            self.text_labels.to_pandas().to_csv(paths[-1], index=False)
        return paths

    def format(self, top: int | None = None) -> str:
        """The ranked table (by K AUROC, then K Spearman), the head rankings and the strongest heads."""
        o = self.options
        lab = self.labels
        lines = [data_line(self.model, o)]
        for name, key in (("induction", "induction"), ("previous-token", "previous_token")):
            t = lab.mean[key]
            best = _top_heads(t, 5)
            lines.append(f"top {name} heads (data): " + "   ".join(f"{l}.{h} {v:.2f}" for (l, h), v in best))
        if self.text_labels is not None:
            t = self.text_labels
            lines += text_lines(t.data, t.mean, t.error, lab.mean)
        lines += truth_lines(o)
        kinds = [k for k in "QKV" if k in self.effects.by_kind]
        w = max([12] + [len(r["metric"]) for r in self.rows])  # the metric column
        header = f"{'measure':<20} {'metric':<{w}}" + "".join(f" {'rho ' + k:>7}" for k in kinds) + \
            (f" {'AUROC K':>8} {'confirmed':>9}" if "K" in kinds else "") + "  axioms kept"
        if self.rows:
            lines += ["", header]
        groups = ranked(self.rows)
        for (m, met), ks in groups[:top] if top else groups:
            cells = "".join(f" {_fmt(ks.get(k, {}).get('spearman')):>7}" for k in kinds)
            k_row = ks.get("K", {})
            au = f" {_auroc(k_row.get('auroc')):>8} {_auroc(k_row.get('auroc_confirmed')):>9}" if "K" in kinds else ""
            ax = next(iter(ks.values()))["axioms"]
            lines.append(f"{m:<20} {met:<{w}}{cells}{au}  {ax}")
        from ..analysis.circuits import relative_kind

        kind = relative_kind(self.options.get("positions"))
        for content, title in (("embed", "weights vs data, per head: "),
                               ("activations", "  with the residual each layer reads on data as the content of the "
                                               f"{kind} previous-token score: ")):
            hs = [h for h in self.heads if h.get("content", "embed") == content]
            if hs:
                lines += ([""] if content == "embed" else []) + [title + "   ".join(
                    f"{h['score']}: Spearman {_fmt(h['spearman'])}, precision of the top 5 {_fmt(h['precision_top5'])}"
                    for h in hs)]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def data_line(model: str, o: dict) -> str:
    """What a verdict ran on, its first printed line (``o``: its options, as ``run.json`` keeps them)."""
    proc = weights_said(o.get("weights_processing"))
    return (f"{model}{proc}: {o['sequences']} repeated random sequences [t, t], |t| = {o['half']} (seed {o['seed']}); "
            + (f"interventions ({o['ablation']}-ablation{', every path' if o.get('paths') == 'all' else ''}) "
               f"on {o['intervention_sequences']} of them{_writers_text(o.get('writers'))}"
               if o.get("intervention_sequences") else "no interventions"))


def truth_lines(o: dict) -> list[str]:
    """The label truth of the K AUROC (how many true pairs, by which thresholds), how many the K
    interventions confirm, and how well the interventions and the writer's role alone separate it."""
    lines = [f"true previous-token -> induction K-pairs: {o['true_pairs']} (previous-token >= {o['prev_threshold']}, "
             f"induction >= {o['induction_threshold']})"]
    if not o["true_pairs"]:
        lines.append("  none, so no AUROC: the rank correlations with the interventions judge the measures alone")
    near = [f"{name} " + ", ".join(f"{l}.{h} {v:.3f} ± {se:.3f}" for l, h, v, se in o["near_threshold"][key])
            for name, key in (("previous-token", "previous_token"), ("induction", "induction"))
            if (o.get("near_threshold") or {}).get(key)]
    if near:  # heads the truth may gain or lose on other sequences
        lines.append(f"  near a threshold (within {NEAR:g} standard errors over the sequences; other sequences may put "
                     f"them on its other side): {'; '.join(near)}")
    if o.get("confirmed_pairs") is not None and o["true_pairs"]:
        some = o.get("writers") is not None
        among = f" of their writers' {o['true_pairs_intervened']}" if some else ""
        lines.append(f"  confirmed by the K intervention (effect >= {o['effect_threshold']}): {o['confirmed_pairs']}{among}; "
                     f"the K interventions themselves separate the {o['true_pairs_intervened'] if some else o['true_pairs']}"
                     f"{' among their pairs' if some else ''} at AUROC {_auroc(o['interventions_auroc'])}")
    if o.get("writer_previous_auroc") and o["true_pairs"]:
        alone = ", ".join(f"{_auroc(a)} ({c if c == 'positions' else 'content: ' + c})"
                          for c, a in o["writer_previous_auroc"].items())
        line = f"  the writer's previous-token score from the weights alone separates them at AUROC {alone}"
        if o.get("circuit_auroc"):
            measure, metric = o["circuit_measure"]
            line += f"; times {measure} ({metric}) " + ", ".join(_auroc(a) for a in o["circuit_auroc"].values())
        lines.append(line)
    return lines


def text_lines(data: str, mean: dict[str, Tensor], error: dict[str, Tensor], repeats: dict[str, Tensor]) -> list[str]:
    """The heads' labels on text (``mean`` by label, ``(L, H)``, on ``data``) beside those on the
    repeats (``repeats``): the top heads, each with its standard error (``error``) where finite, and
    the rank correlation over all heads."""
    from ..analysis.stats import spearman
    from .head_labels import error_text

    lines = [f"labelled again on {data}:"]
    for name, key in (("induction", "induction"), ("previous-token", "previous_token")):
        lines.append(f"  top {name} heads there: " + "   ".join(f"{l}.{h} {v:.2f}{error_text(error.get(key), l, h)}"
                                                              for (l, h), v in _top_heads(mean[key], 5)))
    lines.append("  rank correlation with the repeats' labels over all heads (Spearman): " + ", ".join(
        f"{name} {_fmt(spearman(mean[key], repeats[key]))}" for name, key in
        (("induction", "induction"), ("previous-token", "previous_token"), ("duplicate-token", "duplicate_token"))))
    return lines


def _writers_text(writers) -> str:
    """``, writers 0.1 2.3 (2 heads; ...)``: the writers a verdict intervened on; empty for every head."""
    from .intervene import writers_text

    return "" if writers is None else f", {writers_text(writers, '; rho and confirmed over their pairs')}"


def ranked(rows: list[dict]) -> list[tuple[tuple[str, str], dict[str, dict]]]:
    """A verdict's rows grouped by (measure, metric), ``{kind: row}`` each, best first by
    :func:`rank_key` of the K row: the order of the printed table, the report's and its summary's."""
    by: dict = {}
    for r in rows:
        by.setdefault((r["measure"], r["metric"]), {})[r["kind"]] = r
    return sorted(by.items(), key=lambda item: rank_key(item[1].get("K", {})))


def rank_key(k_row: dict) -> tuple:
    """Best first: higher K AUROC, then higher K Spearman, each as printed (3 and 2 decimals); NaN
    (or no K row) last. Rows tied as printed keep the order they were made in (metric as given, then
    measure as registered) under a stable sort, so the table does not reorder with float noise (the
    thread count, the device)."""

    def printed(text: str) -> tuple[bool, float]:
        return (True, 0.0) if text == "n/a" else (False, -float(text))

    return printed(_auroc(k_row.get("auroc"))) + printed(_fmt(k_row.get("spearman")))


def _fmt(v, digits: int = 2) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _auroc(v) -> str:
    """An AUROC to 3 decimals: the goals are stated at 0.90 and 0.97, and 0.899 is not 0.90."""
    return _fmt(v, 3)


def _top_heads(t: Tensor, n: int):
    from ..results.table import top_entries

    return top_entries(t, n)
