"""``compscope pair``: one writer → reader pair in detail."""

from __future__ import annotations

from ..errors import OptionError
from .common import (TEXT_READERS, add_device, add_linearise_norms, add_metric_data, add_model, add_processing,
                     add_ridge, add_sample_data, add_tokenizer, metric_names, metric_text,
                     model_reading_text, output_file, parse_head, reads_text, weights_and_metric)

HELP = "one writer -> reader pair in detail: principal angles, composed spectrum, every measure"
EXAMPLE = "examples: compscope pair 0.0 1.1 --kind K --metric embed;  compscope pair smollm2 16.0 17.3"

#: a spectrum of more values than this prints its first ``_FIRST`` and last ``_LAST`` (``--all``: every one)
_SHOWN, _FIRST, _LAST = 16, 8, 3


def add_arguments(p) -> None:
    p.add_argument("heads", nargs="+", metavar="[MODEL] WRITER READER",
                   help="LAYER.HEAD of the writing head and of the reading head (a later layer), after the model "
                        "if one is named here rather than with --model")
    add_model(p, positional=False)
    p.usage = "%(prog)s [MODEL] WRITER READER [options]"
    p.add_argument("--kind", default="K", choices=["Q", "K", "V"], help="composition kind (default K)")
    p.add_argument("--metric", default="identity", help=f"{metric_names()} (default identity)")
    add_ridge(p)
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
    p.add_argument("--all", action="store_true", dest="every",
                   help=f"print every value of each spectrum (default: a spectrum of more than {_SHOWN} values prints "
                        f"its first {_FIRST} and last {_LAST})")
    p.add_argument("--out", metavar="FILE.json",
                   help="also write the pair's report, every spectrum whole and every measure (and with --on-data "
                        "its values: the effect, its rank, both heads' labels), as a .json file")


def run(args) -> None:
    from ..analysis.pair import compose_pair
    from ..core.processing import weights_said
    from ..results.table import metric_info

    model, writer, reader = model_and_heads(args.heads, args.model)
    output_file(args.out, "--out", (".json",))
    model = model_reading_text(args, model, reads_text(args, args.metric), TEXT_READERS)
    hw, metric = weights_and_metric(args, model)
    rep = compose_pair(hw, writer, reader, args.kind, metric, offset=args.offset)
    name, info = hw.meta.name + weights_said(hw.meta.processing), metric_info(metric)
    print(format_pair(rep, name, metric_text(rep.metric, info), every=args.every))
    data = on_data(model, writer, reader, args.kind, args.device) if args.on_data else None
    if data is not None:
        print(format_on_data(data, writer, reader))
    if args.out:
        write_pair(rep, args.out, name, info, data)


def on_data(model, writer: tuple[int, int], reader: tuple[int, int], kind: str, device=None) -> dict:
    """The pair on data, as :func:`compscope.validate` sees it with its defaults: both heads'
    activation labels (each with its standard error over the sequences; None where there is none) on
    the verdict's sequences, and the writer's interventions (its row only) on the ones the verdict
    intervenes on, the pair's effect ranked among the writer's later heads (:func:`format_on_data`)."""
    import torch

    from ..data.head_labels import LABELS, activation_labels, label_error
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
    (b2, c2), best = top_entries(row, 1)[0]

    mean, error = labels.mean, labels.error
    later = row[torch.isfinite(row)]  # the writer's effect on each later head
    return {"sequences": labels.sequences, "half": labels.half, "seed": labels.seed, "ablation": fx.ablation,
            "intervention_sequences": fx.sequences, "kind": kind, "effect": value,
            "rank": int((later > value).sum()) + 1, "later_heads": later.numel(),
            "largest": {"reader": [b2, c2], "effect": float(best)},
            **({"v_direction": float(fx.v_direction[l1, h1, l2, h2])} if kind == "V" and fx.v_direction is not None
               else {}),
            **{f"{who}_labels": {k: {"mean": float(mean[k][l, h]), "error": label_error(error.get(k), l, h)}
                                 for k in LABELS}
               for who, (l, h) in (("writer", writer), ("reader", reader))}}


