"""``compscope sweep``: scores or validation over many models, checkpoints or revisions × metrics,
as independent tasks (this process, or Ray), streamed into one Parquet dataset."""

from __future__ import annotations

from .common import (add_device, add_linearise_norms, add_metric_data, add_model_dtype, add_processing, add_ridge,
                     add_sample_data, add_tokenizer, count, half_length, metric_data_read_by_qk_norm, metric_ridge,
                     positive_int, processing, sample_data, writers)

HELP = "scores or validation over many models, checkpoints or revisions, into one Parquet dataset (local or Ray)"
EXAMPLE = """examples:
  compscope train --out runs/a && compscope sweep runs/a --out sweep/
  compscope sweep EleutherAI/pythia-70m --revision step1000 --revision step2000 --metric identity --metric embed --out sweep/
  compscope sweep smollm2 gemma3-270m --job validate --kinds K --linearise-qk-norm text --out verdicts/
      # one verdict a model; QK-norm linearised at the text's moment where a model has one (Gemma 3)
  compscope sweep smollm2 gemma3-270m --job validate --kinds K --linearise-norms --out verdicts/
      # the norms inside the heads' circuits linearised on text where a model has them (Gemma 3's QK-norm and
      # attention-output norm), SmolLM2's weights judged as read
  compscope sweep runs/a runs/b --executor ray --workers 2 --out sweep/      # a local Ray instance
  compscope sweep runs/a --executor ray --address ray://head:10001 --out sweep/   # an existing cluster"""


