"""Everything a report shows, gathered once: the model card, score tables under each metric,
head labels (from the weights, and from data when there are data), the axiom battery, the
verdict, per-pair details and training curves. :mod:`compscope.report.page` renders it.

Data are used when they exist: ``data='auto'`` runs :func:`compscope.validate` on a toy model (a
few seconds) and skips it elsewhere (minutes); ``'run'`` always runs it; ``'none'`` never; a
folder reads what ``compscope validate --out`` wrote there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..data.head_labels import LABELS
from ..defaults import DETAIL_PAIRS, REPORT_MEASURES, REPORT_METRICS
from ..errors import OptionError

#: head-label thresholds: data (those of ``compscope validate``) and weights
DATA_THRESHOLDS = {"previous_token": 0.4, "induction": 0.3}
WEIGHT_THRESHOLDS = {"previous_token": 0.4, "copying": 0.5, "induction_fraction": 0.5}
#: the axiom battery of the registered measures, by the measures' identity (the objects kept, so
#: no id is reused): it is of the measures, not of the model, so a session's reports run it once
_BATTERY: dict[tuple[int, ...], tuple[list, list]] = {}


def axiom_battery() -> list:
    """:func:`compscope.analysis.axioms.check_axioms` of every registered measure, at its defaults."""
    from ..analysis.axioms import check_axioms
    from ..measures import measures

    ms = list(measures().values())
    key = tuple(map(id, ms))
    if key not in _BATTERY:
        _BATTERY[key] = (ms, check_axioms(ms))
    return list(_BATTERY[key][1])


@dataclass(frozen=True)
class OnText:
    """Every head's labels on natural text (``compscope validate --text-labels``): ``(L, H)`` float64
    by label, their standard errors by label where known, and what the text was (``data``)."""

    data: str
    scores: dict[str, torch.Tensor]
    errors: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass
class Labels:
    """Per-head scores ``(L, H)`` and the label sets they give; ``source``: 'data' or 'weights';
    ``errors``: the standard errors ``(L, H)`` of the scores that have one (labels from data);
    ``text``: the labels on natural text too, where the verdict has them (shown, not used for roles)."""

    source: str
    scores: dict[str, torch.Tensor]
    roles: dict[str, list[tuple[int, int]]]
    rule: str
    errors: dict[str, torch.Tensor] = field(default_factory=dict)
    text: OnText | None = None


@dataclass(frozen=True)
class VerdictData:
    """What a report shows of a verdict: the activation labels ``(L, H)`` float64 by name, the
    verdict's rows and per-head rankings (as ``verdict.csv`` and ``heads.csv`` hold them), the
    interventional effects by kind (None without them) with a note of how they were measured, the
    lines ``compscope validate`` prints above its table (None when they cannot be rebuilt), the
    label thresholds of its truth (previous-token, induction), the processing of the weights its
    measures judged (``weights_processing`` of its options; None when not recorded), the
    labels' standard errors ``(L, H)`` by name (empty when the verdict has none), the labels on
    natural text (None when it labelled none there), and the compscope version that computed it
    (None when not recorded)."""

    labels: dict[str, torch.Tensor]
    rows: list[dict]
    heads: list[dict]
    effects: dict | None
    effects_note: str | None
    summary: list[str] | None
    thresholds: tuple[float, float] = (DATA_THRESHOLDS["previous_token"], DATA_THRESHOLDS["induction"])
    judged: list[str] | None = None
    errors: dict[str, torch.Tensor] = field(default_factory=dict)
    on_text: OnText | None = None
    made_by: str | None = None
    ridge: float | None = None  # what its metrics' G were regularised with (None: not recorded)


@dataclass
class Report:
    hw: object  # HeadWeights
    model: str
    tables: dict  # metric -> ScoreTable
    weight_labels: Labels
    data_labels: Labels | None
    axioms: list  # AxiomResult
    verdict: list[dict] | None
    verdict_heads: list[dict] | None
    details: dict  # (metric, kind, l1, h1, l2, h2) -> PairReport
    track: object | None  # Track
    options: dict
    notes: list[str] = field(default_factory=list)
    #: the interventional effects on data, ``{kind: (L, H, L, H)}`` float64 (NaN except measured
    #: earlier → later pairs), when there are data; their ablation, sequences and paths in ``effects_note``
    effects: dict | None = None
    effects_note: str | None = None
    #: what the verdict ran on and its label truth, as ``compscope validate`` prints them above its table
    verdict_summary: list[str] | None = None
    #: the K AUROC of each of the report's measure x metric taken apart by head (:func:`verdict_by_head`)
    verdict_by_head: list[dict] | None = None

    @property
    def labels(self) -> Labels:
        """The labels the circuit graph colours by: from data when there are data."""
        return self.data_labels or self.weight_labels


def weight_labels(hw, positional=None) -> Labels:
    """Previous-token, copying and induction heads from the weights (:func:`head_circuits`;
    ``positional``: the weights before QK-norm was linearised, if it was)."""
    from ..analysis.circuits import head_circuits

    c = head_circuits(hw, positional=positional)
    scores = {k: v for k, v in (("previous_token", c.previous), ("copying", c.copying), ("induction", c.induction),
                                ("induction_qk", c.induction_qk), ("matching", c.matching)) if v is not None}
    t = WEIGHT_THRESHOLDS
    roles = {"previous_token": _above(c.previous, t["previous_token"]), "copying": _above(c.copying, t["copying"])}
    qk = c.induction_qk  # the attention half: what an induction head does, whether or not it copies
    if qk is not None and roles["previous_token"] and float(qk.max()) > 0:
        roles["induction"] = _above(qk, t["induction_fraction"] * float(qk.max()))
    rule = (f"weights: previous-token score >= {t['previous_token']}, copying score >= {t['copying']}, induction (QK) "
            f"score >= {t['induction_fraction']} x the largest (only when some head is previous-token)")
    return Labels("weights", scores, roles, rule)


def data_labels(scores: dict[str, torch.Tensor], copying: torch.Tensor | None,
                errors: dict[str, torch.Tensor] | None = None, on_text: OnText | None = None) -> Labels:
    """Labels from activation scores (the thresholds of ``compscope validate``) and their standard
    errors where known, with the labels on text where there are some; copying, which data do not
    measure here, from the weights."""
    t = DATA_THRESHOLDS
    roles = {k: _above(scores[k], v) for k, v in t.items() if k in scores}
    if copying is not None:
        roles["copying"] = _above(copying, WEIGHT_THRESHOLDS["copying"])
    rule = (f"data: previous-token >= {t['previous_token']}, induction >= {t['induction']} (attention on repeated random "
            f"sequences); copying from the weights (>= {WEIGHT_THRESHOLDS['copying']})")
    return Labels("data", scores, roles, rule, dict(errors or {}), on_text)


def _above(t: torch.Tensor | None, threshold: float) -> list[tuple[int, int]]:
    if t is None:
        return []
    return [tuple(x) for x in (t >= threshold).nonzero().tolist()]


def verdict_data(v) -> VerdictData:
    """:class:`VerdictData` of a :class:`~compscope.data.verdict.Verdict` in hand."""
    fx, t = v.effects, v.text_labels
    scores = {k: v.labels.mean[k] for k in LABELS}
    on_text = None if t is None else OnText(t.data, {k: t.mean[k] for k in LABELS}, {k: t.error[k] for k in LABELS if k in t.error})
    return VerdictData(scores, v.rows, v.heads, dict(fx.by_kind), effects_note(fx.ablation, fx.paths, fx.sequences, fx.writers),
                       verdict_summary(v.model, v.options, on_text, scores), _thresholds(v.options), _judged(v.options),
                       {k: v.labels.error[k] for k in LABELS if k in v.labels.error}, on_text, _made_by(v.options),
                       _ridge(v.options))


def _judged(options) -> list[str] | None:
    """The processing steps of the weights a verdict judged, from its options (None: not recorded)."""
    steps = options.get("weights_processing") if isinstance(options, dict) else None
    return [str(x) for x in steps] if isinstance(steps, list) else None


def _ridge(options) -> float | None:
    """The ridge a verdict's metrics were regularised with, from its options: the default where they name the
    model but no ridge (``validate`` took none before it recorded one); None without options."""
    from ..core.metrics import DEFAULT_RIDGE

    if not isinstance(options, dict) or not ("ridge" in options or options.get("model")):
        return None
    ridge = options.get("ridge", DEFAULT_RIDGE)
    return float(ridge) if isinstance(ridge, (int, float)) and not isinstance(ridge, bool) else None


def ridge_note(theirs: float | None, mine: float | None) -> str | None:
    """A note when a verdict's metrics were regularised with another ridge (``theirs``) than the report's tables
    (``mine``; None: the default); None when the same, or not recorded."""
    from ..core.metrics import DEFAULT_RIDGE

    mine = DEFAULT_RIDGE if mine is None else mine
    if theirs is None or theirs == mine:
        return None
    return (f"the verdict's metrics were regularised with ridge {theirs:g}, this report's with "
            f"{mine:g}: run `compscope validate --ridge {mine:g}` for a verdict of the same metrics")


def _made_by(options) -> str | None:
    """The compscope version that computed a verdict, from its options (None: not recorded)."""
    version = options.get("compscope") if isinstance(options, dict) else None
    return version if isinstance(version, str) else None


def version_note(made_by: str | None) -> str | None:
    """A note when a verdict was computed by another compscope version than the one writing the
    report (None when the same, or not recorded)."""
    from .. import __version__

    if made_by is None or made_by == __version__:
        return None
    return (f"the verdict was computed by compscope {made_by} (its run.json), this report by {__version__}: "
            "run `compscope validate` again for a verdict of this version")


def judged_weights_note(judged: list[str] | None, hw) -> str | None:
    """A note when a verdict judged other weights than ``hw`` (the report's tables): its processing
    ``judged`` against ``hw.meta.processing``, steps that move no score left out; None when they agree
    or the verdict does not record its own."""
    from ..data.validate import SCORE_NEUTRAL_STEPS

    if judged is None:
        return None
    mine, theirs = ([s for s in steps if s not in SCORE_NEUTRAL_STEPS] for steps in (hw.meta.processing, judged))
    if mine == theirs:
        return None
    said = lambda steps: "the weights as read" if not steps else "the weights with " + ", ".join(steps)  # noqa: E731
    return (f"the verdict judged the measures on {said(theirs)}; the report's tables are of {said(mine)}: its "
            "ranking of measure x metric is of those other weights")


def _thresholds(options) -> tuple[float, float]:
    """The verdict's (previous-token, induction) label thresholds from its options, or the defaults."""
    try:
        return float(options["prev_threshold"]), float(options["induction_threshold"])
    except (KeyError, TypeError, ValueError):
        return DATA_THRESHOLDS["previous_token"], DATA_THRESHOLDS["induction"]


def verdict_by_head(tables: dict, side: VerdictData) -> list[dict] | None:
    """For each of the report's measures under each of its metrics (K-composition), the verdict's
    K AUROC taken apart by previous-token writer and induction reader
    (:func:`~compscope.data.validate.auroc_by_head`, its rows with ``measure`` and ``metric``).
    None without K-composition or any true pair."""
    from ..data.validate import auroc_by_head, true_pairs

    args = (side.labels["previous_token"], side.labels["induction"], *side.thresholds)
    if not true_pairs(*args).any() or not any("K" in t.kinds for t in tables.values()):
        return None
    k_effects = (side.effects or {}).get("K")
    return [{"measure": measure, "metric": metric, **row} for metric, table in tables.items() if "K" in table.kinds
            for measure in table.measures for row in auroc_by_head(table.dense(measure, "K"), k_effects, *args)]


def read_validation(folder: str | Path, hw, option: str = "--data") -> VerdictData:
    """:class:`VerdictData` from a ``compscope validate --out`` folder, checked against the model's
    shape (effects None without ``interventions.parquet``, summary None without a readable
    ``run.json``); ``option``: how an error names where the folder was given."""
    import pandas as pd

    folder = Path(folder)
    need = [folder / n for n in ("head_labels.csv", "verdict.csv", "heads.csv")]
    missing = [p.name for p in need if not p.is_file()]
    if missing:
        raise OptionError(f"{option} {folder}: not a folder written by `compscope validate --out` (missing {', '.join(missing)})")
    try:
        lab = pd.read_csv(need[0])
        verdict = pd.read_csv(need[1]).to_dict("records")
        heads = pd.read_csv(need[2]).to_dict("records") if need[2].stat().st_size > 1 else []
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise OptionError(f"{option} {folder}: cannot read the validation tables: {e}") from None
    scores, errors = _per_head_labels(lab, need[0], hw.n_layers, hw.n_heads, option)
    run, options, model = folder / "run.json", None, None
    if run.is_file():
        try:
            options = json.loads(run.read_text())
        except (ValueError, UnicodeDecodeError):
            options = {}
        model = options.get("model") if isinstance(options, dict) else None
        if model is not None and model != hw.meta.name:
            raise OptionError(f"{option} {folder}: validated model {model!r}, not {hw.meta.name!r}")
    on_text = _read_text_labels(folder / "head_labels_text.csv", hw, options, option)
    summary = verdict_summary(model, options, on_text, scores)  # None without a run.json that names the model
    effects, note = read_effects(folder / "interventions.parquet", hw.n_layers, hw.n_heads, option)
    return VerdictData(scores, verdict, heads, effects, note, summary, _thresholds(options), _judged(options), errors,
                       on_text, _made_by(options), _ridge(options))


def _per_head_labels(lab, path: Path, L: int, H: int, option: str = "--data") -> tuple[dict, dict]:
    """``(labels, standard errors)``, ``(L, H)`` float64 by label, of a head-label table (``lab``,
    read from ``path``) checked to hold one row per head; the errors of the columns
    ``<label>_error`` where the table has them (written since they were added)."""
    cols = {"layer", "head", *LABELS}
    shape_ok = cols <= set(lab.columns) and len(lab) == L * H
    if shape_ok:
        try:
            layer, head = lab["layer"].astype(int).to_numpy(), lab["head"].astype(int).to_numpy()
            values = {k: lab[k].astype(float).to_numpy() for k in LABELS}
        except (ValueError, TypeError):
            shape_ok = False
    if not shape_ok or set(zip(layer.tolist(), head.tolist())) != {(l, h) for l in range(L) for h in range(H)}:
        raise OptionError(f"{option} {path}: expected columns {sorted(cols)} with one row per head of a {L} x {H} model")

    def per_head(column) -> torch.Tensor:  # one value per row of the CSV
        t = torch.full((L, H), float("nan"), dtype=torch.float64)
        t[torch.tensor(layer), torch.tensor(head)] = torch.tensor(column, dtype=torch.float64)
        return t

    errors = {}
    for k in LABELS:
        try:
            errors[k] = per_head(lab[f"{k}_error"].astype(float).to_numpy())
        except (KeyError, ValueError, TypeError):
            pass
    return {k: per_head(values[k]) for k in LABELS}, errors


def _read_text_labels(path: Path, hw, options, option: str = "--data") -> OnText | None:
    """The labels on text of a verdict folder (``head_labels_text.csv``, checked as ``head_labels.csv``
    is; what the text was from ``run.json``), None where the verdict labelled none there."""
    import pandas as pd

    if not path.is_file():
        return None
    try:
        lab = pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise OptionError(f"{option} {path}: cannot read the labels on text: {e}") from None
    scores, errors = _per_head_labels(lab, path, hw.n_layers, hw.n_heads, option)
    data = options.get("text_labels_data") if isinstance(options, dict) else None
    return OnText(data if isinstance(data, str) else "natural text", scores, errors)


def verdict_summary(model: str | None, options, on_text: OnText | None = None,
                    repeats: dict[str, torch.Tensor] | None = None) -> list[str] | None:
    """The lines ``compscope validate`` prints above its table (what it ran on, the labels on text
    beside the repeats' ``repeats`` when there are some, the label truth), from its options
    (``Verdict.options``, or a ``run.json``); None when they lack what those lines need (a
    ``run.json`` from an older version, or edited by hand)."""
    from ..data.verdict import data_line, text_lines, truth_lines

    if model is None or not isinstance(options, dict):
        return None
    try:
        on = [] if on_text is None or repeats is None else text_lines(on_text.data, on_text.scores, on_text.errors, repeats)
        return [data_line(model, options)] + on + truth_lines(options)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def effects_note(ablation: str | None, paths: str | None, sequences: int | None, writers=None) -> str:
    """How interventional effects were measured, as the page says it (parts not known left out;
    ``writers``: the ``(layer, head)`` writers intervened on, None for every head)."""
    from ..data.intervene import head_names

    some = f"writers {head_names(writers)} only" if writers else ""
    parts = (f"{ablation}-ablation" if ablation else "", "every path" if paths == "all" else "direct path",
             f"{sequences} sequences" if sequences else "", some)
    return ", ".join(x for x in parts if x)


def read_effects(path: Path, L: int, H: int, option: str = "--data") -> tuple[dict | None, str | None]:
    """``{kind: (L, H, L, H)}`` effects from a verdict's ``interventions.parquet`` (None when
    there is none), and how they were measured (from the frame's own metadata,
    :meth:`~compscope.data.verdict.Verdict.interventions_frame`)."""
    import pandas as pd

    if not path.is_file():
        return None, None
    try:
        df = pd.read_parquet(path, columns=["kind", "src_layer", "src_head", "dst_layer", "dst_head", "effect"])
    except Exception as e:  # pyarrow raises several kinds on a damaged or foreign file
        raise OptionError(f"{option} {path}: cannot read the interventions: {type(e).__name__}: {e}") from None
    idx = df[["src_layer", "src_head", "dst_layer", "dst_head"]].to_numpy()
    if len(idx) and (idx.min() < 0 or idx[:, [0, 2]].max() >= L or idx[:, [1, 3]].max() >= H
                     or (idx[:, 0] >= idx[:, 2]).any()):
        raise OptionError(f"{option} {path}: pairs outside a {L} x {H} model's writer -> later-reader pairs")
    out = {}
    kinds, effect = df["kind"].to_numpy(), torch.tensor(df["effect"].to_numpy(), dtype=torch.float64)
    for kind in sorted(set(kinds)):
        sel = kinds == kind
        t = torch.full((L, H, L, H), float("nan"), dtype=torch.float64)
        t[tuple(torch.tensor(idx[sel]).T)] = effect[torch.from_numpy(sel)]
        out[str(kind)] = t
    a = df.attrs
    return out, effects_note(a.get("ablation"), a.get("paths"), a.get("sequences"), a.get("writers"))


def pair_details(hw, tables: dict, metrics: dict, kinds: str, measure: str, n: int) -> dict:
    """Principal angles and spectra (:func:`compose_pair`) of every pair when there are at most
    ``n`` per kind, else of the ``n`` strongest by ``measure`` per kind and metric."""
    from ..analysis.pair import compose_pairs
    from ..results.table import top_entries

    L, H = hw.n_layers, hw.n_heads
    every = [(l1, h1, l2, h2) for l1 in range(L) for h1 in range(H) for l2 in range(l1 + 1, L) for h2 in range(H)] \
        if H * H * L * (L - 1) // 2 <= n else None
    out = {}
    for name, table in tables.items():  # one metric: each head's spectra taken once for its pairs of every kind
        keys = [(kind, *p) for kind in kinds for p in (every or [p for p, _ in top_entries(table.dense(measure, kind), n)])]
        reports = compose_pairs(hw, [((l1, h1), (l2, h2), kind) for kind, l1, h1, l2, h2 in keys], metrics[name],
                                offset=table.offset)
        out.update({(name, *key): rep for key, rep in zip(keys, reports)})
    return out


def _model_arg(model) -> str | None:
    """How the command line names ``model`` again: a name or path as given, a runner the command
    line (or ``runner_for`` from a path) made by that name; None for a model object."""
    named = getattr(model, "named", None)
    return str(model) if isinstance(model, (str, Path)) else named[0] if named else None


def _model_word(model) -> str:
    """:func:`_model_arg` as a shell word, ``MODEL`` where there is none."""
    import shlex

    arg = _model_arg(model)
    return "MODEL" if arg is None else shlex.quote(arg)


def collect(model, *, kinds: str = "QKV", measures=REPORT_MEASURES, metrics=REPORT_METRICS, data: str = "auto",
            run: str | Path | None = None, detail_pairs: int = DETAIL_PAIRS, processing: dict | None = None,
            progress: bool = True, metric_data=None, data_option: str = "--data", ridge: float | None = None) -> Report:
    """Gather a report of ``model`` (any source :func:`compscope.load` reads; module docstring).
    ``metric_data``: what the metrics estimated on data (the report's and its verdict's) are
    estimated on (:class:`~compscope.data.residual_moments.MetricData`); ``data_option``: how an
    error in a verdict folder given as ``data`` names where it was given; ``ridge``: each metric with a ``G``
    (the report's, its verdict's and its run's) regularised as ``G + ridge·tr(G)/d·I`` (default ``1e-6``)."""
    from ..core.factors import check_composes, check_kinds
    from ..core.metrics import distinct_metrics, get_metric, on_data, ridge_for, shared_ridge
    from ..data.residual_moments import as_metric_data
    from ..data.runner import cannot_run
    from ..data.validate import DEFAULT_METRICS, PROCESSING_STEPS, validate
    from ..data.verdict import Verdict
    from ..engine.composition import scores
    from ..analysis.circuits import POSITIONAL_BEFORE_LINEARISED
    from ..loading.sources import load_with_positional
    from ..measures import select
    from ..results.table import metric_origin

    if not isinstance(data, (str, Path, Verdict)):
        raise OptionError(f"data={type(data).__name__}: give 'auto', 'run', 'none', a folder written by "
                          "`compscope validate --out`, or a Verdict from compscope.validate")
    kinds = check_kinds(kinds)
    metrics = distinct_metrics(metrics)
    ms = [m.name for m in select(measures)]
    primary = ms[0]
    # before the load, leniently: a verdict that may run (`auto` on a toy) judges metrics with a G; after it, exactly
    shared_ridge([*metrics, *(DEFAULT_METRICS if isinstance(data, str) and data in ("auto", "run") else ())], ridge)
    hw, positional = load_with_positional(model, **(processing or {}))
    check_composes(hw, "; a report needs at least 2 layers")
    in_hand = data if isinstance(data, Verdict) else None  # a verdict already computed: its model must be this one
    if in_hand is not None and in_hand.model != hw.meta.name:
        raise OptionError(f"data: a verdict of {in_hand.model!r}, not of {hw.meta.name!r}")
    saved = read_validation(data, hw, data_option) if in_hand is None and data not in ("auto", "run", "none") else None  # checked before any work
    runs_verdict = in_hand is None and (data == "run" or (data == "auto" and hw.meta.family == "toy"))  # toys: seconds
    ridge = shared_ridge([*metrics, *(DEFAULT_METRICS if runs_verdict else ())], ridge)  # the verdict's metrics too
    if run is not None:
        from ..analysis.tracking import list_checkpoints

        list_checkpoints(run)
    notes = list(hw.meta.notes)
    mets, tables, given, why = {}, {}, {}, []
    for metric in metrics:
        name = metric if isinstance(metric, str) else metric.name
        try:
            mets[name] = get_metric(metric, hw, ridge_for(metric, ridge), model=model, data=metric_data)
        except OptionError as e:
            notes.append(f"metric {name} left out: {e}")
            why.append(str(e))
            continue
        tables[name] = scores(hw, kinds, ms, mets[name], pairs="all", progress=progress)
        given[name] = metric  # a name is estimated again on each checkpoint of a run
    if not tables:
        raise OptionError(f"no metric given applies to {hw.meta.name}: " + "; ".join(why))
    notes += [f"metric {n} {metric_origin(t.info)}" for n, t in tables.items() if t.info.get("metric_data")]
    wl = weight_labels(hw, positional)
    if positional is not hw:
        notes.append(f"head labels from the weights: {POSITIONAL_BEFORE_LINEARISED}")
    side = saved  # a folder written by `compscope validate --out`, or None
    if in_hand is not None or runs_verdict:
        v = in_hand or validate(model, kinds=kinds, progress=progress, metric_data=metric_data, ridge=ridge,
                                **{k: (processing or {}).get(k) or False for k in PROCESSING_STEPS})
        side = verdict_data(v)
        notes += v.notes
    refused = cannot_run(model) if side is None else None  # then suggesting `validate` sends the user to a refusal
    if side is None and data == "auto":
        notes.append(f"no data: head labels from the weights; run `compscope validate {_model_word(model)} --out DIR` "
                     "and give `--data DIR` for labels and the verdict from data" if refused is None else
                     f"no data: head labels from the weights; {refused}")
    if side is not None:
        notes += [n for n in (judged_weights_note(side.judged, hw), version_note(side.made_by),
                              ridge_note(side.ridge, ridge)) if n]
    details = pair_details(hw, tables, mets, kinds, primary, detail_pairs)
    tr = None
    if run is not None:
        from ..analysis.tracking import track

        estimated = bool(on_data(list(given.values())))  # names, not metrics of one's own so named
        reading = {"tokenizer": model.tokenizer, "tokenizer_said": model.tokenizer_given} \
            if getattr(model, "tokenizer_given", None) and estimated else {}  # each checkpoint's text as the model's
        tr = track(run, kinds, ms[:3], list(given.values()), progress=progress, **reading,
                   metric_data=metric_data if estimated else None, ridge=ridge)
    named = getattr(model, "named", None)
    options = {"kinds": kinds, "measures": ms, "metrics": list(tables), "data": "a Verdict given" if in_hand else str(data),
               "run": None if run is None else str(run),
               # as named, for the commands the page suggests (a runner the command line made: as it was named there)
               "model": _model_arg(model),
               "model_flags": [f"--{k.replace('_', '-')}" for k, on in (processing or {}).items() if on]  # and as loaded
               + list(named[1] if named else ()),
               "metric_data_flags": as_metric_data(metric_data).cli_flags(),  # for a metric estimated on data
               "cannot_run": refused,  # why the page may not suggest `compscope validate`
               "detail_pairs": detail_pairs, "processing": list(hw.meta.processing),
               "ridge": ridge,  # given for each metric with a G (None: the default), for the commands the page suggests
               "metric_data": {n: t.info["metric_data"] for n, t in tables.items() if t.info.get("metric_data")} or None,
               # how the command line names each metric again: its name, a Gram matrix file's path, None for one given
               # in Python only
               "metric_args": {n: m if isinstance(m, str) else (m.path or None) for n, m in given.items()}}
    if side is None:
        return Report(hw, hw.meta.name, tables, wl, None, axiom_battery(), None, None, details, tr, options, notes)
    return Report(hw, hw.meta.name, tables, wl, data_labels(side.labels, wl.scores.get("copying"), side.errors, side.on_text),
                  axiom_battery(),
                  side.rows, side.heads, details, tr, options, notes, side.effects, side.effects_note, side.summary,
                  verdict_by_head(tables, side))
