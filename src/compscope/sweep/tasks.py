"""One sweep task: a model (a path, a checkpoint, a built-in name or a hub id at a revision), a
job and its options; :func:`run_task` computes its rows."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import __version__
from ..defaults import SEED
from ..errors import OptionError

JOBS = ("scores", "track", "validate")
#: ``|t|`` of ``--job validate``'s repeated sequences by default (cut to a shorter context; a
#: length given that does not fit is refused)
SWEEP_HALF = 16


@dataclass(frozen=True)
class Task:
    """``source``: what :func:`compscope.load` reads; ``model``: the name the dataset partitions by;
    ``step``: the checkpoint step (``-1`` for a model that is not a checkpoint); ``options``: the
    job's options (JSON-able; part of the task's identity; ``processing``, where given: the steps
    of :func:`compscope.load` applied to the weights the task scores or judges)."""

    source: str
    model: str
    step: int = -1
    job: str = "scores"
    options: dict = field(default_factory=dict)

    def key(self) -> str:
        """A short hash of everything that defines the task (its part file's name)."""
        doc = json.dumps(asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(doc.encode()).hexdigest()[:16]


def content_hash(hw) -> str:
    """SHA-256 (first 16 hex digits) of a model's attention weights and embeddings as stored
    (:func:`compscope.analysis.tracking.weights_hash`)."""
    from ..analysis.tracking import weights_hash

    return weights_hash(hw)


def holds_checkpoints(path: Path) -> bool:
    """Whether a sweep source is a run folder or a folder of checkpoints, not one model."""
    from ..analysis.tracking import MODEL_MARKERS

    return path.is_dir() and ((path / "checkpoints").is_dir() or not any((path / f).is_file() for f in MODEL_MARKERS))


def passed_over(sources: list[str]) -> list[Path]:
    """The entries of the sources' checkpoint folders that are not models (passed over, as by
    :func:`compscope.analysis.tracking.scan_checkpoints`)."""
    from ..analysis.tracking import scan_checkpoints

    return [x for s in sources if holds_checkpoints(Path(s)) for x in scan_checkpoints(s)[1]]


def expand_sources(sources: list[str], revisions: list[str] | None = None) -> list[tuple[str, str, int]]:
    """``(source, model name, step)`` for every model: a run folder (``compscope train``) or a folder
    of checkpoints gives one per checkpoint, named after the folder; a hub id with ``revisions``
    one per revision (``id@revision``, step = the revision's last number, e.g. ``step1000``)."""
    import re

    from ..analysis.tracking import list_checkpoints

    out = []
    for s in sources:
        p = Path(s)
        if holds_checkpoints(p):
            out += [(str(c.path), p.name, c.step) for c in list_checkpoints(p)]
        elif revisions and not p.exists():
            for r in revisions:
                nums = re.findall(r"\d+", r)
                out.append((f"{s}@{r}", s, int(nums[-1]) if nums else -1))
        else:
            out.append((s, p.name if p.exists() else s, -1))
    names = [(m, st) for _, m, st in out]
    if len(set(names)) != len(names):
        raise OptionError("two sweep sources have the same model name and step; give them distinct folders")
    return out


def _track_rows(source: str, opts: dict, device=None):
    """``compscope track``'s rows for one checkpoint, each with the writer's previous-token and the
    reader's induction label at that checkpoint (toy checkpoints; NaN for others); its weights'
    hash; what a metric on data was estimated on (None for a metric from the weights)."""
    from ..analysis.tracking import track
    from ..defaults import TRACKED_MEASURES

    tr = track([source], opts.get("kinds", "K"), tuple(opts.get("measures", TRACKED_MEASURES)), [opts.get("metric", "identity")],
               progress=False, device=device, metric_data=_metric_data(opts), ridge=opts.get("ridge"),
               **_tokenizer(opts))
    df = tr.to_pandas().drop(columns=["step", "checkpoint", "weights_hash", "metric_data"], errors="ignore")  # the task's
    lab = tr.labels[0]
    nan = float("nan")
    df["src_previous"] = [nan if lab is None else float(lab.previous[l, h]) for l, h in zip(df.src_layer, df.src_head)]
    df["dst_induction"] = [nan if lab is None else float(lab.induction[l, h]) for l, h in zip(df.dst_layer, df.dst_head)]
    return df, tr.hashes[0], tr.tables[0][0].info.get("metric_data")


def _tokenizer(opts: dict) -> dict:
    """``{tokenizer, tokenizer_said}`` for :func:`~compscope.data.runner.runner_for` and
    :func:`~compscope.analysis.tracking.track` when the task reads text with a tokenizer given
    (``--tokenizer``), else nothing."""
    if not opts.get("tokenizer"):
        return {}
    from ..data.tokenizers import given_tokenizer

    return given_tokenizer(opts["tokenizer"])


def _with_tokenizer(source: str, hw, opts: dict, device=None):
    """``source``, or a runner of it reading text with the task's tokenizer (:func:`_tokenizer`;
    ``hw``: its weights as read, unprocessed, so that they are read once)."""
    given = _tokenizer(opts)
    if not given:
        return source
    from ..data.runner import runner_for

    return runner_for(source, hw, progress=False, device=device, **given)


def _metric_data(opts: dict):
    """The task's ``MetricData`` (None: the defaults)."""
    if not opts.get("metric_data"):
        return None
    from ..data.residual_moments import MetricData

    return MetricData(**opts["metric_data"])


def task_steps(hw, opts: dict) -> dict:
    """``{step: value}`` of :func:`compscope.load`'s processing that the task's options ask for
    (``processing``; ``qk_norm_point``: where ``linearise_qk_norm`` is taken, default the isotropic
    point) and that apply to ``hw``: a sweep runs one set of steps over many models, and
    ``linearise_qk_norm`` has nothing to replace in a model without QK-norm, so it is left out there
    (the rows' ``processing`` column says what each model's weights had). Every other step, and
    QK-norm a step cannot linearise (one over all heads of a layer), is refused as for one model."""
    steps = {step: True for step in opts.get("processing", ())}
    if "linearise_qk_norm" in steps:
        if hw.qk_norm is None:
            del steps["linearise_qk_norm"]
        else:
            steps["linearise_qk_norm"] = opts.get("qk_norm_point", True)
    return steps


def task_norm_parts(hw, opts: dict) -> tuple[str, ...]:
    """The parts of ``linearise_norms`` the task asks for (``'all'``: every one the model has) that ``hw`` has, its
    QK-norm left to ``linearise_qk_norm`` where the task takes that step: a sweep runs one option over many models, so
    a part a model lacks is left out there, and the step where it has none (the rows' ``processing`` column says what
    each model's weights had)."""
    asked = opts.get("linearise_norms")
    if not asked:
        return ()
    from ..data.norm_linearisation import norm_parts

    qk_elsewhere = "linearise_qk_norm" in task_steps(hw, opts)
    has = [p for p in norm_parts(hw) if not (p == "qk" and qk_elsewhere)]
    return tuple(has if asked == "all" else [p for p in asked.split(",") if p in has])


def _sample_data(opts: dict):
    """The task's ``SampleData`` (None: the defaults)."""
    if not opts.get("sample_data"):
        return None
    from ..data.residual_moments import SampleData

    return SampleData(**opts["sample_data"])


def run_task(task: Task, device=None):
    """The task's rows (a pandas frame) with ``content_hash``, ``options`` (JSON) and ``task``
    columns, and ``metric_data`` (what a metric estimated on data was estimated on, in words: a
    corpus by its name and SHA-256) where one was; the partition columns (model, step) are added
    by the dataset. ``device``: where the scores are computed and the model runs (default CUDA
    when present); not part of the task's identity, since the rows agree across devices to
    float32 rounding."""
    from ..loading.sources import load

    opts = dict(task.options)
    if task.job == "scores":
        from ..api import scores
        from ..core.metrics import get_metric
        from ..core.processing import process

        raw = load(task.source)
        steps, parts = task_steps(raw, opts), task_norm_parts(raw, opts)
        running = _with_tokenizer(task.source, raw, opts, device)  # the source itself, or a runner that reads text
        if parts:  # the norms linearised on text: the model runs (read once), after any QK-norm step, before centring
            from ..api import load_processed
            from ..data.runner import Runner, runner_for

            if not isinstance(running, Runner):
                running = runner_for(task.source, raw, progress=False, device=device)
            hw, _ = load_processed(running, device=device, linearise_norms=",".join(parts),
                                   sample_data=_sample_data(opts), progress=False, **steps)
        else:
            hw = process(raw, **steps)
        metric = get_metric(opts.get("metric", "identity"), hw, opts.get("ridge"), model=running,
                            device=None if running is not task.source else device,
                            data=_metric_data(opts))  # 'activations' runs it
        table = scores(hw, kinds=opts.get("kinds", "QKV"), measures=tuple(opts.get("measures", ("frobenius",))),
                       metric=metric, device=device, progress=False)
        df, digest, data_said = table.to_pandas(), content_hash(hw), table.info.get("metric_data")
    elif task.job == "track":
        df, digest, data_said = _track_rows(task.source, opts, device)  # the checkpoint is read once, its hash recorded there
    elif task.job == "validate":
        from ..data.runner import runner_for
        from ..core.metrics import on_data
        from ..data.validate import DEFAULT_METRICS, validate
        from ..data.verdict import data_line

        # the weights are loaded once: the hash and the verdict read the same
        runner = runner_for(task.source, progress=False, device=device, dtype=opts.get("model_dtype"),
                            **_tokenizer(opts))
        half, cut = runner.repeat_half(opts.get("half"), SWEEP_HALF)  # the default cut to a shorter context
        metrics, steps = tuple(opts.get("metrics", DEFAULT_METRICS)), task_steps(runner.hw, opts)
        reads = on_data(metrics) or steps.get("linearise_qk_norm") == "text"  # not where a QK-norm step was left out
        parts = task_norm_parts(runner.hw, opts)
        v = validate(runner, sequences=int(opts.get("sequences", 16)), half=half, seed=int(opts.get("seed", SEED)),
                     metrics=metrics, kinds=opts.get("kinds", "QKV"), writers=opts.get("writers"), progress=False,
                     metric_data=_metric_data(opts) if reads else None, linearise_norms=",".join(parts) or False,
                     sample_data=_sample_data(opts) if parts else None, ridge=opts.get("ridge"), **steps)
        df = v.verdict_frame()
        df["processing"] = ",".join(v.options["weights_processing"]) or "none"  # as a scores task's table writes it
        df["half"] = half  # what the options leave to the default, the rows say
        df["data"] = data_line(v.model, v.options) + (f"; {cut}" if cut else "")
        digest, data_said = content_hash(runner.hw), v.options.get("activations_metric_data")
    else:
        raise OptionError(f"sweep job {task.job!r}: use one of {', '.join(JOBS)}")
    df["content_hash"] = digest
    if data_said:  # what a metric estimated on data was estimated on (a corpus by its name and SHA-256)
        df["metric_data"] = data_said
    df["options"] = json.dumps(opts, sort_keys=True)
    df["compscope"] = __version__  # what computed the rows: a resumed sweep may hold parts of several versions
    df["task"] = task.key()
    df["source"] = task.source
    return df
