"""The ``compscope`` command line."""

from __future__ import annotations

import argparse
import sys

from .errors import CompscopeError


def _fmt_int(n: int) -> str:
    return f"{n:,}"


def describe(hw) -> str:
    """A human summary of a ``HeadWeights`` (what ``compscope info`` prints)."""
    m = hw.meta
    gqa = "" if hw.n_kv_heads == hw.n_heads else f"  (GQA: {hw.n_heads // hw.n_kv_heads} query heads per K/V head)"
    if hw.rotary is not None:
        bases = sorted({round(1 / float(hw.rotary.inv_freq[l, 1]) ** (hw.rotary.dim / 2), -1) for l in range(hw.n_layers)})
        pos = f"rotary on {hw.rotary.dim} of {hw.d_head} head dims ({hw.rotary.style} pairs), base {', '.join(f'{b:g}' for b in bases)}"
    elif hw.W_pos is not None:
        pos = f"learned absolute, {hw.W_pos.shape[1]} positions"
    else:
        pos = "none"
    windows = sorted({w for w in hw.sliding_window if w is not None})
    rows = [
        ("model", m.name),
        ("source", m.source),
        ("family", m.family),
        ("dtype", f"{m.dtype} (stored as {m.source_dtype})"),
        ("layers", str(hw.n_layers)),
        ("heads per layer", f"{hw.n_heads}"),
        ("K/V heads per layer", f"{hw.n_kv_heads}{gqa}"),
        ("d_model", str(hw.d_model)),
        ("d_head", str(hw.d_head)),
        ("vocabulary", _fmt_int(hw.n_vocab)),
        ("attention", ("causal" if hw.causal else "bidirectional") + (f", sliding window {windows} on {sum(w is not None for w in hw.sliding_window)} layers" if windows else "")),
        ("logit scale", f"{hw.scale:.6g}"),
        ("normalisation", f"{hw.norm_placement}-norm: {hw.attn_norm.describe()}" if hw.attn_norm else "none"),
    ]
    if hw.qk_norm is not None:
        rows.append(("QK-norm", hw.qk_norm[0].describe()))
    if hw.attn_out_norm is not None:
        rows.append(("attention-output norm", hw.attn_out_norm.describe()))
    rows += [
        ("positions", pos),
        ("unembedding", "none" if hw.W_U is None else f"W_U {hw.W_U.shape[0]} x {hw.W_U.shape[1]}" + (" + bias" if hw.b_U is not None else "")),
        ("processing", ", ".join(m.processing) or "none"),
        ("attention parameters", _fmt_int(hw.n_attention_params())),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += [f"note: {n}" for n in m.notes]
    return "\n".join(lines)


def _count(text: str) -> int:
    """An argparse type: a positive integer."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return int(text)


def _positive_int(text: str, option: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise CompscopeError(f"{option} {text!r}: expected 'all' or a positive integer")
    return int(text)


def _positive_gib(text: str, option: str) -> int:
    """``text`` GiB as bytes."""
    try:
        gib = float(text)
    except ValueError:
        gib = 0.0
    if not gib > 0:
        raise CompscopeError(f"{option} {text!r}: expected a positive number of GiB, e.g. 2 or 0.5")
    return int(gib * 2**30)


def _metric_text(table) -> str:
    """The metric's name and, for a non-identity metric, its condition number (MATH.md's ridge)."""
    cond = table.info.get("condition") or {}
    if not cond:
        return table.metric
    raw, reg = max(c[0] for c in cond.values()), max(c[1] for c in cond.values())
    what = "condition number" if len(cond) == 1 else f"largest condition number of {len(cond)} layers"
    return f"{table.metric} ({what} {reg:.3g} with ridge {table.info.get('ridge', 0):g}·tr(G)/d, {raw:.3g} without)"


def format_top(table, n: int) -> str:
    """The ``n`` strongest pairs per kind and measure, as ``L1.H1 -> L2.H2  value``."""
    lines = [f"{table.model}: metric {_metric_text(table)}, processing {', '.join(table.processing) or 'none'}"]
    for kind in table.kinds:
        for m in table.measures:
            if (m, kind) not in table.values:
                continue
            top = table.top(kind, m, n)
            pairs = "   ".join(f"{l1}.{h1}->{l2}.{h2} {v:.3f}" for l1, h1, l2, h2, v in top)
            lines.append(f"{kind}  {m:<20} {pairs}")
    return "\n".join(lines)


def _add_processing(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fold-norm", action="store_true", help="fold norm gains into W_Q, W_K, W_V (pre-norm models)")
    p.add_argument("--center-writing", action="store_true", help="centre W_O, W_E, W_pos (LayerNorm models)")
    p.add_argument("--fold-value-bias", action="store_true", help="move b_V into b_O")


MODEL_HELP = ("a HuggingFace folder, a .gguf file, a compscope or toy model folder, or a built-in name "
              "(induction-2l, smollm2, gemma3-270m, minilm); default: the built-in induction-2l")


def _add_scoring(p: argparse.ArgumentParser, default_kinds: str, default_measures: str) -> None:
    p.add_argument("--kinds", default=default_kinds, help=f"any of Q, K, V (default {default_kinds})")
    p.add_argument("--measure", action="append", dest="measures", metavar="NAME",
                   help=f"a measure (repeatable; 'all' for every one; default {default_measures})")
    p.add_argument("--offset", type=float, default=0.0, help="rotary offset: query minus key position (default 0)")
    p.add_argument("--pairs", default="256", help="for bandwidth/spectral: 'all' or the top N pairs by frobenius (default 256)")
    p.add_argument("--precision", default="float32", choices=["float32", "float64"], help="dtype of the large products (default float32)")
    p.add_argument("--device", default=None, help="where to compute: cpu, cuda, cuda:N (default: cuda when present, else cpu)")
    p.add_argument("--max-memory", metavar="GIB", help="GiB for tiles and blocks, beyond the per-head bases (default: a quarter of the free memory)")


def _score_options(args) -> dict:
    pairs = "all" if args.pairs == "all" else _positive_int(args.pairs, "--pairs")
    max_memory = None if args.max_memory is None else _positive_gib(args.max_memory, "--max-memory")
    return {"offset": args.offset, "pairs": pairs, "precision": args.precision, "device": args.device, "max_memory": max_memory}


def _out_table(path: str | None) -> None:
    if path and not path.endswith((".csv", ".parquet")):
        raise CompscopeError(f"--out {path}: use a .csv or .parquet file name")


def _build_parser() -> argparse.ArgumentParser:
    from .builtin import DEFAULT_MODEL

    parser = argparse.ArgumentParser(prog="compscope", description="How attention heads compose, read from the weights.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="summarise a model's attention weights")
    p_info.add_argument("model", nargs="?", default=DEFAULT_MODEL, help=MODEL_HELP)
    _add_processing(p_info)
    p_sc = sub.add_parser("scores", help="Q/K/V composition scores of every head pair; prints the strongest")
    p_sc.add_argument("model", nargs="?", default=DEFAULT_MODEL, help=MODEL_HELP)
    _add_scoring(p_sc, "QKV", "frobenius, frobenius_baselined, tight, overlap")
    p_sc.add_argument("--metric", default="identity",
                      help="identity, embed, unembed, or activations (toy models: residual second moments on data) (default identity)")
    p_sc.add_argument("--top", type=_count, default=5, help="pairs to print per kind and measure (default 5)")
    p_sc.add_argument("--out", help="write the full table (.csv or .parquet)")
    _add_processing(p_sc)
    p_pair = sub.add_parser("pair", help="one writer -> reader pair in detail: principal angles, composed spectrum, every measure")
    p_pair.add_argument("writer", help="LAYER.HEAD of the writing head")
    p_pair.add_argument("reader", help="LAYER.HEAD of the reading head (a later layer)")
    p_pair.add_argument("--model", default=DEFAULT_MODEL, help=MODEL_HELP)
    p_pair.add_argument("--kind", default="K", choices=["Q", "K", "V"], help="composition kind (default K)")
    p_pair.add_argument("--metric", default="identity", help="identity, embed or unembed (default identity)")
    p_pair.add_argument("--offset", type=float, default=0.0, help="rotary offset: query minus key position (default 0)")
    _add_processing(p_pair)
    p_ci = sub.add_parser("circuits", help="copying, matching, previous-token and induction scores of every head, from the weights")
    p_ci.add_argument("model", nargs="?", default=DEFAULT_MODEL, help=MODEL_HELP)
    p_ci.add_argument("--measure", default="frobenius", help="K-composition measure of the induction score (default frobenius)")
    p_ci.add_argument("--offset", type=float, default=0.0, help="rotary offset of the matching score (default 0)")
    p_ci.add_argument("--top", type=_count, default=5, help="heads to print per score for models of over 48 heads (default 5)")
    _add_processing(p_ci)
    p_iv = sub.add_parser("intervene", help="interventional composition of a toy model on data, against every measure")
    p_iv.add_argument("model", nargs="?", default=DEFAULT_MODEL, help="a toy model folder or induction-2l (default)")
    p_iv.add_argument("--kinds", default="QKV", help="any of Q, K, V (default QKV)")
    p_iv.add_argument("--metric", default="identity",
                      help="metric of the measures: identity, embed, unembed or activations (default identity)")
    p_iv.add_argument("--sequences", type=_count, default=100, help="held-out repeated random sequences (default 100)")
    p_iv.add_argument("--ablation", default="mean", choices=["mean", "zero"], help="how h1's output is removed (default mean)")
    p_iv.add_argument("--top", type=_count, default=3, help="strongest pairs to print per kind (default 3)")
    p_ax = sub.add_parser("axioms", help="check every measure against MATH.md's axioms on constructed pairs")
    p_ax.add_argument("--measure", action="append", dest="measures", metavar="NAME", help="a measure (repeatable; default: all)")
    p_ax.add_argument("--axiom", action="append", dest="axioms", metavar="NAME", help="an axiom (repeatable; default: all)")
    p_ax.add_argument("--trials", type=_count, default=6, help="random pairs per check (default 6)")
    p_ax.add_argument("--seed", type=int, default=0, help="seed of the random pairs (default 0)")
    p_ax.add_argument("--metric", default="identity", choices=["identity", "embed"],
                      help="the gauge check's metric: the raw basis, or one that moves with the model (default identity)")
    from .toy.cli import add_train_parser

    add_train_parser(sub)
    p_tr = sub.add_parser("track", help="composition at every checkpoint of a training run, as one table and a plot")
    p_tr.add_argument("checkpoints", nargs="+", help="a run folder from 'compscope train', a folder of checkpoints, or checkpoint paths in order")
    _add_scoring(p_tr, "K", "frobenius, tight, overlap")
    p_tr.add_argument("--metric", action="append", dest="metrics", metavar="NAME", help="a metric (repeatable; default identity and embed)")
    p_tr.add_argument("--out", help="write the table, one row per (checkpoint, metric, measure, kind, pair) (.csv or .parquet)")
    p_tr.add_argument("--plot", help="write the composition-over-training figure (.png, .svg or .pdf)")
    p_tr.add_argument("--pair", action="append", dest="highlight", metavar="L1.H1-L2.H2",
                      help="pair to highlight in the plot (repeatable; default: previous-token -> induction heads of a toy run)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    from .loading import load

    try:
        if args.command == "info":
            hw = load(args.model, fold_norm=args.fold_norm, center_writing=args.center_writing, fold_value_bias=args.fold_value_bias)
            print(describe(hw))
        elif args.command == "scores":
            from .composition import scores

            _out_table(args.out)
            hw = load(args.model, fold_norm=args.fold_norm, center_writing=args.center_writing, fold_value_bias=args.fold_value_bias)
            measures = args.measures or ["frobenius", "frobenius_baselined", "tight", "overlap"]
            metric = args.metric
            if metric == "activations":
                from .residual_moments import toy_activation_metric

                if args.fold_norm or args.center_writing or args.fold_value_bias:
                    raise CompscopeError("--metric activations is estimated on the unprocessed toy model: drop the processing options")
                metric = toy_activation_metric(args.model)
            table = scores(hw, args.kinds, "all" if measures == ["all"] else measures, metric, **_score_options(args))
            print(format_top(table, args.top))
            if args.out:
                print(f"wrote {table.save(args.out)}")
        elif args.command == "pair":
            from .pair import compose_pair

            hw = load(args.model, fold_norm=args.fold_norm, center_writing=args.center_writing, fold_value_bias=args.fold_value_bias)
            rep = compose_pair(hw, _parse_head(args.writer), _parse_head(args.reader), args.kind, args.metric, offset=args.offset)
            print(format_pair(rep, hw.meta.name))
        elif args.command == "circuits":
            print(_run_circuits(args))
        elif args.command == "intervene":
            print(_run_intervene(args))
        elif args.command == "axioms":
            from .axioms import check_axioms, format_axioms

            results = check_axioms(args.measures, args.axioms, trials=args.trials, seed=args.seed, metric=args.metric)
            print(format_axioms(results, args.trials, args.seed, args.metric))
            if any(r.violated for r in results):
                return 1
        elif args.command == "train":
            from .toy.cli import run_train

            run_train(args)
        elif args.command == "track":
            _run_track(args)
    except CompscopeError as e:
        print(f"compscope: error: {e}", file=sys.stderr)
        return 2
    return 0


def _run_circuits(args) -> str:
    """What ``compscope circuits`` prints: every head's scores (the top ones for large models),
    and for an unprocessed toy model its activation-based labels beside them."""
    import torch

    from .circuits import head_circuits, spearman, toy_labels
    from .loading import load
    from .measures import get_measure

    get_measure(args.measure)
    processed = args.fold_norm or args.center_writing or args.fold_value_bias
    hw = load(args.model, fold_norm=args.fold_norm, center_writing=args.center_writing, fold_value_bias=args.fold_value_bias)
    c = head_circuits(hw, args.measure, offset=args.offset)
    found = {"copying": c.copying, "matching": c.matching, "prev-token": c.previous, "induction": c.induction}
    cols = {k: v for k, v in found.items() if v is not None}
    missing = ([] if c.copying is not None else ["no unembedding, so no copying"]) + \
        ([] if c.previous is not None else ["no learned positions, so no previous-token"])
    lines = [f"{c.model}: circuits from the weights (induction: K-composition by {c.measure}"
             + "".join(f"; {m}" for m in missing) + (" or induction scores" if missing else "") + ")"]
    labels = None if processed else toy_labels(args.model)
    if labels is not None:
        cols.update({"data: induction": labels.induction, "data: prev-token": labels.previous})
        lines[0] += f"; data: 200 held-out repeated random sequences [t, t], |t| = {labels.half}"
    L, H = c.matching.shape
    if L * H <= 48:
        lines.append("head  " + "".join(f"{k:>18}" for k in cols))
        lines += [f"{l}.{h:<4}" + "".join(f"{float(v[l, h]):18.3f}" for v in cols.values()) for l in range(L) for h in range(H)]
    else:
        for k, v in cols.items():
            top = v.flatten().nan_to_num(nan=-2.0).topk(min(args.top, v.numel())).indices
            lines.append(f"{k:<12} " + "   ".join(f"{int(i) // H}.{int(i) % H} {float(v.flatten()[i]):.3f}" for i in top))
    if c.copying is not None:
        from .circuits import bigram_copying, virtual_copying

        line = f"zero-layer bigram W_U W_E: copying {bigram_copying(hw):.3f}"
        if L * H <= 48 and L > 1:
            from .composition import scores

            frob = scores(hw, "V", ["frobenius"], progress=False).dense("frobenius", "V")
            virt = virtual_copying(hw)
            top = frob.flatten().nan_to_num(nan=-1.0).topk(3).indices
            at = lambda i: tuple(int(x) for x in torch.unravel_index(i, frob.shape))  # noqa: E731
            line += "; virtual heads h1->h2 with the strongest V-composition (frobenius, copying): " + "   ".join(
                "{}.{}->{}.{} ".format(*at(i)) + f"{float(frob.flatten()[i]):.3f}, {float(virt[at(i)]):.3f}" for i in top)
        lines.append(line)
    if labels is not None and c.induction is not None:
        lines.append(f"rank correlation (Spearman, all heads), weights vs data: induction {spearman(c.induction, labels.induction):.2f}, "
                     f"previous-token {spearman(c.previous, labels.previous):.2f}")
    return "\n".join(lines)


def _run_intervene(args) -> str:
    """What ``compscope intervene`` prints: per kind the strongest pairs by interventional
    effect and each measure's rank correlation with the effect over all pairs."""
    import torch

    from .circuits import spearman
    from .intervene import against_measures

    effects, table, half = against_measures(args.model, args.kinds, metric=args.metric, sequences=args.sequences,
                                            ablation=args.ablation)
    lines = [f"{table.model}: interventional composition ({args.ablation}-ablation of h1's output in h2's input) on "
             f"{args.sequences} held-out repeated random sequences [t, t], |t| = {half}; measures under metric {args.metric}"]
    for kind, eff in effects.items():
        flat = eff.flatten().nan_to_num(nan=-1.0)
        n = int(torch.isfinite(eff).sum())
        top = flat.topk(min(args.top, n)).indices
        pair = lambda i: "{}.{}->{}.{}".format(*(int(x) for x in torch.unravel_index(i, eff.shape)))  # noqa: E731
        lines.append(f"{kind}  strongest effects: " + "   ".join(f"{pair(i)} {float(flat[i]):.3f}" for i in top))
        rho = "  ".join(f"{m} {spearman(table.dense(m, kind), eff):.2f}" for m in table.measures)
        lines.append(f"   rank correlation with the effect over {n} pairs (Spearman): {rho}")
    return "\n".join(lines)


