"""What several commands share: argument types, option groups, and checks made before any work."""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

from ..defaults import NORM_PARTS as PARTS, PATHS, QK_NORM_POINTS
from ..errors import CompscopeError, OptionError


def at_least(low: int, words: str | None = None):
    """An argparse type: an integer of at least ``low`` (``words``: how the bound reads in the error)."""
    from ..errors import at_least_words

    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < low:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {words or at_least_words(low)}")
        return int(text)
    return parse


#: an argparse type: a positive integer
count = at_least(1)
#: an argparse type: the half-length of repeated sequences ``[t, t]``, an integer >= 2 (a
#: previous-token or induction label needs a repeat one token back)
half_length = at_least(2, "an integer >= 2")


def writers(text: str) -> list:
    """An argparse type: writer heads ``LAYER.HEAD``, layers ``LAYER`` and layer ranges ``A-B``
    (inclusive), comma-separated: ``16.0,11.1,2-4`` -> ``[(16, 0), (11, 1), 2, 3, 4]``."""
    out: list = []
    for part in text.split(","):
        part = part.strip()
        a, dash, b = part.partition("-")
        if dash and a.isdigit() and b.isdigit() and int(a) <= int(b):
            out += list(range(int(a), int(b) + 1))
        elif dash and a.isdigit() and b.isdigit():
            raise argparse.ArgumentTypeError(f"{part!r}: a range of layers runs from the lower to the higher ({b}-{a})")
        elif part.isdigit():
            out.append(int(part))
        elif part.count(".") == 1 and all(x.isdigit() for x in part.split(".")):
            layer, head = part.split(".")
            out.append((int(layer), int(head)))
        else:
            raise argparse.ArgumentTypeError(f"{part!r}: expected LAYER.HEAD (16.0), a layer (16) or layers (10-20), "
                                             "comma-separated")
    return out


def positive_int(text: str, option: str, also: str = "") -> int:
    """``text`` as a positive integer; ``also``: the other words the option takes, for the message."""
    if not text.isdigit() or int(text) < 1:
        raise OptionError(f"{option} {text!r}: expected {also}a positive integer")
    return int(text)


def positive_gib(text: str, option: str) -> int:
    """``text`` GiB as bytes."""
    try:
        gib = float(text)
    except ValueError:
        gib = 0.0
    if not (gib > 0 and math.isfinite(gib)):
        raise OptionError(f"{option} {text!r}: expected a positive number of GiB, e.g. 2 or 0.5")
    return int(gib * 2**30)


def model_help() -> str:
    from ..loading.builtin import BUILTINS, DEFAULT_MODEL

    return ("a HuggingFace folder, a .gguf file, a compscope or toy model folder, a built-in name "
            f"({', '.join(BUILTINS)}), or a HuggingFace hub id (owner/name[@revision]; the local cache first, "
            f"no download with HF_HUB_OFFLINE=1); default: the built-in {DEFAULT_MODEL}")


def add_model(p: argparse.ArgumentParser, *, positional: bool = True) -> None:
    from ..loading.builtin import DEFAULT_MODEL

    if positional:
        p.add_argument("model", nargs="?", default=DEFAULT_MODEL, help=model_help())
    else:
        p.add_argument("--model", default=DEFAULT_MODEL, help=model_help())


def add_tokenizer(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokenizer", metavar="PATH",
                   help="the tokenizer to read natural text with, for a model that has none of its own (a training "
                        "checkpoint's folder): a folder with a tokenizer's files, or a tokenizer.json; checked to "
                        "give the model's token ids (without one, such a model's data are repeated random sequences)")


def model_reading_text(args, model, reads: bool = True, readers: str = ""):
    """``model``, or with ``--tokenizer`` a runner of it that reads natural text with that tokenizer
    (the model is loaded to run here, on ``--device`` and in ``--model-dtype`` where the command has them).
    ``reads``: whether anything asked for reads text (``readers``: what would, for the error); the
    option is refused where nothing does, as the ``--metric-*`` options are."""
    if not getattr(args, "tokenizer", None):
        return model
    if not reads:
        raise OptionError(f"--tokenizer: for {readers}, and none is asked for")
    from ..data.runner import runner_for
    from ..data.tokenizers import given_tokenizer

    runner = runner_for(model, device=getattr(args, "device", None), dtype=getattr(args, "model_dtype", None),
                        **given_tokenizer(args.tokenizer))
    runner.named = (str(model), ("--tokenizer", str(args.tokenizer)))
    return runner


