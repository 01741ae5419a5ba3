"""``compscope scores``: Q/K/V composition of every head pair; the strongest printed, all written."""

from __future__ import annotations

from .common import (TEXT_READERS, add_linearise_norms, add_metric_data, add_model, add_processing, add_ridge,
                     add_sample_data, add_scoring, add_tokenizer, count, metric_names, model_reading_text, reads_text,
                     metric_text, score_options, table_file, weights_and_metric)

HELP = "Q/K/V composition scores of every head pair; prints the strongest"
EXAMPLE = ("examples:\n  compscope scores --top 3\n  compscope scores smollm2 --kinds K --measure all --pairs all --out k.parquet\n"
           "  compscope scores --metric embed --measure tight --ridge 1e-3")


def add_arguments(p) -> None:
    from ..defaults import MEASURES as DEFAULT

    add_model(p)
    add_scoring(p, "QKV", DEFAULT)
    p.add_argument("--metric", default="identity", help=f"{metric_names()} (default identity)")
    add_ridge(p)
    add_metric_data(p)
    p.add_argument("--top", type=count, default=5, help="pairs to print per kind and measure (default 5)")
    p.add_argument("--out", help="write the full table (.csv or .parquet)")
    add_processing(p)
    add_linearise_norms(p, "score the weights")
    add_sample_data(p, "for --linearise-norms")
    add_tokenizer(p)


def run(args) -> None:
    from ..engine.composition import scores
    from ..measures import DEFAULT

    table_file(args.out)
    options = score_options(args, DEFAULT)
    hw, metric = weights_and_metric(args, model_reading_text(args, args.model, reads_text(args, args.metric), TEXT_READERS))
    table = scores(hw, args.kinds, args.measures or DEFAULT, metric, **options)
    print(format_top(table, args.top))
    if args.out:
        print(f"wrote {table.save(args.out)}")


def format_top(table, n: int) -> str:
    """The ``n`` strongest pairs per kind and measure, as ``L1.H1 -> L2.H2  value``; measures
    computed for only some pairs say how many."""
    said = metric_text(table.metric, table.info)
    lines = [f"{table.model}: metric {said}, processing {', '.join(table.processing) or 'none'}"]
    for kind in table.kinds:
        for m in table.measures:
            if (m, kind) not in table.values:
                continue
            top = table.top(kind, m, n)
            pairs = "   ".join(f"{l1}.{h1}->{l2}.{h2} {v:.3f}" for l1, h1, l2, h2, v in top)
            lines.append(f"{kind}  {m:<20} {pairs}")
    partial = table.info.get("partial") or {}
    for m, (done, total) in partial.items():
        lines.append(f"note: {m} covers the top {done:,} of {total:,} pairs per kind by frobenius (--pairs all for every pair)")
    return "\n".join(lines)
