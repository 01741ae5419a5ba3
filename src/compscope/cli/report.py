"""``compscope report``: a self-contained interactive HTML page of a model's wiring, with the
tables and static figures beside it, and the geometry explainers."""

from __future__ import annotations

import sys
import time

from .common import (add_metric_data, add_model, add_processing, add_ridge, add_tokenizer, count, metric_data,
                     metric_names, metric_ridge, model_reading_text, processing, reads_text)

HELP = "write an interactive HTML report of a model's wiring (heatmaps, circuit graph, verdict, explainers)"
DESCRIPTION = ("Write DIR/index.html (self-contained and offline: open it from disk), scores.parquet, head_labels.csv, "
               "axioms.csv, verdict.csv (with data) and PNG/SVG figures, then print a short summary.")
EXAMPLE = ("examples:\n  compscope report --out report                  # the built-in toy model, with data\n"
           "  compscope report smollm2 --out report-smollm2 --data verdict-smollm2   # read a `compscope validate` folder\n"
           "  compscope report run-folder/final --run run-folder --out report-run    # with training curves")


def add_arguments(p) -> None:
    from ..defaults import DETAIL_PAIRS, REPORT_MEASURES, REPORT_METRICS

    add_model(p)
    p.add_argument("--out", default="compscope-report", help="folder to write (default compscope-report)")
    p.add_argument("--kinds", default="QKV", help="any of Q, K, V (default QKV)")
    p.add_argument("--measure", action="append", dest="measures", metavar="NAME",
                   help=f"a measure (repeatable; 'all' for every one; default {', '.join(REPORT_MEASURES)})")
    p.add_argument("--metric", action="append", dest="metrics", metavar="NAME",
                   help=f"a metric, {metric_names()} (repeatable; default {', '.join(REPORT_METRICS)})")
    add_ridge(p, "each metric's G (the verdict's too)")
    add_metric_data(p)
    p.add_argument("--data", default="auto", metavar="auto|run|none|DIR",
                   help="head labels and the verdict from data: 'auto' runs `validate` on toy models only (seconds), "
                        "'run' always, 'none' never, or a folder written by `compscope validate --out` (default auto)")
    p.add_argument("--run", metavar="DIR", help="a `compscope train` folder: composition over its checkpoints")
    p.add_argument("--detail-pairs", type=count, default=DETAIL_PAIRS,
                   help=f"pairs per kind and metric whose spectra are kept (default {DETAIL_PAIRS}; all when fewer)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG/SVG figures (no matplotlib needed)")
    p.add_argument("--quiet", action="store_true", help="no progress bars and no summary; print only where the report is")
    p.add_argument("--open", action="store_true", help="open the report in the default browser when written")
    add_processing(p)
    add_tokenizer(p)


def run(args) -> None:
    from ..defaults import REPORT_MEASURES, REPORT_METRICS
    from ..core.metrics import check_metrics
    from ..report.build import build, metrics_on_data
    from ..report.page import check_out

    check_out(args.out)
    metrics = check_metrics(args.metrics or REPORT_METRICS)  # a typo is named before a missing package
    ridge = metric_ridge(args, metrics_on_data(metrics, args.data))  # a verdict's metrics too (collect: exactly)
    data = metric_data(args, metrics_on_data(metrics, args.data))  # a verdict's too
    start = time.perf_counter()
    command = "compscope " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("compscope") else "compscope report"
    model = model_reading_text(args, args.model, reads_text(args, metrics) or args.data == "run",
                               "the metrics estimated on data and --data run")
    rep, paths = build(model, args.out, command=command, kinds=args.kinds, measures=args.measures or REPORT_MEASURES,
                       metrics=metrics, data=args.data, run=args.run, detail_pairs=args.detail_pairs,
                       processing=processing(args), figures=not args.no_figures, progress=not args.quiet,
                       metric_data=data, ridge=ridge)
    index = paths[0]
    if not args.quiet:
        print(summary(rep))
        mb = index.stat().st_size / 1e6
        print(f"wrote {index} ({mb:.1f} MB) and {len(paths) - 1} tables and figures beside it in "
              f"{time.perf_counter() - start:.0f} s; open it in a browser (it works offline)")
    else:
        print(index)
    if args.open:
        import webbrowser

        if not webbrowser.open(index.resolve().as_uri()):  # no browser known here (a server, a container)
            print(f"--open: no browser found to open it; open {index} in one yourself", file=sys.stderr)


def summary(rep) -> str:
    """A few lines: the model, the strongest pair per kind, the labelled heads, the best verdict row."""
    hw = rep.hw
    table = next(iter(rep.tables.values()))
    m = rep.options["measures"][0]
    lines = [f"{rep.model}: {hw.n_layers} layers x {hw.n_heads} heads, d_model {hw.d_model}; metrics "
             f"{', '.join(rep.tables)}; measures {', '.join(rep.options['measures'])}"]
    tops = []
    for k in rep.options["kinds"]:
        (l1, h1, l2, h2, v), = table.top(k, m, 1)
        tops.append(f"{k} {l1}.{h1}->{l2}.{h2} {v:.3f}")
    lines.append(f"strongest pair by {m} ({table.metric}): " + "   ".join(tops))
    lab = rep.labels
    aside = {"copying": " (from the weights)"} if lab.source == "data" else {}  # data do not label copying
    roles = "   ".join(f"{name.replace('_', '-')}{aside.get(name, '')}: " + (" ".join(f"{l}.{h}" for l, h in heads[:8]) or "none")
                       + (f" (+{len(heads) - 8})" if len(heads) > 8 else "") for name, heads in lab.roles.items())
    lines.append(f"heads labelled from {lab.source}: {roles}")
    if rep.verdict:
        from ..data.verdict import ranked

        best = ranked(rep.verdict)[0][1].get("K")  # the verdict table's first row
        if best and best.get("auroc") == best.get("auroc"):
            lines.append(f"best measure x metric on data: {best['measure']}, {best['metric']} (AUROC of the true "
                         f"previous-token -> induction K-pairs {best['auroc']:.3f}, Spearman with interventions {best['spearman']:.2f}"
                         + (f"; interventions: {rep.effects_note}" if "writers " in (rep.effects_note or "") else "") + ")")
    lines += [f"note: {n}" for n in rep.notes]
    return "\n".join(lines)