def format_on_data(d: dict, writer: tuple[int, int], reader: tuple[int, int]) -> str:
    """What ``compscope pair --on-data`` prints of :func:`on_data`'s values ``d``."""
    from ..data.head_labels import plus_minus

    (l1, h1), (l2, h2), kind = writer, reader, d["kind"]
    what = "effect" if kind != "V" else "effect (relative change of the output's norm)"
    (b2, c2) = d["largest"]["reader"]
    lines = [f"on data: {d['sequences']} repeated random sequences [t, t], |t| = {d['half']} (seed {d['seed']}), "
             f"as compscope validate; interventions ({d['ablation']}-ablation, direct path) on "
             f"{d['intervention_sequences']} of them",
             f"{kind} {what} of {l1}.{h1} on {l2}.{h2}: {d['effect']:.4f}, rank {d['rank']} of the {d['later_heads']} "
             f"later heads (largest {l1}.{h1}->{b2}.{c2} {d['largest']['effect']:.4f})"]
    if "v_direction" in d:
        lines.append(f"V direction-sensitive effect ||o' - o|| / ||o||: {d['v_direction']:.4f}")
    for who, (l, h) in (("writer", writer), ("reader", reader)):  # each label ± its standard error over the sequences
        lines.append(f"{who} {l}.{h} labels: " + "  ".join(
            f"{k} {v['mean']:.2f}{plus_minus(v['error'])}"
            for k, v in d[f"{who}_labels"].items()))
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


def format_pair(rep, model: str, metric: str = "", every: bool = False) -> str:
    """What ``compscope pair`` prints; ``metric``: the metric in words (:func:`~compscope.cli.common.metric_text`:
    its condition number and ridge, where its ``G`` came from; default its name); ``every``: every value of
    each spectrum, rather than the first and last few of one longer than ``_SHOWN``."""

    (l1, h1), (l2, h2) = rep.writer, rep.reader
    spectra = [("principal angles (deg)", rep.angles_degrees), ("cosines", rep.cosines),
               ("composed singular values", rep.composed_singular_values),
               ("writer singular values", rep.writer_singular_values),
               ("reader singular values", rep.reader_singular_values)]
    lines = [f"{model}: {l1}.{h1} -> {l2}.{h2}, {rep.kind}-composition, metric {metric or rep.metric}"]
    lines += [f"{name:<26} {_values(xs, every)}" for name, xs in spectra]
    if not every and any(len(xs) > _SHOWN for _, xs in spectra):
        lines.append(f"(spectra of more than {_SHOWN} values cut: --all prints them whole, "
                     "--out FILE.json writes them)")
    lines += [f"{name:<26} {v:.4f}" for name, v in rep.measures.items()]
    return "\n".join(lines)


def _values(xs, every: bool) -> str:
    """``xs`` to 3 significant digits, all of them (``every``, or at most ``_SHOWN``) or the first and last few."""
    shown = [f"{float(x):.3g}" for x in xs]
    if every or len(shown) <= _SHOWN:
        return " ".join(shown)
    return " ".join(shown[:_FIRST] + ["..."] + shown[-_LAST:]) + f"  ({len(shown)} values)"


def write_pair(rep, path: str, model: str, metric: dict | None = None, data: dict | None = None) -> None:
    """``rep`` (:meth:`~compscope.analysis.pair.PairReport.to_dict`) as JSON at ``path``, with the model's name,
    of the metric (``metric``, :func:`~compscope.results.table.metric_info`'s) where its ``G`` came from
    (``metric_origin``) and, for a metric with a ``G``, its ridge and ``G``'s condition numbers (``condition``:
    ``{layer: [raw, regularised]}``, ``"None"`` for every layer), and ``data`` (:func:`on_data`'s, under
    ``on_data``); a value that is not finite is written as null."""
    from ..results.files import write_json
    from ..results.table import metric_origin

    metric = metric or {}
    origin = metric_origin(metric)
    said = {k: metric[k] for k in ("ridge", "condition")} if metric.get("condition") else {}
    write_json(path, {"model": model, **rep.to_dict(), **({"metric_origin": origin} if origin else {}), **said,
                      **({"on_data": data} if data is not None else {})})
