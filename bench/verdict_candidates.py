"""Candidates for the previous-token → induction K-pair AUROC, judged against a saved verdict.

``compscope validate MODEL --out DIR`` saves the activation labels and the interventions; this
script reads them back (no labels or interventions again; the model runs only for the metrics
estimated on data and the rotary heads' residual content) and scores every pair of ``MODEL`` with each
candidate, printing the AUROC against the label truth (previous-token >= 0.4 before induction
>= 0.3) and against the confirmed truth (those pairs whose K effect is >= 0.05):

- ``interventions``: the K effects themselves (the ceiling of any composition score against the
  label truth);
- ``reader's ‖B‖_F alone``: under each metric below, the reader's own scale (the same for all its
  writers; ``read_gain / frobenius``): how much of ``read_gain``'s AUROC the readers alone give;
- every measure under ``identity``, ``embed`` and ``unembed``, and under the metrics estimated on
  data (the model runs over the text once for all four: ``activations``, ``covariance`` and their ``-own`` variants, each
  reading factor in its own layer's moment), here to three decimals;
- two weight-statistics metrics (the seed's option 2: statistics of all heads at once, which
  move with the residual gauge as ``G -> T G Tᵀ``): ``writers``, ``G = Σ_heads W_O W_Oᵀ`` (what
  the heads write), and ``readers``, ``G = (Σ_heads W_Qᵀ W_Q + W_Kᵀ W_K + W_Vᵀ W_V)^{-1}``;
- ``layer-standardised``: each score under each of the metrics above as a z-score among the
  pairs of its (writer layer, reader layer) block, which removes what neighbouring layers share
  whatever the heads;
- norms inside the heads' circuits (Gemma 3: QK-norm and the attention-output norm), each alone and
  both, replaced by their mean Jacobian on the metrics' text (``lin. qk``, ``lin. output``,
  ``lin. qk+output``: :func:`compscope.data.norm_linearisation.linearise_norms`), every measure
  under ``identity``, ``embed``, ``covariance`` and ``covariance-own``;
- a per-head QK-norm replaced by its Jacobian at an operating point read from the weights
  (:func:`compscope.core.processing.linearise_qk_norm`, the second order of the mean Jacobian):
  where the normalised input is isotropic (``iso. qk``, no data) and at the second moment of what
  the heads read on the metrics' text (``G-point qk``), every measure (and the reader's scale
  alone) under ``identity``, ``embed``, ``covariance`` and ``covariance-own``;
- rotary models: every measure under ``identity`` and ``embed`` at the rotary offset where an
  induction head attends on the verdict's sequences ``[t, t]``: the token after the earlier
  occurrence, ``δ = |t| − 1`` back (``W_Q^T R(δ) W_K`` as the reader's QK circuit instead of
  ``δ = 0``); and under ``identity``, ``embed`` and ``unembed`` with the reader's QK circuit
  averaged over every offset the sequences hold, ``W_Q^T (mean_δ R(δ)) W_K`` for ``δ = 0 … 2|t|``:
  the part of the circuit that does not turn with the offset (the slow rotary pairs, which act as
  content) kept, the fast ones damped.

Then, apart (they are not measure × metric pairs: they know which heads are previous-token
heads, or what an induction head's attention looks like), the induction-circuit pair scores from
the weights: the writer's previous-token score (``compscope circuits``; for rotary heads with both
contents, the ``activations`` one running the model on natural text) alone, times each measure
under ``identity`` and ``embed``, and times ``frobenius`` (identity) and the matching through the
writer (``induction_matching``, clamped at 0: the pair score inside ``induction_qk``); and the
matching through the writer alone. The label truth asks "is h1 a previous-token head and h2 an
induction head"; the first row says how much of it the writer's role alone answers.

    compscope validate smollm2 --out verdict-smollm2
    python bench/verdict_candidates.py smollm2 verdict-smollm2
    python bench/verdict_candidates.py gemma3-270m verdict-gemma --shrinkage none

The metrics on data are estimated as compscope estimates them by default (each layer's ``G``
shrunk by Ledoit-Wolf); ``--shrinkage none`` adds every one of them again with ``G`` the sample
moment itself (rows ``NAME, sample``, layer-standardised too, and ``covariance-own, sample`` with
the norms linearised), from the same pass over the text.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd  # noqa: E402
import torch  # noqa: E402

import compscope  # noqa: E402
from compscope.analysis.circuits import induction_matching, positional_previous, rotary_previous  # noqa: E402
from compscope.core.factors import layer_factor  # noqa: E402
from compscope.core.metrics import ON_DATA, from_gram, get_metric  # noqa: E402
from compscope.data.norm_linearisation import mean_jacobians, norm_parts  # noqa: E402
from compscope.data.residual_moments import MetricData  # noqa: E402
from compscope.data.runner import runner_for  # noqa: E402
from compscope.data.validate import auroc, confirmed_pairs, previous_contents, true_pairs, writer_pairs  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402

MEASURES = ("frobenius", "tight", "overlap", "spectral", "bandwidth", "read_gain")


#: the suffix of a metric on data whose G is the sample moment, not shrunk (``--shrinkage none``)
SAMPLE = ", sample"


def head_grid(frame: pd.DataFrame, column: str, L: int, H: int) -> torch.Tensor:
    """``(L, H)``: one column of a saved ``head_labels.csv``."""
    g = torch.full((L, H), float("nan"))
    g[torch.tensor(frame["layer"].to_numpy()), torch.tensor(frame["head"].to_numpy())] = \
        torch.tensor(frame[column].to_numpy(dtype="float32"))
    return g


def pair_grid(frame: pd.DataFrame, L: int, H: int) -> torch.Tensor:
    """``(L, H, L, H)`` float64: the ``effect`` of each pair of a saved ``interventions.parquet`` (NaN where none)."""
    e = torch.full((L, H, L, H), float("nan"), dtype=torch.float64)
    idx = tuple(torch.tensor(frame[c].to_numpy()) for c in ("src_layer", "src_head", "dst_layer", "dst_head"))
    e[idx] = torch.tensor(frame["effect"].to_numpy(dtype="float64"))
    return e


def reader_alone(frobenius: torch.Tensor, read_gain: torch.Tensor) -> torch.Tensor:
    """The reader's own ``‖B‖_F`` in the metric at every pair, ``read_gain / frobenius`` (NaN where
    ``frobenius`` is 0): the same for all of a reader's writers."""
    return torch.where(frobenius > 0, read_gain / frobenius, torch.nan)


