"""``compscope pair``: one writer → reader pair in detail."""

from __future__ import annotations

from .common import add_model, add_processing, metric_names, parse_head, processing

HELP = "one writer -> reader pair in detail: principal angles, composed spectrum, every measure"
EXAMPLE = "example: compscope pair 0.0 1.1 --kind K --metric embed"


def add_arguments(p) -> None:
    p.add_argument("writer", help="LAYER.HEAD of the writing head")
    p.add_argument("reader", help="LAYER.HEAD of the reading head (a later layer)")
    add_model(p, positional=False)
    p.add_argument("--kind", default="K", choices=["Q", "K", "V"], help="composition kind (default K)")
    p.add_argument("--metric", default="identity", help=f"{metric_names()} (default identity)")
    p.add_argument("--offset", type=float, default=0.0, help="rotary offset: query minus key position (default 0; rotary models only)")
    add_processing(p)


def run(args) -> None:
    from ..analysis.pair import compose_pair
    from ..core.metrics import get_metric
    from ..loading.sources import load
    from .common import check_offset

    writer, reader = parse_head(args.writer), parse_head(args.reader)
    hw = load(args.model, **processing(args))
    check_offset(hw, args.offset)
    metric = get_metric(args.metric, hw, model=args.model)  # 'activations' runs the model itself
    rep = compose_pair(hw, writer, reader, args.kind, metric, offset=args.offset)
    print(format_pair(rep, hw.meta.name))


def format_pair(rep, model: str) -> str:
    """What ``compscope pair`` prints."""

    (l1, h1), (l2, h2) = rep.writer, rep.reader
    fmt = lambda xs: " ".join(f"{float(x):.3g}" for x in xs)  # noqa: E731
    lines = [
        f"{model}: {l1}.{h1} -> {l2}.{h2}, {rep.kind}-composition, metric {rep.metric}",
        f"principal angles (deg)     {fmt(rep.angles_degrees)}",
        f"cosines                    {fmt(rep.cosines)}",
        f"composed singular values   {fmt(rep.composed_singular_values)}",
        f"writer singular values     {fmt(rep.writer_singular_values)}",
        f"reader singular values     {fmt(rep.reader_singular_values)}",
    ]
    lines += [f"{name:<26} {v:.4f}" for name, v in rep.measures.items()]
    return "\n".join(lines)