def add_arguments(p) -> None:
    from ..defaults import SEED

    p.add_argument("sources", nargs="+", metavar="MODEL",
                   help="models: a run folder or folder of checkpoints (one task per checkpoint), a model path, "
                        "a built-in name, or a hub id (with --revision: one task per revision)")
    p.add_argument("--out", required=True, help="the dataset folder (partitioned model=/step=; finished parts are skipped)")
    from ..sweep.tasks import JOBS

    p.add_argument("--job", default="scores", choices=JOBS, help="what each task computes: scores (composition), track (scores plus the "
                   "checkpoint's previous-token label of each writer and induction label of each reader) or validate "
                   "(the verdict frame); default scores")
    p.add_argument("--revision", action="append", dest="revisions", metavar="REV", help="a hub revision (repeatable)")
    p.add_argument("--kinds", default="QKV", help="any of Q, K, V (default QKV)")
    p.add_argument("--measure", action="append", dest="measures", metavar="NAME", help="a measure (repeatable; default frobenius)")
    p.add_argument("--metric", action="append", dest="metrics", metavar="NAME",
                   help="a metric's name or a Gram matrix file (.npy, .safetensors; its values are part of the task) "
                        "(repeatable: one task each; default identity); --job validate: the metrics each "
                        "verdict judges, all in one task (default identity, embed, activations and covariance)")
    p.add_argument("--sequences", type=count, metavar="N", help="--job validate: repeated random sequences per verdict (default 16)")
    p.add_argument("--half", type=half_length, metavar="N", help="--job validate: length of the repeated half |t| (default 16, or the longest "
                   "that fits the model's context; a length given that does not fit is refused)")
    p.add_argument("--seed", type=int, metavar="S",
                   help=f"--job validate: seed of the repeated random sequences (default {SEED}; each seed its own "
                        "task, so one dataset can hold several)")
    p.add_argument("--writers", type=writers, metavar="HEADS", help="--job validate: intervene on these writer heads "
                   "only (LAYER.HEAD, LAYER or A-B, comma-separated; default every head)")
    add_model_dtype(p, "--job validate: ")
    add_ridge(p, "each metric's G", "; a task option when given")
    add_metric_data(p)
    # --job scores: any; --job validate: --fold-norm, --linearise-qk-norm [text], --center-writing; --job track: none;
    # --linearise-qk-norm is left out for a model without QK-norm (sweep.tasks.task_steps)
    add_processing(p)
    add_linearise_norms(p, "--job scores and validate: score or judge the weights")
    add_sample_data(p, "for --linearise-norms")
    p.add_argument("--executor", default="local", choices=["local", "ray"], help="where tasks run (default local: this process)")
    p.add_argument("--address", help="Ray: an existing cluster's address (default: start a local instance)")
    p.add_argument("--workers", help="Ray: CPUs of the local instance (default: all)")
    add_device(p, "where each task computes and runs its model (on Ray 'cuda' asks one GPU per task)")
    add_tokenizer(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from ..defaults import SEED
    from ..errors import OptionError
    from ..measures import select
    from ..core.factors import check_kinds
    from ..core.metrics import check_metrics, on_data, ridge_for
    from ..data.validate import DEFAULT_METRICS, PROCESSING_STEPS
    from ..data.sequences import corpus_digest
    from ..data.residual_moments import MetricData
    from ..sweep import Task, expand_sources, read_dataset, sweep

    from .common import output_folder

    output_folder(args.out)
    if args.executor == "local" and (args.address or args.workers):
        raise OptionError("--address and --workers apply to --executor ray")
    kinds = check_kinds(args.kinds)
    metrics = list(args.metrics or ["identity"])  # as the tasks name them: a Gram matrix file by its path
    # every name known and every Gram matrix file read before any work; a file's values are part of its tasks
    gram_id = {m: c.data for m, c in zip(metrics, check_metrics(metrics)) if not isinstance(c, str)}
    judged = metrics if args.job != "validate" or args.metrics else DEFAULT_METRICS  # what the tasks score
    # as a task option only when given (and only for a metric with a G): a task keeps its identity otherwise
    ridge = {} if metric_ridge(args, judged) is None else {"ridge": args.ridge}
    on_text = args.linearise_qk_norm == "text"
    if on_text and args.job != "validate":
        raise OptionError("--linearise-qk-norm text: --job validate takes it (each verdict runs its model over the "
                          "--metric-* text); --job scores takes the isotropic point, --linearise-qk-norm")
    data = metric_data_read_by_qk_norm(args, judged) or MetricData()
    # as a task option, only what is given, and always how G is estimated: a task keeps its identity
    # across versions, but not across the change of that default (the sample moment, before Ledoit-Wolf)
    data = {**{k: v for k, v in vars(data).items() if v is not None}, "shrinkage": data.estimate}
    # a corpus's text is part of the task, not only its name
    data_id = {"corpus_sha256": corpus_digest(data["corpus"])} if "corpus" in data else {}
    norms = _norm_option(args)
    measures = [m.name for m in select(args.measures or ["frobenius"])]
    tokenizer = {}  # for the tasks that read text: the tokenizer's path and its files' digest (edited files: new tasks)
    if args.tokenizer:
        from ..data.tokenizers import read_tokenizer, tokenizer_digest

        if args.job != "validate" and not on_data(metrics) and not norms:
            raise OptionError(f"--tokenizer: for the metrics estimated on data, --linearise-norms and --job "
                              f"validate, and none is selected (metrics: {', '.join(metrics)})")
        read_tokenizer(args.tokenizer)  # refused by name before any task
        tokenizer = {"tokenizer": args.tokenizer, "tokenizer_sha256": tokenizer_digest(args.tokenizer)}
    options = {}
    if args.workers:
        options["workers"] = positive_int(args.workers, "--workers")
    if args.address:
        options["address"] = args.address
    verdict = {}  # a validate task's options: only those given, so that a task keeps its identity across versions
    steps = [name for name, on in processing(args).items() if on]  # as a task option only when given
    judged_steps = {"scores": steps, "validate": [s for s in steps if s in PROCESSING_STEPS], "track": []}[args.job]
    if steps != judged_steps:
        refused = ", ".join("--" + s.replace("_", "-") for s in steps if s not in judged_steps)
        can = {"validate": "--job validate takes --fold-norm, --linearise-qk-norm and --center-writing",
               "track": "--job track reads each checkpoint as it is"}[args.job]
        raise OptionError(f"{refused}: {can}; --job scores takes every processing step")
    step_option = {"processing": steps} if steps else {}
    if args.job != "validate" and (args.sequences or args.half or args.seed is not None or args.model_dtype
                                   or args.writers):
        raise OptionError("--sequences, --half, --seed, --writers and --model-dtype apply to --job validate")
    if args.job == "validate":
        if args.measures:
            raise OptionError("--measure: --job validate judges every measure")
        if kinds != "QKV":
            verdict["kinds"] = kinds
        if args.writers:
            verdict["writers"] = [list(w) if isinstance(w, tuple) else w for w in args.writers]
        if args.metrics:
            verdict["metrics"] = metrics
            if gram_id:
                verdict["gram_files"] = gram_id
        if args.sequences:
            verdict["sequences"] = args.sequences
        if args.half:
            verdict["half"] = args.half
        if args.seed not in (None, SEED):  # the default seed: the same task
            verdict["seed"] = args.seed
        if args.model_dtype not in (None, "float32"):  # float32 is the default: the same task
            verdict["model_dtype"] = args.model_dtype
        verdict.update(ridge)
        if on_data(judged) or on_text:
            verdict.update(metric_data=data, **data_id)
        verdict.update(step_option, **norms, **tokenizer)  # a verdict reads text for a rotary model's content too
        if on_text:
            verdict["qk_norm_point"] = "text"
    tasks = []
    for src, model, step in expand_sources(args.sources, args.revisions):
        if args.job == "validate":
            tasks.append(Task(src, model, step, args.job, verdict))
            continue
        for metric in metrics:
            reading = {"metric_data": data, **data_id, **tokenizer} if on_data(metric) else {}
            given = {"gram_file": gram_id[metric]} if metric in gram_id else {}
            regularised = ridge if ridge_for(metric, args.ridge) is not None else {}  # the identity's: none, same task
            tasks.append(Task(src, model, step, args.job, {"kinds": kinds, "measures": measures, "metric": metric, **reading,
                                                           **given, **regularised, **step_option, **norms}))
    r = sweep(tasks, args.out, executor=args.executor, progress=not args.quiet, device=args.device, **options)
    idle = r.done == 0 and not r.failed
    said = "linearise_qk_norm" in steps or norms  # what is said of the models a step was left out for
    rows = read_dataset(args.out) if not idle or said else None  # read only when said
    if idle:
        print(f"{args.out}: nothing to do ({r.skipped} tasks already done)")
    else:
        print(f"{args.out}: computed {r.done} tasks, skipped {r.skipped} already done, {len(r.failed)} failed; "
              f"{len(rows)} rows in the dataset")
    from ..sweep.tasks import passed_over as not_models
    from .common import passed_over

    skipped = not_models(args.sources)
    if skipped:
        print(f"  {passed_over(skipped)}")
    if "linearise_qk_norm" in steps:
        plain = read_as_they_are(rows, tasks)
        if plain:
            print(f"  --linearise-qk-norm left out where a model has no QK-norm: {', '.join(plain)}")
    if norms:
        plain = read_as_they_are(rows, tasks, "linearise_norms")
        if plain:
            print(f"  --linearise-norms left out where a model has none of those norms: {', '.join(plain)}")
    for key, msg in r.failed.items():
        print(f"  failed: {msg}")
    return 2 if r.failed else 0


def _norm_option(args) -> dict:
    """The tasks' options of ``--linearise-norms`` and the ``--sample-*`` text (only what is given, a corpus by its
    digest too); refused for ``--job track``, and with ``--linearise-qk-norm`` where it names QK-norm itself."""
    from ..data.sequences import corpus_digest
    from ..errors import OptionError

    parts = args.linearise_norms
    samples = sample_data(args, used=bool(parts), where="--linearise-norms")
    if not parts:
        return {}
    if args.job == "track":
        raise OptionError("--linearise-norms: --job track reads each checkpoint as it is; --job scores and validate "
                          "take it")
    if args.linearise_qk_norm and "qk" in parts.split(","):
        raise OptionError("--linearise-norms qk and --linearise-qk-norm: two ways to replace QK-norm; give one "
                          "(--linearise-norms without parts leaves QK-norm to --linearise-qk-norm)")
    option = {"linearise_norms": parts}
    if samples is not None:
        option["sample_data"] = {k: v for k, v in vars(samples).items() if v is not None}
        if samples.corpus is not None:  # a corpus's text is part of the task, not only its name
            option["sample_corpus_sha256"] = corpus_digest(samples.corpus)
    return option


def read_as_they_are(rows, tasks, step: str = "linearise_qk_norm") -> list[str]:
    """The models among ``tasks`` whose rows in ``rows`` (the dataset) read weights without ``step``
    (``sweep.tasks.task_steps`` or ``task_norm_parts`` left it out: they have nothing it replaces); rows that do not
    say (a validate part written before its rows had a ``processing`` column) count for neither."""
    if "task" not in rows or "processing" not in rows:
        return []
    names = {t.key(): t.model for t in tasks}
    mine = rows[rows.task.isin(names)]
    return sorted({names[k] for k, p in zip(mine.task, mine.processing) if isinstance(p, str) and step not in p})