def _standardised(x: torch.Tensor) -> torch.Tensor:
    """z-score of each pair among the pairs of its (writer layer, reader layer) block."""
    x = x.double()
    m = torch.nanmean(x, dim=(1, 3), keepdim=True)
    sd = torch.nanmean((x - m) ** 2, dim=(1, 3), keepdim=True).sqrt().clamp_min(1e-30)
    return (x - m) / sd


def offsets_averaged(hw, n: int):
    """``hw`` with each reader's QK circuit averaged over the rotary offsets ``δ = 0 … n − 1``:
    ``W_K`` replaced by ``mean_δ R(−δ) W_K`` (the rotation :meth:`HeadWeights.W_QK` applies at
    offset ``δ``), so that at offset 0 ``W_QK = W_Q^T mean_δ R(−δ) W_K``."""
    w_k = torch.stack([torch.stack([layer_factor(hw, layer, "K", offset=d, per_kv=True, dtype=torch.float64)
                                    for d in range(n)]).mean(0) for layer in range(hw.n_layers)])
    return hw.replace(W_K=w_k.to(hw.W_K.dtype), step=f"QK averaged over rotary offsets 0-{n - 1}")


def read_verdict(model: str, folder: str) -> tuple:
    """``(hw, previous (L, H), induction (L, H), K effects (L, H, L, H))`` of ``model`` and the
    verdict saved in ``folder``."""
    missing = [n for n in ("head_labels.csv", "interventions.parquet") if not os.path.isfile(os.path.join(folder, n))]
    if missing:  # the scripts' bad input: said, not a traceback
        raise SystemExit(f"{folder}: not a folder written by `compscope validate --out` (missing {', '.join(missing)})")
    hw = compscope.load(model)
    L, H = hw.n_layers, hw.n_heads
    labels = pd.read_csv(os.path.join(folder, "head_labels.csv"))
    heads = set(zip(labels["layer"], labels["head"]))
    if heads != {(layer, head) for layer in range(L) for head in range(H)}:  # another model's verdict: said
        run = os.path.join(folder, "run.json")
        whose = None
        if os.path.isfile(run):
            with open(run) as f:
                whose = json.load(f).get("model")
        raise SystemExit(f"{folder}: its labels are of {len(heads)} heads" + (f" ({whose})" if whose else "")
                         + f", not of {hw.meta.name}'s {L} layers x {H} heads")
    inter = pd.read_parquet(os.path.join(folder, "interventions.parquet"))
    return (hw, head_grid(labels, "previous_token", L, H), head_grid(labels, "induction", L, H),
            pair_grid(inter[inter.kind == "K"], L, H))


