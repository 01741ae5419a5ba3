"""``compscope gauge``: which scores of a real model move under changes of its parameters that
the model cannot see (and one that it can, for contrast)."""

from __future__ import annotations

from .common import add_model, table_file

HELP = "which scores move under changes of the parameters that leave the model as it is"
DESCRIPTION = ("Score every pair before and after each change of the model's parameters: a permutation of the "
               "residual coordinates, a rotation of the residual (norm gains folded), a trade of each pre-norm's "
               "gains against the weights that read them, and a random invertible map (a symmetry only without "
               "norms). Each change is checked on the model's own attention first.")
EXAMPLE = "examples:\n  compscope gauge\n  compscope gauge smollm2 --kinds K --metric identity --metric unembed"


def add_arguments(p) -> None:
    from ..defaults import GAUGE_CHANGES as CHANGES
    from ..defaults import GAUGE_METRICS
    from ..defaults import MEASURES as DEFAULT

    add_model(p)
    p.add_argument("--change", action="append", dest="changes", choices=CHANGES, metavar="NAME",
                   help=f"a change (repeatable; default all: {', '.join(CHANGES)})")
    p.add_argument("--kinds", default="QKV", help="any of Q, K, V (default QKV)")
    p.add_argument("--measure", action="append", dest="measures", metavar="NAME",
                   help=f"a measure (repeatable; 'all' for every one; default {', '.join(DEFAULT)})")
    p.add_argument("--metric", action="append", dest="metrics", choices=GAUGE_METRICS, metavar="NAME",
                   help="identity, embed or unembed (repeatable; default identity and embed); the metrics "
                        "estimated on data would need the changed model to run")
    p.add_argument("--seed", type=int, default=0, help="seed of the changes (default 0)")
    p.add_argument("--out", help="write every row, one per change, metric and measure (.csv or .parquet)")


def run(args) -> None:
    from ..analysis.gauge import CHANGES, format_gauge, gauge_check
    from ..loading.sources import load
    from ..results.table import write_records

    table_file(args.out)
    hw = load(args.model)
    rows, notes = gauge_check(hw, args.changes or CHANGES, kinds=args.kinds, measures=args.measures or "default",
                              metrics=args.metrics or ("identity", "embed"), seed=args.seed)
    print(format_gauge(hw.meta.name, rows, notes, args.seed))
    if args.out:
        print(f"wrote {write_records(rows, args.out)}")
