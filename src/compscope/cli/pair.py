"""``compscope pair``: one writer → reader pair in detail."""

from __future__ import annotations

from ..errors import OptionError
from .common import (TEXT_READERS, add_device, add_linearise_norms, add_metric_data, add_model, add_processing,
                     add_sample_data, add_tokenizer, metric_names, model_reading_text, parse_head, reads_text,
                     weights_and_metric)

HELP = "one writer -> reader pair in detail: principal angles, composed spectrum, every measure"
EXAMPLE = "examples: compscope pair 0.0 1.1 --kind K --metric embed;  compscope pair smollm2 16.0 17.3"


def add_arguments(p) -> None:
    p.add_argument("heads", nargs="+", metavar="[MODEL] WRITER READER",
                   help="LAYER.HEAD of the writing head and of the reading head (a later layer), after the model "
                        "if one is named here rather than with --model")
    add_model(p, positional=False)
    p.usage = "%(prog)s [MODEL] WRITER READER [options]"
    p.add_argument("--kind", default="K", choices=["Q", "K", "V"], help="composition kind (default K)")
    p.add_argument("--metric", default="identity", help=f"{metric_names()} (default identity)")
    add_metric_data(p)
    p.add_argument("--offset", type=float, default=0.0, help="rotary offset: query minus key position (default 0; rotary models only)")
    p.add_argument("--on-data", action="store_true",
                   help="also run the model on the verdict's sequences (64 repeated random sequences, |t| = 32, seed "
                        "12345, as compscope validate): both heads' activation labels, and the pair's interventional "
                        "effect (the writer mean-ablated, direct path, on 16 of them, as validate's)")
    add_device(p, "where the model runs for --metric activations or --on-data (the pair itself is computed on the CPU)")
    add_processing(p)
    add_linearise_norms(p, "read the pair")
    add_sample_data(p, "for --linearise-norms")
    add_tokenizer(p)


def run(args) -> None:
    from ..analysis.pair import compose_pair
    from ..core.processing import weights_said
    from ..results.table import metric_origin

    model, writer, reader = model_and_heads(args.heads, args.model)
    model = model_reading_text(args, model, reads_text(args, args.metric), TEXT_READERS)
    hw, metric = weights_and_metric(args, model)
    rep = compose_pair(hw, writer, reader, args.kind, metric, offset=args.offset)
    print(format_pair(rep, hw.meta.name + weights_said(hw.meta.processing), metric_origin({"metric_data": metric.data})))
    if args.on_data:
        print(on_data(model, writer, reader, args.kind, args.device))


def on_data(model, writer: tuple[int, int], reader: tuple[int, int], kind: str, device=None) -> str:
    """The pair on data, as :func:`compscope.validate` sees it with its defaults: both heads'
    activation labels on the verdict's sequences, and the writer's interventions (its row only) on
    the ones the verdict intervenes on, the pair's effect ranked among the writer's readers."""
    import torch

    from ..data.head_labels import LABELS, activation_labels, error_text
    from ..data.intervene import intervention_effects
    from ..data.runner import runner_for
    from ..data.validate import INTERVENTION_SEQUENCES, default_sequences
    from ..results.table import top_entries

    runner = runner_for(model, device=device)  # the model as it is: processing changes only the weights' side
    reps = default_sequences(runner)  # the verdict's, built once for both
    labels = activation_labels(runner, reps)
    fx = intervention_effects(runner, reps.tokens[:INTERVENTION_SEQUENCES], kinds=kind, writers=[writer])
    (l1, h1), (l2, h2) = writer, reader
    row = fx.by_kind[kind][l1, h1]  # (layer, head): the writer's effect on every later head
    value = float(row[l2, h2])
    rank = int((row[torch.isfinite(row)] > value).sum()) + 1
    (b2, c2), best = top_entries(row, 1)[0]
    what = "effect" if kind != "V" else "effect (relative change of the output's norm)"
    lines = [f"on data: {labels.sequences} repeated random sequences [t, t], |t| = {labels.half} (seed {labels.seed}), "
             f"as compscope validate; interventions ({fx.ablation}-ablation, direct path) on {fx.sequences} of them",
             f"{kind} {what} of {l1}.{h1} on {l2}.{h2}: {value:.4f}, rank {rank} of the {int(torch.isfinite(row).sum())} "
             f"later heads (largest {l1}.{h1}->{b2}.{c2} {best:.4f})"]
    if kind == "V" and fx.v_direction is not None:
        lines.append(f"V direction-sensitive effect ||o' - o|| / ||o||: {float(fx.v_direction[l1, h1, l2, h2]):.4f}")
    for who, (l, h) in (("writer", writer), ("reader", reader)):  # each label ± its standard error over the sequences
        lines.append(f"{who} {l}.{h} labels: " + "  ".join(
            f"{k} {float(labels.mean[k][l, h]):.2f}{error_text(labels.error.get(k), l, h)}" for k in LABELS))
    return "\n".join(lines)


def _is_head(word: str) -> bool:
    """Whether ``word`` reads as a head (:func:`parse_head`)."""
    try:
        parse_head(word)
    except OptionError:
        return False
    return True


def model_and_heads(words: list[str], option: str) -> tuple[str, tuple[int, int], tuple[int, int]]:
    """``[MODEL] WRITER READER`` as given: the model named first, else by ``--model`` (``option``)."""
    from ..loading.builtin import DEFAULT_MODEL

    if len(words) not in (2, 3):
        raise OptionError(f"pair: expected [MODEL] WRITER READER, got: {' '.join(words)}")
    if len(words) == 3:
        if _is_head(words[0]) and _is_head(words[1]) and not _is_head(words[2]):
            raise OptionError(f"pair: the model comes first: compscope pair {words[2]} {words[0]} {words[1]}")
        if option != DEFAULT_MODEL and option != words[0]:
            raise OptionError(f"pair: two models named: {words[0]!r} and --model {option!r}")
        option = words[0]
    return option, parse_head(words[-2]), parse_head(words[-1])


def format_pair(rep, model: str, origin: str = "") -> str:
    """What ``compscope pair`` prints; ``origin``: where the metric's ``G`` came from, in words
    (:func:`~compscope.results.table.metric_origin`), for a metric estimated on data or given."""

    (l1, h1), (l2, h2) = rep.writer, rep.reader
    fmt = lambda xs: " ".join(f"{float(x):.3g}" for x in xs)  # noqa: E731
    lines = [
        f"{model}: {l1}.{h1} -> {l2}.{h2}, {rep.kind}-composition, metric {rep.metric}" + (f", {origin}" if origin else ""),
        f"principal angles (deg)     {fmt(rep.angles_degrees)}",
        f"cosines                    {fmt(rep.cosines)}",
        f"composed singular values   {fmt(rep.composed_singular_values)}",
        f"writer singular values     {fmt(rep.writer_singular_values)}",
        f"reader singular values     {fmt(rep.reader_singular_values)}",
    ]
    lines += [f"{name:<26} {v:.4f}" for name, v in rep.measures.items()]
    return "\n".join(lines)
