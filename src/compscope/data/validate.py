"""The verdict: which measure × metric agrees with what the model does on data.

``validate(model)`` runs the model (:mod:`compscope.data.runner`) on seeded repeated random
sequences and measures, for the same weights:

1. the activation labels of every head (:func:`compscope.data.head_labels.activation_labels`);
2. the interventional composition of every pair and kind (:mod:`compscope.data.intervene`);
3. every measure of every pair under each metric (the engine, every pair: ``pairs='all'``).

It then judges each measure × metric:

- ``spearman``: rank correlation with the interventional effect over all earlier → later pairs
  of the kind (for V also ``spearman_direction``, against ``‖o' − o‖ / ‖o‖``);
- ``auroc`` (kind K only): how well the measure separates the *true previous-token → induction
  pairs* from all other K pairs: ``h1`` with a previous-token label ``≥ prev_threshold``, ``h2``
  in a later layer with an induction label ``≥ induction_threshold`` (the thresholds are
  options and are recorded); the probability that a true pair scores above a false one, ties
  counted half; NaN when there is no true pair; ``auroc_se``, DeLong's standard error of it
  (:func:`~compscope.data.separation.auroc_se`: the pairs taken as independent, which pairs
  sharing a head are not, so a lower bound on the spread); ``auroc_gap``, how far it falls below the
  best K row's (the first printed), with ``auroc_gap_se``, DeLong's standard error of that gap on the
  same pairs (:func:`~compscope.data.separation.auroc_gap_se`). Heads whose label lies within two standard
  errors (over the sequences) of its threshold are named (``near_threshold`` in ``run.json``):
  other sequences may move them across it;
- ``auroc_confirmed`` (kind K only): the same against the true pairs that the interventions
  confirm, those whose K effect is at least ``effect_threshold`` (total variation; recorded):
  the label truth counts every previous-token head before every induction head, also pairs
  the data show do not talk directly. As a ceiling for the first, ``interventions_auroc``
  (in ``run.json``) is the AUROC of the K interventions themselves against the label truth:
  how well the model's own direct-path composition separates those pairs; and as a baseline,
  ``writer_previous_auroc``: that of the writer's previous-token score from the weights alone
  (per content), which knows nothing of the pair, with ``circuit_auroc``, the same times
  ``frobenius`` under ``identity`` (the induction-circuit pair score);
- ``auroc_within_readers``, ``auroc_within_writers`` (kind K only): the AUROC kept to the
  comparisons between pairs into the same reader, or from the same writer
  (:func:`~compscope.data.separation.auroc_within`): whether the measure knows which writers a
  reader composes with, whatever the reader (``interventions_auroc_within`` in ``run.json``: the
  K interventions' own);
- the axioms the measure keeps, from its declaration (which the axiom battery checks).

And the weight-only head scores (:mod:`compscope.analysis.circuits`: previous-token from
positions; induction from copying × previous × K-composition × matching through the writer, and
``induction_qk``, its attention half without copying, which is what the label measures) against
the activation labels:
Spearman over heads, and the precision of the top 5 (the share of the five heads the weights
rank highest whose label passes its threshold). Rotary heads are ranked twice: with the normed
embeddings as the content of the previous-token score (the weights alone) and with samples of
the residual each layer reads on the activations metric's data (``content`` in ``heads.csv``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ..core.heads import HeadWeights
from ..errors import OptionError, check_int
from ..core.metrics import GIVEN, on_data
from ..core.processing import center_writing as centred, check_centrable
from ..defaults import QK_NORM_POINTS, SEED
from .norm_linearisation import unread_norms
from .separation import (BY_HEAD_COLUMNS, auroc, auroc_by_head, auroc_gap_se, auroc_se,  # noqa: F401 (re-exported)
                         auroc_shares, auroc_span, auroc_within, by_head_lines, confirmed_pairs, forward_pairs,
                         near_heads, near_truths, true_pairs, writer_pairs)
from .sequences import HALF
from .verdict import Verdict, data_line, rank_key, ranked, truth_lines  # noqa: F401 (re-exported)

#: the K measure and metric of the induction-circuit pair score (writer's previous-token score × K)
CIRCUIT_MEASURE = ("frobenius", "identity")
#: metrics judged by default (each skipped, with a note, where the model lacks what it needs)
DEFAULT_METRICS = ("identity", "embed", "activations", "covariance")
#: the processing steps of :func:`compscope.load` that :func:`validate` judges the measures with too
#: (the others of its own are validate's alone)
PROCESSING_STEPS = ("fold_norm", "linearise_qk_norm", "center_writing")
#: the processing steps that move no composition score (``b_V`` enters no factor the measures read):
#: a verdict without them stands for weights with them
SCORE_NEUTRAL_STEPS = ("fold_value_bias",)


def verdict_sequences(runner, sequences: int, half: int, seed: int):
    """The verdict's repeated random sequences ``[bos] t t`` for ``runner``'s model (a
    :class:`~compscope.data.sequences.Repeats`), avoiding its special tokens and its first token;
    the interventions read the first ``intervention_sequences`` of them."""
    from .sequences import repeats

    special = runner.special_ids() + ((runner.bos,) if runner.bos is not None else ())
    return repeats(sequences, half, runner.hw.n_vocab, seed, runner.bos, avoid=special)


def sequences_asked(given_name: str, given, sequences: int | None, half: int | None, seed: int | None) -> dict:
    """Those of ``sequences``, ``half``, ``seed`` given (not None), each checked, for a function
    that reads the verdict's sequences unless ``given`` (named ``given_name``) is its data; given
    beside it they are refused (they would change nothing)."""
    asked = {k: v for k, v in (("sequences", sequences), ("half", half), ("seed", seed)) if v is not None}
    if given is not None and asked:
        raise OptionError(f"{', '.join(asked)}: the sequences {given_name} gives are the data; give {given_name} or "
                          "these, not both")
    for name, v in asked.items():
        check_int(name, v, {"sequences": 1, "half": 2, "seed": None}[name])
    return asked


def default_sequences(runner, sequences: int = 64, half: int | None = None, seed: int = SEED):
    """The verdict's sequences, by default with :func:`validate`'s defaults (64 of them, ``|t| = 32``,
    seed 12345; ``|t|`` cut to the model's context, a ``half`` given that does not fit refused):
    what :func:`activation_labels` and :func:`intervention_effects` (the first
    :data:`INTERVENTION_SEQUENCES`) read when given none."""
    return verdict_sequences(runner, sequences, runner.fitting_half(HALF) if half is None else
                             runner.repeat_half(half, HALF)[0], seed)


def previous_contents(weights, model, progress: bool = True, data=None) -> dict[str, dict | None]:
    """The content distributions the previous-token score from the weights is judged under:
    ``embed`` (None: the weights alone), and for rotary, ALiBi or relative-position heads also ``activations``, samples of
    what each layer reads (:func:`~compscope.data.residual_moments.content_samples` of ``model``,
    a runner or a source)."""
    from ..analysis.circuits import reads_content
    from .residual_moments import content_samples

    contents = {"embed": None}
    if reads_content(weights):
        contents["activations"] = content_samples(weights, model, data, progress=progress)
    return contents


def precision_at(weights: Tensor, truth: Tensor, n: int = 5) -> float:
    """The share of the ``n`` heads ranked highest by ``weights`` that are true; NaN when no head
    is (a precision of nothing to find)."""
    if not bool(truth.any()):
        return float("nan")
    from ..results.table import top_entries

    top = [i for i, _ in top_entries(weights, n)]
    return sum(bool(truth[i]) for i in top) / max(1, len(top))


#: how many of the verdict's sequences the interventions run on by default
INTERVENTION_SEQUENCES = 16


def validate(model, *, sequences: int = 64, half: int | None = None, seed: int = SEED,
             intervention_sequences: int = INTERVENTION_SEQUENCES,
             kinds: str = "QKV", metrics=DEFAULT_METRICS, ablation: str = "mean", paths: str = "direct",
             prev_threshold: float = 0.4, induction_threshold: float = 0.3, effect_threshold: float = 0.05,
             batch_size: int = 16, fold_norm: bool = False,
             fold_qk_gains: bool = False, linearise_norms: bool | str | Sequence[str] | None = False,
             linearise_qk_norm: bool | str = False, center_writing: bool = False, progress: bool = True,
             device: str | torch.device | None = None, model_dtype: str | torch.dtype | None = None,
             writers=None, metric_data=None, sample_data=None, text_labels: bool = False,
             ridge: float | None = None) -> Verdict:
    """Judge every measure × metric on ``model`` against its behaviour on data (module docstring).
    ``half``: ``|t|`` of the repeated sequences (default :data:`HALF`, cut with a note where
    ``[bos] t t`` would not fit the model's context; a ``half`` given that does not fit is refused).

    ``model``: anything :func:`compscope.data.runner.runner_for` runs (a toy folder or name, a
    HuggingFace folder, a ``.gguf`` file, a built-in, a hub id, a ``transformers`` model). ``fold_norm``,
    ``fold_qk_gains``: judge the measures of the weights with the norm gains folded in (exact) or
    QK-norm's gains moved into ``W_Q``, ``W_K`` (approximate: :func:`~compscope.core.processing.fold_qk_norm_gains`);
    ``linearise_norms``: judge the weights with the norms inside the heads' circuits replaced by
    their mean Jacobians on natural text (True: every one the model has; or parts ``'qk'``,
    ``'output'``, ``'value'``: :func:`~compscope.data.norm_linearisation.linearise_norms`; False or None:
    none), after any folding
    (the heads' own previous-token and induction scores read the norms as they are: a head's
    positional pattern comes from the mean query and key, which the linearisation drops);
    ``linearise_qk_norm``: judge the weights with QK-norm replaced by its Jacobian at second order
    (:func:`~compscope.core.processing.linearise_qk_norm`; the heads' own scores as above): True or
    ``'isotropic'``, where the normalised input is isotropic, from the weights alone; ``'text'``, at the
    second moment of what the heads read on the ``metric_data`` text (the sample moment and mean; one
    pass of the model, shared with the metrics estimated on data); ``center_writing``: judge the
    weights with what the heads, the embeddings and the positions write centred (pre-LayerNorm
    models: :func:`~compscope.core.processing.center_writing`; the heads' own scores read the weights
    uncentred), after the steps above, as :func:`compscope.load` orders them;
    the model that runs on the data is always the unprocessed one. ``paths``: the interventions
    along the direct path (the specification's, the default) or every path
    (:func:`~compscope.data.intervene.intervention_effects`). ``effect_threshold``: the K
    effect that confirms a true pair (``auroc_confirmed``). ``device``: where the model runs and every
    score is computed (:func:`~compscope.data.runner.runner_for`: default CUDA when present, else the
    CPU; a model object runs where it is); ``model_dtype``: what a model loaded from files computes
    in (float32, the default, bfloat16 or float16: :func:`~compscope.data.runner.runner_for`); both recorded.
    ``writers``: intervene on these writer heads only (:func:`~compscope.data.intervene.writer_heads`:
    ``(layer, head)`` pairs and layer numbers; default every head; recorded): the interventions'
    time scales with their number, and the Spearman correlations, the confirmed pairs and their
    AUROC, and the interventions' own AUROC are then over the pairs of those writers only (the
    label-truth AUROC and the head rankings need no interventions and stay over every pair).
    ``metric_data``: what the metrics estimated on data are estimated on
    (:class:`~compscope.data.residual_moments.MetricData`; default the model's default; recorded).
    ``sample_data``: what the residual is sampled on for the rotary, ALiBi or relative-position previous-token score's
    ``activations`` content, for ``linearise_norms`` and for ``text_labels``
    (:class:`~compscope.data.residual_moments.SampleData`; recorded; refused where none runs).
    ``text_labels``: label every head on that text too
    (:func:`~compscope.data.head_labels.text_labels`, ``Verdict.text_labels``): the labels'
    agreement with those on the repeats is printed, the truth stays the repeats'. ``ridge``: each metric's
    ``G`` regularised as ``G + ridge·tr(G)/d·I`` (default ``1e-6``; the identity has no ``G``, and one given
    where every metric is the identity is refused; recorded)."""
    from ..core.factors import check_composes, check_kinds
    from ..core.metrics import DEFAULT_RIDGE, check_data_used, distinct_metrics, get_metric, ridge_for, shared_ridge
    from ..engine.composition import scores
    from .head_labels import activation_labels
    from .intervene import check_ablation, check_paths, intervention_effects, runner_with_writers
    from ..analysis.circuits import reads_content
    from .residual_moments import SampleData, as_metric_data, as_sample_data, metric_data as data_words
    from .sequences import python_version

    kinds = check_kinds(kinds)
    _check_numbers(sequences=sequences, half=HALF if half is None else half, seed=seed,
                   intervention_sequences=intervention_sequences, batch_size=batch_size, prev_threshold=prev_threshold,
                   induction_threshold=induction_threshold, effect_threshold=effect_threshold)
    for name, flag in (("text_labels", text_labels), ("center_writing", center_writing)):
        if not isinstance(flag, bool):
            raise OptionError(f"{name}={flag!r}: expected True or False")
    if not (isinstance(linearise_qk_norm, bool) or linearise_qk_norm in QK_NORM_POINTS):
        raise OptionError(f"linearise_qk_norm={linearise_qk_norm!r}: expected False, True or one of {', '.join(QK_NORM_POINTS)}")
    metrics = distinct_metrics(metrics)
    check_data_used(metric_data, metrics, reading=linearise_qk_norm == "text", also="linearise_qk_norm='text'")
    ridge = shared_ridge(metrics, ridge)
    metric_data = as_metric_data(metric_data)
    sample_data = as_sample_data(sample_data)
    check_ablation(ablation, min(intervention_sequences, sequences))
    check_paths(paths)
    runner, chosen = runner_with_writers(model, writers, progress=progress, device=device, dtype=model_dtype)
    hw = check_composes(runner.hw, "; a verdict judges head pairs (compscope.activation_labels labels its heads)")
    half, cut = runner.repeat_half(half, HALF)  # the default cut to the model's context (said so); one given kept or refused
    head_weights = _folded(hw, fold_norm, fold_qk_gains)
    if center_writing:
        check_centrable(head_weights)  # before any pass of the model
    linearising = linearise_norms is not False and linearise_norms is not None
    if sample_data != SampleData() and not (linearising or text_labels or reads_content(head_weights)):
        raise OptionError(f"sample data: the residual is sampled for the rotary, ALiBi or relative-position "
                          f"previous-token score's activations content, for linearise_norms and for text_labels; "
                          f"{hw.meta.name}'s positions are {head_weights.positions!r}, none of those, and none of the "
                          "others is asked for")
    weights, linearised_on = _linearised(runner, head_weights, linearise_qk_norm,
                                         linearise_norms if linearising else None, sample_data, metric_data, progress)
    if center_writing:
        weights = centred(weights)
    notes = _data_notes(runner, head_weights, weights, linearised_on, linearise_qk_norm, cut, metrics, metric_data,
                        sample_data)
    if ridge is not None:
        notes.append(f"each metric with a G regularised as G + {ridge:g}·tr(G)/d·I "
                     f"(the default ridge: {DEFAULT_RIDGE:g})")
    # the metrics from the weights alone, before any forward pass: one the model lacks what it needs
    # for is skipped with a note, and a verdict left with no metric at all is refused
    ready: list = []  # per metric: the Metric, None (estimated on data, later) or False (skipped)
    why = []
    for name in metrics:
        try:
            ready.append(None if on_data(name) else get_metric(name, weights, ridge_for(name, ridge)))
        except OptionError as e:
            notes.append(f"metric {name} skipped: {e}")
            ready.append(False)
            why.append(str(e))
    if not any(r is not False for r in ready):
        raise OptionError(f"no metric given applies to {hw.meta.name}: " + "; ".join(why))
    reps = verdict_sequences(runner, sequences, half, seed)
    labels = activation_labels(runner, reps, batch_size, progress)
    on_text = None
    if text_labels:
        from .head_labels import text_labels as _text_labels

        on_text = _text_labels(runner, sample_data, batch_size, progress)
    n_int = min(intervention_sequences, sequences)
    effects = intervention_effects(runner, reps.tokens[:n_int], kinds, ablation, batch_size=batch_size,
                                   progress=progress, paths=paths, writers=chosen)
    truth = true_pairs(labels.previous_token, labels.induction, prev_threshold, induction_threshold)
    near = near_heads(labels, prev_threshold, induction_threshold)
    truths = near_truths(labels.previous_token, labels.induction, near, prev_threshold, induction_threshold)
    k_effects = effects.by_kind.get("K")
    confirmed = confirmed_pairs(truth, k_effects, effect_threshold) if k_effects is not None else None
    measured = torch.isfinite(k_effects) if k_effects is not None else None  # the intervened writers' pairs
    rows, tables = [], {}
    for name, met in zip(metrics, ready):
        if met is False:
            continue
        if met is None:
            try:
                met = get_metric(name, weights, ridge, model=runner, data=metric_data)  # runs the model loaded
            except OptionError as e:
                notes.append(f"metric {name} skipped: {e}")
                continue
        table = scores(weights, kinds, "all", met, pairs="all", progress=progress, device=runner.device)
        tables[met.name] = table  # a Metric passed in: by its own name
        rows += _measure_rows(table, met.name, kinds, effects, truth, measured, confirmed, truths)
    _auroc_gaps(rows, tables, truth)
    contents = previous_contents(head_weights, runner, progress, sample_data)
    notes += _no_head_scores(head_weights)
    heads, writer_auroc, circuit_auroc = _head_rankings(head_weights, contents, labels, truth, tables, kinds,
                                                        prev_threshold, induction_threshold, runner.device, progress)
    options = {"sequences": sequences, "half": half, "seed": seed, "intervention_sequences": n_int, "kinds": kinds,
               "writers": [list(w) for w in chosen] if chosen is not None else None,
               "metrics": list(tables),
               "metrics_given": {n: t.info["metric_data"] for n, t in tables.items()
                                 if str(t.info.get("metric_data", "")).startswith(GIVEN)} or None,  # which G of one's own
               "ridge": DEFAULT_RIDGE if ridge is None else ridge,  # each metric with a G: G + ridge·tr(G)/d·I
               "ablation": ablation, "paths": paths, "prev_threshold": prev_threshold,
               "induction_threshold": induction_threshold, "true_pairs": int(truth.sum()),
               "near_threshold": near,
               "effect_threshold": effect_threshold,
               "confirmed_pairs": int(confirmed.sum()) if confirmed is not None else None,
               "true_pairs_intervened": int((truth & measured).sum()) if measured is not None else None,
               "interventions_auroc": auroc(k_effects, truth) if k_effects is not None else None,
               "interventions_auroc_within": ({side: auroc_within(k_effects, truth, side) for side in ("reader", "writer")}
                                              if k_effects is not None else None),
               "first_token": runner.bos,
               **runner.software(), "python": python_version(), "torch": torch.__version__, "device": str(runner.device),
               "model_dtype": str(runner.dtype).removeprefix("torch."),
               "activations_metric_data": data_words(runner, metric_data)
               if set(on_data(metrics)) & set(tables) else None,  # names estimated here, not Metrics so named
               "head_scores_content": list(contents), "positions": head_weights.positions,
               "writer_previous_auroc": writer_auroc or None,
               "circuit_auroc": circuit_auroc or None, "circuit_measure": list(CIRCUIT_MEASURE),
               "activations_content_data": sample_data.content(runner) if "activations" in contents else None,
               "sample_data": sample_data.recorded()
               if "activations" in contents or linearising or text_labels else None,
               "text_labels_data": on_text.data if on_text is not None else None,
               "weights_processing": list(weights.meta.processing)}
    return Verdict(hw.meta.name, labels, effects, tables, rows, heads, options, notes, on_text)


def _data_notes(runner, head_weights: HeadWeights, weights: HeadWeights, linearised_on, linearise_qk_norm, cut,
                metrics, metric_data, sample_data) -> list[str]:
    """The verdict's first notes: the norms its measures do not read (or what linearised them), where
    QK-norm's text moments come from, a cut ``|t|``, and what the data other than the repeats are:
    a model without a tokenizer reads repeated random sequences where a user expects natural
    text (said, with how to give it one); otherwise data other than the defaults are said."""
    from ..analysis.circuits import reads_content
    from .residual_moments import MetricData, SampleData, has_text, metric_data as data_words

    note = linearised_on or unread_norms(weights)
    notes = [note] if note else []
    if linearise_qk_norm == "text":  # where its moments come from
        notes += [n for n in weights.meta.notes if n.startswith("QK-norm linearised")]
    if cut:
        notes.append(cut)
    reads = bool(on_data(metrics))
    content = reads_content(head_weights)
    if (reads or content) and not has_text(runner):  # (asked only then: a runner reads its tokenizer on first use)
        read = ([f"metrics on data estimated on {data_words(runner, metric_data)}"] if reads else []) + \
            ([f"the previous-token score's activations content sampled on {sample_data.content(runner)}"] if content else [])
        notes.append(f"{runner.hw.meta.name} has no tokenizer, so no natural text: {'; '.join(read)}. To read text, "
                     "give it one: --tokenizer PATH, its tokenizer's files in its folder, or "
                     "compscope.runner_for(model, tokenizer=...)")
    else:
        if reads and metric_data != MetricData():
            notes.append(f"metrics on data estimated on {data_words(runner, metric_data)}")
        if content and sample_data != SampleData():
            notes.append(f"the previous-token score's activations content sampled on {sample_data.content(runner)}")
    return notes


def _check_numbers(**given) -> None:
    """The verdict's counts (``half`` at least 2, the others at least 1, ``seed`` any integer) and
    thresholds (a label's in ``[0, 1]``, an effect's ``>= 0``), each refused by its name."""
    for name in ("sequences", "half", "intervention_sequences", "batch_size"):
        check_int(name, given[name], 2 if name == "half" else 1)
    check_int("seed", given["seed"])
    label = (1.0, "a label is a fraction of attention, so its threshold lies in [0, 1]")
    for name, (high, why) in (("prev_threshold", label), ("induction_threshold", label),
                              ("effect_threshold", (math.inf, "an interventional effect is never negative; expected a threshold >= 0"))):
        v = given[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise OptionError(f"{name}={v!r}: expected a finite number")
        if not 0 <= v <= high:
            raise OptionError(f"{name}={v!r}: {why}")


def _folded(hw: HeadWeights, fold_norm: bool, fold_qk_gains: bool) -> HeadWeights:
    """``hw`` with the asked folds (exact norm gains, then QK-norm's gains): what the heads' own scores
    read; the measures read it after any linearisation (:func:`_linearised`)."""
    from ..core import processing

    if fold_norm:
        hw = processing.fold_norm(hw)
    return processing.fold_qk_norm_gains(hw) if fold_qk_gains else hw


def _linearised(runner, hw: HeadWeights, qk_norm: bool | str, norms, data, metric_data,
                progress: bool) -> tuple[HeadWeights, str | None]:
    """``(weights the measures read, the note of a linearisation on data or None)``: ``hw`` with
    QK-norm's Jacobian at second order (``qk_norm``: at the isotropic point, or ``'text'`` at the
    second moment of what the heads read on ``metric_data``'s text), then the norms given by
    ``norms`` replaced by their mean Jacobians on ``data`` (True or ``'all'``: every one the model has;
    None: none)."""
    from ..core.processing import linearise_qk_norm

    if qk_norm == "text":
        from .norm_linearisation import qk_norm_on_text

        hw = qk_norm_on_text(runner, hw, metric_data)
    elif qk_norm:
        hw = linearise_qk_norm(hw)
    if norms is None:
        return hw, None
    from .norm_linearisation import linearise_norms

    parts = None if norms is True or norms == "all" else norms
    hw = linearise_norms(runner, parts, hw=hw, data=data, progress=progress)
    return hw, hw.meta.notes[-1]


def _measure_rows(table, metric: str, kinds: str, effects, truth: Tensor, measured, confirmed,
                  truths: Tensor | None = None) -> list[dict]:
    """The verdict's rows of one metric's table: per measure and kind, Spearman with the effects, the
    AUROCs of the true K-pairs (all, confirmed among the intervened pairs, within readers and writers,
    and the lowest and highest over ``truths``, the truth with the heads near a threshold on either
    side: :func:`~compscope.data.separation.near_truths`), and the axioms the measure keeps."""
    from ..analysis.stats import spearman
    from ..measures import AXIOMS, MEASURES

    nan, rows = float("nan"), []
    for m in table.measures:
        kept = [a for a in AXIOMS if a in MEASURES.get(m).satisfies]
        for kind in kinds:
            dense, K = table.dense(m, kind), kind == "K"
            rows.append({"measure": m, "metric": metric, "kind": kind,
                         "spearman": spearman(dense, effects.by_kind[kind]),
                         "auroc": auroc(dense, truth) if K else nan,
                         "auroc_confirmed": auroc(torch.where(measured, dense.double(), torch.nan), confirmed) if K else nan,
                         "auroc_se": auroc_se(dense, truth) if K else nan,
                         "spearman_direction": spearman(dense, effects.v_direction) if kind == "V" else nan,
                         **{f"auroc_within_{side}s": auroc_within(dense, truth, side) if K else nan
                            for side in ("reader", "writer")},
                         **dict(zip(("auroc_near_low", "auroc_near_high"),
                                    auroc_span(dense, truths) if K and truths is not None else (nan, nan))),
                         "axioms": f"{len(kept)}/{len(AXIOMS)}", "axioms_failed": ",".join(a for a in AXIOMS if a not in kept)})
    return rows


def _auroc_gaps(rows: list[dict], tables: dict, truth: Tensor) -> None:
    """Give each row ``auroc_gap``, how far its K AUROC falls below the best K row's (the first of the printed
    ranking), and ``auroc_gap_se``, DeLong's paired standard error of that gap
    (:func:`~compscope.data.separation.auroc_gap_se`); NaN on the other kinds and where there is no AUROC."""
    nan = float("nan")
    for r in rows:
        r["auroc_gap"] = r["auroc_gap_se"] = nan
    k_rows = [r for r in rows if r["kind"] == "K" and not math.isnan(r["auroc"])]
    if not k_rows:
        return
    best = min(k_rows, key=rank_key)  # (a stable min: the first of the printed order)
    top = tables[best["metric"]].dense(best["measure"], "K").double()
    for r in k_rows:
        r["auroc_gap"] = best["auroc"] - r["auroc"]
        r["auroc_gap_se"] = auroc_gap_se(top, tables[r["metric"]].dense(r["measure"], "K").double(), truth)


def _no_head_scores(hw: HeadWeights) -> list[str]:
    """The note on which head scores the weights cannot give (none when they give them all)."""
    if not hw.causal:
        return ["bidirectional model: no induction scores from the weights "
                "(an encoder sees the repeat ahead as well as behind)"]
    if hw.positions not in ("learned", "rotary", "alibi", "relative"):
        return ["no previous-token or induction scores from the weights: no learned, rotary, ALiBi or relative "
                "positions to read"]
    if hw.W_U is None:
        return ["no whole-circuit induction score from the weights: no unembedding, so no copying score"]
    return []


def _head_rankings(hw: HeadWeights, contents, labels, truth: Tensor, tables: dict, kinds: str, prev_threshold: float,
                   induction_threshold: float, device, progress: bool) -> tuple[list[dict], dict, dict]:
    """``(heads, writer_auroc, circuit_auroc)``: per content of the rotary, ALiBi or relative-position previous-token score, each
    head score from the weights against its activation label (Spearman, precision of the top 5), and
    the AUROC of the true K-pairs by the writer's previous-token score alone and times
    :data:`CIRCUIT_MEASURE` (keyed ``'positions'`` for learned positions)."""
    from ..analysis.circuits import head_circuits_by_content
    from ..analysis.stats import spearman

    heads, writer_auroc, circuit_auroc = [], {}, {}
    for content, circ in head_circuits_by_content(hw, contents, progress=progress, device=device).items():
        if circ.previous is not None and "K" in kinds:  # how much of the label truth the writer's role alone gives
            name = content if hw.W_pos is None else "positions"
            writer = writer_pairs(circ.previous, forward_pairs(hw.n_layers, hw.n_heads))
            writer_auroc[name] = auroc(writer, truth)
            if CIRCUIT_MEASURE[1] in tables:
                circuit_auroc[name] = auroc(writer * tables[CIRCUIT_MEASURE[1]].dense(CIRCUIT_MEASURE[0], "K").double(), truth)
        for score, from_weights, label, thr in (("induction", circ.induction, labels.induction, induction_threshold),
                                                ("induction_qk", circ.induction_qk, labels.induction, induction_threshold),
                                                ("previous_token", circ.previous, labels.previous_token, prev_threshold)):
            if from_weights is not None:
                heads.append({"score": score, "content": content, "spearman": spearman(from_weights, label),
                              "precision_top5": precision_at(from_weights, label >= thr),
                              "true_heads": int((label >= thr).sum())})
    return heads, writer_auroc, circuit_auroc