def verdict_arguments(ap: argparse.ArgumentParser) -> None:
    """The arguments of a script reading a saved verdict back: ``model``, ``verdict`` (the folder)
    and the label thresholds of its truth (``--prev-threshold``, ``--induction-threshold``)."""
    ap.add_argument("model")
    ap.add_argument("verdict", help="a folder written by compscope validate --out")
    threshold_arguments(ap)


def threshold_arguments(ap: argparse.ArgumentParser) -> None:
    """The label thresholds of the truth, as ``compscope validate`` has them: ``--prev-threshold``,
    ``--induction-threshold``."""
    ap.add_argument("--prev-threshold", type=float, default=0.4)
    ap.add_argument("--induction-threshold", type=float, default=0.3)


def norms_argument(ap: argparse.ArgumentParser) -> None:
    """``--linearise-norms [PARTS]``, as ``compscope validate`` has it: the measures read the weights
    with the norms inside the heads' circuits replaced by their mean Jacobian on natural text."""
    ap.add_argument("--linearise-norms", nargs="?", const="all", metavar="PARTS", default=None,
                    choices=("all", "qk", "output", "qk,output"),
                    help="score the weights with the norms inside the heads' circuits (QK-norm 'qk', attention-output "
                         "norm 'output'; alone: every one the model has) replaced by their mean Jacobian on natural text")
    ap.add_argument("--linearise-qk-norm", nargs="?", const="isotropic", choices=("isotropic", "text"), default=None,
                    metavar="POINT",
                    help="score the weights with QK-norm replaced by its Jacobian where the normalised input is "
                         "isotropic, from the weights alone (the default without POINT; compscope.load(..., "
                         "linearise_qk_norm=True)), or at the second moment of what the heads read on the metrics' "
                         "text (text: validate --linearise-qk-norm text; the pass that estimates the metrics on data)")


def data_arguments(ap: argparse.ArgumentParser) -> None:
    """``--on-data`` (the metrics estimated on natural text join the candidates, each layer's ``G``
    shrunk by Ledoit-Wolf as compscope's default has it) and, with it, ``--shrinkage none`` (each of
    them again with ``G`` the sample moment: rows ``NAME, sample``)."""
    ap.add_argument("--on-data", action="store_true",
                    help="also the metrics estimated on natural text (the model runs once over it; G shrunk by "
                         "Ledoit-Wolf, the default)")
    shrinkage_argument(ap, "with --on-data, also")


def shrinkage_argument(ap: argparse.ArgumentParser, also: str) -> None:
    """``--shrinkage none``: each metric on data again with ``G`` the sample moment (rows ``NAME, sample``)."""
    ap.add_argument("--shrinkage", choices=["none"], default=None,
                    help=f"{also} each metric on data with its G the sample moment itself, not shrunk by Ledoit-Wolf "
                         f"(rows 'NAME{SAMPLE}')")