def _parse_head(text: str) -> tuple[int, int]:
    try:
        layer, head = text.split(".")
        return int(layer), int(head)
    except ValueError:
        raise CompscopeError(f"head {text!r}: expected LAYER.HEAD, e.g. 0.1") from None


def format_pair(rep, model: str) -> str:
    """What ``compscope pair`` prints."""
    import math

    (l1, h1), (l2, h2) = rep.writer, rep.reader
    fmt = lambda xs: " ".join(f"{float(x):.3g}" for x in xs)  # noqa: E731
    lines = [
        f"{model}: {l1}.{h1} -> {l2}.{h2}, {rep.kind}-composition, metric {rep.metric}",
        f"principal angles (deg)     {fmt(t * 180 / math.pi for t in rep.principal_angles)}",
        f"cosines                    {fmt(rep.cosines)}",
        f"composed singular values   {fmt(rep.composed_singular_values)}",
        f"writer singular values     {fmt(rep.writer_singular_values)}",
        f"reader singular values     {fmt(rep.reader_singular_values)}",
    ]
    lines += [f"{name:<26} {v:.4f}" for name, v in rep.measures.items()]
    return "\n".join(lines)


def _parse_pair(text: str) -> tuple[int, int, int, int]:
    try:
        a, b = text.split("-")
        (l1, h1), (l2, h2) = (map(int, a.split(".")), map(int, b.split(".")))
        return (l1, h1, l2, h2)
    except ValueError:
        raise CompscopeError(f"--pair {text!r}: expected SRC_LAYER.SRC_HEAD-DST_LAYER.DST_HEAD, e.g. 0.1-1.2") from None


