"""``compscope track``: composition at every checkpoint of a training run, one table and a plot."""

from __future__ import annotations

from .common import (add_metric_data, add_ridge, add_scoring, add_tokenizer, metric_data, metric_names, metric_ridge,
                     output_file, parse_pair, passed_over, reads_text, score_options, table_file)

HELP = "composition at every checkpoint of a training run, as one table and a plot"
EXAMPLE = "example: compscope train --out runs/a && compscope track runs/a --out track.parquet --plot track.png"


def add_arguments(p) -> None:
    from ..defaults import TRACKED_MEASURES as TRACKED

    p.add_argument("checkpoints", nargs="+", help="a run folder from 'compscope train', a folder of checkpoints, or checkpoint paths in order")
    add_scoring(p, "K", TRACKED)
    p.add_argument("--metric", action="append", dest="metrics", metavar="NAME",
                   help=f"a metric, {metric_names()} (repeatable; default identity and embed)")
    add_ridge(p, "each metric's G")
    add_metric_data(p)
    add_tokenizer(p)
    p.add_argument("--out", help="write the table, one row per (checkpoint, metric, measure, kind, pair) (.csv or .parquet)")
    p.add_argument("--plot", help="write the composition-over-training figure (.png, .svg or .pdf)")
    p.add_argument("--pair", action="append", dest="highlight", metavar="L1.H1-L2.H2",
                   help="pair to highlight in the plot (repeatable; default: previous-token -> induction heads of a toy run)")


def run(args) -> None:
    from ..analysis.tracking import track
    from ..errors import OptionError
    from ..defaults import TRACKED_MEASURES as TRACKED, TRACKED_METRICS
    from ..results.table import metric_origin

    table_file(args.out)
    output_file(args.plot, "--plot", (".png", ".svg", ".pdf"))
    if args.plot:
        from ..report.plots import require_matplotlib

        require_matplotlib()  # before the checkpoints are read
    highlight = [parse_pair(p) for p in args.highlight] if args.highlight else None
    source = args.checkpoints[0] if len(args.checkpoints) == 1 else args.checkpoints
    metrics = args.metrics or list(TRACKED_METRICS)
    ridge = metric_ridge(args, metrics)
    tokenizer = {}
    if args.tokenizer:  # read once, before the checkpoints; each checkpoint's runner is given it
        from ..data.tokenizers import given_tokenizer

        if not reads_text(args, metrics):
            raise OptionError(f"--tokenizer: for the metrics estimated on data, and none is selected (metrics: "
                              f"{', '.join(map(str, metrics))})")
        tokenizer = given_tokenizer(args.tokenizer)
    tr = track(source, args.kinds, args.measures or TRACKED, metrics, check=highlight or (),
               metric_data=metric_data(args, metrics), ridge=ridge, **tokenizer, **score_options(args, TRACKED))
    print(f"{len(tr.checkpoints)} checkpoints, steps {tr.steps[0]}..{tr.steps[-1]}; kinds {args.kinds}; "
          f"metrics {', '.join(t.metric for t in tr.tables[-1])}"
          + ("" if ridge is None else f"; ridge {ridge:g}·tr(G)/d on each metric with a G"))
    for t in tr.tables[-1]:  # where a G came from (one estimated on data: each checkpoint's own, the last said)
        origin = metric_origin(t.info)
        if origin:
            each = "" if origin.startswith("with") else " (the last checkpoint's G; each checkpoint has its own)"
            print(f"metric {t.metric}, {origin}{each}")
    if tr.skipped:
        print(passed_over(tr.skipped))
    if tr.labels[-1] is not None:
        prev, ind = tr.roles()
        lab = tr.labels[-1]
        print("previous-token heads (last checkpoint): " + ", ".join(f"{l}.{h} ({float(lab.previous[l, h]):.2f})" for l, h in prev))
        print("induction heads (last checkpoint):      " + ", ".join(f"{l}.{h} ({float(lab.induction[l, h]):.2f})" for l, h in ind))
        formed = tr.formation_step()
        if formed is None:
            print("no induction head forms (no head ends with an induction score >= 0.5)")
        else:
            print(f"induction forms at step {formed} (first checkpoint at half the final induction score)")
    if args.out:
        print(f"wrote {tr.save(args.out)}")
    if args.plot:
        from ..report.plots import plot_track

        kind = "K" if "K" in args.kinds else args.kinds[0]
        print(f"wrote {plot_track(tr, args.plot, kind=kind, highlight=highlight)}")
