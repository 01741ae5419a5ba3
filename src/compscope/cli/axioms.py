"""``compscope axioms``: every measure against the axioms, on constructed pairs."""

from __future__ import annotations

from .common import at_least, count, table_file

HELP = "check every measure against the axioms on constructed pairs"
EXAMPLE = "examples:\n  compscope axioms\n  compscope axioms --axiom gauge --metric embed --trials 20"


def add_arguments(p) -> None:
    p.add_argument("--measure", action="append", dest="measures", metavar="NAME", help="a measure (repeatable; default: all)")
    p.add_argument("--axiom", action="append", dest="axioms", metavar="NAME", help="an axiom (repeatable; default: all)")
    p.add_argument("--trials", type=count, default=6, help="random pairs per check (default 6)")
    p.add_argument("--seed", type=at_least(0), default=0, help="seed of the random pairs (default 0)")
    p.add_argument("--metric", default="identity", choices=["identity", "embed"],
                   help="the gauge check's metric: the raw basis, or one that moves with the model (default identity)")
    p.add_argument("--out", help="write every result, one row per measure and axiom (.csv or .parquet)")


def run(args) -> int:
    from ..analysis.axioms import check_axioms, format_axioms
    from ..results.table import write_records

    table_file(args.out)
    results = check_axioms(args.measures, args.axioms, trials=args.trials, seed=args.seed, metric=args.metric)
    print(format_axioms(results, args.trials, args.seed, args.metric))
    if args.out:
        print(f"wrote {write_records(results, args.out)}")
    return 1 if any(r.violated for r in results) else 0
