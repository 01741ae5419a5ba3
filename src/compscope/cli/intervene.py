"""``compscope intervene``: interventional composition of a model on data, against every measure."""

from __future__ import annotations

from .common import (add_device, add_intervention, add_metric_data, add_model_dtype, add_ridge, add_tokenizer, count,
                     half_length, metric_data, metric_names, metric_ridge, metric_text, model_reading_text, reads_text,
                     table_file)

HELP = "interventional composition of a model on data, against every measure"
EXAMPLE = "example: compscope intervene --kinds K --top 16 --metric activations   (or: compscope intervene smollm2 --kinds K --sequences 8)"


def add_arguments(p) -> None:
    from ..defaults import SEED
    from ..loading.builtin import DEFAULT_MODEL

    p.add_argument("model", nargs="?", default=DEFAULT_MODEL,
                   help=f"a toy model folder, a HuggingFace folder, a .gguf file, a built-in name ({DEFAULT_MODEL}, the "
                        "default) or a HuggingFace hub id (owner/name[@revision], the local cache first)")
    p.add_argument("--kinds", default="QKV", help="any of Q, K, V (default QKV)")
    p.add_argument("--metric", default="identity", help=f"metric of the measures: {metric_names()} (default identity)")
    add_ridge(p)
    add_metric_data(p)
    p.add_argument("--sequences", type=count, default=100, help="held-out repeated random sequences (default 100)")
    p.add_argument("--half", type=half_length, default=None,
                   help="length of the repeated half |t| (default 32, or the longest that fits the model's context; "
                        "a length given that does not fit is refused)")
    p.add_argument("--seed", type=int, default=SEED, help=f"seed of the sequences (default {SEED})")
    p.add_argument("--batch-size", type=count, default=16, help="sequences per forward pass (default 16)")
    add_intervention(p, "16.0,11.1 or 10-20")
    p.add_argument("--top", type=count, default=3, help="strongest pairs to print per kind (default 3)")
    p.add_argument("--out", help="write every effect, one row per pair and kind (.csv or .parquet)")
    add_device(p)
    add_tokenizer(p)
    add_model_dtype(p)


def run(args) -> None:
    table_file(args.out)
    metric_ridge(args)  # before the model loads
    print(report(args))


def report(args) -> str:
    """Per kind the strongest pairs by interventional effect and each measure's rank
    correlation with the effect over all pairs."""
    import torch

    from ..analysis.stats import spearman
    from ..data.intervene import against_measures, writers_text
    from ..data.sequences import HALF
    from ..results.table import top_entries

    model = model_reading_text(args, args.model, reads_text(args, args.metric), "the metrics estimated on data")
    fx, table, half = against_measures(model, args.kinds, metric=args.metric, sequences=args.sequences,
                                       half=args.half, seed=args.seed, ablation=args.ablation,
                                       batch_size=args.batch_size, progress=True, device=args.device,
                                       model_dtype=args.model_dtype, paths=args.paths, writers=args.writers,
                                       metric_data=metric_data(args, args.metric), ridge=args.ridge)
    cut = f" (cut from {HALF} to fit the model's context)" if args.half is None and half != HALF else ""
    where = "in h2's input" if args.paths == "direct" else "in the model, read by h2 through every path"
    some = "" if fx.writers is None else f"; {writers_text(fx.writers)}"
    lines = [f"{table.model}: interventional composition ({args.ablation}-ablation of h1's output {where}) on "
             f"{args.sequences} held-out repeated random sequences [t, t], |t| = {half}{cut} (seed {args.seed}); "
             f"measures under metric {metric_text(table.metric, table.info)}{some}"]  # as the scores header says it
    rows = [(kind, kind, eff) for kind, eff in fx.by_kind.items()]
    if fx.v_direction is not None:
        rows.append(("V (direction)", "V", fx.v_direction))
    for label, kind, eff in rows:
        n = int(torch.isfinite(eff).sum())
        top = top_entries(eff, args.top)
        lines.append(f"{label}  strongest effects: " + "   ".join("{}.{}->{}.{}".format(*i) + f" {x:.3f}" for i, x in top))
        rho = "  ".join(f"{m} {spearman(table.dense(m, kind), eff):.2f}" for m in table.measures)
        lines.append(f"   rank correlation with the effect over {n} pairs (Spearman): {rho}")
    if args.out:
        lines.append(f"wrote {fx.save(args.out)}")
    return "\n".join(lines)