def data_metric_names(args: argparse.Namespace) -> tuple[str, ...]:
    """The names of the metrics on data that :func:`data_arguments` asked for (none without ``--on-data``)."""
    if not args.on_data:
        return ()
    return ON_DATA + (tuple(f"{name}{SAMPLE}" for name in ON_DATA) if args.shrinkage else ())


def metrics_to_score(args: argparse.Namespace, weights, runner, names: tuple[str, ...] = ("identity", "embed")) -> dict:
    """``{name: Metric}`` of ``weights``: the metrics ``names`` that need no data and, as
    :func:`data_arguments` asked, those estimated on text (one pass of ``runner`` serves them all).
    ``--shrinkage`` without ``--on-data``: refused, not ignored."""
    if args.shrinkage and not args.on_data:
        raise SystemExit("--shrinkage says how the metrics estimated on data are estimated: give --on-data with it")
    metrics = {name: get_metric(name, weights) for name in names}
    return {**metrics, **data_metrics(weights, runner, args.shrinkage)} if args.on_data else metrics


def data_metrics(weights, runner, shrinkage: str | None) -> dict:
    """``{name: Metric}`` of ``weights``: every metric estimated on text as by default (one pass of
    ``runner`` serves them all) and, with ``shrinkage`` ``'none'``, each again with its ``G`` the
    sample moment (``NAME, sample``)."""
    metrics = {name: get_metric(name, weights, model=runner) for name in ON_DATA}
    if shrinkage:  # the same pass's sums, not shrunk
        sample = MetricData(shrinkage=shrinkage)
        metrics.update({f"{name}{SAMPLE}": get_metric(name, weights, model=runner, data=sample) for name in ON_DATA})
    return metrics


def weights_to_score(args: argparse.Namespace, hw, runs: bool, progress: bool = False) -> tuple:
    """``(weights, runner)``: the weights the measures read, ``hw`` or, with ``args.linearise_norms``
    (:func:`norms_argument`), ``hw`` with those norms replaced by their mean Jacobian on the default
    text (:func:`compscope.data.norm_linearisation.linearise_norms`, as ``validate`` does); and a
    runner of ``args.model`` where the model must run (``runs``: a metric on data; or linearising),
    else ``None``. With ``args.linearise_qk_norm``, QK-norm is linearised first, from the weights
    (``isotropic``: :func:`compscope.core.processing.linearise_qk_norm`) or at the second moment of
    the metrics' text (``text``: :func:`compscope.data.norm_linearisation.qk_norm_on_text`, the pass
    the metrics on data share). A model without those norms: said, not a traceback."""
    parts, point = args.linearise_norms, getattr(args, "linearise_qk_norm", None)
    runner = runner_for(args.model, hw, progress=progress) if runs or parts or point == "text" else None  # as it is
    weights = hw
    if point:
        from compscope.core.processing import linearise_qk_norm
        from compscope.data.norm_linearisation import qk_norm_on_text

        try:
            weights = linearise_qk_norm(hw) if point == "isotropic" else qk_norm_on_text(runner, hw)
        except compscope.ProcessingError as e:
            raise SystemExit(f"--linearise-qk-norm: {e}") from None
    if parts is None:
        return weights, runner
    from compscope.data.norm_linearisation import linearise_norms

    try:
        return linearise_norms(runner, None if parts == "all" else parts.split(","), hw=weights, progress=False), runner
    except (compscope.OptionError, compscope.ProcessingError) as e:
        raise SystemExit(f"--linearise-norms: {e}") from None


def linearised_words(args: argparse.Namespace) -> str:
    """A header's words for ``--linearise-norms`` and ``--linearise-qk-norm`` (empty without them)."""
    point = getattr(args, "linearise_qk_norm", None)
    words = {None: "", "isotropic": "; QK-norm linearised at the isotropic point",
             "text": "; QK-norm linearised at the text's second moment"}[point]
    return words + (f"; the norms {args.linearise_norms.replace(',', '+')} linearised" if args.linearise_norms else "")