def add_processing(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fold-norm", action="store_true", help="fold norm gains into W_Q, W_K, W_V (pre-norm models)")
    p.add_argument("--linearise-qk-norm", nargs="?", const="isotropic", type=qk_norm_point, metavar="POINT",
                   help="replace QK-norm by its Jacobian (approximate, for analysis; models with a per-head QK-norm such "
                        "as Gemma 3) where the normalised input is isotropic, from the weights alone (the default "
                        "without POINT), or at the second moment of what the heads read on the --metric-* text "
                        "(text: scores, pair and validate)")
    p.add_argument("--center-writing", action="store_true", help="centre W_O, W_E, W_pos (LayerNorm models)")
    p.add_argument("--fold-value-bias", action="store_true", help="move b_V into b_O")


def qk_norm_point(value: str) -> str:
    """``--linearise-qk-norm``'s optional POINT; anything else is refused naming the POINTs."""
    if value not in QK_NORM_POINTS:
        raise argparse.ArgumentTypeError(f"{value!r} is no POINT ({', '.join(QK_NORM_POINTS)})")
    return value


#: ``--linearise-norms``' optional PARTS: all, or any of the parts, comma-separated in this order
NORM_PARTS = ("all", *(",".join(c) for n in range(1, len(PARTS) + 1) for c in itertools.combinations(PARTS, n)))


def add_linearise_norms(p: argparse.ArgumentParser, what: str) -> None:
    """``--linearise-norms [PARTS]``: ``what`` (the weights a command reads) with the norms inside the heads'
    circuits replaced by their mean Jacobian on the ``--sample-*`` text."""
    p.add_argument("--linearise-norms", nargs="?", const="all", metavar="PARTS", choices=NORM_PARTS,
                   help=f"{what} with the norms inside the heads' circuits replaced by their mean Jacobian on "
                        "natural text (--sample-*; runs the model): qk (QK-norm), output (attention-output norm), "
                        "value (Gemma 4's value norm), latent (multi-head latent attention's latent norms), or "
                        "several (qk,output; the default without PARTS: every one the model has)")

#: the options whose value may be left out, with the words they take and the one taken without a word
OPTIONAL_WORDS = {"--linearise-qk-norm": (QK_NORM_POINTS, "isotropic"), "--linearise-norms": (NORM_PARTS, "all")}


def leave_model_names(argv: list[str]) -> list[str]:
    """``argv`` with an option of :data:`OPTIONAL_WORDS` followed by a model (a built-in name, an existing
    file or folder, a hub id ``org/name``: ``compscope info --linearise-qk-norm gemma3-270m``) given its
    value outright, so that the model stays the model; any other word is left for the option to take
    or refuse."""
    from ..loading.builtin import BUILTINS

    def names_a_model(word: str) -> bool:
        try:
            return word in BUILTINS or "/" in word or Path(word).exists()
        except (OSError, ValueError):  # a word no file system takes (too long, a NUL byte)
            return False

    out = list(argv)
    for i, a in enumerate(out[:-1]):
        word = out[i + 1]
        if a in OPTIONAL_WORDS and word not in OPTIONAL_WORDS[a][0] and not word.startswith("-") and names_a_model(word):
            out[i] = f"{a}={OPTIONAL_WORDS[a][1]}"
    return out


def processing(args) -> dict:
    """``{step: asked}`` for every processing step of :func:`compscope.load`, from :func:`add_processing`'s flags
    (``linearise_qk_norm``: False, ``'isotropic'`` or ``'text'``)."""
    from ..core.processing import STEPS

    return {name: getattr(args, name) or False for name in STEPS}


def weights_and_metric(args, model) -> tuple:
    """``(weights, metric)`` of a command that scores with ``--metric``: ``model`` loaded with the processing
    flags (:func:`compscope.api.load_processed`), its rotary offset checked, and the metric on them (one
    estimated on data runs the model, on the ``--metric-*`` data; where ``--linearise-qk-norm text`` ran it,
    that pass)."""
    from ..api import load_processed
    from ..core.factors import check_composes
    from ..core.metrics import get_metric

    ridge = metric_ridge(args)
    data = metric_data_read_by_qk_norm(args, args.metric)
    norms = getattr(args, "linearise_norms", None) or False
    hw, runner = load_processed(model, metric_data=data, device=getattr(args, "device", None), **processing(args),
                                linearise_norms=norms, sample_data=sample_data(args, bool(norms), "--linearise-norms"))
    check_offset(hw, args.offset)
    check_composes(hw)  # before a metric on data runs the model
    return hw, get_metric(args.metric, hw, ridge, model=runner or model, device=None if runner else args.device,
                          data=data)


def metric_text(name: str, info: dict) -> str:
    """The metric ``name`` and, from ``info`` (:func:`~compscope.results.table.metric_info`'s), for a metric with a
    ``G`` its condition number under the ridge and without it, and for one estimated on data or given what
    its ``G`` came from."""
    from ..results.table import metric_origin

    origin = metric_origin(info)
    on = f", {origin}" if origin else ""
    cond = info.get("condition") or {}
    if not cond:
        return name + on
    raw, reg = max(c[0] for c in cond.values()), max(c[1] for c in cond.values())
    what = "condition number" if len(cond) == 1 else f"largest condition number of {len(cond)} layers"
    return f"{name} ({what} {reg:.3g} with ridge {info.get('ridge', 0):g}·tr(G)/d, {raw:.3g} without){on}"


def ridge_value(text: str) -> float:
    """An argparse type: a metric's ridge, a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number >= 0")
    return value


def add_ridge(p: argparse.ArgumentParser, which: str = "the metric's G", more: str = "") -> None:
    """``--ridge`` (:func:`metric_ridge` reads it); ``which``: the ``G`` it regularises, in words; ``more``: what
    else to say of it."""
    from ..defaults import RIDGE

    p.add_argument("--ridge", type=ridge_value, metavar="R",
                   help=f"regularise {which} as G + R·tr(G)/d·I (default {RIDGE:g}; 0: none, refused where G is "
                        f"singular); the identity metric has no G and takes none{more}")


def metric_ridge(args, metrics=None) -> float | None:
    """``--ridge`` (None where not given: the default, ``1e-6``), refused above 0 with ``--metric identity``,
    where it would change nothing, before the model loads (as ``get_metric`` refuses ``ridge=``); with
    ``metrics`` (a command taking several), where every one is the identity (``core.metrics.check_some_g``)."""
    from ..core.metrics import check_some_g

    ridge = getattr(args, "ridge", None)
    check_some_g([args.metric] if metrics is None else metrics, ridge, "--ridge ", "choose another --metric")
    return ridge


def metric_names() -> str:
    return ("identity, embed, unembed, activations, covariance, activations-own or covariance-own (the last four "
            "estimated on data by running the model; -own: each reading factor in its own layer's G), or a Gram matrix "
            "file of your own (.npy or .safetensors: one (d_model, d_model) G, or one per layer)")


def add_scoring(p: argparse.ArgumentParser, default_kinds: str, default_measures: tuple[str, ...]) -> None:
    p.add_argument("--kinds", default=default_kinds, help=f"any of Q, K, V (default {default_kinds})")
    p.add_argument("--measure", action="append", dest="measures", metavar="NAME",
                   help=f"a measure (repeatable; 'all' for every one; default {', '.join(default_measures)})")
    p.add_argument("--offset", type=float, default=0.0,
                   help="rotary offset: query minus key position (default 0; rotary models only)")
    p.add_argument("--pairs", default=None,
                   help="for bandwidth/spectral: 'all' or the top N pairs by frobenius per kind (default 256)")
    p.add_argument("--precision", default="float32", choices=["float32", "float64", "tf32", "bfloat16"],
                   help="precision of the large products (default float32; tf32 and bfloat16: reduced, for GPUs)")
    add_device(p, "where to compute (and where a --metric estimated on data runs the model)")
    p.add_argument("--max-memory", metavar="GIB", help="GiB for tiles and blocks, beyond the per-head bases (default: a quarter of the free memory)")


def add_metric_data(p: argparse.ArgumentParser) -> None:
    """``--metric-sequences``, ``--metric-length``, ``--metric-seed``, ``--metric-shrinkage``: what
    the metrics estimated on data are estimated on, and how (:func:`metric_data`)."""
    p.add_argument("--metric-sequences", type=count, metavar="N",
                   help="for a metric estimated on data: how many sequences (default 64 of natural text; compscope's "
                        "toy models: 200 held-out repeated random sequences)")
    p.add_argument("--metric-length", type=at_least(4, "an integer >= 4"), metavar="T",
                   help="for a metric estimated on data: tokens per sequence (default 128, at most the model's context; "
                        "toy models: 64, [t, t] with |t| = T / 2)")
    p.add_argument("--metric-seed", type=at_least(0), metavar="S",
                   help="for a metric estimated on data: which sequences (default 12346)")
    from ..defaults import SHRINKAGES

    p.add_argument("--metric-shrinkage", choices=SHRINKAGES,
                   help="for a metric estimated on data: each layer's G as the sample moment shrunk toward a multiple "
                        "of the identity by its Ledoit-Wolf intensity (ledoit-wolf, the default) or the sample moment "
                        "itself (none)")
    p.add_argument("--metric-corpus", metavar="FILE",
                   help="for a metric estimated on data: a UTF-8 text file of your own to estimate it on instead of "
                        "the standard library's docstrings (models with a tokenizer; its name and SHA-256 are recorded)")


def metric_data(args, metrics, also: str | None = None, reading: bool = False):
    """The ``MetricData`` that ``--metric-sequences/-length/-seed/-shrinkage/-corpus`` ask for (None when
    none is given), refused when none of ``metrics`` is estimated on data and nothing else reads them
    (they would change nothing); ``also``: another option that reads them (``--linearise-qk-norm text``),
    given when ``reading``."""
    from dataclasses import fields

    from ..data.residual_moments import MetricData

    given = {f"metric_{f.name}": getattr(args, f"metric_{f.name}") for f in fields(MetricData)}  # one option a field
    if all(v is None for v in given.values()):
        return None
    from ..core.metrics import ON_DATA, on_data

    if not on_data(metrics) and not reading:
        metrics = [m if isinstance(m, str) else m.name for m in ([metrics] if isinstance(metrics, str) else metrics)]
        flags = ", ".join("--" + k.replace("_", "-") for k, v in given.items() if v is not None)
        raise OptionError(f"{flags}: for the metrics estimated on data ({', '.join(ON_DATA)})"
                          + (f" and {also}" if also else "") + f", and none is selected (metrics: {', '.join(metrics)})")
    return MetricData(*given.values())


def reads_text(args, metrics) -> bool:
    """Whether a command that scores with ``metrics`` reads text: a metric estimated on data,
    ``--linearise-qk-norm text`` or ``--linearise-norms``."""
    from ..core.metrics import on_data

    return (bool(on_data(metrics)) or getattr(args, "linearise_qk_norm", None) == "text"
            or bool(getattr(args, "linearise_norms", None)))


#: what reads text in a command that scores, for the errors of the options that choose it
TEXT_READERS = "the metrics estimated on data, --linearise-qk-norm text and --linearise-norms"


def metric_data_read_by_qk_norm(args, metrics):
    """:func:`metric_data` of a command whose ``--linearise-qk-norm text`` reads the ``--metric-*`` text
    as well as ``metrics`` estimated on data do."""
    return metric_data(args, metrics, "--linearise-qk-norm text", reading=args.linearise_qk_norm == "text")


def add_sample_data(p: argparse.ArgumentParser, where: str) -> None:
    """``--sample-sequences``, ``--sample-length``, ``--sample-seed``, ``--sample-positions``,
    ``--sample-corpus``: what the residual is sampled on (``where``: the options that sample it;
    :func:`sample_data`)."""
    p.add_argument("--sample-sequences", type=count, metavar="N",
                   help=f"how many sequences the residual is sampled on, {where} (default 16 of natural text; "
                        "models without a tokenizer: repeated random sequences)")
    p.add_argument("--sample-length", type=at_least(4, "an integer >= 4"), metavar="T",
                   help="tokens per sampled sequence (default 128, at most the model's context)")
    p.add_argument("--sample-seed", type=at_least(0), metavar="S", help="which sequences and positions are sampled (default 12346)")
    p.add_argument("--sample-positions", type=count, metavar="K",
                   help="residuals per layer drawn as the previous-token score's content (default 1024)")
    p.add_argument("--sample-corpus", metavar="FILE",
                   help="a UTF-8 text file of your own to sample on instead of the standard library's docstrings "
                        "(models with a tokenizer; its name and SHA-256 are recorded)")


def sample_data(args, used: bool = True, where: str = ""):
    """The ``SampleData`` that ``--sample-*`` ask for (None when none is given), refused unless
    ``used`` (``where``: what would use it, for the error; the API refuses what it cannot use)."""
    from dataclasses import fields

    from ..data.residual_moments import SampleData

    names = [f"sample_{f.name}" for f in fields(SampleData)]  # one option a field
    given = [getattr(args, k) for k in names]
    if all(v is None for v in given):
        return None
    if not used:
        flags = ", ".join("--" + k.replace("_", "-") for k, v in zip(names, given) if v is not None)
        raise OptionError(f"{flags}: for {where} only")
    return SampleData(*given)


def add_device(p: argparse.ArgumentParser, what: str = "where the model runs and the scores are computed") -> None:
    p.add_argument("--device", default=None, help=f"{what}: cpu, cuda, cuda:N (default: cuda when present, else cpu)")


def add_intervention(p: argparse.ArgumentParser, example: str, after: str = "") -> None:
    """``--ablation``, ``--paths`` and ``--writers``: how and where the writers' outputs are removed
    (``example``: the heads ``--writers`` shows; ``after``: what its help adds at the end)."""
    p.add_argument("--ablation", default="mean", choices=["mean", "zero"], help="how h1's output is removed (default mean)")
    add_paths(p)
    p.add_argument("--writers", type=writers, help="intervene on these writer heads only: LAYER.HEAD, LAYER or A-B "
                   f"(layers), comma-separated, e.g. {example} (default every head; the time scales with their "
                   f"number{after})")


def add_paths(p: argparse.ArgumentParser) -> None:
    p.add_argument("--paths", default=PATHS[0], choices=PATHS,
                   help="direct: h1's output removed from what h2 reads and nowhere else (the default); all: removed "
                        "from the model, so that h2 reads the change through every layer in between too "
                        "(one more forward pass per writer, from its layer to the last layer's input)")


def add_model_dtype(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("--model-dtype", default=None, choices=["float32", "bfloat16", "float16"],
                   help=prefix + "what a model loaded from files computes in on the data (default float32; 16-bit halves a "
                        "folder model's memory, not a GGUF file's; compscope's recomputation stays float32)")


def score_options(args, default_measures: tuple[str, ...]) -> dict:
    """The engine's options from :func:`add_scoring`'s; ``--pairs`` is refused when no measure
    selected (``args.measures``, else ``default_measures``) is computed per pair (bandwidth, spectral)."""
    pairs = 256 if args.pairs is None else "all" if args.pairs == "all" else positive_int(args.pairs, "--pairs", "'all' or ")
    if args.pairs is not None:
        from ..measures import select

        if all(m.from_gram is not None for m in select(args.measures or default_measures)):
            raise OptionError(f"--pairs {args.pairs}: it chooses the pairs of the measures computed per pair "
                              "(bandwidth, spectral), and none is selected (--measure bandwidth, --measure all)")
    max_memory = None if args.max_memory is None else positive_gib(args.max_memory, "--max-memory")
    return {"offset": args.offset, "pairs": pairs, "precision": args.precision, "device": args.device, "max_memory": max_memory}


def check_offset(hw, offset: float) -> None:
    """A rotary offset means nothing without rotary positions: say so instead of ignoring it
    (before a metric on data runs the model)."""
    from ..core.factors import check_offset as check

    check(hw, offset, "--offset")


def output_file(path: str | None, option: str, suffixes: tuple[str, ...]) -> None:
    """Check ``path`` before any work: a known suffix, an existing folder, not a folder itself."""
    if not path:
        return
    p = Path(path)
    if p.suffix not in suffixes:
        raise OptionError(f"{option} {path}: use a {' or '.join(suffixes)} file name")
    if p.is_dir():
        raise OptionError(f"{option} {path}: is a folder; give a file name")
    if not p.parent.is_dir():
        raise OptionError(f"{option} {path}: the folder {p.parent} does not exist")
    from ..results.files import check_new_file

    check_new_file(p, f"{option} {path}")


def output_folder(path: str | None, option: str = "--out") -> None:
    """Check a results folder before any work: new or a folder (never a file), its parent existing."""
    if path:
        from ..results.files import check_folder

        check_folder(path, option)


def table_file(path: str | None, option: str = "--out") -> None:
    """:func:`output_file` for a table, and the packages that write it, checked before the work."""
    output_file(path, option, (".csv", ".parquet"))
    if path:
        need = ["pandas"] + (["pyarrow"] if path.endswith(".parquet") else [])
        missing = [m for m in need if not _importable(m)]
        if missing:
            raise CompscopeError(f"{option} {path}: writing tables needs {' and '.join(missing)}: pip install {' '.join(missing)}")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def parse_head(text: str) -> tuple[int, int]:
    from ..analysis.pair import as_head

    return as_head(text, "head")


def parse_pair(text: str) -> tuple[int, int, int, int]:
    try:
        a, b = text.split("-")
        (l1, h1), (l2, h2) = (map(int, a.split(".")), map(int, b.split(".")))
        return (l1, h1, l2, h2)
    except ValueError:
        raise OptionError(f"--pair {text!r}: expected SRC_LAYER.SRC_HEAD-DST_LAYER.DST_HEAD, e.g. 0.1-1.2") from None


def passed_over(paths) -> str | None:
    """The line that names what a folder of checkpoints held besides models (None when nothing)."""
    if not paths:
        return None
    more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
    return f"passed over (not models): {', '.join(p.name for p in paths[:5])}{more}"
