"""``compscope circuits``: copying, matching, previous-token and induction scores (and the
induction circuit's attention half, ``induction (QK)``) of every head, read from the weights;
beside them, for an unprocessed toy model, its activation labels."""

from __future__ import annotations

from .common import (add_model, add_processing, add_sample_data, add_tokenizer, check_offset, count, model_reading_text,
                     processing, sample_data, table_file)

HELP = "copying, matching, previous-token and induction scores of every head, from the weights"
EXAMPLE = "example: compscope circuits --measure tight"


def add_arguments(p) -> None:
    add_model(p)
    p.add_argument("--measure", default="frobenius",
                   help="measure of the induction score (K) and of the virtual heads shown (V) (default frobenius)")
    p.add_argument("--offset", type=float, default=0.0, help="rotary offset of the matching score (default 0; rotary models only)")
    from ..defaults import CONTENTS

    p.add_argument("--content", choices=CONTENTS, default="embed",
                   help="content distribution of the previous-token score of rotary, ALiBi and relative-position heads: the normed "
                        "embeddings (default; weights only) or what each layer reads on natural text (runs the model; "
                        "those models only)")
    add_sample_data(p, "with --content activations")
    p.add_argument("--top", type=count, default=5, help="heads to print per score for models of over 48 heads (default 5)")
    p.add_argument("--out", help="write every head's scores, one row per head (.csv or .parquet)")
    add_processing(p)
    add_tokenizer(p)


def run(args) -> None:
    table_file(args.out)
    print(report(args))


def _content_said(c, hw, sampled_on) -> list[str]:
    """The header's words on the content of a rotary (ALiBi, relative) head's previous-token score (none
    where the score reads no content); ``sampled_on()``: what the residual was sampled on."""
    from ..analysis.circuits import reads_content, relative_kind

    kind = relative_kind(hw.positions)
    if c.content == "activations":
        return [f"{kind} previous-token: content from the residual each layer reads on {sampled_on()}"]
    if reads_content(hw) and c.previous is not None:
        return [f"{kind} previous-token: content from the normed embeddings, which deep layers do not read; "
                "--content activations takes what each layer reads on data"]
    return []


def report(args) -> str:
    """What ``compscope circuits`` prints: every head's scores (the top ones for large models),
    and for an unprocessed toy model its activation-based labels beside them."""
    from ..analysis.circuits import (POSITIONAL_BEFORE_LINEARISED, bigram_copying, head_circuits, reads_content,
                                     virtual_copying)
    from ..data.residual_moments import as_sample_data, content_runner
    from ..api import circuit_content
    from ..analysis.stats import spearman
    from ..core.processing import weights_said
    from ..data.head_labels import toy_labels
    from ..engine.composition import scores
    from ..loading.sources import load_with_positional
    from ..measures import get_measure
    from ..results.table import top_entries

    get_measure(args.measure)
    data = sample_data(args, args.content == "activations", "--content activations")
    model = model_reading_text(args, args.model, args.content == "activations", "--content activations")
    hw, positional = load_with_positional(model, **processing(args))
    check_offset(hw, args.offset)
    if args.content == "activations" and reads_content(hw):  # one runner samples the content and says on what
        model = content_runner(hw, model)
    c = head_circuits(hw, args.measure, offset=args.offset, content=circuit_content(hw, args.content, model, data),
                      progress=True, positional=positional)
    found = {"copying": c.copying, "matching": c.matching, "prev-token": c.previous, "induction": c.induction,
             "induction (QK)": c.induction_qk}
    cols = {k: v for k, v in found.items() if v is not None}
    missing = ([] if c.copying is not None else ["no unembedding, so no copying score"]) + \
        ([] if c.previous is not None else ["no learned, rotary, ALiBi or relative positions, so no previous-token or induction scores"]) + \
        ([] if hw.causal else ["bidirectional, so no induction scores"])
    told = ([f"induction: K-composition by {c.measure}, matching through the writer"] if c.induction_qk is not None else []) \
        + _content_said(c, hw, lambda: as_sample_data(data).content(model)) \
        + ([POSITIONAL_BEFORE_LINEARISED] if positional is not hw and c.previous is not None else [])
    lines = [f"{c.model}{weights_said(hw.meta.processing)}: circuits from the weights ({'; '.join(told + missing)})"]
    labels = None if hw.meta.processing else toy_labels(args.model)
    if labels is not None:
        cols.update({"data: induction": labels.induction, "data: prev-token": labels.previous})
        lines[0] += f"; data: {labels.sequences} held-out repeated random sequences [t, t], |t| = {labels.half}"
    L, H = c.matching.shape
    if L * H <= 48:
        lines.append("head  " + "".join(f"{k:>18}" for k in cols))
        lines += [f"{l}.{h:<4}" + "".join(f"{float(v[l, h]):18.3f}" for v in cols.values()) for l in range(L) for h in range(H)]
    else:
        for k, v in cols.items():
            lines.append(f"{k:<14} " + "   ".join(f"{l}.{h} {x:.3f}" for (l, h), x in top_entries(v, args.top)))
    if c.copying is not None:
        line = f"zero-layer bigram W_U W_E: copying {bigram_copying(hw):.3f}"
        if L * H <= 48 and L > 1:
            v = scores(hw, "V", [c.measure], progress=False).dense(c.measure, "V")
            virt = virtual_copying(hw)
            line += f"; virtual heads h1->h2 with the strongest V-composition ({c.measure}, copying): " + "   ".join(
                "{}.{}->{}.{} ".format(*i) + f"{x:.3f}, {float(virt[i]):.3f}" for i, x in top_entries(v, 3))
        lines.append(line)
    if labels is not None and c.induction is not None:
        lines.append(f"rank correlation (Spearman, all heads), weights vs data: induction {spearman(c.induction, labels.induction):.2f}, "
                     f"induction (QK) {spearman(c.induction_qk, labels.induction):.2f}, "
                     f"previous-token {spearman(c.previous, labels.previous):.2f}")
    if args.out:
        lines.append(f"wrote {c.save(args.out)}")
    return "\n".join(lines)