def truth_from_args(ap: argparse.ArgumentParser) -> tuple:
    """``(args, hw, truth (L, H, L, H) bool, runner)``: ``ap`` (with :func:`verdict_arguments`)
    parsed, its ``verdict`` read back for its ``model``, and a runner of the model (for the metrics
    estimated on data)."""
    from compscope.data.validate import true_pairs

    args = ap.parse_args()
    hw, previous, induction, _ = read_verdict(args.model, args.verdict)
    truth = true_pairs(previous, induction, args.prev_threshold, args.induction_threshold)
    return args, hw, truth, runner_for(args.model, progress=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verdict_arguments(ap)
    ap.add_argument("--effect-threshold", type=float, default=0.05)
    shrinkage_argument(ap, "also")
    args = ap.parse_args()
    hw, previous, induction, effects = read_verdict(args.model, args.verdict)
    truth = true_pairs(previous, induction, args.prev_threshold, args.induction_threshold)
    confirmed = confirmed_pairs(truth, effects, args.effect_threshold)
    print(f"{hw.meta.name}: {int(truth.sum())} true K-pairs (previous-token >= {args.prev_threshold}, induction >= "
          f"{args.induction_threshold}); {int(confirmed.sum())} confirmed (K effect >= {args.effect_threshold})")
    rows = [("interventions (K effect)", "-", auroc(effects, truth), auroc(effects, confirmed))]
    W_O = hw.W_O.double()
    writers = torch.einsum("lhdr,lher->de", W_O, W_O)
    readers = sum(torch.einsum("lhrd,lhre->de", W.double(), W.double()) for W in (hw.W_Q, hw.W_K, hw.W_V))
    metrics = {"identity": get_metric("identity", hw), "embed": get_metric("embed", hw),
               "writers": from_gram("writers", writers), "readers": from_gram("readers", readers, invert=True)}
    if hw.W_U is not None:
        metrics["unembed"] = get_metric("unembed", hw)
    runner = runner_for(args.model, hw)  # loaded once; one pass over the text serves the metrics on data
    metrics.update(data_metrics(hw, runner, args.shrinkage))
    dense = {}
    for name, met in metrics.items():
        table = scores(hw, "K", list(MEASURES), met, pairs="all", progress=False)
        for m in MEASURES:
            x = dense[m, name] = table.dense(m, "K")
            rows.append((m, name, auroc(x, truth), auroc(x, confirmed)))
            z = _standardised(x)
            rows.append((m, f"{name}, layer-standardised", auroc(z, truth), auroc(z, confirmed)))
        scale = reader_alone(dense["frobenius", name], dense["read_gain", name])  # what read_gain adds to frobenius
        rows.append(("reader's ‖B‖_F alone", name, auroc(scale, truth), auroc(scale, confirmed)))
    jacobians = mean_jacobians(runner, progress=False) if norm_parts(hw) else None  # one pass serves each subset
    on = ("identity", "embed", "covariance", "covariance-own")
    # the norms inside the heads' circuits, linearised on the metrics' text; then QK-norm linearised from
    # the weights (isotropic) and at the text's G
    variants = [(f"lin. {'+'.join(parts)}", jacobians.apply(hw, parts), on + (f"covariance-own{SAMPLE}",))
                for parts in _norm_parts(hw)] + [(how, lin, on) for how, lin in qk_operating_points(hw, runner)]
    for how, lin, names in variants:
        for name in [n for n in names if n in metrics]:
            table = scores(lin, "K", list(MEASURES), metrics[name], pairs="all", progress=False)
            for m in MEASURES:
                x = table.dense(m, "K")
                rows.append((m, f"{name}; {how}", auroc(x, truth), auroc(x, confirmed)))
            scale = reader_alone(table.dense("frobenius", "K"), table.dense("read_gain", "K"))
            rows.append(("reader's ‖B‖_F alone", f"{name}; {how}", auroc(scale, truth), auroc(scale, confirmed)))
    if hw.rotary is not None:
        with open(os.path.join(args.verdict, "run.json")) as f:
            delta = json.load(f)["half"] - 1  # query i attends to key i - |t| + 1
        for name in ("identity", "embed"):
            table = scores(hw, "K", list(MEASURES), metrics[name], offset=delta, pairs="all", progress=False)
            for m in MEASURES:
                x = table.dense(m, "K")
                rows.append((m, f"{name}, offset {delta}", auroc(x, truth), auroc(x, confirmed)))
        most = 2 * (delta + 1)  # [bos] t t: offsets 0 ... 2|t|
        averaged = offsets_averaged(hw, most + 1)
        for name in [n for n in ("identity", "embed", "unembed") if n in metrics]:
            table = scores(averaged, "K", list(MEASURES), metrics[name], pairs="all", progress=False)
            for m in MEASURES:
                x = table.dense(m, "K")
                rows.append((m, f"{name}, offsets 0-{most} averaged", auroc(x, truth), auroc(x, confirmed)))
    _print(rows, "candidate")
    circuit = []
    previous = _previous_scores(hw, runner)
    if previous:
        match = induction_matching(hw, progress=True)
        circuit.append(("matching through the writer", "-", auroc(match, truth), auroc(match, confirmed)))
    for content, prev in previous.items():
        writer = writer_pairs(prev, effects)
        circuit.append(("previous-token score alone", content, auroc(writer, truth), auroc(writer, confirmed)))
        for m in MEASURES:
            for name in ("identity", "embed"):
                x = writer * dense[m, name].double()
                circuit.append((f"previous-token x {m}", f"{content}; {name}", auroc(x, truth), auroc(x, confirmed)))
        x = writer * dense["frobenius", "identity"].double().clamp_min(0) * match.clamp_min(0)
        circuit.append(("prev. x frobenius x matching", f"{content}; identity", auroc(x, truth), auroc(x, confirmed)))
    if circuit:
        print("\ninduction-circuit pair scores (the writer's previous-token score from the weights, alone and times K):")
        _print(circuit, "circuit score")


def qk_operating_points(hw, runner) -> list[tuple[str, object]]:
    """``[(words, weights)]``: ``hw`` with its per-head QK-norm replaced by the second-order Jacobian
    of :func:`compscope.core.processing.linearise_qk_norm`, at the isotropic operating point (``iso.
    qk``, from the weights alone) and at the second moment of what the heads read on the metrics'
    text (``G-point qk``: the sample moment and mean, the same pass as the metrics; ``validate
    --linearise-qk-norm text``); none without such a QK-norm."""
    from compscope.core.processing import linearise_qk_norm
    from compscope.data.norm_linearisation import qk_norm_on_text

    if hw.qk_norm is None or hw.qk_norm_scope != "head":
        return []
    return [("iso. qk", linearise_qk_norm(hw)), ("G-point qk", qk_norm_on_text(runner, hw))]


def _norm_parts(hw) -> list[tuple[str, ...]]:
    """Each norm inside the heads' circuits that ``hw`` has, alone, and all of them together."""
    has = norm_parts(hw)
    return [(p,) for p in has] + ([tuple(has)] if len(has) > 1 else [])


def _previous_scores(hw, model) -> dict[str, torch.Tensor]:
    """The previous-token score of every head from the weights, per content distribution."""
    if hw.W_pos is not None:
        return {"positions": positional_previous(hw)}
    if hw.rotary is None:
        return {}
    return {f"{content} content": rotary_previous(hw, content=samples)
            for content, samples in previous_contents(hw, model, progress=False).items()}


#: decimals an AUROC is printed (and ranked) to
DIGITS = 3


def _print(rows: list[tuple], title: str) -> None:
    rows = sorted(rows, key=lambda r: -round(r[2], DIGITS))  # ties as printed keep the order they were made in
    w = max(36, *(len(r[1]) for r in rows))
    print(f"\n{title:<30} {'metric':<{w}} {'AUROC K':>8} {'confirmed':>9}")
    for cand, met, a, c in rows:
        print(f"{cand:<30} {met:<{w}} {a:8.{DIGITS}f} {c:9.{DIGITS}f}")


if __name__ == "__main__":
    main()
