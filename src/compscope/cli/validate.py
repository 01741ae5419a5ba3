"""``compscope validate``: which measure × metric agrees with the model's behaviour on data."""

from __future__ import annotations

from .common import (add_device, add_intervention, add_linearise_norms, add_metric_data, add_model_dtype, add_ridge,
                     add_sample_data, add_tokenizer, count, half_length, metric_data_read_by_qk_norm, metric_names,
                     metric_ridge, model_reading_text, output_folder, qk_norm_point, sample_data)

HELP = "judge every measure x metric against interventions and activation labels on data"
EXAMPLE = ("examples:\n  compscope validate --out verdict\n"
           "  compscope validate smollm2 --out verdict-smollm2 --intervention-sequences 8\n"
           "  compscope validate path/to/large-model --writers 0-5 --out verdict   # interventions on layers 0-5 only")


def add_arguments(p) -> None:
    from ..defaults import DEFAULT_MODEL, SEED

    p.add_argument("model", nargs="?", default=DEFAULT_MODEL,
                   help=f"a toy model, HuggingFace folder, .gguf file, built-in name or HuggingFace hub id "
                        f"(owner/name[@revision], the local cache first; default {DEFAULT_MODEL})")
    p.add_argument("--out", help="folder for head_labels.csv, interventions.parquet, verdict.csv, heads.csv, run.json "
                                 "(and head_labels_text.csv with --text-labels)")
    p.add_argument("--sequences", type=count, default=64, help="repeated random sequences for the labels (default 64)")
    p.add_argument("--half", type=half_length, default=None,
                   help="length of the repeated half |t| (default 32, or the longest that fits the model's context, "
                        "with a note; a length given that does not fit is refused)")
    p.add_argument("--seed", type=int, default=SEED, help=f"seed of the sequences (default {SEED})")
    p.add_argument("--intervention-sequences", type=count, default=16,
                   help="of those, how many the interventions run on (default 16)")
    p.add_argument("--batch-size", type=count, default=16,
                   help="sequences per forward pass (default 16; fewer take less memory, the results are the same)")
    p.add_argument("--kinds", default="QKV", help="any of Q, K, V (default QKV)")
    p.add_argument("--metric", action="append", dest="metrics", metavar="NAME",
                   help=f"a metric, {metric_names()} (repeatable; default identity, embed, activations and covariance)")
    add_ridge(p, "each metric's G")
    add_metric_data(p)
    add_intervention(p, "0-5", "; rho and the confirmed pairs are then over their pairs")
    p.add_argument("--prev-threshold", type=float, default=0.4, help="previous-token label of a true writer (default 0.4)")
    p.add_argument("--induction-threshold", type=float, default=0.3, help="induction label of a true reader (default 0.3)")
    p.add_argument("--effect-threshold", type=float, default=0.05,
                   help="K effect (total variation) that confirms a true pair, for 'confirmed' (default 0.05)")
    p.add_argument("--top", type=count, help="rows of the ranked table to print (default all)")
    p.add_argument("--by-head", nargs="?", const="best", metavar="MEASURE,METRIC",
                   help="also print the K AUROC of MEASURE under METRIC (default: the best-ranked) taken apart by "
                        "previous-token writer and induction reader, beside the K interventions' (e.g. overlap,embed)")
    p.add_argument("--fold-norm", action="store_true", help="judge the weights with norm gains folded in (pre-norm models)")
    p.add_argument("--fold-qk-gains", action="store_true",
                   help="judge the weights with QK-norm's gains moved into W_Q, W_K (approximate; Gemma 3)")
    add_linearise_norms(p, "judge the weights")
    p.add_argument("--linearise-qk-norm", nargs="?", const="isotropic", type=qk_norm_point, metavar="POINT",
                   help="judge the weights with QK-norm replaced by its Jacobian (approximate; per-head QK-norm such as "
                        "Gemma 3's) where the normalised input is isotropic, from the weights alone (the default without "
                        "POINT), or at the second moment of what the heads read on the --metric-* text (text)")
    p.add_argument("--center-writing", action="store_true",
                   help="judge the weights with W_O, W_E, W_pos centred (pre-LayerNorm models, as TransformerLens loads them)")
    p.add_argument("--text-labels", action="store_true",
                   help="label every head on natural text too (the --sample-* text): head_labels_text.csv, and how its "
                        "labels agree with the repeats' (the truth stays the repeats')")
    add_sample_data(p, "for a rotary model's previous-token score from the weights with the residual as content, "
                       "for --linearise-norms and for --text-labels")
    add_device(p)
    add_tokenizer(p)
    add_model_dtype(p)


def run(args) -> None:
    from ..data.validate import DEFAULT_METRICS, validate

    output_folder(args.out)
    metrics = args.metrics or DEFAULT_METRICS
    by_head = _by_head(args.by_head, metrics, args.kinds)  # refused before the model runs
    ridge = metric_ridge(args, metrics)
    data = metric_data_read_by_qk_norm(args, metrics)
    v = validate(model_reading_text(args, args.model), sequences=args.sequences, half=args.half, seed=args.seed,
                 intervention_sequences=args.intervention_sequences, kinds=args.kinds,
                 metrics=metrics, ablation=args.ablation, paths=args.paths, prev_threshold=args.prev_threshold,
                 induction_threshold=args.induction_threshold, effect_threshold=args.effect_threshold, fold_norm=args.fold_norm,
                 fold_qk_gains=args.fold_qk_gains, linearise_norms=args.linearise_norms or False,
                 linearise_qk_norm=args.linearise_qk_norm or False, center_writing=args.center_writing,
                 device=args.device, model_dtype=args.model_dtype, batch_size=args.batch_size,
                 writers=args.writers, metric_data=data, sample_data=sample_data(args),
                 text_labels=args.text_labels, ridge=ridge)
    print(v.format(args.top))
    if by_head is not None:
        print("\n" + v.format_by_head(*by_head))
    if args.out:
        for p in v.save(args.out):
            print(f"wrote {p}")


def _by_head(option: str | None, metrics, kinds: str) -> tuple | None:
    """``--by-head``: None (not asked), ``()`` (the best-ranked) or ``(measure, metric)``, checked."""
    from ..errors import OptionError
    from ..measures import MEASURES

    if option is None:
        return None
    if "K" not in kinds.upper():
        raise OptionError(f"--by-head: the AUROC is of K-composition, and --kinds {kinds} has no K")
    if option == "best":
        return ()
    measure, _, metric = option.partition(",")
    try:
        MEASURES.get(measure.strip())
    except OptionError as e:
        raise OptionError(f"--by-head {option}: {e}") from None
    names = [m if isinstance(m, str) else m.name for m in metrics]
    if metric.strip() not in names:
        raise OptionError(f"--by-head {option}: expected MEASURE,METRIC with METRIC one of those judged ({', '.join(names)})")
    return measure.strip(), metric.strip()