def _run_track(args) -> None:
    from .tracking import track

    _out_table(args.out)
    if args.plot and not args.plot.endswith((".png", ".svg", ".pdf")):
        raise CompscopeError(f"--plot {args.plot}: use a .png, .svg or .pdf file name")
    if args.plot:
        from .plots import require_matplotlib

        require_matplotlib()  # before the checkpoints are read
    highlight = [_parse_pair(p) for p in args.highlight] if args.highlight else None
    source = args.checkpoints[0] if len(args.checkpoints) == 1 else args.checkpoints
    measures = args.measures or ["frobenius", "tight", "overlap"]
    metrics = args.metrics or ["identity", "embed"]
    tr = track(source, args.kinds, "all" if measures == ["all"] else measures, metrics, **_score_options(args))
    print(f"{len(tr.checkpoints)} checkpoints, steps {tr.steps[0]}..{tr.steps[-1]}; kinds {args.kinds}; "
          f"metrics {', '.join(metrics)}")
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
        from .plots import plot_track

        kind = "K" if "K" in args.kinds else args.kinds[0]
        print(f"wrote {plot_track(tr, args.plot, kind=kind, highlight=highlight)}")


def entry() -> None:
    """Console entry point: exit quietly when the reader of stdout goes away (``| head``)."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    entry()
